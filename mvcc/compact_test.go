package mvcc

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// TestStartCompactionDeletesInTheBackground: an apply loop's compaction
// returns once it is scheduled (its log index recorded, reads below it
// refused), and the next entries apply while its later deletion batches
// are held; wait, WaitCompaction and HashKV return only once every
// dropped revision is gone from disk.
func TestStartCompactionDeletesInTheBackground(t *testing.T) {
	db := openEngine(t, vfs.NewMem(), false)
	defer db.Close()
	held, release := make(chan struct{}), make(chan struct{})
	s := openStore(t, db, Options{CompactionBatchSize: 2, hooks: hooks{beforeCompactCommit: func(i int) error {
		if i == 1 {
			close(held)
			<-release
		}
		return nil
	}}})
	defer s.Close()
	m := newModel()
	index := uint64(0)
	put := func(k, v string) {
		t.Helper()
		index++
		ops := []Op{PutOp([]byte(k), []byte(v))}
		if _, err := s.Entry(index).Txn(TxnRequest{Success: ops}); err != nil {
			t.Fatal(err)
		}
		m.apply(ops)
	}
	for i := range 10 {
		put("a", fmt.Sprint(i))
		put("b", fmt.Sprint(i))
	}
	target := m.rev - 1
	index++
	type started struct {
		wait func() error
		err  error
	}
	start := make(chan started, 1)
	go func() {
		wait, err := s.Entry(index).StartCompaction(target)
		start <- started{wait, err}
	}()
	select {
	case <-held:
	case <-time.After(time.Minute):
		t.Fatal("the second deletion batch never ran")
	}
	var wait func() error
	select {
	case st := <-start:
		if st.err != nil {
			t.Fatal(st.err)
		}
		wait = st.wait
	case <-time.After(time.Minute):
		close(release)
		t.Fatal("StartCompaction waited for its deletions")
	}
	m.compacted = target
	// The deletions are held: the compaction is in effect all the same.
	if got := s.AppliedIndex(); got != index {
		t.Fatalf("applied index %d while the deletions run, want the compaction's %d", got, index)
	}
	if _, err := s.Range([]byte("a"), nil, RangeOptions{Rev: target - 1}); !errors.Is(err, ErrCompacted) {
		t.Fatalf("Range below the compaction: %v, want ErrCompacted", err)
	}
	put("c", "after")
	checkAgainstModel(t, s, m, "while the deletions are held")

	waited := make(chan error, 3)
	go func() { waited <- wait() }()
	go func() { waited <- s.WaitCompaction() }()
	go func() { _, _, _, err := s.HashKV(0); waited <- err }()
	select {
	case err := <-waited:
		t.Fatalf("a wait returned (%v) while the deletions are held", err)
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	for range 3 {
		if err := <-waited; err != nil {
			t.Fatal(err)
		}
	}
	if got, want := storedRevisions(t, db), retainedRevisions(m); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("after the deletions disk holds\n%v\nwant\n%v", got, want)
	}
	checkCompactionFinished(t, s, db)
	checkAgainstModel(t, s, m, "after the deletions")
}

// TestStartCompactionFailedDeletions: a deletion batch that fails in the
// background is reported by wait and finished by WaitCompaction.
func TestStartCompactionFailedDeletions(t *testing.T) {
	db := openEngine(t, vfs.NewMem(), false)
	defer db.Close()
	fail := true
	s := openStore(t, db, Options{CompactionBatchSize: 2, hooks: hooks{beforeCompactCommit: func(i int) error {
		if fail && i == 1 {
			return errInjected
		}
		return nil
	}}})
	defer s.Close()
	m := newModel()
	for i := range 10 {
		ops := []Op{PutOp([]byte("a"), []byte(fmt.Sprint(i)))}
		if _, err := s.Txn(TxnRequest{Success: ops}); err != nil {
			t.Fatal(err)
		}
		m.apply(ops)
	}
	wait, err := s.Entry(0).StartCompaction(m.rev)
	if err != nil {
		t.Fatal(err)
	}
	m.compacted = m.rev
	if err := wait(); !errors.Is(err, errInjected) {
		t.Fatalf("wait: %v, want the injected error", err)
	}
	fail = false
	if err := s.WaitCompaction(); err != nil {
		t.Fatal(err)
	}
	if got, want := storedRevisions(t, db), retainedRevisions(m); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("after WaitCompaction disk holds\n%v\nwant\n%v", got, want)
	}
	checkCompactionFinished(t, s, db)
}

// BenchmarkCompactionHold measures how long a compaction holds writes up:
// a store of 200,000 keys written twice is compacted to its last revision,
// dropping 200,000 revisions (Kubernetes' five minutes of updates at
// 30 GB drop about a million), while a writer puts a key of its own in a
// loop. It reports the writer's slowest put during the compaction, its
// slowest put before it, and the compaction's length (Compact, which
// waits for the deletions, as an apply loop did before they went to the
// background).
//
//	go test ./mvcc -run '^$' -bench CompactionHold -benchtime 3x
func BenchmarkCompactionHold(b *testing.B) {
	const keys = 200_000
	var during, before, compaction time.Duration
	for b.Loop() {
		b.StopTimer()
		db := benchDB(b)
		s := openStore(b, db, Options{})
		for round := range 2 {
			for i := range keys {
				if _, err := s.Put(fmt.Appendf(nil, "/registry/pods/ns/pod-%07d", i), fmt.Appendf(nil, "value %d", round)); err != nil {
					b.Fatal(err)
				}
			}
		}
		rev := s.Rev()
		// The writer's slowest put over a while before the compaction,
		// then during it.
		slowest := func(stop <-chan struct{}) <-chan time.Duration {
			out := make(chan time.Duration, 1)
			go func() {
				var worst time.Duration
				for {
					select {
					case <-stop:
						out <- worst
						return
					default:
					}
					t := time.Now()
					if _, err := s.Put([]byte("/registry/leases/writer"), []byte("x")); err != nil {
						b.Error(err)
					}
					worst = max(worst, time.Since(t))
				}
			}()
			return out
		}
		stop := make(chan struct{})
		quiet := slowest(stop)
		time.Sleep(200 * time.Millisecond)
		close(stop)
		before = max(before, <-quiet)
		b.StartTimer()
		stop = make(chan struct{})
		busy := slowest(stop)
		start := time.Now()
		if err := s.Compact(rev); err != nil {
			b.Fatal(err)
		}
		compaction += time.Since(start)
		close(stop)
		during = max(during, <-busy)
		b.StopTimer()
		_ = s.Close()
		b.StartTimer()
	}
	b.ReportMetric(float64(during.Microseconds())/1000, "slowest-put-ms")
	b.ReportMetric(float64(before.Microseconds())/1000, "slowest-put-before-ms")
	b.ReportMetric(float64(compaction.Microseconds())/1000/float64(b.N), "compaction-ms/op")
}
