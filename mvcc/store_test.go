package mvcc

import (
	"errors"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stratadb/strata/mvcc/keyindex"
)

// TestStoreAgainstModel runs random Puts, Deletes, DeleteRanges, Txns and
// Compacts against the store and a model, reading every retained revision
// after each step, and reopens the store (rebuilding its index) now and
// then. Replay a failure with -seed.
func TestStoreAgainstModel(t *testing.T) {
	seed := testSeed(t)
	r := rand.New(rand.NewPCG(seed, 0))
	fs := vfs.NewMem()
	db := openEngine(t, fs, false)
	defer func() { _ = db.Close() }()
	opts := Options{}
	s := openStore(t, db, opts)
	m := newModel()
	g := newOpGen(r, 16)
	steps := 1500
	if testing.Short() {
		steps = 400
	}
	var last []string
	for i := range steps {
		what := g.step(t, s, m, 4)
		last = append(last, what)
		if len(last) > 5 {
			last = last[1:]
		}
		// Keep the retained window short so that reading every revision
		// stays cheap.
		if m.rev-m.compacted > 40 {
			rev := m.rev - 10 - r.Int64N(10)
			if err := s.Compact(rev); err != nil {
				t.Fatalf("step %d: Compact(%d): %v", i, rev, err)
			}
			m.compacted = rev
		}
		checkAgainstModel(t, s, m, "step "+itoa(i)+" after "+last[len(last)-1])
		if r.IntN(100) == 0 {
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			if r.IntN(2) == 0 {
				if err := db.Flush(); err != nil {
					t.Fatal(err)
				}
			}
			s = openStore(t, db, opts)
			checkAgainstModel(t, s, m, "reopened at step "+itoa(i))
		}
	}
	_ = s.Close()
}

func itoa(i int) string { return strconv.Itoa(i) }

// TestEtcdRevisionNumbering: as in etcd, an empty store is at revision 1
// (and stays there across a reopen), its first write makes 2, and its
// first compaction may be at 0 or 1 even while it is empty.
func TestEtcdRevisionNumbering(t *testing.T) {
	db := openEngine(t, vfs.NewMem(), false)
	defer db.Close()
	s := openStore(t, db, Options{})
	res, err := s.Range([]byte("k"), nil, RangeOptions{})
	if err != nil || s.Rev() != 1 || res.Rev != 1 {
		t.Fatalf("empty store: Rev %d, Range header %d, %v", s.Rev(), res.Rev, err)
	}
	if err := s.Compact(0); err != nil {
		t.Fatalf("Compact(0) on an empty store: %v", err)
	}
	if err := s.Compact(0); !errors.Is(err, ErrCompacted) {
		t.Fatalf("second Compact(0): %v, want ErrCompacted", err)
	}
	if err := s.Compact(2); !errors.Is(err, ErrFutureRev) {
		t.Fatalf("Compact(2) at revision 1: %v, want ErrFutureRev", err)
	}
	if err := s.Compact(1); err != nil {
		t.Fatalf("Compact(1) on an empty store: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openStore(t, db, Options{})
	defer s.Close()
	if s.Rev() != 1 || s.CompactRev() != 1 {
		t.Fatalf("reopened empty store at %d, compacted %d", s.Rev(), s.CompactRev())
	}
	rev, err := s.Put([]byte("k"), []byte("v"))
	if err != nil || rev != 2 {
		t.Fatalf("first Put = %d, %v; want revision 2", rev, err)
	}
	res, err = s.Range([]byte("k"), nil, RangeOptions{})
	if err != nil || res.KVs[0].CreateRevision != 2 || res.KVs[0].ModRevision != 2 || res.Rev != 2 {
		t.Fatalf("after the first Put: %v %s header %d", err, fmtKVs(res.KVs), res.Rev)
	}
}

// TestOpenStoreWrittenBefore: a store written before etcd's numbering (its
// first write at revision 1, records without a lease) opens unchanged and
// continues from its current revision.
func TestOpenStoreWrittenBefore(t *testing.T) {
	db := openEngine(t, vfs.NewMem(), false)
	defer db.Close()
	old := record{key: []byte("k"), value: []byte("v1"), create: 1, mod: 1, version: 1}
	if err := db.Put(revKey(keyindex.Revision{Main: 1}), appendRecord(nil, &old)); err != nil {
		t.Fatal(err)
	}
	if err := db.Put(metaRev, encodeInt64(1)); err != nil {
		t.Fatal(err)
	}
	s := openStore(t, db, Options{})
	defer s.Close()
	res, err := s.Range([]byte("k"), nil, RangeOptions{})
	if err != nil || s.Rev() != 1 || fmtKVs(res.KVs) != `k="v1"(c1 m1 v1) ` {
		t.Fatalf("old store: Rev %d, %s, %v", s.Rev(), fmtKVs(res.KVs), err)
	}
	if rev, err := s.Put([]byte("k"), []byte("v2")); err != nil || rev != 2 {
		t.Fatalf("Put on an old store = %d, %v; want 2", rev, err)
	}
	res, _ = s.Range([]byte("k"), nil, RangeOptions{})
	if fmtKVs(res.KVs) != `k="v2"(c1 m2 v2) ` || res.KVs[0].Lease != 0 {
		t.Fatalf("after Put: %s", fmtKVs(res.KVs))
	}
}
