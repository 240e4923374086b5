package mvcc

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
)

// TestConcurrentReadsWritesCompactions: one writer replaces ten keys in
// each Txn and compacts now and then, while readers range at the latest
// and at older revisions and a watcher follows. Every read sees all ten
// keys from one transaction (atomicity), reads of retained revisions never
// fail but with ErrCompacted, and the watcher sees every revision once.
func TestConcurrentReadsWritesCompactions(t *testing.T) {
	s, _ := newMemStore(t, Options{WatchBufferSize: 16})
	const keys = 10
	writes := 600
	if testing.Short() {
		writes = 200
	}
	put := func(i int) {
		var ops []Op
		for k := range keys {
			ops = append(ops, PutOp(fmt.Appendf(nil, "k%d", k), fmt.Appendf(nil, "%d", i)))
		}
		if _, err := s.Txn(TxnRequest{Success: ops}); err != nil {
			t.Error(err)
		}
	}
	put(0)
	w, err := s.Watch(context.Background(), []byte("k"), PrefixEnd([]byte("k")), 2)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	var wg sync.WaitGroup
	done := make(chan struct{})
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(g), 9))
			for {
				select {
				case <-done:
					return
				default:
				}
				cur := s.Rev()
				rev := int64(0)
				if g%2 == 1 {
					rev = 2 + r.Int64N(cur-1) // revision 1 is the empty store
				}
				res, err := s.Range([]byte("k"), PrefixEnd([]byte("k")), RangeOptions{Rev: rev})
				if errors.Is(err, ErrCompacted) {
					continue
				}
				if err != nil {
					t.Errorf("Range at %d: %v", rev, err)
					return
				}
				if len(res.KVs) != keys {
					t.Errorf("Range at %d: %d keys", rev, len(res.KVs))
					return
				}
				for _, kv := range res.KVs {
					if string(kv.Value) != string(res.KVs[0].Value) || kv.ModRevision != res.KVs[0].ModRevision {
						t.Errorf("Range at %d mixes transactions: %s", rev, fmtKVs(res.KVs))
						return
					}
				}
			}
		}()
	}
	for i := 1; i <= writes; i++ {
		put(i)
		if i%50 == 0 {
			if err := s.Compact(s.Rev() - 10); err != nil {
				t.Error(err)
			}
		}
	}
	close(done)
	wg.Wait()
	// The watcher may have been overtaken by compaction (ErrCompacted);
	// until then it saw each revision's ten events in order.
	next := int64(2)
	for next <= s.Rev() {
		evs, ok := <-w.C
		if !ok {
			if !errors.Is(w.Err(), ErrCompacted) {
				t.Fatalf("watcher stopped: %v", w.Err())
			}
			break
		}
		for i, e := range evs {
			if want := next + int64(i/keys); e.KV.ModRevision != want {
				t.Fatalf("event at revision %d, want %d", e.KV.ModRevision, want)
			}
		}
		if len(evs)%keys != 0 {
			t.Fatalf("a batch of %d events splits a revision", len(evs))
		}
		next += int64(len(evs) / keys)
	}
}
