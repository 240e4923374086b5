//go:build linux

package tiering

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
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
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+strconv.Itoa(size)); err != nil {
		t.Skipf("cannot mount a tmpfs: %v", err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(dir, syscall.MNT_DETACH) })
}

// quotaFS is a file system whose directory dir behaves as a device of
// quota bytes: a write that would take the files in dir past it fails with
// ENOSPC, and GetDiskUsage reports what is left.
type quotaFS struct {
	vfs.FS
	dir   string
	quota int64
}

func (q *quotaFS) inDir(name string) bool { return filepath.Dir(name) == q.dir }

func (q *quotaFS) used() int64 {
	names, _ := q.FS.List(q.dir)
	var n int64
	for _, name := range names {
		if fi, err := q.FS.Stat(filepath.Join(q.dir, name)); err == nil {
			n += fi.Size()
		}
	}
	return n
}

func (q *quotaFS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := q.FS.Create(name, c)
	if err != nil || !q.inDir(name) {
		return f, err
	}
	return &quotaFile{File: f, q: q}, nil
}

func (q *quotaFS) GetDiskUsage(path string) (vfs.DiskUsage, error) {
	if filepath.Clean(path) != q.dir {
		return q.FS.GetDiskUsage(path)
	}
	used := q.used()
	return vfs.DiskUsage{AvailBytes: uint64(max(q.quota-used, 0)), TotalBytes: uint64(q.quota), UsedBytes: uint64(used)}, nil
}

type quotaFile struct {
	vfs.File
	q *quotaFS
}

// room returns how many of n bytes fit. The layout may have retargeted the
// descriptor onto a file elsewhere (dup3), so the file's directory is read
// back from the descriptor.
func (f *quotaFile) room(n int) int {
	if path, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(int(f.Fd()))); err == nil && filepath.Dir(path) != f.q.dir {
		return n
	}
	return int(min(int64(n), max(f.q.quota-f.q.used(), 0)))
}

func (f *quotaFile) Write(p []byte) (int, error) {
	k := f.room(len(p))
	n, err := f.File.Write(p[:k])
	if err == nil && k < len(p) {
		err = &os.PathError{Op: "write", Path: "quota", Err: syscall.ENOSPC}
	}
	return n, err
}

func (f *quotaFile) WriteAt(p []byte, off int64) (int, error) {
	k := f.room(len(p))
	n, err := f.File.WriteAt(p[:k], off)
	if err == nil && k < len(p) {
		err = &os.PathError{Op: "write", Path: "quota", Err: syscall.ENOSPC}
	}
	return n, err
}

// TestFullDevice puts the first path on a 3 MB device whose target claims
// 64 MB (a fault-injecting FS, and a real tmpfs when the test runs as
// root): when it fills, tables being written continue in the next path,
// new ones go there, Pebble never sees ENOSPC, the database keeps taking
// writes, Stats say the path is full, and every record reads back, also
// after a reopen.
func TestFullDevice(t *testing.T) {
	for _, dev := range []string{"quota", "tmpfs"} {
		t.Run(dev, func(t *testing.T) {
			root := t.TempDir()
			p0 := filepath.Join(root, "p0")
			base := vfs.Default
			if dev == "tmpfs" {
				if testing.Short() {
					t.Skip("the quota FS covers -short runs")
				}
				mountTmpfs(t, p0, 3<<20)
			} else {
				base = &quotaFS{FS: vfs.Default, dir: p0, quota: 3 << 20}
			}
			testFullDevice(t, root, base)
		})
	}
}

func testFullDevice(t *testing.T, root string, base vfs.FS) {
	dbDir := filepath.Join(root, "db") // metadata and WAL off the full device
	paths := []Path{{filepath.Join(root, "p0"), 64 << 20}, {filepath.Join(root, "p1"), 1 << 30}}
	var mu sync.Mutex
	var bgErrs []error
	el := pebble.EventListener{BackgroundError: func(err error) {
		mu.Lock()
		defer mu.Unlock()
		bgErrs = append(bgErrs, err)
	}}
	open := func() (*Layout, *pebble.DB) {
		l, err := New(base, dbDir, paths, Options{Shape: testShape()})
		if err != nil {
			t.Fatal(err)
		}
		db, err := pebble.Open(dbDir, testPebbleOptions(l, "", &el))
		if err != nil {
			t.Fatal(err)
		}
		l.Attach(db)
		return l, db
	}
	l, db := open()
	d := &testDB{t: t, root: root, dbDir: dbDir, layout: l, db: db}
	records := 10000 // 10 MB: more than three times the device
	if raceEnabled {
		records = 6000
	}
	for n := 0; n < records; n += 500 {
		done := make(chan struct{})
		go func() { d.write(n, n+500, uint64(n)); close(done) }()
		select {
		case <-done:
		case <-time.After(60 * time.Second):
			t.Fatalf("writes stalled after %d records:\n%s", n, l.Stats())
		}
	}
	d.settle()
	st := l.Stats()
	t.Logf("after %d records:\n%s", records, st)
	mu.Lock()
	for _, err := range bgErrs {
		t.Errorf("Pebble saw a background error: %v", err)
	}
	mu.Unlock()
	if st.SpilledFiles == 0 || st.Paths[0].SpilledFiles == 0 {
		t.Errorf("no table spilled off the full path: %s", st)
	}
	if st.Paths[1].Bytes < 1<<20 {
		t.Errorf("path 1 holds only %d bytes: the tables did not go there", st.Paths[1].Bytes)
	}
	if st.Paths[0].Bytes > 3<<20 {
		t.Errorf("path 0 claims %d bytes on a 3 MB device", st.Paths[0].Bytes)
	}
	if !strings.Contains(st.String(), "spilled") {
		t.Errorf("Stats do not mention the spill:\n%s", st)
	}
	verifyKeys(t, db, 0, records)
	checkConsistent(t, l, db)
	if _, temps := physicalFiles(t, l); len(temps) > 0 {
		t.Errorf("temporary copies left: %v", temps)
	}
	if err := l.Settle(context.Background()); err != nil && !errors.Is(err, ErrNotSettled) {
		t.Errorf("Settle on a full device: %v", err)
	}
	l.Close()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	l, db = open()
	verifyKeys(t, db, 0, records)
	l.Close()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}
