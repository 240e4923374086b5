package mvcc

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stratadb/strata/engine"
)

// TestCrashAtRandomPoints runs random operations with sync = true while
// another goroutine takes crash clones of the file system (only synced data
// survives, plus a random share of the rest) at random moments, also in
// the middle of commits and compactions. Each clone must reopen to the
// state after some k operations, with every operation acknowledged before
// the clone was taken (k >= lo) and none not yet begun (k <= hi): the
// revisions are a prefix of what was acknowledged, and a compaction
// scheduled is finished on open.
func TestCrashAtRandomPoints(t *testing.T) {
	seed := testSeed(t)
	r := rand.New(rand.NewPCG(seed, 1))
	mem := vfs.NewCrashableMem()
	db := openEngine(t, copyingLinks{mem}, true)
	s := openStore(t, db, Options{})
	m := newModel()
	g := newOpGen(r, 12)

	type state struct{ rev, compacted int64 }
	states := []state{{1, 0}}
	var acked atomic.Int64
	type clone struct {
		fs     *vfs.MemFS
		lo, hi int64
		seed   uint64
	}
	var (
		clones []clone
		mu     sync.Mutex
		done   = make(chan struct{})
		wg     sync.WaitGroup
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		cr := rand.New(rand.NewPCG(seed, 2))
		for i := uint64(0); ; i++ {
			select {
			case <-done:
				return
			case <-time.After(time.Duration(cr.IntN(300)) * time.Microsecond):
			}
			lo := acked.Load()
			fs := mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: cr.IntN(101), RNG: rand.New(rand.NewPCG(seed, 100+i))})
			hi := acked.Load() + 1
			mu.Lock()
			clones = append(clones, clone{fs, lo, hi, i})
			mu.Unlock()
		}
	}()
	steps := 1000
	if testing.Short() {
		steps = 200
	}
	for i := range steps {
		g.step(t, s, m, 10)
		states = append(states, state{m.rev, m.compacted})
		acked.Store(int64(i + 1))
	}
	close(done)
	wg.Wait()
	_ = s.Close()
	_ = db.Close()
	if len(clones) == 0 {
		t.Fatal("no crash clone taken")
	}
	t.Logf("%d crash clones over %d operations", len(clones), steps)
	for _, c := range clones {
		db2 := openEngine(t, c.fs, true)
		s2, err := Open(db2, Options{})
		if err != nil {
			t.Fatalf("clone %d (ops %d..%d): Open: %v", c.seed, c.lo, c.hi, err)
		}
		got := state{s2.Rev(), s2.CompactRev()}
		k := int64(-1)
		for i := c.lo; i <= min(c.hi, int64(len(states)-1)); i++ {
			if states[i] == got {
				k = i
			}
		}
		if k < 0 {
			t.Fatalf("clone %d: reopened at revision %d compacted %d, not the state after any of operations %d..%d: %v",
				c.seed, got.rev, got.compacted, c.lo, c.hi, states[c.lo:min(c.hi+1, int64(len(states)))])
		}
		checkAgainstModel(t, s2, &model{hist: m.hist, rev: got.rev, compacted: got.compacted}, fmt.Sprintf("clone %d after op %d", c.seed, k))
		checkCompactionFinished(t, s2, db2)
		_ = s2.Close()
		_ = db2.Close()
	}
}

// checkCompactionFinished checks that no compaction is pending on disk
// once the store's compaction in the background, if any (one Open
// resumed), is done.
func checkCompactionFinished(t *testing.T, s *Store, db *engine.DB) {
	t.Helper()
	if err := s.WaitCompaction(); err != nil {
		t.Fatalf("WaitCompaction: %v", err)
	}
	sched, fin, err := compactionMarkers(s)
	if err != nil {
		t.Fatal(err)
	}
	if sched != fin || sched != s.CompactRev() {
		t.Fatalf("compaction scheduled at %d, finished at %d, store compacted at %d", sched, fin, s.CompactRev())
	}
}

// storedRevisions lists the (main revision, key) pairs of every record.
func storedRevisions(t *testing.T, db *engine.DB) []string {
	t.Helper()
	it, err := db.NewIter(&engine.IterOptions{LowerBound: []byte{revPrefix}, UpperBound: []byte{revPrefix + 1}})
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	var out []string
	for ok := it.First(); ok; ok = it.Next() {
		rev, index, err := decodeRevSlot(it.Key())
		if err != nil {
			t.Fatal(err)
		}
		if index {
			continue
		}
		rec, err := decodeRecord(it.Value())
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, fmt.Sprintf("%d:%s", rev.Main, rec.key))
	}
	sort.Strings(out)
	return out
}

// retainedRevisions lists what a compaction at m.compacted keeps: each
// key's latest version at or below it unless that is a deletion below it,
// and everything after.
func retainedRevisions(m *model) []string {
	var out []string
	for k, h := range m.hist {
		for i, v := range h {
			if v.rev > m.rev {
				break
			}
			latestAtOrBelow := v.rev <= m.compacted && (i+1 == len(h) || h[i+1].rev > m.compacted)
			if v.rev > m.compacted || latestAtOrBelow && (!v.tomb || v.rev == m.compacted) {
				out = append(out, fmt.Sprintf("%d:%s", v.rev, k))
			}
		}
	}
	sort.Strings(out)
	return out
}

// TestCrashDuringCompaction crashes a compaction at its k-th batch, for
// every k: the clone taken then must reopen with the compaction either not
// begun (k = 0: its first batch never committed) or finished by Open, with
// exactly the revisions the compaction keeps left on disk. The store that
// saw the failure finishes the deletions on its next Compact.
func TestCrashDuringCompaction(t *testing.T) {
	seed := testSeed(t)
	for k := 0; ; k++ {
		r := rand.New(rand.NewPCG(seed, 3))
		mem := vfs.NewCrashableMem()
		db := openEngine(t, mem, true)
		s := openStore(t, db, Options{})
		m := newModel()
		g := newOpGen(r, 10)
		for range 80 {
			g.step(t, s, m, 0)
		}
		target := m.rev - 5
		var crashed *vfs.MemFS
		s.opts.hooks.beforeCompactCommit = func(i int) error {
			if i == k {
				crashed = mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 50, RNG: rand.New(rand.NewPCG(seed, uint64(k)))})
				return errInjected
			}
			return nil
		}
		err := s.Compact(target)
		if err == nil {
			if k < 2 {
				t.Fatalf("compaction took only %d batches; the test needs more", k)
			}
			t.Logf("crashed a compaction of %d batches at every batch", k)
			_ = s.Close()
			_ = db.Close()
			return
		}
		if !errors.Is(err, errInjected) {
			t.Fatalf("k=%d: Compact: %v, want the injected error", k, err)
		}

		// The store that failed: a retry finishes the deletions.
		s.opts.hooks.beforeCompactCommit = nil
		wantCompacted := target
		if k == 0 {
			wantCompacted = 0
			if err := s.Compact(target); err != nil {
				t.Fatalf("k=0: Compact after an injected failure: %v", err)
			}
		} else if err := s.Compact(target); !errors.Is(err, ErrCompacted) {
			t.Fatalf("k=%d: second Compact(%d): %v, want ErrCompacted", k, target, err)
		}
		m.compacted = target
		checkAgainstModel(t, s, m, fmt.Sprintf("k=%d, after the retry", k))
		if got, want := storedRevisions(t, db), retainedRevisions(m); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("k=%d: after the retry disk holds\n%v\nwant\n%v", k, got, want)
		}
		_ = s.Close()
		_ = db.Close()

		// The crash clone.
		db2 := openEngine(t, crashed, true)
		s2 := openStore(t, db2, Options{})
		m.compacted = wantCompacted
		checkAgainstModel(t, s2, m, fmt.Sprintf("k=%d, reopened", k))
		checkCompactionFinished(t, s2, db2)
		if got, want := storedRevisions(t, db2), retainedRevisions(m); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("k=%d: reopened disk holds\n%v\nwant\n%v", k, got, want)
		}
		_ = s2.Close()
		_ = db2.Close()
	}
}

// TestFailedCommitStopsWrites: after a write fails in the engine (here:
// the engine is closed under the store) the store refuses writes, since
// the revision may or may not have reached storage.
func TestFailedCommitStopsWrites(t *testing.T) {
	db := openEngine(t, vfs.NewMem(), false)
	s := openStore(t, db, Options{})
	if _, err := s.Put([]byte("a"), []byte("1")); err != nil {
		t.Fatal(err)
	}
	_ = db.Close()
	if _, err := s.Put([]byte("a"), []byte("2")); !errors.Is(err, engine.ErrClosed) {
		t.Fatalf("Put on a closed engine: %v", err)
	}
	if _, err := s.Put([]byte("b"), []byte("2")); err == nil || s.failure() == nil {
		t.Fatalf("Put after a failed commit: %v", err)
	}
	if err := s.Compact(1); err == nil {
		t.Fatal("Compact after a failed commit succeeded")
	}
	_ = s.Close()
}

// TestCompactionDurableWithoutSync: on an engine with sync = false, a crash
// that loses every unsynced byte right after a compaction leaves the store
// as compacted, with the history it keeps. The compaction's deletions are
// ingested, durable at once, so the marker that schedules it is synced
// before them; were it not, the crash would keep the deletions and lose
// the marker (and the writes before it), and the store would answer reads
// below the compaction from missing records.
func TestCompactionDurableWithoutSync(t *testing.T) {
	mem := vfs.NewCrashableMem()
	db := openEngine(t, mem, false)
	s := openStore(t, db, Options{})
	m := newModel()
	g := newOpGen(rand.New(rand.NewPCG(testSeed(t), 5)), 10)
	for range 120 {
		g.step(t, s, m, 0)
	}
	// The history compacted is flushed and later writes are in the
	// memtable: Pebble flushes a memtable that overlaps an ingestion, which
	// would make the marker durable anyway.
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	target := m.rev
	for range 10 {
		g.step(t, s, m, 0)
	}
	if err := s.Compact(target); err != nil {
		t.Fatal(err)
	}
	m.compacted = target
	crashed := mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
	_ = s.Close()
	_ = db.Close()
	db2 := openEngine(t, crashed, false)
	defer db2.Close()
	s2 := openStore(t, db2, Options{})
	defer s2.Close()
	checkAgainstModel(t, s2, m, "reopened after the crash")
	checkCompactionFinished(t, s2, db2)
}

// copyingLinks is an FS whose Link fails, so that Pebble copies the tables
// it ingests (a compaction's tombstones) instead of linking them
// (vfs.LinkOrCopy), and which never recycles a WAL file. The crashable
// MemFS's Link and ReuseForWrite read-lock its clone lock twice, which
// deadlocks against a CrashClone that starts waiting between the two;
// TestCrashAtRandomPoints clones while compactions ingest and commits
// rotate the WAL.
type copyingLinks struct{ vfs.FS }

func (copyingLinks) Link(oldname, newname string) error {
	return fmt.Errorf("link %s %s: not supported by this test's file system", oldname, newname)
}

// ReuseForWrite creates newname and removes oldname, as FS.ReuseForWrite
// allows, instead of renaming it.
func (fs copyingLinks) ReuseForWrite(oldname, newname string, category vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.Create(newname, category)
	if err != nil {
		return nil, err
	}
	if err := fs.Remove(oldname); err != nil && !errors.Is(err, os.ErrNotExist) {
		_ = f.Close()
		return nil, err
	}
	return f, nil
}
