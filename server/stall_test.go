package server

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/stratadb/strata/engine"
)

// stallFS blocks the syncs of WAL files while armed, until released.
type stallFS struct {
	vfs.FS
	armed   atomic.Bool
	release chan struct{}
}

func (fs *stallFS) wrap(name string, f vfs.File, err error) (vfs.File, error) {
	if err != nil || !strings.HasSuffix(name, ".log") {
		return f, err
	}
	return &stallFile{File: f, fs: fs}, nil
}

func (fs *stallFS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.Create(name, c)
	return fs.wrap(name, f, err)
}

func (fs *stallFS) ReuseForWrite(oldname, newname string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.ReuseForWrite(oldname, newname, c)
	return fs.wrap(newname, f, err)
}

func (fs *stallFS) OpenReadWrite(name string, c vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	f, err := fs.FS.OpenReadWrite(name, c, opts...)
	return fs.wrap(name, f, err)
}

type stallFile struct {
	vfs.File
	fs *stallFS
}

func (f *stallFile) wait() {
	if f.fs.armed.Load() {
		<-f.fs.release
	}
}

func (f *stallFile) Sync() error     { f.wait(); return f.File.Sync() }
func (f *stallFile) SyncData() error { f.wait(); return f.File.SyncData() }
func (f *stallFile) SyncTo(n int64) (bool, error) {
	f.wait()
	return f.File.SyncTo(n)
}

// TestDiskStall stalls the WAL's fsync of a real server (sync = true)
// under Pebble's disk health checker, as the OS file system runs with
// it (here with a 100 ms threshold instead of 5 s, and a stall bound of
// 1 s): while the fsync hangs, /readyz fails disk_stall naming the WAL
// file, the log says "slow fdatasync" with the duration and the stall,
// strata_disk_stalls_total counts it once; once released the put
// returns, the fsync's duration is in etcd_disk_wal_fsync_duration_seconds,
// and /readyz passes again.
func TestDiskStall(t *testing.T) {
	defer func(b, s time.Duration) { stallBound, stallStale = b, s }(stallBound, stallStale)
	stallBound, stallStale = time.Second, 3*time.Second
	fs := &stallFS{FS: vfs.Default, release: make(chan struct{})}
	var health interface{ Close() error }
	testEngineOptions = func(o *engine.Options) {
		slow := o.EventListener.DiskSlow
		var hfs vfs.FS
		hfs, health = vfs.WithDiskHealthChecks(fs, 100*time.Millisecond, nil, slow)
		o.FS = hfs
	}
	defer func() { testEngineOptions = nil }()
	log := &logLines{}
	cfg := testConfig(t)
	cfg.Sync = true
	s, err := Start(cfg, Options{Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	released := false
	release := func() {
		if !released {
			released = true
			close(fs.release)
		}
	}
	t.Cleanup(func() {
		release()
		_ = s.Close()
		_ = health.Close()
	})
	c := newClient(t, s, nil)
	ctx := testCtx(t)
	if _, err := c.Put(ctx, "before", "v"); err != nil {
		t.Fatal(err)
	}
	checkProbes(t, s, []probe{{"/readyz/disk_stall", 200, "ok\n"}})

	fs.armed.Store(true)
	put := make(chan error, 1)
	go func() {
		_, err := c.Put(ctx, "stalled", "v")
		put <- err
	}()
	base := "http://" + s.Addr().String()
	waitProbe := func(status int) httpAnswer {
		t.Helper()
		deadline := time.Now().Add(8 * time.Second)
		for {
			a := httpDo(t, "GET", base+"/readyz", "")
			if a.status == status {
				return a
			}
			if time.Now().After(deadline) {
				t.Fatalf("/readyz: %d %q, want %d", a.status, a.body, status)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	a := waitProbe(http.StatusServiceUnavailable)
	if !strings.Contains(a.body, "[-]disk_stall failed: ") || !strings.Contains(a.body, ".log in flight for ") {
		t.Errorf("/readyz: %q, want disk_stall failed on a WAL file", a.body)
	}
	select {
	case err := <-put:
		t.Fatalf("the put returned during the stall: %v", err)
	default:
	}
	if got := scrape(t, s).Sum("strata_disk_stalls_total"); got != 1 {
		t.Errorf("strata_disk_stalls_total = %v, want 1", got)
	}
	// The log lines are written on goroutines of their own.
	for deadline := time.Now().Add(time.Second); log.count("slow fdatasync: ") == 0 || log.count("expected-duration 1s") == 0 || log.count("disk stall: ") != 1; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("log, want one slow fdatasync and one disk stall line:\n%s", strings.Join(log.lines, "\n"))
		}
	}
	fsyncs := scrape(t, s).Sum("etcd_disk_wal_fsync_duration_seconds_sum")

	stalledFor := time.Now()
	release()
	if err := <-put; err != nil {
		t.Fatal(err)
	}
	waitProbe(http.StatusOK)
	t.Logf("/readyz passed %v after the release", time.Since(stalledFor).Round(10*time.Millisecond))
	if got := scrape(t, s).Sum("etcd_disk_wal_fsync_duration_seconds_sum"); got-fsyncs < 1 {
		t.Errorf("etcd_disk_wal_fsync_duration_seconds_sum grew by %v s over the stall, want >= 1", got-fsyncs)
	}
	if got := scrape(t, s).Sum("strata_disk_stalls_total"); got != 1 {
		t.Errorf("strata_disk_stalls_total = %v after the stall, want 1", got)
	}
	for deadline := time.Now().Add(time.Second); log.count("disk stall ended: ") != 1; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("log, want one disk stall ended line:\n%s", strings.Join(log.lines, "\n"))
		}
	}
	if _, err := c.Put(context.Background(), "after", "v"); err != nil {
		t.Fatal(err)
	}
}
