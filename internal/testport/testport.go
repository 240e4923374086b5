// Package testport picks loopback addresses for servers under test, with
// ports below 32768:
//
//	addr := testport.Addr(t) // "127.0.0.1:2xxxx", free a moment ago
//	cfg.Server.Listen = addr
//
// Linux hands out ports from 32768 up (ip_local_port_range) to every
// client socket on the machine, so a port the kernel picked for a test
// server (":0") or one found free there can be taken by any outgoing
// connection before the server binds it, and servers under test on this
// project's machines must stay out of that range anyway. Ports here come
// from 20000-32767 at random, and one process is never handed the same
// port twice: a port found free and closed again is free for the next
// draw too, so two members of one test cluster could otherwise get the
// same address (a 3-member cluster draws 6, and some tests many more).
// Another process may still take one between the check and the bind, and
// the server then fails to start and says so.
package testport

import (
	"fmt"
	"math/rand/v2"
	"net"
	"sync"
	"testing"
)

// The range ports are picked from: below the kernel's ephemeral ports.
const (
	Low  = 20000
	High = 32767
)

// handedOut is every port this process drew, bound or not.
var handedOut = struct {
	sync.Mutex
	ports map[int]bool
}{ports: map[int]bool{}}

// draw returns a port in [Low, High] not drawn before in this process, or
// false when the range ran out.
func draw() (int, bool) {
	handedOut.Lock()
	defer handedOut.Unlock()
	if len(handedOut.ports) > High-Low {
		return 0, false
	}
	for {
		port := Low + rand.IntN(High-Low+1)
		if !handedOut.ports[port] {
			handedOut.ports[port] = true
			return port, true
		}
	}
}

// Listen returns a listener on 127.0.0.1 at a port in [Low, High] that
// no earlier call in this process returned.
func Listen() (net.Listener, error) {
	for range 1000 {
		port, ok := draw()
		if !ok {
			break
		}
		if l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port)); err == nil {
			return l, nil
		}
	}
	return nil, fmt.Errorf("testport: no free loopback port in %d-%d after 1000 tries", Low, High)
}

// Addr returns "127.0.0.1:PORT" with a port in [Low, High] that was free
// a moment ago; it fails tb if none is found.
func Addr(tb testing.TB) string {
	tb.Helper()
	l, err := Listen()
	if err != nil {
		tb.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}
