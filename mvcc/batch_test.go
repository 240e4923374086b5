package mvcc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// entryWriter writes one log entry: by itself (Entry) or staged in a
// Batch (batchEntry).
type entryWriter interface {
	Txn(TxnRequest) (TxnResponse, error)
	Skip() error
}

// batchEntry is the entry at index staged in b.
type batchEntry struct {
	b     *Batch
	index uint64
}

func (e batchEntry) Txn(req TxnRequest) (TxnResponse, error) { return e.b.Txn(e.index, req) }
func (e batchEntry) Skip() error                             { return e.b.Skip(e.index) }

// batchScript is a run of log entries whose later entries read what the
// earlier ones wrote (prev_kv, compares, ranges at an older revision,
// deletes with prev_kvs), with values too large for the record cache, so
// a batch must find them among its staged writes; and entries the store
// rejects for the request itself, which keep their index.
func batchScript() []func(w entryWriter) (TxnResponse, error) {
	big := func(c byte) []byte { return bytes.Repeat([]byte{c}, 3<<10) }
	txn := func(req TxnRequest) func(w entryWriter) (TxnResponse, error) {
		return func(w entryWriter) (TxnResponse, error) { return w.Txn(req) }
	}
	withPrev := PutOp([]byte("a"), big('2'))
	withPrev.PrevKV = true
	unknownLease := PutOp([]byte("c"), nil)
	unknownLease.Lease = 99
	ignoreValue := PutOp([]byte("nope"), nil)
	ignoreValue.IgnoreValue = true
	delAB := DeleteOp([]byte("a"), []byte("c"))
	delAB.PrevKV = true
	return []func(w entryWriter) (TxnResponse, error){
		txn(TxnRequest{Success: []Op{PutOp([]byte("a"), big('1'))}}),
		txn(TxnRequest{Success: []Op{withPrev}}),
		txn(TxnRequest{
			Compare: []Compare{{Key: []byte("a"), Target: CompareValue, Result: Equal, Value: big('2')}},
			Success: []Op{PutOp([]byte("b"), big('b')), RangeOp([]byte("a"), []byte("c"), RangeOptions{})},
		}),
		txn(TxnRequest{
			Compare: []Compare{{Key: []byte("a"), Target: CompareValue, Result: Equal, Value: []byte("no")}},
			Failure: []Op{RangeOp([]byte("a"), nil, RangeOptions{Rev: 2})},
		}),
		txn(TxnRequest{Success: []Op{PutOp([]byte("c"), nil), PutOp([]byte("c"), nil)}}), // ErrDuplicateKeyInTxn
		func(w entryWriter) (TxnResponse, error) { return TxnResponse{}, w.Skip() },
		txn(TxnRequest{Success: []Op{delAB}}),
		txn(TxnRequest{Success: []Op{unknownLease}}),                                      // ErrLeaseNotFound
		txn(TxnRequest{Success: []Op{DeleteOp([]byte("missing"), nil)}}),                  // no revision
		txn(TxnRequest{Success: []Op{ignoreValue}}),                                       // ErrKeyNotFound
		txn(TxnRequest{Success: []Op{RangeOp([]byte("a"), nil, RangeOptions{Rev: 100})}}), // ErrFutureRev
		txn(TxnRequest{Success: []Op{PutOp([]byte("d"), big('d'))}}),
	}
}

// TestBatchOneCommit applies the same entries to two stores with
// sync = true, one Entry at a time and in one Batch: every result, the
// contents, revision and applied index are the same, nothing staged is
// visible before Commit, a watcher sees every revision in order after
// it, and the batch costs one WAL sync (one engine commit) where the
// entries cost one each.
func TestBatchOneCommit(t *testing.T) {
	script := batchScript()
	n := len(script)
	type outcome struct {
		resp TxnResponse
		err  string
	}
	run := func(batched bool) ([]outcome, *Store, int64, []Event) {
		db := openEngine(t, vfs.NewMem(), true)
		t.Cleanup(func() { db.Close() })
		s := openStore(t, db, Options{})
		t.Cleanup(func() { s.Close() })
		w, err := s.Watch(context.Background(), []byte("a"), []byte("\x00"), 0)
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		before := walSyncs(t, db)
		out := make([]outcome, n)
		var b *Batch
		if batched {
			b = s.BeginBatch()
			// On a failure below, release the write lock before the store
			// closes (a second Commit does nothing).
			t.Cleanup(func() { _ = b.Commit() })
		}
		for i, step := range script {
			index := uint64(i + 1)
			var ew entryWriter = s.Entry(index)
			if batched {
				ew = batchEntry{b, index}
			}
			resp, err := step(ew)
			out[i].resp = resp
			if err != nil {
				out[i].err = err.Error()
			}
		}
		if batched {
			if b.Len() != n {
				t.Fatalf("batch staged %d entries, want %d", b.Len(), n)
			}
			// Readers do not wait for the batch and see none of it.
			if s.Rev() != 1 || s.AppliedIndex() != 0 {
				t.Fatalf("before Commit: revision %d, applied index %d; want 1, 0", s.Rev(), s.AppliedIndex())
			}
			if r, err := s.Range([]byte("a"), []byte("\x00"), RangeOptions{}); err != nil || len(r.KVs) != 0 || r.Rev != 1 {
				t.Fatalf("before Commit a reader sees %+v, %v", r, err)
			}
			if err := b.Commit(); err != nil {
				t.Fatal(err)
			}
		}
		syncs := walSyncs(t, db) - before
		// a, a, b; a and b deleted; d.
		evs := collect(t, w, 6)
		return out, s, syncs, evs
	}
	one, s1, syncs1, evs1 := run(false)
	all, s2, syncs2, evs2 := run(true)
	for i := range one {
		if !reflect.DeepEqual(one[i], all[i]) {
			t.Fatalf("entry %d: one at a time %+v, batched %+v", i+1, one[i], all[i])
		}
	}
	for i, want := range map[int]error{4: ErrDuplicateKeyInTxn, 7: ErrLeaseNotFound, 9: ErrKeyNotFound, 10: ErrFutureRev} {
		if !bytes.Contains([]byte(all[i].err), []byte(want.Error())) {
			t.Fatalf("entry %d: error %q, want %v", i+1, all[i].err, want)
		}
	}
	if p := all[1].resp.Responses[0].PrevKV; p == nil || p.Value[0] != '1' {
		t.Fatalf("entry 2's prev_kv: %+v, want entry 1's value", p)
	}
	if !all[2].resp.Succeeded || len(all[2].resp.Responses[1].Range.KVs) != 2 {
		t.Fatalf("entry 3: %+v, want the compare on entry 2's value to hold and both keys read", all[2].resp)
	}
	if kvs := all[3].resp.Responses[0].Range.KVs; len(kvs) != 1 || kvs[0].Value[0] != '1' {
		t.Fatalf("entry 4 reads a at revision 2: %+v, want entry 1's value", kvs)
	}
	if got := len(all[6].resp.Responses[0].PrevKVs); got != 2 {
		t.Fatalf("entry 7 deleted with %d prev_kvs, want 2", got)
	}
	sameEvents(t, evs2, evs1)
	for i := 1; i < len(evs2); i++ {
		if evs2[i].KV.ModRevision < evs2[i-1].KV.ModRevision {
			t.Fatalf("event %d at revision %d after %d", i, evs2[i].KV.ModRevision, evs2[i-1].KV.ModRevision)
		}
	}
	if s1.Rev() != s2.Rev() || s1.AppliedIndex() != uint64(n) || s2.AppliedIndex() != uint64(n) {
		t.Fatalf("one at a time: revision %d, applied %d; batched: %d, %d; want applied %d", s1.Rev(), s1.AppliedIndex(), s2.Rev(), s2.AppliedIndex(), n)
	}
	r1, _ := s1.Range([]byte("\x00"), []byte("\x00"), RangeOptions{})
	r2, _ := s2.Range([]byte("\x00"), []byte("\x00"), RangeOptions{})
	if !sameKVs(r1.KVs, r2.KVs) {
		t.Fatalf("contents differ:\n one at a time %s\n batched %s", fmtKVs(r1.KVs), fmtKVs(r2.KVs))
	}
	t.Logf("%d entries: %d WAL syncs one at a time, %d batched", n, syncs1, syncs2)
	if syncs1 < int64(n) {
		t.Fatalf("%d entries one at a time made %d WAL syncs: want one each", n, syncs1)
	}
	if syncs2 != 1 {
		t.Fatalf("%d entries in one batch made %d WAL syncs: want 1 (one engine commit)", n, syncs2)
	}
}

// TestBatchMisuse: an index not above the last, a batch used after
// Commit, and a batch with nothing staged, which commits nothing and
// releases the write lock. Index 0 (a single member's command, without a
// log position) stages and records no index.
func TestBatchMisuse(t *testing.T) {
	s, _ := newMemStore(t, Options{})
	b := s.BeginBatch()
	put := TxnRequest{Success: []Op{PutOp([]byte("k"), nil)}}
	if _, err := b.Txn(0, put); err != nil {
		t.Fatalf("Batch.Txn(0): %v", err)
	}
	if err := b.Skip(3); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Txn(3, put); !errors.Is(err, ErrAlreadyApplied) {
		t.Fatalf("index 3 twice in a batch: %v, want ErrAlreadyApplied", err)
	}
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := b.Commit(); !errors.Is(err, errBatchDone) {
		t.Fatalf("second Commit: %v", err)
	}
	if _, err := b.Txn(4, put); !errors.Is(err, errBatchDone) {
		t.Fatalf("Txn after Commit: %v", err)
	}
	if s.AppliedIndex() != 3 {
		t.Fatalf("applied index %d, want 3", s.AppliedIndex())
	}
	if err := s.BeginBatch().Commit(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Entry(4).Txn(put); err != nil { // the lock is free
		t.Fatal(err)
	}
}

// TestBatchCrash applies log entries in batches of 1 to 16 (puts of key
// e<i>, and entries that write nothing or are rejected) while crash
// clones of the file system are taken at random moments, with the
// engine's sync = true and sync = false (a cluster member's store: the
// raft log is the durable record). After reopening a clone at applied
// index A: A is where a batch ends (a batch is in storage whole or not
// at all), entry i's put is present exactly when i <= A (the log replays
// the rest once), and every batch durable before the clone is in it: with
// sync = true each once its Commit returned, with sync = false each
// before a Flush (which a raft member calls before truncating its log).
func TestBatchCrash(t *testing.T) {
	for _, sync := range []bool{true, false} {
		t.Run(fmt.Sprintf("sync=%v", sync), func(t *testing.T) { batchCrash(t, sync) })
	}
}

func batchCrash(t *testing.T, syncWrites bool) {
	seed := testSeed(t)
	r := rand.New(rand.NewPCG(seed, 21))
	mem := vfs.NewCrashableMem()
	db := openEngine(t, slowSyncFS(mem, 100*time.Microsecond), syncWrites)
	s := openStore(t, db, Options{})
	n := 600
	if testing.Short() {
		n = 200
	}
	kinds := make([]int, n+1) // 0: put, 1: no-op delete, 2: skip, 3: duplicate key
	for i := 1; i <= n; i++ {
		kinds[i] = r.IntN(4)
	}
	ends := map[uint64]bool{0: true}
	type clone struct {
		fs    *vfs.MemFS
		acked uint64
	}
	var (
		clones []clone
		mu     sync.Mutex
		acked  atomic.Uint64
		done   = make(chan struct{})
		wg     sync.WaitGroup
	)
	wg.Go(func() {
		cr := rand.New(rand.NewPCG(seed, 22))
		for i := uint64(0); ; i++ {
			select {
			case <-done:
				return
			case <-time.After(time.Duration(cr.IntN(400)) * time.Microsecond):
			}
			lo := acked.Load()
			fs := mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: cr.IntN(101), RNG: rand.New(rand.NewPCG(seed, 300+i))})
			mu.Lock()
			clones = append(clones, clone{fs, lo})
			mu.Unlock()
		}
	})
	for i := 1; i <= n; {
		b := s.BeginBatch()
		end := min(n, i+r.IntN(16))
		for ; i <= end; i++ {
			e := batchEntry{b, uint64(i)}
			var err error
			switch kinds[i] {
			case 0:
				_, err = e.Txn(TxnRequest{Success: []Op{PutOp(fmt.Appendf(nil, "e%04d", i), nil)}})
			case 1:
				_, err = e.Txn(TxnRequest{Success: []Op{DeleteOp([]byte("missing"), nil)}})
			case 2:
				err = e.Skip()
			default:
				_, err = e.Txn(TxnRequest{Success: []Op{PutOp([]byte("dup"), nil), PutOp([]byte("dup"), nil)}})
				if errors.Is(err, ErrDuplicateKeyInTxn) {
					err = nil
				}
			}
			if err != nil {
				t.Fatalf("entry %d: %v", i, err)
			}
		}
		if err := b.Commit(); err != nil {
			t.Fatal(err)
		}
		ends[uint64(end)] = true
		switch {
		case syncWrites:
			acked.Store(uint64(end))
		case r.IntN(8) == 0:
			// What a raft member does before it truncates its log.
			if err := s.Flush(); err != nil {
				t.Fatal(err)
			}
			acked.Store(uint64(end))
		default:
			// Without syncs batches commit in microseconds: give the
			// clones a chance to fall between and inside them.
			time.Sleep(time.Duration(r.IntN(300)) * time.Microsecond)
		}
	}
	close(done)
	wg.Wait()
	_ = s.Close()
	_ = db.Close()
	t.Logf("%d crash clones over %d entries in %d batches", len(clones), n, len(ends)-1)
	if len(clones) == 0 {
		t.Fatal("no crash clone taken")
	}
	seen := map[uint64]bool{}
	defer func() { t.Logf("the clones reopened at %d different applied indexes", len(seen)) }()
	for c, cl := range clones {
		db2 := openEngine(t, cl.fs, syncWrites)
		s2 := openStore(t, db2, Options{})
		applied := s2.AppliedIndex()
		seen[applied] = true
		if !ends[applied] {
			t.Fatalf("clone %d: applied index %d is inside a batch", c, applied)
		}
		if applied < cl.acked {
			t.Fatalf("clone %d: applied index %d, but the batch up to %d was durable (synced or flushed) before the crash", c, applied, cl.acked)
		}
		checkPutsUpTo(t, s2, c, applied, kinds)
		_ = s2.Close()
		_ = db2.Close()
	}
}
