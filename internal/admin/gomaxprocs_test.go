package admin

import (
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/stratadb/strata/internal/testport"
)

// TestServeRaisesGOMAXPROCS checks the floor strata serve puts under
// GOMAXPROCS on one CPU: the runtime's 1 becomes serveMinProcs while
// serve runs, and the startup line says so; a GOMAXPROCS the user set,
// and a value at the floor or above, are kept.
func TestServeRaisesGOMAXPROCS(t *testing.T) {
	orig := runtime.GOMAXPROCS(0)
	t.Cleanup(func() { runtime.GOMAXPROCS(orig) })
	// serve also sets the Go memory limit; later tests read it.
	origLimit := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(origLimit) })
	env, hadEnv := os.LookupEnv("GOMAXPROCS")
	t.Cleanup(func() {
		if hadEnv {
			os.Setenv("GOMAXPROCS", env)
		} else {
			os.Unsetenv("GOMAXPROCS")
		}
	})
	serveProcs := func() (int, string) {
		var n int
		out := serveWhile(t, "", func() { n = runtime.GOMAXPROCS(0) })
		return n, out
	}
	memberProcs := func() (int, string) {
		peer := testport.Addr(t)
		member := fmt.Sprintf("[cluster]\nname = \"s1\"\nlisten_peer = %q\n[[cluster.members]]\nname = \"s1\"\npeer_url = \"http://%s\"\nclient_url = \"http://%s\"\n", peer, peer, testport.Addr(t))
		var n int
		out := serveWhile(t, member, func() { n = runtime.GOMAXPROCS(0) })
		return n, out
	}

	// One CPU, nothing set: raised.
	os.Unsetenv("GOMAXPROCS")
	runtime.GOMAXPROCS(1)
	if n, out := serveProcs(); n != serveMinProcs || !strings.Contains(out, "GOMAXPROCS 2 (raised from 1") {
		t.Errorf("one CPU: serve runs with GOMAXPROCS %d, want %d; startup %q", n, serveMinProcs, out)
	}

	// One CPU, a cluster member: left at one P.
	runtime.GOMAXPROCS(1)
	if n, out := memberProcs(); n != 1 || !strings.Contains(out, "GOMAXPROCS 1 (a cluster member is not raised") {
		t.Errorf("one CPU, a cluster member: serve runs with GOMAXPROCS %d, want 1; startup %q", n, out)
	}

	// The user's GOMAXPROCS=1 is kept.
	os.Setenv("GOMAXPROCS", "1")
	runtime.GOMAXPROCS(1)
	if n, out := serveProcs(); n != 1 || !strings.Contains(out, "GOMAXPROCS 1 (GOMAXPROCS=1)") {
		t.Errorf("GOMAXPROCS=1 set: serve runs with %d, want 1; startup %q", n, out)
	}

	// At or above the floor: unchanged.
	os.Unsetenv("GOMAXPROCS")
	runtime.GOMAXPROCS(3)
	if n, out := serveProcs(); n != 3 || !strings.Contains(out, "GOMAXPROCS 3;") {
		t.Errorf("GOMAXPROCS 3: serve runs with %d, want 3; startup %q", n, out)
	}
}
