package mvcc

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// TestEntryAppliedIndex: every write of an Entry advances the applied
// index, also one that changes nothing and one rejected for its request;
// an index not above the last fails with ErrAlreadyApplied and changes
// nothing; the index survives a reopen.
func TestEntryAppliedIndex(t *testing.T) {
	db := openEngine(t, vfs.NewMem(), true)
	defer db.Close()
	s := openStore(t, db, Options{})
	put := func(k string) TxnRequest { return TxnRequest{Success: []Op{PutOp([]byte(k), []byte("v"))}} }
	dup := TxnRequest{Success: []Op{PutOp([]byte("a"), nil), PutOp([]byte("a"), nil)}}
	failed := TxnRequest{Compare: []Compare{{Key: []byte("zz"), Target: CompareVersion, Result: Greater, Rev: 5}}, Success: []Op{PutOp([]byte("zz"), nil)}}
	unknownLease := PutOp([]byte("b"), nil)
	unknownLease.Lease = 99
	steps := []struct {
		name    string
		index   uint64
		err     error
		newRev  bool
		applied uint64
		call    func(e Entry) error
	}{
		{"put", 1, nil, true, 1, func(e Entry) error { _, err := e.Txn(put("a")); return err }},
		{"delete of a missing key", 2, nil, false, 2, func(e Entry) error {
			_, err := e.Txn(TxnRequest{Success: []Op{DeleteOp([]byte("nope"), nil)}})
			return err
		}},
		{"failed compare, empty branch", 3, nil, false, 3, func(e Entry) error { _, err := e.Txn(failed); return err }},
		{"read-only txn", 4, nil, false, 4, func(e Entry) error {
			_, err := e.Txn(TxnRequest{Success: []Op{RangeOp([]byte("a"), nil, RangeOptions{})}})
			return err
		}},
		{"duplicate key", 5, ErrDuplicateKeyInTxn, false, 5, func(e Entry) error { _, err := e.Txn(dup); return err }},
		{"compact in the future", 6, ErrFutureRev, false, 6, func(e Entry) error { return e.Compact(100) }},
		{"grant", 7, nil, false, 7, func(e Entry) error { return e.GrantLease(1, 10) }},
		{"put with an unknown lease", 8, ErrLeaseNotFound, false, 8, func(e Entry) error {
			_, err := e.Txn(TxnRequest{Success: []Op{unknownLease}})
			return err
		}},
		{"revoke without keys", 9, nil, false, 9, func(e Entry) error { _, err := e.RevokeLease(1); return err }},
		{"skip", 12, nil, false, 12, func(e Entry) error { return e.Skip() }},
		{"same index again", 12, ErrAlreadyApplied, false, 12, func(e Entry) error { _, err := e.Txn(put("c")); return err }},
		{"older index", 10, ErrAlreadyApplied, false, 12, func(e Entry) error { return e.Skip() }},
		{"older index, rejected request", 11, ErrAlreadyApplied, false, 12, func(e Entry) error { _, err := e.Txn(dup); return err }},
		{"compact", 13, nil, false, 13, func(e Entry) error { return e.Compact(2) }},
		{"put after", 14, nil, true, 14, func(e Entry) error { _, err := e.Txn(put("d")); return err }},
		{"store write", 0, nil, true, 14, func(e Entry) error { _, err := e.Txn(put("e")); return err }},
	}
	for _, st := range steps {
		rev := s.Rev()
		err := st.call(s.Entry(st.index))
		if !errors.Is(err, st.err) || st.err == nil && err != nil {
			t.Fatalf("%s: %v, want %v", st.name, err, st.err)
		}
		if got := s.Rev() != rev; got != st.newRev {
			t.Fatalf("%s: revision %d -> %d", st.name, rev, s.Rev())
		}
		if got := s.AppliedIndex(); got != st.applied {
			t.Fatalf("%s: applied index %d, want %d", st.name, got, st.applied)
		}
	}
	rev := s.Rev()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openStore(t, db, Options{})
	defer s.Close()
	if s.AppliedIndex() != 14 || s.Rev() != rev {
		t.Fatalf("reopened at applied index %d, revision %d; want 14, %d", s.AppliedIndex(), s.Rev(), rev)
	}
	if err := s.Entry(14).Skip(); !errors.Is(err, ErrAlreadyApplied) {
		t.Fatalf("Skip(14) after reopen: %v", err)
	}
}

// TestEntryCrash applies log entries in order (a put of key e<i>, or an
// entry that writes nothing) with sync = true while crash clones of the
// file system are taken at random moments. After reopening a clone at
// applied index A, entry i's write is present exactly when i <= A: the
// index and the data it describes are never apart, so replaying the log
// after A applies every entry once.
func TestEntryCrash(t *testing.T) {
	seed := testSeed(t)
	r := rand.New(rand.NewPCG(seed, 12))
	mem := vfs.NewCrashableMem()
	db := openEngine(t, slowSyncFS(mem, 100*time.Microsecond), true)
	s := openStore(t, db, Options{})
	n := 300
	if testing.Short() {
		n = 120
	}
	kinds := make([]int, n+1) // 0: put, 1: no-op delete, 2: skip
	for i := 1; i <= n; i++ {
		kinds[i] = r.IntN(3)
	}
	var clones []*vfs.MemFS
	var mu sync.Mutex
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		cr := rand.New(rand.NewPCG(seed, 13))
		for i := uint64(0); ; i++ {
			select {
			case <-done:
				return
			case <-time.After(time.Duration(cr.IntN(500)) * time.Microsecond):
			}
			fs := mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: cr.IntN(101), RNG: rand.New(rand.NewPCG(seed, 200+i))})
			mu.Lock()
			clones = append(clones, fs)
			mu.Unlock()
		}
	}()
	for i := 1; i <= n; i++ {
		e := s.Entry(uint64(i))
		var err error
		switch kinds[i] {
		case 0:
			_, err = e.Txn(TxnRequest{Success: []Op{PutOp(fmt.Appendf(nil, "e%04d", i), nil)}})
		case 1:
			_, err = e.Txn(TxnRequest{Success: []Op{DeleteOp([]byte("missing"), nil)}})
		default:
			err = e.Skip()
		}
		if err != nil {
			t.Fatalf("entry %d: %v", i, err)
		}
	}
	close(done)
	wg.Wait()
	_ = s.Close()
	_ = db.Close()
	t.Logf("%d crash clones over %d entries", len(clones), n)
	for c, fs := range clones {
		db2 := openEngine(t, fs, true)
		s2 := openStore(t, db2, Options{})
		checkPutsUpTo(t, s2, c, s2.AppliedIndex(), kinds)
		_ = s2.Close()
		_ = db2.Close()
	}
}

// checkPutsUpTo checks, on clone c recovered at applied index applied,
// that the put of each entry i (kinds[i] 0: a put of key e%04d) is
// present exactly when i <= applied: an entry's writes and its index
// reach storage together.
func checkPutsUpTo(t *testing.T, s *Store, c int, applied uint64, kinds []int) {
	t.Helper()
	for i := 1; i < len(kinds); i++ {
		if kinds[i] != 0 {
			continue
		}
		res, err := s.Range(fmt.Appendf(nil, "e%04d", i), nil, RangeOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if present := len(res.KVs) == 1; present != (uint64(i) <= applied) {
			t.Fatalf("clone %d at applied index %d: entry %d's put present = %v", c, applied, i, present)
		}
	}
}
