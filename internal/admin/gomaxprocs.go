package admin

import (
	"fmt"
	"os"
	"runtime"
)

// serveMinProcs is the floor strata serve puts under GOMAXPROCS when the
// Go runtime chose fewer (a machine or container with one CPU) and the
// user did not set GOMAXPROCS.
//
// Why: with one P, a goroutine in a blocking system call keeps the only P
// until the runtime's monitor (sysmon) takes it back, and sysmon only
// does that for a call it sees in two of its ticks in a row, ticks that
// stretch to 10 ms while it finds nothing to take. A WAL fdatasync of a
// few milliseconds is then never taken back: while it runs, no request is
// read or parsed, so the next sync starts with the one or two writes that
// arrived after it, not with the dozens waiting on the sockets. With a
// second P the other goroutines run beside the sync and group commit
// batches as it does on two cores. Every path that fsyncs (the store's
// WAL under v2 and v3 writes, a cluster member's raft log) waits this
// way, so the floor is set once, for the process. Figures in
// docs/server.md and docs/data/pinned-qps.md. Members of one cluster that
// share one CPU are the exception: the CPU runs the others while one
// syncs, and GOMAXPROCS=1 is cheaper there (docs/data/members-one-p.md).
const serveMinProcs = 2

// raiseGOMAXPROCS applies serveMinProcs and returns what the startup line
// says about GOMAXPROCS. A GOMAXPROCS environment variable is the user's
// choice and is kept; so is a runtime value at or above the floor, which
// the runtime then keeps following the CPU limit (setting GOMAXPROCS
// stops that, so it is only set when raised).
func raiseGOMAXPROCS() string {
	cur := runtime.GOMAXPROCS(0)
	if v := os.Getenv("GOMAXPROCS"); v != "" {
		return fmt.Sprintf("GOMAXPROCS %d (GOMAXPROCS=%s)", cur, v)
	}
	if cur >= serveMinProcs {
		return fmt.Sprintf("GOMAXPROCS %d", cur)
	}
	runtime.GOMAXPROCS(serveMinProcs)
	return fmt.Sprintf("GOMAXPROCS %d (raised from %d, see docs/server.md)", serveMinProcs, cur)
}
