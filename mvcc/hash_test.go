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
