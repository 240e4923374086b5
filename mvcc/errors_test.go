package mvcc

import (
	"bytes"
	"context"
	"errors"
	"testing"
)

// TestBadInput checks each error of the API, and that nothing is written
// on error.
func TestBadInput(t *testing.T) {
	s, _ := newMemStore(t, Options{})
	for i := range 5 {
		if _, err := s.Put([]byte("k"), []byte{byte(i)}); err != nil {
			t.Fatal(err)
		}
	}
	// Revisions 2..6 (an empty store is at 1), compacted at 4.
	if err := s.Compact(4); err != nil {
		t.Fatal(err)
	}
	big := bytes.Repeat([]byte("x"), MaxValueSize+1)
	longKey := bytes.Repeat([]byte("k"), MaxKeySize+1)
	ctx := context.Background()
	tests := []struct {
		name string
		err  error
		call func() error
	}{
		{"put empty key", ErrEmptyKey, func() error { _, err := s.Put(nil, []byte("v")); return err }},
		{"put long key", ErrKeyTooLarge, func() error { _, err := s.Put(longKey, []byte("v")); return err }},
		{"put large value", ErrValueTooLarge, func() error { _, err := s.Put([]byte("a"), big); return err }},
		{"delete empty key", ErrEmptyKey, func() error { _, _, err := s.Delete(nil); return err }},
		{"delete range end before key", ErrInvalidRange, func() error { _, _, err := s.DeleteRange([]byte("b"), []byte("a")); return err }},
		{"range empty key", ErrEmptyKey, func() error { _, err := s.Range(nil, nil, RangeOptions{}); return err }},
		{"range end before key", ErrInvalidRange, func() error { _, err := s.Range([]byte("b"), []byte("a"), RangeOptions{}); return err }},
		{"range compacted", ErrCompacted, func() error { _, err := s.Range([]byte("k"), nil, RangeOptions{Rev: 3}); return err }},
		{"range future", ErrFutureRev, func() error { _, err := s.Range([]byte("k"), nil, RangeOptions{Rev: 7}); return err }},
		{"compact compacted", ErrCompacted, func() error { return s.Compact(4) }},
		{"compact older", ErrCompacted, func() error { return s.Compact(1) }},
		{"compact future", ErrFutureRev, func() error { return s.Compact(7) }},
		{"watch compacted", ErrCompacted, func() error { _, err := s.Watch(ctx, []byte("k"), nil, 3); return err }},
		{"watch empty key", ErrEmptyKey, func() error { _, err := s.Watch(ctx, nil, nil, 0); return err }},
		{"watch empty range", ErrEmptyWatchRange, func() error { _, err := s.Watch(ctx, []byte("b"), []byte("b"), 0); return err }},
		{"watch end before key", ErrEmptyWatchRange, func() error { _, err := s.Watch(ctx, []byte("b"), []byte("a"), 0); return err }},
		{"txn two puts", ErrDuplicateKeyInTxn, func() error {
			_, err := s.Txn(TxnRequest{Success: []Op{PutOp([]byte("a"), nil), PutOp([]byte("b"), nil), PutOp([]byte("a"), nil)}})
			return err
		}},
		{"txn put and delete", ErrDuplicateKeyInTxn, func() error {
			_, err := s.Txn(TxnRequest{Success: []Op{DeleteOp([]byte("a"), nil), PutOp([]byte("a"), nil)}})
			return err
		}},
		{"txn put in deleted range", ErrDuplicateKeyInTxn, func() error {
			_, err := s.Txn(TxnRequest{Failure: []Op{PutOp([]byte("b"), nil), DeleteOp([]byte("a"), []byte("c"))}})
			return err
		}},
		{"txn put under delete of all keys", ErrDuplicateKeyInTxn, func() error {
			_, err := s.Txn(TxnRequest{Success: []Op{DeleteOp([]byte("a"), []byte{0}), PutOp([]byte("zz"), nil)}})
			return err
		}},
		{"txn bad value in failure branch", ErrValueTooLarge, func() error {
			_, err := s.Txn(TxnRequest{Success: []Op{PutOp([]byte("a"), nil)}, Failure: []Op{PutOp([]byte("a"), big)}})
			return err
		}},
		{"txn compare empty key", ErrEmptyKey, func() error {
			_, err := s.Txn(TxnRequest{Compare: []Compare{{Target: CompareVersion}}, Success: []Op{PutOp([]byte("a"), nil)}})
			return err
		}},
		{"txn unknown op", ErrInvalidTxn, func() error { _, err := s.Txn(TxnRequest{Success: []Op{{Key: []byte("a")}}}); return err }},
		{"txn unknown target", ErrInvalidTxn, func() error {
			_, err := s.Txn(TxnRequest{Compare: []Compare{{Key: []byte("a"), Target: 9}}})
			return err
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := s.Rev()
			err := tc.call()
			if !errors.Is(err, tc.err) {
				t.Fatalf("got %v, want %v", err, tc.err)
			}
			if s.Rev() != before {
				t.Fatalf("revision moved from %d to %d on error", before, s.Rev())
			}
		})
	}
	// Nothing of the failed calls is visible.
	res, err := s.Range([]byte{0}, []byte{0}, RangeOptions{})
	if err != nil || len(res.KVs) != 1 || string(res.KVs[0].Key) != "k" {
		t.Fatalf("after bad input: %v %s", err, fmtKVs(res.KVs))
	}
	// Overlapping deletes are allowed, as in etcd, and delete once.
	_, _ = s.Put([]byte("a"), nil)
	resp, err := s.Txn(TxnRequest{Success: []Op{DeleteOp([]byte("a"), []byte("z")), DeleteOp([]byte("a"), nil)}})
	if err != nil || resp.Responses[0].Deleted != 2 || resp.Responses[1].Deleted != 0 {
		t.Fatalf("overlapping deletes: %v %+v", err, resp.Responses)
	}
}

// TestOpenOptions checks option validation and a nil db.
func TestOpenOptions(t *testing.T) {
	if _, err := Open(nil, Options{}); err == nil {
		t.Fatal("Open(nil) succeeded")
	}
	_, db := newMemStore(t, Options{})
	_, err := Open(db, Options{WatchBufferSize: -2})
	if err == nil || !bytes.Contains([]byte(err.Error()), []byte("WatchBufferSize = -2")) {
		t.Fatalf("bad options: %v", err)
	}
}

// TestClosed checks the API after Close.
func TestClosed(t *testing.T) {
	s, _ := newMemStore(t, Options{})
	_, _ = s.Put([]byte("a"), []byte("1"))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); !errors.Is(err, ErrClosed) {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := s.Put([]byte("a"), nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("Put: %v", err)
	}
	if _, err := s.Range([]byte("a"), nil, RangeOptions{}); !errors.Is(err, ErrClosed) {
		t.Fatalf("Range: %v", err)
	}
	if err := s.Compact(1); !errors.Is(err, ErrClosed) {
		t.Fatalf("Compact: %v", err)
	}
}
