package mvcc

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// TestEntryCompactLeavesDeletionsRunning: the apply loop's Compact
// returns once the compaction is scheduled, while its walk of the key
// index and its deletions are held up, and the next entries apply
// meanwhile; the compacted revisions are already gone from reads.
// WaitCompaction returns only when the deletions are done.
func TestEntryCompactLeavesDeletionsRunning(t *testing.T) {
	db := openEngine(t, vfs.NewMem(), false)
	defer db.Close()
	reached, release := make(chan struct{}), make(chan struct{})
	var armed atomic.Bool // the history below compacts too
	s := openStore(t, db, Options{hooks: hooks{beforeCompactCommit: func(i int) error {
		if i == 1 && armed.Load() { // the deletions
			close(reached)
			<-release
		}
		return nil
	}}})
	defer s.Close()
	m := newModel()
	randomLeasedHistory(t, s, m, newOpGen(rand.New(rand.NewPCG(testSeed(t), 1)), 8), 100)
	for i := range 3 { // above any compaction the history made
		ops := []Op{PutOp([]byte("k01"), fmt.Appendf(nil, "v%d", i))}
		if _, err := s.Txn(TxnRequest{Success: ops}); err != nil {
			t.Fatal(err)
		}
		m.apply(ops)
	}
	at := m.rev - 1
	armed.Store(true)

	compacted := make(chan error, 1)
	go func() { compacted <- s.Entry(1000).Compact(at) }()
	select {
	case err := <-compacted:
		if err != nil {
			t.Fatalf("Entry.Compact: %v", err)
		}
	case <-time.After(time.Minute):
		close(release)
		t.Fatal("Entry.Compact waited for its deletions")
	}
	m.compacted = at
	<-reached
	// k01's put at at-1 is still in the index, for the walk to drop.
	s.mu.RLock()
	_, indexed := s.ix.Get([]byte("k01"), at-1)
	s.mu.RUnlock()
	if !indexed {
		t.Error("the key index lost the history below the compaction before its walk: the walk held the apply loop")
	}
	if _, err := s.Range([]byte("k"), []byte("l"), RangeOptions{Rev: at - 1}); !errors.Is(err, ErrCompacted) {
		t.Errorf("Range at %d after the compaction at %d: %v, want ErrCompacted", at-1, at, err)
	}
	ops := []Op{PutOp([]byte("k00"), []byte("after"))}
	if _, err := s.Entry(1001).Txn(TxnRequest{Success: ops}); err != nil {
		t.Fatalf("the next entry, while the deletions run: %v", err)
	}
	m.apply(ops)

	waited := make(chan error, 1)
	go func() {
		err := s.WaitCompaction()
		if err == nil {
			// Read at once: had it returned early, the deletions
			// would still be held up.
			err = compactionPending(s)
		}
		waited <- err
	}()
	time.Sleep(50 * time.Millisecond) // time enough to see an early return
	close(release)
	if err := <-waited; err != nil {
		t.Fatalf("WaitCompaction: %v", err)
	}
	if s.AppliedIndex() != 1001 {
		t.Errorf("AppliedIndex = %d, want 1001", s.AppliedIndex())
	}
	checkAgainstModel(t, s, m, "after the deletions")
	checkCompactionFinished(t, s, db)
	s.mu.RLock()
	_, indexed = s.ix.Get([]byte("k01"), at-1)
	s.mu.RUnlock()
	if indexed {
		t.Errorf("k01's put at %d still in the key index after the compaction at %d", at-1, at)
	}
}

// TestOpenResumesCompactionInBackground: a compaction whose deletions
// failed is resumed by the next Open in the background, as etcd's
// restore does: Open returns while the deletions are held up, the store
// serves reads at and above the compaction (and ErrCompacted below it)
// and takes writes, and WaitCompaction returns once the deletions are
// done, with only the kept history left on disk.
func TestOpenResumesCompactionInBackground(t *testing.T) {
	db := openEngine(t, vfs.NewMem(), false)
	defer db.Close()
	var failing atomic.Bool
	s := openStore(t, db, Options{hooks: hooks{beforeCompactCommit: func(i int) error {
		if i == 1 && failing.Load() {
			return errInjected
		}
		return nil
	}}})
	m := newModel()
	randomLeasedHistory(t, s, m, newOpGen(rand.New(rand.NewPCG(testSeed(t), 1)), 8), 100)
	at := m.rev - 1
	failing.Store(true)
	if err := s.Compact(at); !errors.Is(err, errInjected) {
		t.Fatalf("Compact: %v, want the injected error", err)
	}
	m.compacted = at
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	reached, release := make(chan struct{}), make(chan struct{})
	opened := make(chan *Store, 1)
	go func() {
		opened <- openStore(t, db, Options{hooks: hooks{beforeCompactCommit: func(i int) error {
			if i == 1 {
				close(reached)
				<-release
			}
			return nil
		}}})
	}()
	var s2 *Store
	select {
	case s2 = <-opened:
	case <-time.After(time.Minute):
		close(release)
		t.Fatal("Open waited for the compaction it resumed")
	}
	defer s2.Close()
	<-reached
	if err := compactionPending(s2); err == nil {
		t.Fatal("the resumed compaction finished while its deletions were held up")
	}
	checkAgainstModel(t, s2, m, "while the resumed compaction runs")
	if _, err := s2.Range([]byte("k"), []byte("l"), RangeOptions{Rev: at - 1}); !errors.Is(err, ErrCompacted) {
		t.Errorf("Range at %d below the resumed compaction at %d: %v, want ErrCompacted", at-1, at, err)
	}
	ops := []Op{PutOp([]byte("k00"), []byte("after"))}
	if _, err := s2.Txn(TxnRequest{Success: ops}); err != nil {
		t.Fatalf("a write while the resumed compaction runs: %v", err)
	}
	m.apply(ops)
	close(release)
	checkCompactionFinished(t, s2, db)
	checkAgainstModel(t, s2, m, "after the resumed compaction")
	if got, want := storedRevisions(t, db), retainedRevisions(m); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("after the resumed compaction disk holds\n%v\nwant\n%v", got, want)
	}
}

// compactionPending returns an error if the store's last compaction is
// scheduled on disk and not finished.
func compactionPending(s *Store) error {
	sched, fin, err := compactionMarkers(s)
	if err != nil {
		return err
	}
	if sched != fin {
		return errors.New("WaitCompaction returned with the compaction scheduled and not finished")
	}
	return nil
}

// compactionMarkers reads the revisions of the last compaction scheduled
// and of the last finished.
func compactionMarkers(s *Store) (sched, fin int64, err error) {
	if sched, _, err = s.readMeta(metaCompactScheduled); err != nil {
		return 0, 0, err
	}
	fin, _, err = s.readMeta(metaCompactFinished)
	return sched, fin, err
}

// TestCompactScheduleLeavesReadersRunning: while the marker that
// schedules a compaction waits for its WAL sync (held up here), reads go
// on; the history goes once the marker is published.
func TestCompactScheduleLeavesReadersRunning(t *testing.T) {
	db := openEngine(t, vfs.NewMem(), false)
	defer db.Close()
	reached, release := make(chan struct{}), make(chan struct{})
	var armed atomic.Bool
	s := openStore(t, db, Options{hooks: hooks{beforeCompactCommit: func(i int) error {
		if i == 0 && armed.Load() { // the schedule marker
			close(reached)
			<-release
		}
		return nil
	}}})
	defer s.Close()
	for i := range 3 {
		if _, err := s.Put([]byte("k"), fmt.Appendf(nil, "v%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	at := s.Rev()
	armed.Store(true)
	compacted := make(chan error, 1)
	go func() { compacted <- s.Entry(1000).Compact(at) }()
	<-reached

	read := make(chan error, 1)
	go func() {
		_, err := s.Range([]byte("k"), nil, RangeOptions{Rev: at - 1})
		read <- err
	}()
	select {
	case err := <-read:
		if err != nil {
			t.Errorf("Range at %d while the compaction at %d is being scheduled: %v, want the old value", at-1, at, err)
		}
	case <-time.After(time.Minute):
		t.Error("Range waited for the schedule marker's commit")
	}
	close(release)
	if err := <-compacted; err != nil {
		t.Fatalf("Entry.Compact: %v", err)
	}
	if _, err := s.Range([]byte("k"), nil, RangeOptions{Rev: at - 1}); !errors.Is(err, ErrCompacted) {
		t.Errorf("Range at %d after the compaction at %d: %v, want ErrCompacted", at-1, at, err)
	}
	if err := s.WaitCompaction(); err != nil {
		t.Fatal(err)
	}
}

// TestCompactionWalkBesideWriters: a compaction's walk of the key index,
// in steps after Entry.Compact returned, and the apply loop's writes to
// the keys it visits interleave, and every write stays readable. Writers
// read the index under writeMu alone, so each step of the walk holds it
// (checked in the step: -race sees the lost lock only when a step falls
// between a writer's last lock and its read).
func TestCompactionWalkBesideWriters(t *testing.T) {
	var s *Store
	var steps, unguarded atomic.Int64
	inStep := func() {
		steps.Add(1)
		if s.writeMu.TryLock() {
			s.writeMu.Unlock()
			unguarded.Add(1)
		}
	}
	s, _ = newMemStore(t, Options{hooks: hooks{walkKeys: 2, inWalkStep: inStep}})
	keys := 2000 // 1,000 steps
	key := func(i int) []byte { return fmt.Appendf(nil, "k%06d", i) }
	for round := range 2 { // history for the walk to drop
		b := s.BeginBatch()
		for i := range keys {
			ops := []Op{PutOp(key(i), fmt.Appendf(nil, "v%d", round))}
			if _, err := b.Txn(0, TxnRequest{Success: ops}); err != nil {
				t.Fatal(err)
			}
		}
		if err := b.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	at := s.Rev()
	if err := s.Entry(1000).Compact(at); err != nil {
		t.Fatalf("Entry.Compact: %v", err)
	}
	walked := make(chan error, 1)
	go func() { walked <- s.WaitCompaction() }()
	written := map[int]int64{}
	for i, index := 0, uint64(1001); ; i, index = i+1, index+1 {
		select {
		case err := <-walked:
			if err != nil {
				t.Fatalf("WaitCompaction: %v", err)
			}
			if len(written) == 0 || steps.Load() < int64(keys/2) {
				t.Fatalf("%d writes beside %d steps of the walk, want some beside at least %d", len(written), steps.Load(), keys/2)
			}
			if n := unguarded.Load(); n > 0 {
				t.Errorf("%d of %d steps of the walk did not hold writeMu, under which writers read the key index", n, steps.Load())
			}
			for i, rev := range written {
				kvs, err := s.Range(key(i), nil, RangeOptions{})
				if err != nil || len(kvs.KVs) != 1 || kvs.KVs[0].ModRevision != rev {
					t.Fatalf("Range(%s) after the compaction: %+v, %v, want mod revision %d", key(i), kvs, err, rev)
				}
			}
			return
		default:
		}
		k := (i * 7919) % keys
		ops := []Op{PutOp(key(k), []byte("beside the walk"))}
		resp, err := s.Entry(index).Txn(TxnRequest{Success: ops})
		if err != nil {
			t.Fatal(err)
		}
		written[k] = resp.Rev
	}
}

// TestBackgroundCompactionRests: a compaction the apply loop hands off
// rests between pieces of its work (its walk of the key index, its
// tombstones), about three times as long as it worked; one a caller
// waits for does not rest.
func TestBackgroundCompactionRests(t *testing.T) {
	for _, background := range []bool{true, false} {
		t.Run(fmt.Sprintf("background=%v", background), func(t *testing.T) {
			db := openEngine(t, vfs.NewMem(), false)
			defer db.Close()
			var rests atomic.Int64
			var rested atomic.Int64
			s := openStore(t, db, Options{hooks: hooks{walkKeys: 256, compactSleep: func(d time.Duration) {
				rests.Add(1)
				rested.Add(int64(d))
			}}})
			defer s.Close()
			// Keys written twice: the compaction drops one revision of
			// each, many milliseconds of work on any machine (-short, as
			// under the race detector: half as many).
			keys, perTxn := 100_000, 500
			if testing.Short() {
				keys = 50_000
			}
			for round := range 2 {
				for k := 0; k < keys; k += perTxn {
					ops := make([]Op, 0, perTxn)
					for i := k; i < k+perTxn; i++ {
						ops = append(ops, PutOp(fmt.Appendf(nil, "/registry/pods/ns/pod-%06d", i), fmt.Appendf(nil, "v%d", round)))
					}
					if _, err := s.Txn(TxnRequest{Success: ops}); err != nil {
						t.Fatal(err)
					}
				}
			}
			start := time.Now()
			if background {
				if err := s.Entry(1).Compact(s.Rev()); err != nil {
					t.Fatal(err)
				}
				if err := s.WaitCompaction(); err != nil {
					t.Fatal(err)
				}
			} else if err := s.Compact(s.Rev()); err != nil {
				t.Fatal(err)
			}
			took := time.Since(start)
			n, d := rests.Load(), time.Duration(rested.Load())
			t.Logf("compaction took %v without its rests, %d rests of %v in all", took, n, d)
			switch {
			case background && n == 0:
				t.Fatalf("a background compaction of %d revisions (%v of work) never rested", keys, took)
			case background && d < took:
				t.Fatalf("a background compaction rested %v for %v of work, want about three times as long", d, took)
			case !background && n > 0:
				t.Fatalf("a compaction its caller waits for rested %d times", n)
			}
		})
	}
}
