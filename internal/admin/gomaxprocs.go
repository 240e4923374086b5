package admin

import (
	"fmt"
	"os"
	"runtime"
)

// serveMinProcs is the floor strata serve puts under GOMAXPROCS when the
// Go runtime chose fewer (a machine or container with one CPU), the user
// did not set GOMAXPROCS and the server is not a cluster member.
//
// Why: with one P, a goroutine in a blocking system call keeps the only P
// until the runtime's monitor (sysmon) takes it back, and sysmon only
// does that for a call it sees in two of its ticks in a row, ticks that
// stretch to 10 ms while it finds nothing to take. A WAL fdatasync of a
// few milliseconds is then never taken back: while it runs, no request is
// read or parsed, so the next sync starts with the one or two writes that
// arrived after it, not with the dozens waiting on the sockets. With a
// second P the other goroutines run beside the sync and group commit
// batches as it does on two cores. Figures in docs/server.md and
// docs/data/pinned-qps.md.
//
// A cluster member is left at one P: its syncs are the raft log's, on a
// goroutine of their own, and what arrives meanwhile is taken in one
// Ready after it, so the second P batches nothing more and only spins.
// Measured alone on its CPU, a leader at one P made as many pod writes
// and 256 B v2 PUTs per second, for 0.82x the CPU on pods; three members
// sharing one CPU made 1.11x the creates for 0.83x the CPU
// (docs/data/members-one-p.md).
const serveMinProcs = 2

// raiseGOMAXPROCS applies serveMinProcs (not to a cluster member) and
// returns what the startup line says about GOMAXPROCS. A GOMAXPROCS
// environment variable is the user's choice and is kept; so is a runtime
// value at or above the floor, which the runtime then keeps following the
// CPU limit (setting GOMAXPROCS stops that, so it is only set when
// raised).
func raiseGOMAXPROCS(member bool) string {
	cur := runtime.GOMAXPROCS(0)
	if v := os.Getenv("GOMAXPROCS"); v != "" {
		return fmt.Sprintf("GOMAXPROCS %d (GOMAXPROCS=%s)", cur, v)
	}
	if cur >= serveMinProcs {
		return fmt.Sprintf("GOMAXPROCS %d", cur)
	}
	if member {
		return fmt.Sprintf("GOMAXPROCS %d (a cluster member is not raised, see docs/server.md)", cur)
	}
	runtime.GOMAXPROCS(serveMinProcs)
	return fmt.Sprintf("GOMAXPROCS %d (raised from %d, see docs/server.md)", serveMinProcs, cur)
}
