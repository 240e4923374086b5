package admin

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stratadb/strata/config"
	"github.com/stratadb/strata/internal/testport"
)

// lockedBuffer is a bytes.Buffer the serve command writes while the test
// reads it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// serveAndReadGoMemoryLimit runs `strata serve` in-process with the
// [server] lines given, reads the Go memory limit once it serves, and
// stops it. It returns the limit and the startup output.
func serveAndReadGoMemoryLimit(t *testing.T, serverLines string) (int64, string) {
	t.Helper()
	var limit int64
	out := serveWhile(t, serverLines, func() { limit = debug.SetMemoryLimit(-1) })
	return limit, out
}

// serveWhile runs `strata serve` in-process with the [server] lines
// given, calls read once it serves, stops it, and returns its output.
func serveWhile(t *testing.T, serverLines string, read func()) string {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "strata.toml")
	file := fmt.Sprintf("db_path = %q\n[server]\nlisten = %q\n%s\n", filepath.Join(dir, "db"), testport.Addr(t), serverLines)
	if err := os.WriteFile(path, []byte(file), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	root := NewRootCommand()
	var out, errb lockedBuffer
	root.SetArgs([]string{"serve", "--config", path})
	root.SetOut(&out)
	root.SetErr(&errb)
	done := make(chan error, 1)
	go func() { done <- root.ExecuteContext(ctx) }()
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(out.String(), "serving etcd") {
		select {
		case err := <-done:
			t.Fatalf("serve ended before serving: %v (stderr %q)", err, errb.String())
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve did not start in 30 s (stdout %q, stderr %q)", out.String(), errb.String())
		}
	}
	read()
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("serve: %v (stderr %q)", err, errb.String())
	}
	return out.String()
}

// TestServeAppliesGoMemoryLimit checks that serve sets the Go runtime's
// soft memory limit from [server] go_memory_limit_mb: a fixed number as
// written, -1 not at all, and the automatic limit (0, the default) at
// least its slack, the line saying which.
func TestServeAppliesGoMemoryLimit(t *testing.T) {
	orig := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(orig) })

	debug.SetMemoryLimit(orig)
	limit, out := serveAndReadGoMemoryLimit(t, "go_memory_limit_mb = 48")
	if limit != 48<<20 {
		t.Errorf("go_memory_limit_mb = 48: Go memory limit %d, want %d", limit, int64(48<<20))
	}
	if !strings.Contains(out, "Go memory limit 48 MB") {
		t.Errorf("startup line does not name the limit: %q", out)
	}

	debug.SetMemoryLimit(orig)
	limit, out = serveAndReadGoMemoryLimit(t, "")
	if slack := int64(config.AutoGoMemoryLimitSlackMB << 20); limit < slack || limit == orig {
		t.Errorf("automatic: Go memory limit %d, want at least %d (and not the runtime's %d)", limit, slack, orig)
	}
	if !strings.Contains(out, "Go memory limit automatic (") {
		t.Errorf("startup line does not say automatic: %q", out)
	}

	debug.SetMemoryLimit(orig)
	if limit, _ = serveAndReadGoMemoryLimit(t, "go_memory_limit_mb = -1"); limit != orig {
		t.Errorf("go_memory_limit_mb = -1: Go memory limit %d, want the runtime's %d unchanged", limit, orig)
	}
}

// TestServeGCPercent: the automatic limit gives a small heap room to grow
// by minGCHeadroomBytes between collections, and leaves GOGC alone when
// the limit is not automatic or the user set GOGC.
func TestServeGCPercent(t *testing.T) {
	readGCPercent := func() int { p := debug.SetGCPercent(100); debug.SetGCPercent(p); return p }
	defer debug.SetGCPercent(readGCPercent())
	for _, c := range []struct {
		name, lines, gogc string
		raised            bool
	}{
		{"automatic", "", "", true},
		{"go_memory_limit_mb = 48", "go_memory_limit_mb = 48", "", false},
		{"go_memory_limit_mb = -1", "go_memory_limit_mb = -1", "", false},
		{"GOGC set", "", "100", false},
	} {
		if c.gogc != "" {
			t.Setenv("GOGC", c.gogc)
		}
		debug.SetGCPercent(100)
		var p int
		serveWhile(t, c.lines, func() { p = readGCPercent() })
		if raised := p > 100; raised != c.raised {
			t.Errorf("%s: GOGC %d while serving, want raised above 100: %t", c.name, p, c.raised)
		}
	}
}

// TestGCPercentFor: the percentage lets the live heap grow by
// minGCHeadroomBytes, and never below GOGC's default of 100.
func TestGCPercentFor(t *testing.T) {
	for _, c := range []struct {
		live uint64
		want int
	}{
		{0, 3200}, {1 << 20, 3200}, {5 << 20, 640}, {32 << 20, 100}, {64 << 20, 100}, {1 << 40, 100},
	} {
		if got := gcPercentFor(c.live); got != c.want {
			t.Errorf("gcPercentFor(%d MB) = %d, want %d", c.live>>20, got, c.want)
		}
	}
}

// TestAutoGoMemoryLimitFollowsLiveHeap checks that the automatic limit
// grows with the live heap (a key index bigger than the slack gets its
// quarter of headroom, not a limit the collector would fight).
func TestAutoGoMemoryLimitFollowsLiveHeap(t *testing.T) {
	samples := goMemorySamples()
	before := readGoMemory(samples).limit()
	live := make([][]byte, 0, 128)
	for range 128 {
		live = append(live, make([]byte, 1<<20))
	}
	runtime.GC()
	after := readGoMemory(samples).limit()
	if want := int64(len(live)) << 20; after < want+want/4 || after <= before {
		t.Errorf("with %d MB more live heap the limit is %d MB (before %d MB), want at least %d MB", len(live), after>>20, before>>20, (want+want/4)>>20)
	}
	live[0][0] = 1 // keep live reachable past the reading
}

// TestIdleReturnOncePerIdlePeriod checks when the automatic limit returns
// memory: not while the server allocates, once when it goes idle with a
// surplus worth returning, not again until it was busy again, and never
// for a small surplus.
func TestIdleReturnOncePerIdlePeriod(t *testing.T) {
	const mb = 1 << 20
	var r idleReturn
	allocs := uint64(0)
	step := func(allocated, surplus uint64) bool {
		allocs += allocated
		return r.tick(allocs, surplus)
	}
	steps := []struct {
		allocated, surplus uint64
		want               bool
	}{
		{50 * mb, 20 * mb, false},                // busy
		{10 * mb, 30 * mb, false},                // busy
		{1 << 10, 30 * mb, true},                 // idle: return once
		{1 << 10, 30 * mb, false},                // still idle: already returned
		{0, 30 * mb, false},                      // still idle
		{goMemoryIdleAllocBytes, 30 * mb, false}, // busy again
		{0, goMemoryIdleMinGainBytes - 1, false}, // idle, too little to gain
		{0, 8 * mb, true},                        // idle, now worth it
	}
	for i, s := range steps {
		if got := step(s.allocated, s.surplus); got != s.want {
			t.Fatalf("tick %d (allocated %d, surplus %d): return = %v, want %v", i, s.allocated, s.surplus, got, s.want)
		}
	}
}

// TestGoMemorySurplus checks that garbage the collector has not yet
// collected counts as surplus and that returning memory removes it, so
// that the idle return sees what it can gain.
func TestGoMemorySurplus(t *testing.T) {
	samples := goMemorySamples()
	runtime.GC()
	debug.FreeOSMemory()
	before := readGoMemory(samples)
	gcPercent := debug.SetGCPercent(-1) // no collection while the garbage is made
	var keep []byte
	for range 64 {
		keep = make([]byte, 1<<20)
		keep[0] = 1
	}
	withGarbage := readGoMemory(samples)
	debug.SetGCPercent(gcPercent)
	debug.FreeOSMemory()
	after := readGoMemory(samples)
	if withGarbage.surplus() < before.surplus()+32<<20 {
		t.Errorf("64 MB of garbage: surplus %d MB (before %d MB), want at least 32 MB more", withGarbage.surplus()>>20, before.surplus()>>20)
	}
	if after.surplus() > before.surplus()+goMemoryIdleMinGainBytes {
		t.Errorf("after returning memory the surplus is %d MB (before the garbage %d MB)", after.surplus()>>20, before.surplus()>>20)
	}
	if withGarbage.allocs < before.allocs+64<<20 {
		t.Errorf("allocated 64 MB: allocs %d -> %d", before.allocs, withGarbage.allocs)
	}
	_ = keep[0]
}
