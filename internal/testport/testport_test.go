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
