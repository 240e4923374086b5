//go:build linux

package tiering

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// mountTmpfs mounts a tmpfs of size bytes at dir, or skips the test.
func mountTmpfs(t *testing.T, dir string, size int) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a small tmpfs")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+itoa(size)); err != nil {
		t.Skipf("cannot mount a tmpfs: %v", err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(dir, syscall.MNT_DETACH) })
}

func itoa(n int) string { return strconv.Itoa(n) }

// TestFullDevice puts the middle path on a 3 MB device whose target claims
// much more: Pebble's compaction into it fails with ENOSPC, reported as
// Pebble's background error, and every record written stays readable.
func TestFullDevice(t *testing.T) {
	root := t.TempDir()
	mountTmpfs(t, filepath.Join(root, "p1"), 3<<20)
	l, err := New(vfs.Default, filepath.Join(root, "p0"), []Path{
		{filepath.Join(root, "p0"), 1 << 20},
		{filepath.Join(root, "p1"), 64 << 20},
		{filepath.Join(root, "p2"), 1 << 30},
	}, Options{Shape: testShape()})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var enospc error
	el := pebble.EventListener{BackgroundError: func(err error) {
		mu.Lock()
		defer mu.Unlock()
		if errors.Is(err, syscall.ENOSPC) && enospc == nil {
			enospc = err
		}
	}}
	db, err := pebble.Open(filepath.Join(root, "p0"), testPebbleOptions(l, "", &el))
	if err != nil {
		t.Fatal(err)
	}
	l.Attach(db)
	d := &testDB{t: t, root: root, dbDir: filepath.Join(root, "p0"), layout: l, db: db}
	n := 0
	for n < 12000 {
		done := make(chan struct{})
		go func() { d.write(n, n+500, uint64(n)); close(done) }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			t.Fatalf("writes stalled")
		}
		n += 500
		mu.Lock()
		full := enospc != nil
		mu.Unlock()
		if full {
			break
		}
	}
	if enospc == nil {
		t.Fatalf("no ENOSPC after %d records", n)
	}
	t.Logf("after %d records: %v\n%s", n, enospc, l.Stats())
	verifyKeys(t, db, 0, n)
	if err := l.Rebalance(context.Background()); err != nil {
		t.Logf("mover on a full device: %v", err)
	}
	verifyKeys(t, db, 0, n)
	// Pebble keeps retrying the compaction into the full path, so the LSM
	// never settles; check only that no failed copy is left behind.
	if _, temps := physicalFiles(t, l); len(temps) > 0 {
		t.Errorf("temporary copies left: %v", temps)
	}
	l.Close()
	_ = db.Close()
}
