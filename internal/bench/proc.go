package bench

import (
	"fmt"
	"math/rand/v2"
	"net"
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
// free a moment ago: each is bound on 127.0.0.1 and released. Ports come
// from 20000-32767, below Linux's ephemeral range (32768 and up), where
// any client socket on the machine may take a port between our check and
// the server's bind. Another process may still take one in between; the
// server then fails to start and says so.
func freePorts(n int) ([]int, error) {
	ls := make([]net.Listener, 0, n)
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	ports := make([]int, 0, n)
	for tries := 0; len(ports) < n; tries++ {
		if tries == 1000 {
			return nil, fmt.Errorf("bench: no free loopback port in %d-%d after %d tries", lowPort, highPort, tries)
		}
		port := lowPort + rand.IntN(highPort-lowPort+1)
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			continue
		}
		ls = append(ls, l)
		ports = append(ports, port)
	}
	return ports, nil
}

// The range freePorts picks from: below the kernel's ephemeral ports.
const (
	lowPort  = 20000
	highPort = 32767
)
