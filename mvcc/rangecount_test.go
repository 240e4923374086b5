package mvcc

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"
)

// paginate lists [key, end) at rev in pages as Kubernetes and the server
// do (the store asked for limit+1 keys, the next page from just after the
// limit-th), checking every page's Count against a count-only Range of the
// rest of the range at the same revision, and returns the keys listed.
func paginate(t *testing.T, s *Store, key, end []byte, rev, limit int64) []string {
	t.Helper()
	var keys []string
	start := key
	for page := 0; ; page++ {
		res, err := s.Range(start, end, RangeOptions{Rev: rev, Limit: limit + 1})
		if err != nil {
			t.Fatalf("page %d from %q at %d: %v", page, start, rev, err)
		}
		want, err := s.Range(start, end, RangeOptions{Rev: rev, CountOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		if res.Count != want.Count {
			t.Fatalf("page %d from %q at %d: Count %d, want %d (the keys left in the range)", page, start, rev, res.Count, want.Count)
		}
		n := min(int64(len(res.KVs)), limit)
		for _, kv := range res.KVs[:n] {
			keys = append(keys, string(kv.Key))
		}
		if int64(len(res.KVs)) <= limit {
			return keys
		}
		start = append(bytes.Clone(res.KVs[limit-1].Key), 0)
	}
}

// TestPaginatedCountsStayExact lists a range in pages while the store
// changes under it (puts, deletes, a compaction) and after its contents
// are replaced by a snapshot with the same revision numbers: every page's
// Count is the number of keys left in the range at the page's revision,
// as if each page had counted them (the counts a page leaves for the next
// are remembered, see rangeCounts).
func TestPaginatedCountsStayExact(t *testing.T) {
	key := func(i int) []byte { return []byte(fmt.Sprintf("/registry/pods/ns/%05d", i)) }
	// Two stores with the same revisions: in other, the first revision
	// also puts a key at the end of the range, so that at every revision
	// other has one key more in it than s, behind the same pages.
	s, _ := newMemStore(t, Options{})
	other, _ := newMemStore(t, Options{})
	if _, err := s.Put(key(0), []byte("v")); err != nil {
		t.Fatal(err)
	}
	if _, err := other.Txn(TxnRequest{Success: []Op{PutOp(key(0), []byte("v")), PutOp(key(99999), []byte("v"))}}); err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(3, 4))
	deletes := make([]int, 200)
	for i := range deletes {
		deletes[i] = r.IntN(1000)
	}
	for _, st := range []*Store{s, other} {
		for i := 1; i < 1000; i++ {
			if _, err := st.Put(key(i), []byte("v")); err != nil {
				t.Fatal(err)
			}
		}
		for _, i := range deletes {
			if _, _, err := st.DeleteRange(key(i), nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	if s.Rev() != other.Rev() {
		t.Fatalf("the stores are at revisions %d and %d, want the same", s.Rev(), other.Rev())
	}
	prefix, end := []byte("/registry/pods/"), []byte("/registry/pods0")
	rev := s.Rev()
	first := paginate(t, s, prefix, end, rev, 37)
	// Restored from other's snapshot, s holds other's keys at the same
	// revisions: the pages at rev, listed before from the same starts,
	// count one key more.
	var snap bytes.Buffer
	if _, err := other.WriteSnapshot(&snap); err != nil {
		t.Fatal(err)
	}
	if err := s.RestoreSnapshot(&snap); err != nil {
		t.Fatal(err)
	}
	if got, want := paginate(t, s, prefix, end, rev, 37), paginate(t, other, prefix, end, rev, 37); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("after the restore, the list at %d has %d keys, want the snapshot's %d", rev, len(got), len(want))
	}
	if len(first) != len(paginate(t, s, prefix, end, rev, 37))-1 {
		t.Fatalf("other was to hold one key more than s")
	}
	first = paginate(t, s, prefix, end, rev, 37)

	// Writes and a compaction below rev change nothing at rev, but change
	// the latest revision: the same list again, and one at the latest.
	for range 300 {
		i := r.IntN(1200)
		if r.IntN(2) == 0 {
			_, _, _ = s.DeleteRange(key(i), nil)
		} else if _, err := s.Put(key(i), []byte("w")); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Compact(rev - 50); err != nil {
		t.Fatal(err)
	}
	if again := paginate(t, s, prefix, end, rev, 37); fmt.Sprint(again) != fmt.Sprint(first) {
		t.Fatalf("the list at %d changed after later writes: %d keys, then %d", rev, len(first), len(again))
	}
	paginate(t, s, prefix, end, 0, 37)
	paginate(t, s, prefix, nil, rev, 50)            // a single key: no pages
	paginate(t, s, prefix, []byte{0}, s.Rev(), 101) // every key from prefix on

}

// TestRestoreSnapshotForgetsCachedRecords reads a revision, then restores
// a snapshot in which that revision holds another key: reads return the
// snapshot's record, not the one cached before.
func TestRestoreSnapshotForgetsCachedRecords(t *testing.T) {
	s, _ := newMemStore(t, Options{})
	other, _ := newMemStore(t, Options{})
	if _, err := s.Put([]byte("a"), []byte("1")); err != nil {
		t.Fatal(err)
	}
	if _, err := other.Put([]byte("b"), []byte("2")); err != nil {
		t.Fatal(err)
	}
	if res, err := s.Range([]byte("a"), nil, RangeOptions{}); err != nil || len(res.KVs) != 1 {
		t.Fatalf("Range(a) = %v, %v", res, err)
	}
	var snap bytes.Buffer
	if _, err := other.WriteSnapshot(&snap); err != nil {
		t.Fatal(err)
	}
	if err := s.RestoreSnapshot(&snap); err != nil {
		t.Fatal(err)
	}
	res, err := s.Range([]byte("b"), nil, RangeOptions{})
	if err != nil || len(res.KVs) != 1 || string(res.KVs[0].Key) != "b" || string(res.KVs[0].Value) != "2" {
		t.Fatalf("after restoring a snapshot with b=2 at the revision a=1 had: Range(b) = %+v, %v", res.KVs, err)
	}
}

// BenchmarkPaginatedList lists 100,000 keys in pages of 500 at one
// revision, as Kubernetes' lists do; without the remembered counts every
// page walked the rest of the range.
func BenchmarkPaginatedList(b *testing.B) {
	s, _ := newMemStore(b, Options{})
	const n = 100_000
	for i := range n {
		if _, err := s.Put([]byte(fmt.Sprintf("/registry/pods/ns/pod-%06d", i)), nil); err != nil {
			b.Fatal(err)
		}
	}
	end := []byte("/registry/pods0")
	b.ResetTimer()
	for range b.N {
		start, rev, listed := []byte("/registry/pods/"), int64(0), 0
		for {
			res, err := s.Range(start, end, RangeOptions{Rev: rev, Limit: 501, KeysOnly: true})
			if err != nil {
				b.Fatal(err)
			}
			rev = res.Rev
			listed += min(len(res.KVs), 500)
			if len(res.KVs) <= 500 {
				break
			}
			start = append(bytes.Clone(res.KVs[499].Key), 0)
		}
		if listed != n {
			b.Fatalf("listed %d keys, want %d", listed, n)
		}
	}
}
