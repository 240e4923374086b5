package mvcc

import (
	"bytes"
	"fmt"
	"math/rand"
	"runtime"
	"slices"
	"testing"
	"time"
)

// TestLeaseSetMatchesMaps drives a leaseSet and a model made of plain maps
// with the same random attaches, detaches and revokes, with keys long
// enough that removed ones compact the slab many times, and compares every
// key's lease and every lease's keys after each step.
func TestLeaseSetMatchesMaps(t *testing.T) {
	t.Run("hash=maphash", func(t *testing.T) { testLeaseSetMatchesMaps(t, nil) })
	// Sixteen hash values for 600 keys: every lookup and removal walks a
	// chain of keys that share a hash.
	t.Run("hash=colliding", func(t *testing.T) {
		testLeaseSetMatchesMaps(t, func(key string) uint64 { return uint64(key[len(key)-1]+key[17]) % 16 })
	})
}

func testLeaseSetMatchesMaps(t *testing.T, hash func(string) uint64) {
	rng := rand.New(rand.NewSource(1))
	ls := newLeaseSet()
	if hash != nil {
		ls.keys.hash = hash
	}
	modelLease := map[string]int64{}
	const leases, keys = 8, 600
	for id := int64(1); id <= leases; id++ {
		ls.byID[id] = &leaseState{ttl: id}
	}
	keyName := func(k int) string {
		// Long keys fill the slab quickly; some share a prefix and end.
		return fmt.Sprintf("/registry/events/%04d/%s", k, bytes.Repeat([]byte{'x'}, 1500+k%7))
	}
	compactions := 0
	for step := 0; step < 20000; step++ {
		k := keyName(rng.Intn(keys))
		dead := ls.keys.dead
		switch op := rng.Intn(10); {
		case op < 6:
			id := int64(1 + rng.Intn(leases))
			if err := ls.attach(k, id); err != nil {
				t.Fatal(err)
			}
			modelLease[k] = id
		case op < 9:
			ls.detach(k)
			delete(modelLease, k)
		default:
			// A revoke: the lease goes first, then its keys one by one,
			// as revokeLease and the commit after it do.
			id := int64(1 + rng.Intn(leases))
			l := ls.byID[id]
			delete(ls.byID, id)
			for _, key := range ls.keysOf(l) {
				ls.detach(string(key))
				delete(modelLease, string(key))
			}
			ls.byID[id] = &leaseState{ttl: id}
		}
		if ls.keys.dead < dead {
			compactions++
		}
		if step%97 == 0 {
			checkLeaseSet(t, &ls, modelLease, keys, keyName)
		}
	}
	checkLeaseSet(t, &ls, modelLease, keys, keyName)
	if compactions == 0 {
		t.Fatal("the slab was never compacted: the test does not reach compactSlab")
	}
}

func checkLeaseSet(t *testing.T, ls *leaseSet, model map[string]int64, keys int, keyName func(int) string) {
	t.Helper()
	for k := 0; k < keys; k++ {
		key := keyName(k)
		if got, want := ls.leaseOf(key), model[key]; got != want {
			t.Fatalf("key %d: lease %d, want %d", k, got, want)
		}
	}
	if ls.keys.len() != len(model) {
		t.Fatalf("%d leased keys, want %d", ls.keys.len(), len(model))
	}
	byLease := map[int64][][]byte{}
	for k, id := range model {
		byLease[id] = append(byLease[id], []byte(k))
	}
	for id, l := range ls.byID {
		want := byLease[id]
		slices.SortFunc(want, bytes.Compare)
		got := ls.keysOf(l)
		if len(got) != l.n || len(got) != len(want) {
			t.Fatalf("lease %d: %d keys in its chain, count %d, want %d", id, len(got), l.n, len(want))
		}
		for i := range got {
			if !bytes.Equal(got[i], want[i]) {
				t.Fatalf("lease %d: key %d differs", id, i)
			}
		}
	}
}

// BenchmarkLeasedKeysGC reports what a million leased keys (events'
// names, on a thousand leases) cost the collector: the heap they take and
// the time of a full collection with them live.
func BenchmarkLeasedKeysGC(b *testing.B) {
	const n, leases = 1_000_000, 1000
	ls := newLeaseSet()
	for id := int64(1); id <= leases; id++ {
		ls.byID[id] = &leaseState{ttl: 3600}
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := 0; i < n; i++ {
		_ = ls.attach(fmt.Sprintf("/registry/events/namespace-%03d/pod-%08d.%016x", i%300, i, i*7919), int64(1+i%leases))
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		runtime.GC()
	}
	b.ReportMetric(float64(time.Since(start).Microseconds())/float64(b.N), "µs/GC")
	b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/n, "heapB/key")
	runtime.KeepAlive(&ls)
}
