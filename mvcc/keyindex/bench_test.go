package keyindex

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// benchKeys returns n distinct keys of size bytes in a scrambled order, as
// internal/memtable makes them.
func benchKeys(n, size int) [][]byte {
	r := rand.New(rand.NewPCG(uint64(n), uint64(size)))
	keys := make([][]byte, n)
	for i := range keys {
		b := make([]byte, size)
		binary.BigEndian.PutUint64(b, uint64(i)*0x9E3779B97F4A7C15+0x7F4A7C159E3779B9)
		for j := 8; j < size; j += 8 {
			binary.LittleEndian.PutUint64(b[j:], r.Uint64())
		}
		keys[i] = b
	}
	return keys
}

// BenchmarkPut puts 100k distinct 64-byte keys, then further versions of
// them round-robin; one op is one Put.
func BenchmarkPut(b *testing.B) { benchmarkPut(b, 100000) }

// BenchmarkPut1M is BenchmarkPut with 1M keys; -benchtime 5000000x is the
// tune memory row of 1M keys x 5 versions x 64 B.
func BenchmarkPut1M(b *testing.B) { benchmarkPut(b, 1000000) }

func benchmarkPut(b *testing.B, n int) {
	keys := benchKeys(n, 64)
	ix := New()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := ix.Put(keys[i%len(keys)], Revision{Main: int64(i + 1)}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkExportLoad exports an index of 1M pod-like keys with two
// versions each (the restart figures' store) and loads it into a new
// index; one op is one key loaded.
func BenchmarkExportLoad(b *testing.B) {
	const n = 1000000
	src := New()
	rb, err := src.StartRebuild()
	if err != nil {
		b.Fatal(err)
	}
	r := rand.New(rand.NewPCG(1, 2))
	perm := r.Perm(n)
	for i, k := range perm {
		key := fmt.Appendf(nil, "/registry/pods/namespace-%02d/pod-%08x", k%100, k)
		if err := rb.Restore(key, Revision{Main: int64(i/100 + 2), Sub: int64(i % 100)}, false, int64(i/100+2), 1); err != nil {
			b.Fatal(err)
		}
	}
	rb.Finish()
	type kl struct{ key, list []byte }
	var all []kl
	if err := src.Export(func(key, list []byte) error {
		all = append(all, kl{append([]byte(nil), key...), append([]byte(nil), list...)})
		return nil
	}); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for done := 0; done < b.N; {
		ix := New()
		l, err := ix.StartLoad()
		if err != nil {
			b.Fatal(err)
		}
		for _, e := range all[:min(len(all), b.N-done)] {
			if _, err := l.Add(e.key, e.list); err != nil {
				b.Fatal(err)
			}
		}
		l.Finish()
		done += len(all)
	}
}

// BenchmarkCompactionSteps compacts an index of 1.1 million pod-like
// keys (the 30 GB load's), each created and then updated, at the
// revision that drops half of the creates and then at the last, in
// steps of 4,096 keys as the store walks it; it reports the longest
// step, the last one (which returns the arenas' garbage) and the walk's
// total, each of which the store's readers and writers wait for.
func BenchmarkCompactionSteps(b *testing.B) {
	const n = 1_100_000
	key := func(k int) []byte { return fmt.Appendf(nil, "/registry/pods/namespace-%02d/pod-%08x", k%100, k) }
	benchmarkCompactionSteps(b, func(ix *Index) []int64 {
		for k := range n {
			if err := ix.Put(key(k), Revision{Main: int64(k + 1)}); err != nil {
				b.Fatal(err)
			}
		}
		for k := range n {
			if err := ix.Put(key(k), Revision{Main: int64(n + k + 1)}); err != nil {
				b.Fatal(err)
			}
		}
		return []int64{n + n/2, 2 * n}
	})
}

// BenchmarkCompactionStepsDeletes is BenchmarkCompactionSteps over 1.1
// million pods and 400,000 events whose leases all expired: the
// compaction at the last revision removes the events' keys, a quarter of
// the key arena, whose garbage the steps after the walk return.
func BenchmarkCompactionStepsDeletes(b *testing.B) {
	const pods, events = 1_100_000, 400_000
	pod := func(k int) []byte { return fmt.Appendf(nil, "/registry/pods/namespace-%02d/pod-%08x", k%100, k) }
	event := func(k int) []byte {
		return fmt.Appendf(nil, "/registry/events/namespace-%02d/pod-%08x.%016x", k%100, k, uint64(k)*0x9E3779B97F4A7C15)
	}
	benchmarkCompactionSteps(b, func(ix *Index) []int64 {
		rev := int64(0)
		for k := range pods {
			rev++
			if err := ix.Put(pod(k), Revision{Main: rev}); err != nil {
				b.Fatal(err)
			}
		}
		for k := range events {
			rev++
			if err := ix.Put(event(k), Revision{Main: rev}); err != nil {
				b.Fatal(err)
			}
		}
		for k := range events {
			rev++
			if _, err := ix.Tombstone(event(k), Revision{Main: rev}); err != nil {
				b.Fatal(err)
			}
		}
		return []int64{rev + 1}
	})
}

// benchmarkCompactionSteps compacts the index fill makes at each revision
// it returns, in steps of 4,096 keys, and reports the longest step, the
// last one and the walk's total.
func benchmarkCompactionSteps(b *testing.B, fill func(*Index) []int64) {
	var longest, last, total time.Duration
	for b.Loop() {
		b.StopTimer()
		ix := New()
		revs := fill(ix)
		b.StartTimer()
		for _, at := range revs {
			c := ix.StartCompaction(at, func(Revision) {})
			for done := false; !done; {
				start := time.Now()
				done = c.Step(4096)
				d := time.Since(start)
				longest, total = max(longest, d), total+d
				if done {
					last = max(last, d)
				}
			}
		}
	}
	b.ReportMetric(float64(longest.Microseconds())/1000, "longest-step-ms")
	b.ReportMetric(float64(last.Microseconds())/1000, "last-step-ms")
	b.ReportMetric(float64(total.Microseconds())/1000/float64(b.N), "walk-ms/op")
}
