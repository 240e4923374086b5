package mvcc

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stratadb/strata/mvcc/keyindex"
)

// TestRecordCacheAgreesWithStorage runs puts (half of them with prev_kv),
// txns that put several keys in one revision (sub revisions), deletes and
// re-puts, compactions and reopens, and after every step checks, for every
// live key, that the index (create revision, version, mod revision), the
// record the store serves (Range, through the record cache), the cached
// record and the record in the engine agree; and that every prev_kv a put
// returned is the engine's record of the version it replaced. A put with
// prev_kv or a Range of one key reads the record cache instead of the
// engine, so a cache entry that is not its revision's stored record (a
// wrong slot, a stale entry after a delete, compaction or reopen) fails
// here.
func TestRecordCacheAgreesWithStorage(t *testing.T) {
	seed := testSeed(t)
	r := rand.New(rand.NewPCG(seed, 1))
	db := openEngine(t, vfs.NewMem(), false)
	defer func() { _ = db.Close() }()
	s := openStore(t, db, Options{})
	defer func() { _ = s.Close() }()
	keys := []string{"a", "b", "c", "d", "e", "f"}
	value := func() []byte { return fmt.Appendf(nil, "v%d-%s", r.IntN(1000), bytes.Repeat([]byte("x"), r.IntN(40))) }
	prevPuts := 0
	for step := range 400 {
		var what string
		switch p := r.IntN(100); {
		case p < 40:
			k := keys[r.IntN(len(keys))]
			want, live := storedLatest(t, s, k)
			op := PutOp([]byte(k), value())
			op.PrevKV = r.IntN(2) == 0
			resp, err := s.Txn(TxnRequest{Success: []Op{op}})
			if err != nil {
				t.Fatalf("step %d: put %s: %v", step, k, err)
			}
			what = "put " + k
			if op.PrevKV {
				got := resp.Responses[0].PrevKV
				switch {
				case live && got == nil:
					t.Fatalf("step %d: put %s with prev_kv: none, storage has %+v", step, k, want)
				case !live && got != nil:
					t.Fatalf("step %d: put %s with prev_kv: %+v for a key not live", step, k, *got)
				case live && !sameKVs([]KeyValue{*got}, []KeyValue{want}):
					t.Fatalf("step %d: put %s: prev_kv %+v, storage %+v", step, k, *got, want)
				}
				prevPuts++
			}
		case p < 55:
			perm := r.Perm(len(keys))[:2+r.IntN(3)]
			var ops []Op
			for _, i := range perm {
				ops = append(ops, PutOp([]byte(keys[i]), value()))
			}
			if _, err := s.Txn(TxnRequest{Success: ops}); err != nil {
				t.Fatalf("step %d: txn of %d puts: %v", step, len(ops), err)
			}
			what = fmt.Sprintf("txn of %d puts", len(ops))
		case p < 75:
			k := keys[r.IntN(len(keys))]
			if _, _, err := s.Delete([]byte(k)); err != nil {
				t.Fatalf("step %d: delete %s: %v", step, k, err)
			}
			what = "delete " + k
		case p < 92:
			cur := s.Rev()
			rev := cur - int64(r.IntN(5))
			if rev <= s.compactRev || rev < 2 {
				continue
			}
			if err := s.Compact(rev); err != nil {
				t.Fatalf("step %d: compact %d: %v", step, rev, err)
			}
			what = fmt.Sprintf("compact %d", rev)
		default:
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			s = openStore(t, db, Options{})
			what = "reopen"
		}
		checkRecordsAgree(t, s, fmt.Sprintf("step %d (%s)", step, what))
	}
	if prevPuts < 50 {
		t.Fatalf("only %d puts with prev_kv", prevPuts)
	}
}

// storedLatest returns key's latest version as the engine stores it.
func storedLatest(t *testing.T, s *Store, key string) (KeyValue, bool) {
	t.Helper()
	kr, ok := s.ix.Get([]byte(key), s.Rev())
	if !ok {
		return KeyValue{}, false
	}
	v, err := s.db.Get(revKey(kr.Mod))
	if err != nil {
		t.Fatalf("%s: revision %v in the index: %v", key, kr.Mod, err)
	}
	rec, err := decodeRecord(v)
	if err != nil {
		t.Fatal(err)
	}
	return rec.kv(), true
}

// checkRecordsAgree compares, for every live key, the index, the record the
// store serves, the cached one and the engine's.
func checkRecordsAgree(t *testing.T, s *Store, what string) {
	t.Helper()
	type live struct {
		key string
		kr  keyindex.KeyRev
	}
	var lives []live
	s.mu.RLock()
	s.ix.Range([]byte{0}, nil, s.rev, func(k []byte, kr keyindex.KeyRev) bool {
		lives = append(lives, live{string(k), kr})
		return true
	})
	s.mu.RUnlock()
	for _, l := range lives {
		stored, err := s.db.Get(revKey(l.kr.Mod))
		if err != nil {
			t.Fatalf("%s: %s at %v: %v", what, l.key, l.kr.Mod, err)
		}
		rec, err := decodeRecord(stored)
		if err != nil {
			t.Fatal(err)
		}
		if string(rec.key) != l.key || rec.mod != l.kr.Mod.Main || rec.create != l.kr.Create || rec.version != l.kr.Version {
			t.Fatalf("%s: %s: index says mod %d create %d version %d, storage has %q mod %d create %d version %d",
				what, l.key, l.kr.Mod.Main, l.kr.Create, l.kr.Version, rec.key, rec.mod, rec.create, rec.version)
		}
		if enc, ok := s.recs.get(l.kr.Mod); ok && !bytes.Equal(enc, stored) {
			t.Fatalf("%s: %s: cached record of %v is %x, storage %x", what, l.key, l.kr.Mod, enc, stored)
		}
		res, err := s.Range([]byte(l.key), nil, RangeOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !sameKVs(res.KVs, []KeyValue{rec.kv()}) {
			t.Fatalf("%s: Range(%s) = %s, storage %s", what, l.key, fmtKVs(res.KVs), fmtKVs([]KeyValue{rec.kv()}))
		}
	}
}
