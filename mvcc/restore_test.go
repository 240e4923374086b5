package mvcc

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stratadb/strata/engine"
	"github.com/stratadb/strata/mvcc/keyindex"
)

// randomLeasedHistory runs n random operations on s and m: puts,
// deletes, txns and compactions (checked against the model as they go),
// leases granted, keys put with them and leases revoked.
func randomLeasedHistory(t *testing.T, s *Store, m *model, g *opGen, n int) {
	t.Helper()
	r := g.r
	for range n {
		switch p := r.IntN(100); {
		case p < 5:
			id := 1 + r.Int64N(8)
			if err := s.GrantLease(id, 60); err != nil && !errors.Is(err, ErrLeaseExists) {
				t.Fatal(err)
			}
		case p < 15:
			leases := s.Leases()
			if len(leases) == 0 {
				continue
			}
			op := PutOp(g.key(), g.value())
			op.Lease = leases[r.IntN(len(leases))].ID
			if _, err := s.Txn(TxnRequest{Success: []Op{op}}); err != nil {
				t.Fatal(err)
			}
			m.apply([]Op{PutOp(op.Key, op.Value)})
		case p < 18:
			leases := s.Leases()
			if len(leases) == 0 {
				continue
			}
			l := leases[r.IntN(len(leases))]
			if _, err := s.RevokeLease(l.ID); err != nil {
				t.Fatal(err)
			}
			var dels []Op
			for _, k := range l.Keys {
				dels = append(dels, DeleteOp(k, nil))
			}
			m.apply(dels)
		default:
			g.step(t, s, m, 1)
		}
		if s.Rev() != m.rev {
			t.Fatalf("store at revision %d, model at %d", s.Rev(), m.rev)
		}
	}
}

// copyEngine returns a new in-memory engine holding the pairs of src that
// keep accepts.
func copyEngine(t *testing.T, src *engine.DB, keep func(k []byte) bool) *engine.DB {
	t.Helper()
	dst := openEngine(t, vfs.NewMem(), false)
	t.Cleanup(func() { _ = dst.Close() })
	it, err := src.NewIter(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	b := dst.NewBatch()
	defer b.Close()
	for ok := it.First(); ok; ok = it.Next() {
		if keep(it.Key()) {
			if err := b.Put(it.Key(), it.Value()); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := errors.Join(it.Error(), b.Commit()); err != nil {
		t.Fatal(err)
	}
	return dst
}

// withoutIndexRecords keeps every pair but the index records of the
// revisions below main: a store written before index records, up to main.
func withoutIndexRecords(main int64) func(k []byte) bool {
	return func(k []byte) bool {
		if len(k) == 0 || k[0] != revPrefix || !isRevIndexKey(k) {
			return true
		}
		r, _, err := decodeRevSlot(k)
		return err != nil || r.Main >= main
	}
}

// checkRevisionKeys checks the revision keys of db: every index record
// follows its record (compaction left no orphan), and every record of a
// revision at or above indexedFrom has one.
func checkRevisionKeys(t *testing.T, db *engine.DB, indexedFrom int64) {
	t.Helper()
	it, err := db.NewIter(&engine.IterOptions{LowerBound: []byte{revPrefix}, UpperBound: []byte{revPrefix + 1}})
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	var prev keyindex.Revision
	prevIndexed := true
	records := 0
	for ok := it.First(); ok; ok = it.Next() {
		r, index, err := decodeRevSlot(it.Key())
		if err != nil {
			t.Fatal(err)
		}
		if index {
			if prevIndexed || prev != r {
				t.Fatalf("index record of revision %d.%d without its record", r.Main, r.Sub)
			}
			prevIndexed = true
			continue
		}
		if !prevIndexed && prev.Main >= indexedFrom {
			t.Fatalf("revision %d.%d has no index record", prev.Main, prev.Sub)
		}
		prev, prevIndexed = r, false
		records++
	}
	if err := it.Error(); err != nil {
		t.Fatal(err)
	}
	if !prevIndexed && prev.Main >= indexedFrom {
		t.Fatalf("revision %d.%d has no index record", prev.Main, prev.Sub)
	}
	if records == 0 {
		t.Fatal("no revision stored")
	}
}

// requireSameRestore checks that got, opened from other revision keys,
// restored what want did: requireSameStore, the same index, the same hash.
func requireSameRestore(t *testing.T, want, got *Store) {
	t.Helper()
	requireSameStore(t, want, got)
	if g, w := got.IndexStats(), want.IndexStats(); g != w {
		t.Errorf("index %+v, want %+v", g, w)
	}
	wh, _, _, err := want.HashKV(0)
	if err != nil {
		t.Fatal(err)
	}
	gh, _, _, err := got.HashKV(0)
	if err != nil {
		t.Fatal(err)
	}
	if gh != wh {
		t.Errorf("HashKV %08x, want %08x: the index records changed the hash", gh, wh)
	}
}

// TestRestoreFromIndexRecords: over a random history with deletes, txns,
// leases and compactions, a store opened from its index records restores
// what it restores from its records alone (as written before index
// records: the index records deleted), and what it does when only the
// newer half has index records (a store written across the change), and
// all answer as the store that wrote them. Compaction leaves no index
// record without its record, also when it compacts records that have
// none; writes to a store without index records add them.
func TestRestoreFromIndexRecords(t *testing.T) {
	g := newOpGen(rand.New(rand.NewPCG(testSeed(t), 0)), 20)
	m := newModel()
	live, db := newMemStore(t, Options{})
	randomLeasedHistory(t, live, m, g, 600)
	checkRevisionKeys(t, db, 0)
	t.Logf("revision %d, compacted at %d, %d leases, index %+v", live.Rev(), live.CompactRev(), len(live.Leases()), live.IndexStats())

	fromIndex := openStore(t, copyEngine(t, db, func([]byte) bool { return true }), Options{})
	defer fromIndex.Close()
	oldDB := copyEngine(t, db, withoutIndexRecords(keyindex.MaxMain))
	fromRecords := openStore(t, oldDB, Options{})
	defer fromRecords.Close()
	mid := (live.CompactRev() + live.Rev()) / 2
	mixedDB := copyEngine(t, db, withoutIndexRecords(mid))
	mixed := openStore(t, mixedDB, Options{})
	defer mixed.Close()

	requireSameStore(t, live, fromIndex)
	requireSameRestore(t, fromRecords, fromIndex)
	requireSameRestore(t, fromRecords, mixed)

	// The store without index records goes on: its new writes have
	// them, its compactions delete records with and without, and it
	// restores what it holds.
	cut := fromRecords.Rev() + 1
	randomLeasedHistory(t, fromRecords, m, g, 300)
	if err := fromRecords.Compact(fromRecords.Rev()); err != nil {
		t.Fatal(err)
	}
	if err := fromRecords.Close(); err != nil {
		t.Fatal(err)
	}
	checkRevisionKeys(t, oldDB, cut)
	again := openStore(t, oldDB, Options{})
	defer again.Close()
	fromScratch := openStore(t, copyEngine(t, oldDB, withoutIndexRecords(keyindex.MaxMain)), Options{})
	defer fromScratch.Close()
	requireSameRestore(t, fromScratch, again)
}

// TestOpenDoesNotDecodeRecords: a record whose bytes are damaged, with its
// index record intact, does not stop Open (which reads the index record
// only); reading that revision reports ErrCorrupt, and the other keys read
// as before. Without its index record, the damaged record fails Open, as
// in a store written before index records.
func TestOpenDoesNotDecodeRecords(t *testing.T) {
	db := openEngine(t, vfs.NewMem(), false)
	defer db.Close()
	s := openStore(t, db, Options{})
	damaged, err := s.Put([]byte("damaged"), []byte("value"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put([]byte("fine"), []byte("value")); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	forgetCheckpoint(t, db) // the damage is behind the checkpoint's back
	key := revKey(keyindex.Revision{Main: damaged})
	rec, err := db.Get(key)
	if err != nil {
		t.Fatal(err)
	}
	rec[0] = 0x7f // the record format
	if err := db.Put(key, rec); err != nil {
		t.Fatal(err)
	}

	s = openStore(t, db, Options{})
	if _, err := s.Range([]byte("damaged"), nil, RangeOptions{}); !errors.Is(err, ErrCorrupt) {
		t.Errorf("read of the damaged revision: %v, want ErrCorrupt", err)
	}
	res, err := s.Range([]byte("fine"), nil, RangeOptions{})
	if err != nil || fmtKVs(res.KVs) != `fine="value"(c3 m3 v1) ` {
		t.Errorf("read of another key: %s, %v", fmtKVs(res.KVs), err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	forgetCheckpoint(t, db)
	if err := db.Delete(appendRevIndexKey(nil, keyindex.Revision{Main: damaged})); err != nil {
		t.Fatal(err)
	}
	if s, err := Open(db, Options{}); !errors.Is(err, ErrCorrupt) {
		if err == nil {
			s.Close()
		}
		t.Errorf("Open with the damaged record and no index record: %v, want ErrCorrupt", err)
	}
}

// TestOpenRefusesBadIndexRecords: an index record without its record, or
// holding a value, or disagreeing with its revision, is damage Open
// reports as ErrCorrupt, naming the revision.
func TestOpenRefusesBadIndexRecords(t *testing.T) {
	for name, damage := range map[string]func(db *engine.DB, r keyindex.Revision) error{
		"no record": func(db *engine.DB, r keyindex.Revision) error { return db.Delete(revKey(r)) },
		"a value": func(db *engine.DB, r keyindex.Revision) error {
			k := appendRevIndexKey(nil, r)
			v, err := db.Get(k)
			if err != nil {
				return err
			}
			return db.Put(k, append(v, 'x'))
		},
		"another revision": func(db *engine.DB, r keyindex.Revision) error {
			v, err := db.Get(appendRevIndexKey(nil, keyindex.Revision{Main: r.Main - 1}))
			if err != nil {
				return err
			}
			return db.Put(appendRevIndexKey(nil, r), v)
		},
	} {
		t.Run(name, func(t *testing.T) {
			db := openEngine(t, vfs.NewMem(), false)
			defer db.Close()
			s := openStore(t, db, Options{})
			var rev int64
			for i := range 3 {
				var err error
				if rev, err = s.Put(fmt.Appendf(nil, "k%d", i), []byte("v")); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			forgetCheckpoint(t, db) // the damage is behind the checkpoint's back
			if err := damage(db, keyindex.Revision{Main: rev - 1}); err != nil {
				t.Fatal(err)
			}
			s, err := Open(db, Options{})
			if err == nil {
				s.Close()
			}
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), fmt.Sprintf("revision %d.0", rev-1)) {
				t.Errorf("Open: %v, want ErrCorrupt at revision %d.0", err, rev-1)
			}
		})
	}
}
