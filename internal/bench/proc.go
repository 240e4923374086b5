package bench

import (
	"fmt"
	"net"

	"github.com/stratadb/strata/internal/testport"
)

// truncate shortens output quoted in an error.
func truncate(b []byte) string {
	const n = 120
	if len(b) > n {
		return string(b[:n]) + "..."
	}
	return string(b)
}

// freePorts returns n distinct loopback TCP ports below 32768 that were
// free a moment ago (testport.Listen: out of the ephemeral range, where any
// client socket may take a port before the server binds it). Another
// process may still take one in between; the server then fails to start
// and says so.
func freePorts(n int) ([]int, error) {
	ls := make([]net.Listener, 0, n)
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	ports := make([]int, 0, n)
	for range n {
		l, err := testport.Listen()
		if err != nil {
			return nil, fmt.Errorf("bench: %w", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
