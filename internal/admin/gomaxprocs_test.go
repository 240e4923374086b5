package admin

import (
	"os"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
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

	// One CPU, nothing set: raised.
	os.Unsetenv("GOMAXPROCS")
	runtime.GOMAXPROCS(1)
	if n, out := serveProcs(); n != serveMinProcs || !strings.Contains(out, "GOMAXPROCS 2 (raised from 1") {
		t.Errorf("one CPU: serve runs with GOMAXPROCS %d, want %d; startup %q", n, serveMinProcs, out)
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
