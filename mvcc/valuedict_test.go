package mvcc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/stratadb/strata/engine"
	"github.com/stratadb/strata/internal/workload"
)

// putPods writes pods n..n+count-1 (generation gen) under their keys.
func putPods(t *testing.T, s *Store, pods *workload.Pods, n, count, gen int) {
	t.Helper()
	for i := n; i < n+count; i++ {
		if _, err := s.Put([]byte(pods.Key(i)), pods.Pod(i, gen)); err != nil {
			t.Fatalf("put pod %d: %v", i, err)
		}
	}
}

// storedValueBytes sums the bytes of the records under the revision
// prefix (index records aside) and counts those compressed against a
// dictionary.
func storedValueBytes(t *testing.T, db *engine.DB) (bytes, packed int) {
	t.Helper()
	it, err := db.NewIter(&engine.IterOptions{LowerBound: []byte{revPrefix}, UpperBound: []byte{revPrefix + 1}})
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		if isRevIndexKey(it.Key()) {
			continue
		}
		bytes += len(it.Value())
		if it.Value()[1]&flagDict != 0 {
			packed++
		}
	}
	return bytes, packed
}

// checkPods reads every pod back through each read path (Range, a txn's
// prev_kv, a watch from history with prev_kv, Export) and compares it with
// what was written: generation gen of pods 0..count-1.
func checkPods(t *testing.T, s *Store, pods *workload.Pods, count, gen int) {
	t.Helper()
	want := map[string][]byte{}
	for i := range count {
		want[pods.Key(i)] = pods.Pod(i, gen)
	}
	res, err := s.Range([]byte("/registry/"), []byte("/registry0"), RangeOptions{})
	if err != nil {
		t.Fatalf("range: %v", err)
	}
	if len(res.KVs) != count {
		t.Fatalf("range: %d pods, want %d", len(res.KVs), count)
	}
	for _, kv := range res.KVs {
		if !bytes.Equal(kv.Value, want[string(kv.Key)]) {
			t.Fatalf("range: %s: %d bytes differ from the %d written", kv.Key, len(kv.Value), len(want[string(kv.Key)]))
		}
	}
	w, err := s.Watch(context.Background(), []byte("/registry/"), []byte("/registry0"), s.CompactRev()+1, WithPrevKV())
	if err != nil {
		t.Fatalf("watch: %v", err)
	}
	defer w.Close()
	latest := map[string][]byte{}
	deadline := time.After(10 * time.Second)
	for rev := int64(0); rev < s.Rev(); {
		select {
		case evs := <-w.C:
			for _, ev := range evs {
				if ev.PrevKV != nil && !bytes.Equal(ev.PrevKV.Value, latest[string(ev.KV.Key)]) {
					t.Fatalf("watch: prev_kv of %s at %d differs from the version before", ev.KV.Key, ev.KV.ModRevision)
				}
				latest[string(ev.KV.Key)] = ev.KV.Value
				rev = ev.KV.ModRevision
			}
		case <-deadline:
			t.Fatalf("watch: no event past revision %d in 10 s", rev)
		}
	}
	for k, v := range want {
		if !bytes.Equal(latest[k], v) {
			t.Fatalf("watch: the last event of %s differs from the value written", k)
		}
	}
	exported := map[string][]byte{}
	if _, err := s.Export(func(v Version) error {
		exported[string(v.KV.Key)] = bytes.Clone(v.KV.Value) // valid only during the call
		return nil
	}); err != nil {
		t.Fatalf("export: %v", err)
	}
	for k, v := range want {
		if !bytes.Equal(exported[k], v) {
			t.Fatalf("export: %s differs from the value written", k)
		}
	}
	k := []byte(pods.Key(0))
	resp, err := s.Txn(TxnRequest{Success: []Op{{Type: OpPut, Key: k, Value: want[string(k)], PrevKV: true}}})
	if err != nil {
		t.Fatalf("put with prev_kv: %v", err)
	}
	if prev := resp.Responses[0].PrevKV; prev == nil || !bytes.Equal(prev.Value, want[string(k)]) {
		t.Fatalf("put with prev_kv: prev_kv %v differs from the value written", prev)
	}
}

// TestValueDictionaries: Kubernetes-sized values are stored compressed
// against a dictionary, far smaller than as written, and every read path
// returns them as written, before and after a restart.
func TestValueDictionaries(t *testing.T) {
	pods := workload.NewPods(7)
	fs := vfs.NewMem()
	db := openEngine(t, fs, false)
	s := openStore(t, db, Options{})
	putPods(t, s, pods, 0, 200, 1)
	putPods(t, s, pods, 0, 200, 2)

	raw, _ := newMemStore(t, Options{RawValues: true})
	putPods(t, raw, pods, 0, 200, 1)
	putPods(t, raw, pods, 0, 200, 2)

	packedBytes, packed := storedValueBytes(t, db)
	rawBytes, rawPacked := storedValueBytes(t, raw.db)
	t.Logf("400 pods: %d bytes as written, %d compressed (%.1fx), %d of 400 records compressed", rawBytes, packedBytes, float64(rawBytes)/float64(packedBytes), packed)
	if rawPacked != 0 {
		t.Fatalf("RawValues: %d records compressed", rawPacked)
	}
	// A dictionary is made once 64 KB of values went by: the first few
	// pods are stored as written.
	if packed < 390 || packedBytes*4 > rawBytes {
		t.Fatalf("%d of 400 records compressed, %d bytes against %d as written: want nearly all, under a quarter", packed, packedBytes, rawBytes)
	}
	// Members make their own dictionaries: HashKV hashes the values as
	// written, so a member that compresses and one that does not agree.
	h1, _, _, err := s.HashKV(0)
	if err != nil {
		t.Fatal(err)
	}
	h2, _, _, err := raw.HashKV(0)
	if err != nil {
		t.Fatal(err)
	}
	if h1 != h2 {
		t.Fatalf("HashKV: %08x with dictionaries, %08x without", h1, h2)
	}
	checkPods(t, s, pods, 200, 2) // rewrites pod 0, generation 2

	// A restart goes on with the dictionary in use: no new one.
	s = reopen(t, s, db)
	defer s.Close()
	putPods(t, s, pods, 0, 50, 2)
	if n := countDicts(t, db); n != 1 {
		t.Fatalf("%d dictionaries after a restart and 50 more pods, want 1", n)
	}
	_, packedAfter := storedValueBytes(t, db)
	if packedAfter != packed+51 {
		t.Fatalf("%d records compressed after 51 more writes, want %d", packedAfter, packed+51)
	}
	checkPods(t, s, pods, 200, 2)
}

// reopen closes s and opens a store on db again, with everything flushed
// and compacted into tables: the dictionaries are read back from them.
func reopen(t *testing.T, s *Store, db *engine.DB) *Store {
	t.Helper()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := db.CompactAll(); err != nil {
		t.Fatal(err)
	}
	return openStore(t, db, Options{})
}

func countDicts(t *testing.T, db *engine.DB) int {
	t.Helper()
	it, err := db.NewIter(&engine.IterOptions{LowerBound: []byte{dictPrefix}, UpperBound: []byte{dictPrefix + 1}})
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	n := 0
	for ok := it.First(); ok; ok = it.Next() {
		n++
	}
	return n
}

// TestValueDictionarySnapshot: a snapshot carries its dictionaries; the
// member that restores it reads its values, and its own writes after the
// restore survive a restart (their dictionary is stored again if the
// snapshot replaced it).
func TestValueDictionarySnapshot(t *testing.T) {
	pods := workload.NewPods(3)
	src, _ := newMemStore(t, Options{})
	putPods(t, src, pods, 0, 100, 1)
	var snap bytes.Buffer
	if _, err := src.WriteSnapshot(&snap); err != nil {
		t.Fatal(err)
	}

	fs := vfs.NewMem()
	db := openEngine(t, fs, false)
	dst := openStore(t, db, Options{})
	other := workload.NewPods(99) // other values: another dictionary
	putPods(t, dst, other, 0, 30, 1)
	if err := dst.RestoreSnapshot(bytes.NewReader(snap.Bytes())); err != nil {
		t.Fatal(err)
	}
	putPods(t, dst, pods, 100, 20, 1)
	checkPods(t, dst, pods, 120, 1)
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
	dst = openStore(t, db, Options{})
	defer dst.Close()
	checkPods(t, dst, pods, 120, 1)
}

// TestValueDictionaryMissing: a record whose dictionary is gone is
// reported as corrupt, never returned compressed; a store whose
// dictionary in use is gone does not open.
func TestValueDictionaryMissing(t *testing.T) {
	pods := workload.NewPods(5)
	db := openEngine(t, vfs.NewMem(), false)
	s := openStore(t, db, Options{})
	putPods(t, s, pods, 0, 20, 1)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	it, err := db.NewIter(&engine.IterOptions{LowerBound: []byte{dictPrefix}, UpperBound: []byte{dictPrefix + 1}})
	if err != nil {
		t.Fatal(err)
	}
	if !it.First() {
		t.Fatal("no dictionary stored")
	}
	key := bytes.Clone(it.Key())
	it.Close()
	if err := db.Delete(key); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(db, Options{}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Open without the dictionary in use: %v, want ErrCorrupt", err)
	}
	if err := db.Delete(metaValueDict); err != nil {
		t.Fatal(err)
	}
	s = openStore(t, db, Options{})
	defer s.Close()
	_, err = s.Range([]byte(pods.Key(19)), nil, RangeOptions{})
	if !errors.Is(err, ErrCorrupt) || !bytes.Contains([]byte(err.Error()), []byte(fmt.Sprintf("%x", key[1:]))) {
		t.Fatalf("range of a record without its dictionary: %v, want ErrCorrupt naming the dictionary", err)
	}
}

// TestValueDictionaryFollowsTheValues: a dictionary made from values
// unlike those written later (random bytes first, as a cluster's first
// objects are unlike its pods) is replaced at the next check by one made
// from the later values, and a check makes at most one dictionary.
func TestValueDictionaryFollowsTheValues(t *testing.T) {
	pods := workload.NewPods(13)
	db := openEngine(t, vfs.NewMem(), false)
	s := openStore(t, db, Options{})
	s.dicts.checkEvery = 1 << 20
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 8 {
		v := make([]byte, 8<<10)
		for j := range v {
			v[j] = "0123456789abcdef"[rng.IntN(16)]
		}
		if _, err := s.Put(fmt.Appendf(nil, "/other/s%d", i), v); err != nil {
			t.Fatal(err)
		}
	}
	putPods(t, s, pods, 0, 40, 1)
	if n := countDicts(t, db); n != 1 {
		t.Fatalf("%d dictionaries after 40 pods (0.5 MB), want the first one only", n)
	}
	before, _ := storedValueBytes(t, db)
	putPods(t, s, pods, 0, 300, 2)
	after, _ := storedValueBytes(t, db)
	raw := 0
	for i := range 300 {
		raw += len(pods.Pod(i, 2))
	}
	n := countDicts(t, db)
	t.Logf("300 pods: %d bytes, stored in %d (%.1fx), %d dictionaries", raw, after-before, float64(raw)/float64(after-before), n)
	if (after-before)*5 > raw {
		t.Fatalf("300 pods of %d bytes stored in %d: want under a fifth, with a dictionary of pods", raw, after-before)
	}
	if checks := raw>>20 + 1; n < 2 || n > 1+checks {
		t.Fatalf("%d dictionaries after %d checks: want the first replaced, at most one more per check", n, checks)
	}
	checkPods(t, s, pods, 300, 2)

	// A restart loads every dictionary, each from its own bytes.
	s = reopen(t, s, db)
	defer s.Close()
	checkPods(t, s, pods, 300, 2)
}
