package mvcc

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stratadb/strata/config"
	"github.com/stratadb/strata/engine"
	"github.com/stratadb/strata/mvcc/keyindex"
)

// benchDB opens an engine in a temporary directory on disk, sync off.
func benchDB(b *testing.B) *engine.DB {
	b.Helper()
	cfg := config.Default()
	cfg.DBPath = filepath.Join(b.TempDir(), "db")
	cfg.MemtableSizeMB = 64
	cfg.BlockCacheSizeMB = 64
	db, err := engine.Open(cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = db.Close() })
	return db
}

func benchKey(i int) []byte { return fmt.Appendf(nil, "key/%012d", i) }

// BenchmarkPut puts 256-byte values on 100K keys, against the engine's own
// Put of the same data as the baseline (layer=engine).
func BenchmarkPut(b *testing.B) {
	value := make([]byte, 256)
	const keys = 100_000
	b.Run("layer=mvcc", func(b *testing.B) {
		s := openStore(b, benchDB(b), Options{})
		defer s.Close()
		b.SetBytes(int64(len(value)))
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			if _, err := s.Put(benchKey(i%keys), value); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
	b.Run("layer=engine", func(b *testing.B) {
		db := benchDB(b)
		b.SetBytes(int64(len(value)))
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			if err := db.Put(benchKey(i%keys), value); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
}

// loadStore writes n keys with 256-byte values, txnSize puts per revision.
func loadStore(b *testing.B, s *Store, n, txnSize int) {
	loadStoreValues(b, s, n, txnSize, make([]byte, 256))
}

// loadStoreValues writes n keys with value, txnSize puts per revision.
func loadStoreValues(b *testing.B, s *Store, n, txnSize int, value []byte) {
	b.Helper()
	for i := 0; i < n; i += txnSize {
		var ops []Op
		for j := i; j < min(n, i+txnSize); j++ {
			ops = append(ops, PutOp(benchKey(j), value))
		}
		if _, err := s.Txn(TxnRequest{Success: ops}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRange reads one key, and 1000 consecutive keys, of 100K.
func BenchmarkRange(b *testing.B) {
	const n = 100_000
	db := benchDB(b)
	s := openStore(b, db, Options{})
	defer s.Close()
	loadStore(b, s, n, 1000)
	if err := db.Flush(); err != nil {
		b.Fatal(err)
	}
	// The baseline: the engine's Get of one revision key, as Range of one
	// key does after its index lookup.
	b.Run("keys=1/layer=engine", func(b *testing.B) {
		r := rand.New(rand.NewPCG(1, 2))
		b.ReportAllocs()
		for b.Loop() {
			i := r.IntN(n)
			if _, err := db.Get(revKey(keyindex.Revision{Main: int64(i/1000 + 1), Sub: int64(i % 1000)})); err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, keys := range []int{1, 1000} {
		b.Run(fmt.Sprintf("keys=%d", keys), func(b *testing.B) {
			r := rand.New(rand.NewPCG(1, 2))
			b.ReportAllocs()
			for b.Loop() {
				i := r.IntN(n - keys)
				var end []byte
				if keys > 1 {
					end = benchKey(i + keys)
				}
				res, err := s.Range(benchKey(i), end, RangeOptions{})
				if err != nil || len(res.KVs) != keys {
					b.Fatalf("Range: %v, %d keys", err, len(res.KVs))
				}
			}
		})
	}
}

// BenchmarkRebuild measures Open's index rebuild; the metric s/Mkeys is
// the time per million revisions. value=256B: 1M revisions of 256 bytes
// (100K with -short), 1000 per txn; value=14KB: 20K revisions of 14 KB,
// half random, half zeros (compressing about 2:1, as Kubernetes pods do),
// 100 per txn (2K with -short).
//
//	go test ./mvcc -run '^$' -bench Rebuild -count 5
func BenchmarkRebuild(b *testing.B) {
	for _, c := range []struct {
		name     string
		n, txn   int
		valueLen int
	}{
		{"value=256B", 1_000_000, 1000, 256},
		{"value=14KB", 20_000, 100, 14 << 10},
	} {
		n := c.n
		if testing.Short() {
			n /= 10
		}
		value := make([]byte, c.valueLen)
		rng := rand.New(rand.NewPCG(1, 2))
		for i := range len(value) / 2 {
			value[i] = byte(rng.Uint32())
		}
		b.Run(fmt.Sprintf("%s/keys=%d", c.name, n), func(b *testing.B) {
			db := benchDB(b)
			s := openStore(b, db, Options{})
			loadStoreValues(b, s, n, c.txn, value)
			_ = s.Close()
			benchmarkOpen(b, db, n)
		})
	}
	// Kubernetes' order: pods created in no key order, then each updated
	// once in another, so that neighbouring revisions share no path in
	// the index's tree.
	n := 500_000
	if testing.Short() {
		n /= 10
	}
	b.Run(fmt.Sprintf("order=pods/revisions=%d", 2*n), func(b *testing.B) {
		db := benchDB(b)
		s := openStore(b, db, Options{})
		rng := rand.New(rand.NewPCG(3, 4))
		value := make([]byte, 256)
		for range 2 {
			perm := rng.Perm(n)
			for i := 0; i < n; i += 1000 {
				var ops []Op
				for _, j := range perm[i:min(n, i+1000)] {
					ops = append(ops, PutOp([]byte(fmt.Sprintf("/registry/pods/namespace-%02d/pod-%08x", j%50, j*2654435761%(1<<32))), value))
				}
				if _, err := s.Txn(TxnRequest{Success: ops}); err != nil {
					b.Fatal(err)
				}
			}
		}
		_ = s.Close()
		benchmarkOpen(b, db, 2*n)
	})
}

// benchmarkOpen opens the store on db again and again and reports the
// index rebuild's time per million revisions.
func benchmarkOpen(b *testing.B, db *engine.DB, revisions int) {
	if err := db.Flush(); err != nil {
		b.Fatal(err)
	}
	var total time.Duration
	for b.Loop() {
		s, err := Open(db, Options{})
		if err != nil {
			b.Fatal(err)
		}
		total += s.RebuildDuration()
		_ = s.Close()
	}
	b.ReportMetric(total.Seconds()/float64(b.N)/(float64(revisions)/1e6), "s/Mkeys")
}

// BenchmarkGroupCommit measures write throughput with sync = true (every
// write durable before it returns) as concurrent writers grow: with group
// commit (commit=group, the store's behaviour) writers that arrive during
// a WAL sync share the next one; commit=serial syncs each write while
// holding the write lock, as a store without group commit does, and is the
// peer in the same run. Metrics: writes/s, WAL syncs per write, CPU
// microseconds per write (user+system of the whole process).
//
//	go test ./mvcc -run '^$' -bench GroupCommit -benchtime 2000x -count 5
func BenchmarkGroupCommit(b *testing.B) {
	value := make([]byte, 256)
	for _, writers := range []int{1, 8, 64} {
		for _, serial := range []bool{false, true} {
			mode := "group"
			if serial {
				mode = "serial"
			}
			b.Run(fmt.Sprintf("writers=%d/commit=%s", writers, mode), func(b *testing.B) {
				cfg := config.Default()
				cfg.DBPath = filepath.Join(b.TempDir(), "db")
				cfg.Sync = true
				db, err := engine.Open(cfg)
				if err != nil {
					b.Fatal(err)
				}
				defer db.Close()
				s := openStore(b, db, Options{hooks: hooks{syncUnderLock: serial}})
				defer s.Close()
				syncs0 := walSyncs(b, db)
				cpu0 := cpuTime()
				var next atomic.Int64
				var wg sync.WaitGroup
				b.SetBytes(int64(len(value)))
				b.ResetTimer()
				start := time.Now()
				for range writers {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for {
							i := next.Add(1) - 1
							if i >= int64(b.N) {
								return
							}
							if _, err := s.Put(benchKey(int(i)), value); err != nil {
								b.Error(err)
								return
							}
						}
					}()
				}
				wg.Wait()
				elapsed := time.Since(start)
				b.StopTimer()
				b.ReportMetric(float64(b.N)/elapsed.Seconds(), "writes/s")
				b.ReportMetric(float64(walSyncs(b, db)-syncs0)/float64(b.N), "syncs/write")
				b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(b.N), "cpu-us/write")
			})
		}
	}
}

// cpuTime returns the process's user plus system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkCompactionHold measures how long a compaction holds writes up:
// a store of 200,000 keys written twice, then one of 1,000,000 keys of
// which 100,000 were written twice (a large store with little history to
// drop, as at 30 GB of pods five minutes into the updates), is compacted
// to its last revision while a writer puts a key of its own in a loop.
// It reports the writer's slowest put during the compaction, its slowest
// put before it, and the compaction's length. The slowest put is what the
// scheduling, under the write lock, holds writes up for; the server's
// apply loop waits for no more, since its compaction leaves the
// deletions running (Entry.Compact).
//
//	go test ./mvcc -run '^$' -bench CompactionHold -benchtime 3x
func BenchmarkCompactionHold(b *testing.B) {
	for _, c := range []struct{ keys, updated int }{{200_000, 200_000}, {1_000_000, 100_000}} {
		b.Run(fmt.Sprintf("keys=%d/updated=%d", c.keys, c.updated), func(b *testing.B) {
			benchmarkCompactionHold(b, c.keys, c.updated)
		})
	}
}

func benchmarkCompactionHold(b *testing.B, keys, updated int) {
	var during, before, compaction time.Duration
	for b.Loop() {
		b.StopTimer()
		db := benchDB(b)
		s := openStore(b, db, Options{})
		for round, n := range []int{keys, updated} {
			for i := range n {
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

// BenchmarkOpenResumingCompaction opens a store of 500,000 pod-like keys
// written twice whose compaction at the last revision (500,000 revisions
// to drop) failed after its marker, as a crash would leave it; Close then
// writes no checkpoint, so Open rebuilds the key index. It reports how
// long Open took to return and how long until the resumed compaction was
// done (WaitCompaction).
func BenchmarkOpenResumingCompaction(b *testing.B) {
	const keys = 500_000
	var opened, done time.Duration
	for b.Loop() {
		b.StopTimer()
		db := benchDB(b)
		var failing atomic.Bool
		s := openStore(b, db, Options{hooks: hooks{beforeCompactCommit: func(i int) error {
			if i == 1 && failing.Load() {
				return errInjected
			}
			return nil
		}}})
		for round := range 2 {
			for i := range keys {
				if _, err := s.Put(fmt.Appendf(nil, "/registry/pods/ns/pod-%07d", i), fmt.Appendf(nil, "value %d", round)); err != nil {
					b.Fatal(err)
				}
			}
		}
		failing.Store(true)
		if err := s.Compact(s.Rev()); !errors.Is(err, errInjected) {
			b.Fatalf("Compact: %v, want the injected error", err)
		}
		_ = s.Close()
		b.StartTimer()
		start := time.Now()
		s = openStore(b, db, Options{})
		opened += time.Since(start)
		if err := s.WaitCompaction(); err != nil {
			b.Fatal(err)
		}
		done += time.Since(start)
		b.StopTimer()
		_ = s.Close()
		b.StartTimer()
	}
	b.ReportMetric(float64(opened.Microseconds())/1000/float64(b.N), "open-ms/op")
	b.ReportMetric(float64(done.Microseconds())/1000/float64(b.N), "compacted-ms/op")
}
