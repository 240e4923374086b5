package mvcc

import (
	"errors"
	"fmt"
	"testing"
)

// TestCollectWrites checks the duplicate-key rule of a Txn branch,
// nested Txns included: etcd's checkIntervals, and the two cases Strata
// refuses too (a put under a delete to the end; a nested delete of a key
// an earlier nested Txn puts).
func TestCollectWrites(t *testing.T) {
	put := func(k string) Op { return PutOp([]byte(k), nil) }
	del := func(k, end string) Op {
		if end == "" {
			return DeleteOp([]byte(k), nil)
		}
		return DeleteOp([]byte(k), []byte(end))
	}
	get := func(k string) Op { return RangeOp([]byte(k), nil, RangeOptions{}) }
	nest := func(then, els []Op) Op { return TxnOp(TxnRequest{Success: then, Failure: els}) }
	ops := func(o ...Op) []Op { return o }
	for _, tc := range []struct {
		name string
		ops  []Op
		dup  bool
	}{
		{"distinct puts", ops(put("a"), put("b"), get("a")), false},
		{"a key put twice", ops(put("a"), put("a")), true},
		{"a put in a delete range", ops(del("a", "c"), put("b")), true},
		{"a put at a range's end", ops(del("a", "c"), put("c")), false},
		{"a put of a deleted key", ops(put("a"), del("a", "")), true},
		{"overlapping deletes", ops(del("a", "c"), del("b", ""), nest(ops(del("a", "z")), nil)), false},
		{"a put under a delete to the end", ops(put("m"), del("a", "\x00")), true},
		{"a put before a delete to the end", ops(put("a"), del("b", "\x00")), false},
		{"both branches of a nested txn put a key", ops(nest(ops(put("a")), ops(put("a")))), false},
		{"a put and a nested put", ops(put("a"), nest(nil, ops(put("a")))), true},
		{"two nested txns put a key", ops(nest(ops(put("a")), nil), nest(nil, ops(put("a")))), true},
		{"a delete and a nested put", ops(nest(ops(put("b")), nil), del("a", "c")), true},
		{"a nested delete and a put", ops(nest(nil, ops(del("a", "c"))), put("b")), true},
		{"a nested delete, then a nested put", ops(nest(ops(del("a", "")), nil), nest(ops(put("a")), nil)), true},
		{"a nested put, then a nested delete", ops(nest(ops(put("a")), nil), nest(ops(del("a", "")), nil)), true},
		{"a put and a delete in the two branches", ops(nest(ops(put("a")), ops(del("a", "")))), false},
		{"a duplicate two levels down", ops(nest(ops(nest(ops(put("a"), put("a")), nil)), nil)), true},
		{"a delete two levels down", ops(put("a"), nest(ops(nest(nil, ops(del("a", "b")))), nil)), true},
	} {
		_, err := collectWrites(tc.ops)
		if got := errors.Is(err, ErrDuplicateKeyInTxn); got != tc.dup || err != nil && !got {
			t.Errorf("%s: %v, want duplicate %v", tc.name, err, tc.dup)
		}
	}
}

// TestNestedTxn checks a nested Txn's semantics in the store: its
// compares see the state before the Txn, not the writes of the ops
// before it; its ops write at the Txn's revision; a read-only nested Txn
// is read without a revision; a rejected one writes nothing.
func TestNestedTxn(t *testing.T) {
	s, _ := newMemStore(t, Options{})
	if _, err := s.Put([]byte("a"), []byte("1")); err != nil {
		t.Fatal(err)
	}
	valueIs := func(v string) []Compare {
		return []Compare{{Key: []byte("a"), Target: CompareValue, Result: Equal, Value: []byte(v)}}
	}
	resp, err := s.Txn(TxnRequest{Success: []Op{
		PutOp([]byte("a"), []byte("2")),
		TxnOp(TxnRequest{Compare: valueIs("1"),
			Success: []Op{PutOp([]byte("b"), []byte("seen before")), RangeOp([]byte("a"), nil, RangeOptions{})},
			Failure: []Op{PutOp([]byte("b"), []byte("seen after"))}}),
	}})
	if err != nil {
		t.Fatal(err)
	}
	inner := resp.Responses[1].Txn
	if resp.Rev != 3 || !inner.Succeeded || inner.Rev != 0 || inner.Responses[0].Rev != 3 ||
		string(inner.Responses[1].Range.KVs[0].Value) != "2" {
		t.Fatalf("txn: %+v, inner %+v; want revision 3, the success branch, the inner put at 3 and its read of a = 2", resp, inner)
	}
	if r, _ := s.Range([]byte("b"), nil, RangeOptions{}); string(r.KVs[0].Value) != "seen before" || r.KVs[0].ModRevision != 3 {
		t.Fatalf("b = %+v", r.KVs)
	}

	resp, err = s.Txn(TxnRequest{Compare: valueIs("nope"), Failure: []Op{TxnOp(TxnRequest{Compare: valueIs("2"), Success: []Op{RangeOp([]byte("b"), nil, RangeOptions{})}})}})
	if err != nil || resp.Rev != 3 || resp.Succeeded || !resp.Responses[0].Txn.Succeeded || resp.Responses[0].Txn.Responses[0].Range.Count != 1 {
		t.Fatalf("read-only nested txn: %+v, %v", resp, err)
	}

	_, err = s.Txn(TxnRequest{Success: []Op{PutOp([]byte("c"), nil), TxnOp(TxnRequest{Success: []Op{PutOp([]byte("c"), nil)}})}})
	if !errors.Is(err, ErrDuplicateKeyInTxn) || s.Rev() != 3 {
		t.Fatalf("duplicate in a nested txn: %v, revision %d; want %v at 3", err, s.Rev(), ErrDuplicateKeyInTxn)
	}
	_, err = s.Txn(TxnRequest{Success: []Op{PutOp([]byte("c"), nil), TxnOp(TxnRequest{Success: []Op{{Type: OpTxn}}})}})
	if !errors.Is(err, ErrInvalidTxn) {
		t.Fatalf("an OpTxn without a request: %v, want %v", err, ErrInvalidTxn)
	}
}

// TestRangeSkipCount checks that SkipCount stops at the limit: Count is
// then the keys returned; without it, every key of the range.
func TestRangeSkipCount(t *testing.T) {
	s, _ := newMemStore(t, Options{})
	for i := range 20 {
		if _, err := s.Put(fmt.Appendf(nil, "k%02d", i), []byte("v")); err != nil {
			t.Fatal(err)
		}
	}
	for _, skip := range []bool{false, true} {
		r, err := s.Range([]byte("k"), []byte("l"), RangeOptions{Limit: 5, SkipCount: skip})
		want := int64(20)
		if skip {
			want = 5
		}
		if err != nil || len(r.KVs) != 5 || r.Count != want {
			t.Errorf("SkipCount %v: %d keys, count %d, %v; want 5 keys, count %d", skip, len(r.KVs), r.Count, err, want)
		}
	}
}
