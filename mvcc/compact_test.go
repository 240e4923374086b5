package mvcc

import (
	"fmt"
	"testing"
	"time"
)

// BenchmarkCompactionHold measures how long a compaction holds writes up:
// a store of 200,000 keys written twice is compacted to its last revision,
// dropping 200,000 revisions (Kubernetes' five minutes of updates at
// 30 GB drop about a million), while a writer puts a key of its own in a
// loop. It reports the writer's slowest put during the compaction, its
// slowest put before it, and the compaction's length: what a server's
// apply loop, which runs the compaction, holds the writes behind it for.
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
