package mvcc

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/stratadb/strata/engine"
)

// slowSyncFS makes every file sync take d, as a disk's fsync does, so that
// writers arrive while a sync is in flight.
func slowSyncFS(fs vfs.FS, d time.Duration) vfs.FS {
	return errorfs.Wrap(fs, errorfs.InjectorFunc(func(op errorfs.Op) error {
		switch op.Kind {
		case errorfs.OpFileSync, errorfs.OpFileSyncData, errorfs.OpFileSyncTo:
			if strings.HasSuffix(op.Path, ".log") {
				time.Sleep(d)
			}
		}
		return nil
	}))
}

// putConcurrently runs writers goroutines of n puts each, of distinct keys,
// and returns the revision each acknowledged put got, per key.
func putConcurrently(t testing.TB, s *Store, writers, n int, acked func(key string, rev int64)) {
	var wg sync.WaitGroup
	for g := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range n {
				k := fmt.Sprintf("w%02d-%04d", g, i)
				rev, err := s.Put([]byte(k), []byte(k))
				if err != nil {
					t.Errorf("Put(%s): %v", k, err)
					return
				}
				if acked != nil {
					acked(k, rev)
				}
			}
		}()
	}
	wg.Wait()
}

// walSyncs returns the WAL syncs the file system has seen.
func walSyncs(t testing.TB, db *engine.DB) int64 {
	m, err := db.Metrics()
	if err != nil {
		t.Fatal(err)
	}
	return m.WAL.FS.Syncs
}

// TestGroupCommitSharesSyncs: with sync = true and a WAL sync that takes
// a millisecond, 16 concurrent writers need far fewer syncs than writes,
// because writers that arrive during a sync share the next one. Without
// group commit (each writer syncing under the write lock) every write
// costs a sync.
func TestGroupCommitSharesSyncs(t *testing.T) {
	for _, serial := range []bool{false, true} {
		t.Run(fmt.Sprintf("sync_under_lock=%v", serial), func(t *testing.T) {
			db := openEngine(t, slowSyncFS(vfs.NewMem(), time.Millisecond), true)
			defer db.Close()
			s := openStore(t, db, Options{hooks: hooks{syncUnderLock: serial}})
			defer s.Close()
			before := walSyncs(t, db)
			const writers, n = 16, 20
			putConcurrently(t, s, writers, n, nil)
			syncs := walSyncs(t, db) - before
			t.Logf("%d writes, %d WAL syncs", writers*n, syncs)
			if serial {
				if syncs < writers*n {
					t.Fatalf("%d syncs for %d writes that each sync under the lock", syncs, writers*n)
				}
				return
			}
			if syncs > writers*n/4 {
				t.Fatalf("%d WAL syncs for %d concurrent writes: writers do not share syncs", syncs, writers*n)
			}
		})
	}
}

// TestGroupCommitCrash: concurrent writers with sync = true while crash
// clones of the file system (synced data only) are taken at random
// moments. Every write acknowledged, and every revision a reader could see,
// before a clone was taken must be in it after reopening.
func TestGroupCommitCrash(t *testing.T) {
	seed := testSeed(t)
	mem := vfs.NewCrashableMem()
	db := openEngine(t, slowSyncFS(mem, 200*time.Microsecond), true)
	s := openStore(t, db, Options{})
	type clone struct {
		fs      *vfs.MemFS
		visible int64
		acked   map[string]int64
	}
	var (
		mu     sync.Mutex
		acked  = map[string]int64{}
		clones []clone
		done   = make(chan struct{})
		wg     sync.WaitGroup
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		r := rand.New(rand.NewPCG(seed, 11))
		for i := uint64(0); ; i++ {
			select {
			case <-done:
				return
			case <-time.After(time.Duration(r.IntN(2000)) * time.Microsecond):
			}
			visible := s.Rev()
			mu.Lock()
			snap := make(map[string]int64, len(acked))
			for k, v := range acked {
				snap[k] = v
			}
			mu.Unlock()
			fs := mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
			clones = append(clones, clone{fs, visible, snap})
		}
	}()
	writers, n := 8, 60
	if testing.Short() {
		n = 25
	}
	putConcurrently(t, s, writers, n, func(k string, rev int64) {
		mu.Lock()
		acked[k] = rev
		mu.Unlock()
	})
	close(done)
	wg.Wait()
	_ = s.Close()
	_ = db.Close()
	if len(clones) < 3 {
		t.Fatalf("only %d crash clones", len(clones))
	}
	t.Logf("%d crash clones during %d writes", len(clones), writers*n)
	for i, c := range clones {
		db2 := openEngine(t, c.fs, true)
		s2 := openStore(t, db2, Options{})
		if got := s2.Rev(); got < c.visible {
			t.Fatalf("clone %d: reopened at revision %d, but readers saw %d before the crash", i, got, c.visible)
		}
		for k, rev := range c.acked {
			res, err := s2.Range([]byte(k), nil, RangeOptions{})
			if err != nil || len(res.KVs) != 1 || res.KVs[0].ModRevision != rev {
				t.Fatalf("clone %d: acknowledged put of %s at revision %d lost: %v %s", i, k, rev, err, fmtKVs(res.KVs))
			}
		}
		_ = s2.Close()
		_ = db2.Close()
	}
}

// TestGroupCommitOrder: concurrent writers, readers and a watcher (run it
// with -race). A writer reads its own write once acknowledged; a reader
// never sees the revision go back; the watcher gets every revision once,
// in order, and only revisions a reader could already see.
func TestGroupCommitOrder(t *testing.T) {
	db := openEngine(t, slowSyncFS(vfs.NewMem(), 100*time.Microsecond), true)
	defer db.Close()
	s := openStore(t, db, Options{WatchBufferSize: 64})
	defer s.Close()
	w, err := s.Watch(context.Background(), []byte{0}, []byte{0}, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	var stop atomic.Bool
	var rwg sync.WaitGroup
	for range 2 {
		rwg.Add(1)
		go func() {
			defer rwg.Done()
			last := int64(0)
			for !stop.Load() {
				rev := s.Rev()
				if rev < last {
					t.Errorf("revision went back from %d to %d", last, rev)
					return
				}
				last = rev
				time.Sleep(50 * time.Microsecond) // pace the readers; writers need the cores
				res, err := s.Range([]byte{0}, []byte{0}, RangeOptions{CountOnly: true})
				if err != nil || res.Count != res.Rev-1 || res.Rev < rev {
					t.Errorf("at revision %d: %d keys (rev %d), %v", rev, res.Count, res.Rev, err)
					return
				}
			}
		}()
	}
	writers, n := 8, 40
	if testing.Short() {
		n = 20
	}
	var wg sync.WaitGroup
	for g := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range n {
				k := fmt.Appendf(nil, "w%02d-%04d", g, i)
				rev, err := s.Put(k, k)
				if err != nil {
					t.Error(err)
					return
				}
				res, err := s.Range(k, nil, RangeOptions{})
				if err != nil || len(res.KVs) != 1 || res.KVs[0].ModRevision != rev || res.Rev < rev {
					t.Errorf("read after the acknowledged put of %s at %d: %v %s", k, rev, err, fmtKVs(res.KVs))
					return
				}
			}
		}()
	}
	next := int64(2)
	for next <= int64(writers*n+1) {
		select {
		case evs := <-w.C:
			for _, e := range evs {
				if e.KV.ModRevision != next {
					t.Fatalf("watch event at revision %d, want %d", e.KV.ModRevision, next)
				}
				if vis := s.Rev(); e.KV.ModRevision > vis {
					t.Fatalf("watch event at revision %d before readers see it (at %d)", e.KV.ModRevision, vis)
				}
				next++
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("watcher stuck before revision %d", next)
		}
	}
	wg.Wait()
	stop.Store(true)
	rwg.Wait()
}

// TestGroupCommitWALErrorSweep fails the k-th write or sync of a WAL file
// while concurrent writers commit, for k = 0, 1, ... until a run sees no
// failure. With group commit Pebble reports the failure to the waiting
// writers (not as a crash): each write either succeeds or returns the
// injected error, the store refuses writes after it, nothing is
// acknowledged that a crash clone (synced data only) then lacks.
func TestGroupCommitWALErrorSweep(t *testing.T) {
	for k := int64(0); ; k++ {
		mem := vfs.NewCrashableMem()
		var armed atomic.Bool
		var ops atomic.Int64
		inj := errorfs.InjectorFunc(func(op errorfs.Op) error {
			if !armed.Load() || !strings.HasSuffix(op.Path, ".log") {
				return nil
			}
			switch op.Kind {
			case errorfs.OpFileWrite, errorfs.OpFileSync, errorfs.OpFileSyncData, errorfs.OpFileSyncTo:
				if ops.Add(1)-1 == k {
					return errorfs.ErrInjected
				}
			}
			return nil
		})
		db := openEngine(t, errorfs.Wrap(mem, inj), true)
		s := openStore(t, db, Options{})
		armed.Store(true)
		var mu sync.Mutex
		acked := map[string]int64{}
		failures := 0
		var wg sync.WaitGroup
		for g := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range 10 {
					key := fmt.Sprintf("w%d-%02d", g, i)
					rev, err := s.Put([]byte(key), []byte(key))
					mu.Lock()
					if err == nil {
						acked[key] = rev
					} else {
						failures++
						if !errors.Is(err, errorfs.ErrInjected) {
							t.Errorf("k=%d: Put(%s): %v, want the injected error", k, key, err)
						}
					}
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		armed.Store(false)
		crashed := mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
		if ops.Load() <= k {
			// The k-th WAL operation never came: every one has failed once.
			if k < 2 || failures != 0 {
				t.Fatalf("the writes touched the WAL only %d times, %d failures", k, failures)
			}
			t.Logf("failed each of %d WAL writes and syncs", k)
			_ = s.Close()
			_ = db.Close()
			return
		}
		if failures == 0 {
			t.Fatalf("k=%d: the injected WAL error reached no writer: all %d puts acknowledged", k, len(acked))
		}
		if _, err := s.Put([]byte("after"), nil); err == nil {
			t.Fatalf("k=%d: a Put after a failed WAL write succeeded", k)
		}
		// The failed engine is abandoned (Pebble's WAL is unusable after
		// an I/O error); the crash clone must hold every acknowledged put.
		_ = s.Close()
		db2 := openEngine(t, crashed, true)
		s2 := openStore(t, db2, Options{})
		for key, rev := range acked {
			res, err := s2.Range([]byte(key), nil, RangeOptions{})
			if err != nil || len(res.KVs) != 1 || res.KVs[0].ModRevision != rev {
				t.Fatalf("k=%d: acknowledged put of %s at %d lost: %v %s", k, key, rev, err, fmtKVs(res.KVs))
			}
		}
		_ = s2.Close()
		_ = db2.Close()
	}
}
