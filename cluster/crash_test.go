package cluster

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// slowSyncFS delays every sync by a few milliseconds, as a disk does: a
// member that acknowledged an append before its write was durable would be
// caught in the gap. Every change it makes holds freeze for reading, so
// that the crash, holding it for writing, clones the three members' file
// systems at one instant: cloned one after the other while the members
// run, a leader's copy could record a commit that its followers' copies,
// taken earlier, had not yet acknowledged.
type slowSyncFS struct {
	vfs.FS
	freeze *sync.RWMutex
}

const syncDelay = 3 * time.Millisecond

func (fs slowSyncFS) wrap(f vfs.File, err error) (vfs.File, error) {
	if err != nil {
		return nil, err
	}
	return slowSyncFile{f, fs.freeze}, nil
}

func (fs slowSyncFS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	fs.freeze.RLock()
	defer fs.freeze.RUnlock()
	return fs.wrap(fs.FS.Create(name, c))
}

func (fs slowSyncFS) OpenReadWrite(name string, c vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	fs.freeze.RLock()
	defer fs.freeze.RUnlock()
	return fs.wrap(fs.FS.OpenReadWrite(name, c, opts...))
}

func (fs slowSyncFS) ReuseForWrite(oldname, newname string, c vfs.DiskWriteCategory) (vfs.File, error) {
	fs.freeze.RLock()
	defer fs.freeze.RUnlock()
	return fs.wrap(fs.FS.ReuseForWrite(oldname, newname, c))
}

func (fs slowSyncFS) OpenDir(name string) (vfs.File, error) {
	return fs.wrap(fs.FS.OpenDir(name))
}

func (fs slowSyncFS) Rename(oldname, newname string) error {
	fs.freeze.RLock()
	defer fs.freeze.RUnlock()
	return fs.FS.Rename(oldname, newname)
}

func (fs slowSyncFS) Remove(name string) error {
	fs.freeze.RLock()
	defer fs.freeze.RUnlock()
	return fs.FS.Remove(name)
}

type slowSyncFile struct {
	vfs.File
	freeze *sync.RWMutex
}

func (f slowSyncFile) Write(p []byte) (int, error) {
	f.freeze.RLock()
	defer f.freeze.RUnlock()
	return f.File.Write(p)
}

func (f slowSyncFile) Sync() error {
	time.Sleep(syncDelay)
	f.freeze.RLock()
	defer f.freeze.RUnlock()
	return f.File.Sync()
}

func (f slowSyncFile) SyncData() error {
	time.Sleep(syncDelay)
	f.freeze.RLock()
	defer f.freeze.RUnlock()
	return f.File.SyncData()
}

func (f slowSyncFile) SyncTo(length int64) (bool, error) {
	time.Sleep(syncDelay)
	f.freeze.RLock()
	defer f.freeze.RUnlock()
	return f.File.SyncTo(length)
}

// TestRaftLogCrash crashes all three members at once while clients write on
// every member, keeping of each raft log only what was fsynced (Pebble's
// crashable file system, each sync taking 3 ms; SIGKILL would keep the
// page cache), and restarts
// them from that: every write acknowledged before the crash is there. It
// proves that a member acknowledges an append (and the leader counts its
// own copy) only once the append is durable: with the append goroutine's
// responses delivered before the write, or the raft log written without
// fsync, acknowledged writes are lost.
func TestRaftLogCrash(t *testing.T) {
	fss := map[string]*vfs.MemFS{"s1": vfs.NewCrashableMem(), "s2": vfs.NewCrashableMem(), "s3": vfs.NewCrashableMem()}
	var fsMu sync.Mutex
	var freeze sync.RWMutex
	c := newTestCluster(t, 3, func(cfg *RaftConfig) {
		fsMu.Lock()
		defer fsMu.Unlock()
		cfg.logFS = slowSyncFS{fss[cfg.Name], &freeze}
		// The state machine starts empty after the crash: it rebuilds from
		// the log, so no snapshot may truncate it.
		cfg.SnapshotEntries = 1 << 30
	})
	c.leader()

	var crashing atomic.Bool
	var ackedMu sync.Mutex
	var acked []string
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for g := range 9 {
		wg.Go(func() {
			for i := 0; ctx.Err() == nil; i++ {
				k := fmt.Sprintf("w%d-%d", g, i)
				pctx, pcancel := context.WithTimeout(ctx, 5*time.Second)
				_, err := c.nodes[g%3].Propose(pctx, []byte("put "+k+" v"))
				pcancel()
				// An acknowledgement seen before crashing was set came
				// before the crash.
				if err == nil && !crashing.Load() {
					ackedMu.Lock()
					acked = append(acked, k)
					ackedMu.Unlock()
				}
			}
		})
	}
	waitFor(t, "300 acknowledged writes", func() bool {
		ackedMu.Lock()
		defer ackedMu.Unlock()
		return len(acked) >= 300
	})
	freeze.Lock()
	crashing.Store(true)
	fsMu.Lock()
	for name, fs := range fss {
		fss[name] = fs.CrashClone(vfs.CrashCloneCfg{})
	}
	fsMu.Unlock()
	freeze.Unlock()
	cancel()
	wg.Wait()
	for i := range c.nodes {
		c.stop(i)
	}

	// Restart every member from its crashed raft log with an empty state
	// machine.
	var rwg sync.WaitGroup
	errs := make([]error, len(c.nodes))
	for i := range c.nodes {
		c.sms[i] = newKVSM()
		rwg.Go(func() { c.nodes[i], errs[i] = StartRaft(c.config(i, false), c.sms[i]) })
	}
	rwg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	c.leader()
	// A write after the restart commits everything before it.
	if _, err := c.put(0, "after", "crash"); err != nil {
		t.Fatal(err)
	}
	c.converge()
	lost := 0
	for _, k := range acked {
		if c.sms[0].get(k) != "v" {
			if lost < 5 {
				t.Errorf("acknowledged write %s lost in the crash", k)
			}
			lost++
		}
	}
	if lost > 0 {
		t.Fatalf("%d of %d acknowledged writes lost", lost, len(acked))
	}
	t.Logf("%d acknowledged writes survived the crash of every member", len(acked))
}
