package mvcc

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

func leaseKeys(t *testing.T, s *Store, id int64) string {
	t.Helper()
	l, err := s.Lease(id)
	if err != nil {
		t.Fatalf("Lease(%d): %v", id, err)
	}
	return fmt.Sprintf("ttl %d keys %q", l.TTL, l.Keys)
}

func putLease(t *testing.T, s *Store, key string, id int64) int64 {
	t.Helper()
	op := PutOp([]byte(key), []byte("v-"+key))
	op.Lease = id
	resp, err := s.Txn(TxnRequest{Success: []Op{op}})
	if err != nil {
		t.Fatalf("put %s with lease %d: %v", key, id, err)
	}
	return resp.Rev
}

// TestLeases: keys attach to a lease with a put and leave it with a put
// without it or a delete; a revoke deletes the keys still attached in one
// revision, in key order; leases and their keys survive a reopen.
func TestLeases(t *testing.T) {
	db := openEngine(t, vfs.NewMem(), false)
	defer db.Close()
	s := openStore(t, db, Options{})
	if err := s.GrantLease(7, 30); err != nil {
		t.Fatal(err)
	}
	if err := s.GrantLease(9, 60); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"c", "a", "b", "d"} {
		putLease(t, s, k, 7)
	}
	putLease(t, s, "x", 9)
	if _, err := s.Put([]byte("d"), []byte("no lease")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Delete([]byte("b")); err != nil {
		t.Fatal(err)
	}
	if got := leaseKeys(t, s, 7); got != `ttl 30 keys ["a" "c"]` {
		t.Fatalf("lease 7: %s", got)
	}
	res, err := s.Range([]byte("a"), nil, RangeOptions{})
	if err != nil || res.KVs[0].Lease != 7 {
		t.Fatalf("Range(a): %v %+v", err, res.KVs)
	}

	// Reopen: the same leases and keys.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openStore(t, db, Options{})
	defer s.Close()
	if got := leaseKeys(t, s, 7); got != `ttl 30 keys ["a" "c"]` {
		t.Fatalf("lease 7 after reopen: %s", got)
	}
	if got := fmt.Sprintf("%d %s", len(s.Leases()), leaseKeys(t, s, 9)); got != `2 ttl 60 keys ["x"]` {
		t.Fatalf("leases after reopen: %s", got)
	}

	w, err := s.Watch(context.Background(), []byte{0}, []byte{0}, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	before := s.Rev()
	rev, err := s.RevokeLease(7)
	if err != nil || rev != before+1 {
		t.Fatalf("RevokeLease(7) = %d, %v; want %d", rev, err, before+1)
	}
	evs := collect(t, w, 2)
	if got := fmtEvents(evs); got != fmt.Sprintf(`DELETE a=""(c0 m%d v0)  DELETE c=""(c0 m%d v0)  `, rev, rev) {
		t.Fatalf("revoke events: %s", got)
	}
	if _, err := s.Lease(7); !errors.Is(err, ErrLeaseNotFound) {
		t.Fatalf("Lease(7) after revoke: %v", err)
	}
	// A lease without keys: revoking it makes no revision.
	if err := s.GrantLease(8, 5); err != nil {
		t.Fatal(err)
	}
	if rev, err := s.RevokeLease(8); err != nil || rev != s.Rev() || rev != before+1 {
		t.Fatalf("RevokeLease(8) = %d, %v at revision %d", rev, err, s.Rev())
	}
}

// TestLeaseErrors checks each lease error, and that nothing is written on
// error.
func TestLeaseErrors(t *testing.T) {
	s, _ := newMemStore(t, Options{})
	if err := s.GrantLease(1, 10); err != nil {
		t.Fatal(err)
	}
	put := PutOp([]byte("k"), []byte("v"))
	put.Lease = 2
	for _, tc := range []struct {
		name string
		err  error
		call func() error
	}{
		{"grant ID 0", ErrInvalidLease, func() error { return s.GrantLease(0, 10) }},
		{"grant negative TTL", ErrInvalidLease, func() error { return s.GrantLease(3, -1) }},
		{"grant TTL too large", ErrLeaseTTLTooLarge, func() error { return s.GrantLease(3, MaxLeaseTTL+1) }},
		{"grant existing", ErrLeaseExists, func() error { return s.GrantLease(1, 10) }},
		{"revoke unknown", ErrLeaseNotFound, func() error { _, err := s.RevokeLease(2); return err }},
		{"put with unknown lease", ErrLeaseNotFound, func() error { _, err := s.Txn(TxnRequest{Success: []Op{put}}); return err }},
		{"ignore lease of a missing key", ErrKeyNotFound, func() error {
			op := PutOp([]byte("missing"), nil)
			op.IgnoreLease = true
			_, err := s.Txn(TxnRequest{Success: []Op{op}})
			return err
		}},
		{"ignore lease with a lease", ErrLeaseProvided, func() error {
			op := PutOp([]byte("k"), nil)
			op.IgnoreLease, op.Lease = true, 1
			_, err := s.Txn(TxnRequest{Success: []Op{op}})
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rev := s.Rev()
			if err := tc.call(); !errors.Is(err, tc.err) {
				t.Fatalf("got %v, want %v", err, tc.err)
			}
			if s.Rev() != rev || len(s.Leases()) != 1 {
				t.Fatalf("revision %d -> %d, %d leases", rev, s.Rev(), len(s.Leases()))
			}
		})
	}
}
