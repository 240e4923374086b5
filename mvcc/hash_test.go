package mvcc

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestHashKV checks what members compare: stores given the same writes
// and the same compaction hash alike at every revision; one different
// value changes the hash from its revision on and not before; a hash at a
// revision does not move as later writes come.
func TestHashKV(t *testing.T) {
	a, _ := newMemStore(t, Options{})
	b, _ := newMemStore(t, Options{})
	r := rand.New(rand.NewPCG(1, 2))
	both := func(f func(s *Store) error) {
		t.Helper()
		for _, s := range []*Store{a, b} {
			if err := f(s); err != nil {
				t.Fatal(err)
			}
		}
	}
	for i := range 200 {
		k := []byte(fmt.Sprintf("k%02d", r.IntN(30)))
		v := []byte(fmt.Sprintf("v%d", i))
		if r.IntN(5) == 0 {
			both(func(s *Store) error { _, _, err := s.Delete(k); return err })
		} else {
			both(func(s *Store) error { _, err := s.Put(k, v); return err })
		}
	}
	both(func(s *Store) error { return s.Compact(120) })
	hashAt := func(s *Store, rev int64) uint32 {
		t.Helper()
		h, hr, cr, err := s.HashKV(rev)
		if err != nil {
			t.Fatal(err)
		}
		if cr != 120 || (rev != 0 && hr != rev) {
			t.Fatalf("HashKV(%d): hash revision %d, compacted %d", rev, hr, cr)
		}
		return h
	}
	for _, rev := range []int64{120, 150, 0} {
		if ha, hb := hashAt(a, rev), hashAt(b, rev); ha != hb {
			t.Errorf("at %d: %08x and %08x for the same history", rev, ha, hb)
		}
	}
	before := hashAt(a, 0)
	cur := a.Rev()
	if _, err := a.Put([]byte("k01"), []byte("only in a")); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Put([]byte("k01"), []byte("only in b")); err != nil {
		t.Fatal(err)
	}
	if ha := hashAt(a, cur); ha != before {
		t.Errorf("the hash at %d moved after a later write: %08x, then %08x", cur, before, ha)
	}
	if ha, hb := hashAt(a, 0), hashAt(b, 0); ha == hb {
		t.Errorf("stores that differ at %d hash alike: %08x", cur+1, ha)
	}
	if _, _, _, err := a.HashKV(100); !errors.Is(err, ErrCompacted) {
		t.Errorf("below the compaction: %v", err)
	}
	if _, _, _, err := a.HashKV(a.Rev() + 1); !errors.Is(err, ErrFutureRev) {
		t.Errorf("past the current revision: %v", err)
	}
}

// TestCompactionHashes: with HashCompactions, each compaction keeps the
// hash of the store at its revision, the same as HashKV at that revision
// right after it on a store that keeps none, and still answered by HashKV
// once a later compaction dropped that history; only the last 10 are
// kept; a store whose history differs below the revision keeps another.
func TestCompactionHashes(t *testing.T) {
	write := func(s *Store, differ bool) {
		for i := range 30 {
			v := fmt.Sprintf("v%d", i)
			if differ && i == 15 { // revision 17, the last of k1 at or below 20
				v = "other"
			}
			if _, err := s.Put([]byte(fmt.Sprintf("k%d", i%7)), []byte(v)); err != nil {
				t.Fatal(err)
			}
		}
	}
	a, _ := newMemStore(t, Options{HashCompactions: true})
	b, _ := newMemStore(t, Options{})
	c, _ := newMemStore(t, Options{HashCompactions: true})
	write(a, false)
	write(b, false)
	write(c, true)
	const first = 20
	for _, s := range []*Store{a, b, c} {
		if err := s.Compact(first); err != nil {
			t.Fatal(err)
		}
	}
	hb, _, _, err := b.HashKV(first)
	if err != nil {
		t.Fatal(err)
	}
	ha := a.CompactionHashes()
	if len(ha) != 1 || ha[0] != (CompactionHash{Hash: hb, Revision: first, CompactRevision: first}) {
		t.Fatalf("kept hashes %+v, want one of %d at revision %d", ha, hb, first)
	}
	if len(b.CompactionHashes()) != 0 {
		t.Fatalf("a store without HashCompactions kept %+v", b.CompactionHashes())
	}
	if hc := c.CompactionHashes(); len(hc) != 1 || hc[0].Hash == hb {
		t.Fatalf("a store with another history kept %+v, want another hash than %d", hc, hb)
	}
	for rev := int64(first + 1); rev <= first+11; rev++ {
		if _, err := a.Put([]byte("more"), []byte("x")); err != nil {
			t.Fatal(err)
		}
		if err := a.Compact(rev); err != nil {
			t.Fatal(err)
		}
	}
	// HashKV at a revision compacted away answers from the kept hashes.
	if got := a.CompactionHashes(); len(got) != 10 || got[0].Revision != first+2 || got[9].Revision != first+11 {
		t.Fatalf("kept hashes %+v, want the last 10 compactions", got)
	}
	h, rev, compacted, err := a.HashKV(first + 5)
	if want := a.CompactionHashes()[3]; err != nil || h != want.Hash || rev != first+5 || compacted != first+5 {
		t.Fatalf("HashKV(%d) after later compactions = %d, %d, %d, %v; want the kept %+v", first+5, h, rev, compacted, err, want)
	}
	if _, _, _, err := a.HashKV(first); !errors.Is(err, ErrCompacted) {
		t.Fatalf("HashKV at a compaction no longer kept = %v, want ErrCompacted", err)
	}
}
