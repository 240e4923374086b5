package testport

import (
	"net"
	"strconv"
	"testing"
)

func TestAddrBelowEphemeralRange(t *testing.T) {
	for range 20 {
		_, port, err := net.SplitHostPort(Addr(t))
		if err != nil {
			t.Fatal(err)
		}
		if p, _ := strconv.Atoi(port); p < Low || p > High || p >= 32768 {
			t.Fatalf("port %d: want %d-%d, below 32768", p, Low, High)
		}
	}
}

// TestAddrNeverTwice: one process never gets the same port twice, even
// though each was closed again at once (free for the next draw).
func TestAddrNeverTwice(t *testing.T) {
	seen := map[string]bool{}
	for range 3000 {
		a := Addr(t)
		if seen[a] {
			t.Fatalf("%s handed out twice in %d draws", a, len(seen)+1)
		}
		seen[a] = true
	}
}
