package etcdfile

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stratadb/strata/config"
	"github.com/stratadb/strata/engine"
	"github.com/stratadb/strata/mvcc"
)

// newStore returns a store on a fresh engine in a temporary directory,
// closed with the test.
func newStore(t *testing.T) *mvcc.Store {
	t.Helper()
	s, err := mvcc.Open(emptyDB(t), mvcc.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// TestWriteOpenLoad writes a store with history, a deletion, a lease and a
// compaction as an etcd snapshot, opens it as a snapshot and, without its
// trailer, as a member db file, and loads both: the same revision,
// compaction, keys and history.
func TestWriteOpenLoad(t *testing.T) {
	src := newStore(t)
	if err := src.GrantLease(5, 100); err != nil {
		t.Fatal(err)
	}
	for i := range 40 {
		if _, err := src.Put(fmt.Appendf(nil, "k%d", i%7), fmt.Appendf(nil, "v%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	op := mvcc.PutOp([]byte("leased"), nil)
	op.Lease = 5
	if _, err := src.Txn(mvcc.TxnRequest{Success: []mvcc.Op{op, mvcc.DeleteOp([]byte("k3"), nil)}}); err != nil {
		t.Fatal(err)
	}
	if err := src.Compact(20); err != nil {
		t.Fatal(err)
	}
	snap := filepath.Join(t.TempDir(), "s.snap")
	if _, err := WriteSnapshot(src, snap, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := WriteSnapshot(src, snap, nil); err == nil {
		t.Error("WriteSnapshot over an existing file: no error")
	}
	body, err := os.ReadFile(snap)
	if err != nil {
		t.Fatal(err)
	}
	dbFile := filepath.Join(t.TempDir(), "db")
	if err := os.WriteFile(dbFile, body[:len(body)-sha256.Size], 0o600); err != nil {
		t.Fatal(err)
	}
	for path, kind := range map[string]Kind{snap: Snapshot, dbFile: MemberDB} {
		f, err := Open(path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if f.Kind() != kind {
			t.Errorf("%s: kind %s, want %s", path, f.Kind(), kind)
		}
		l, err := mvcc.NewLoader(emptyDB(t))
		if err != nil {
			t.Fatal(err)
		}
		s, rep, err := f.Load(l, mvcc.Options{}, nil)
		_ = f.Close()
		if err != nil {
			t.Fatal(err)
		}
		if s.Rev() != src.Rev() || s.CompactRev() != 20 || rep.Leases != 1 {
			t.Errorf("%s: revision %d compacted at %d, %d leases; want %d, 20, 1", kind, s.Rev(), s.CompactRev(), rep.Leases, src.Rev())
		}
		for _, rev := range []int64{20, 30, 0} {
			w, _ := src.Range([]byte{0}, []byte{0}, mvcc.RangeOptions{Rev: rev})
			g, err := s.Range([]byte{0}, []byte{0}, mvcc.RangeOptions{Rev: rev})
			if err != nil || fmt.Sprint(g.KVs) != fmt.Sprint(w.KVs) {
				t.Errorf("%s at revision %d: %v %v, want %v", kind, rev, g.KVs, err, w.KVs)
			}
		}
		_ = s.Close()
	}

	for name, bad := range map[string][]byte{
		"truncated":                 body[:len(body)-100],
		"no trailer, cut at a page": body[:8192],
		"last pages cut":            body[:len(body)-sha256.Size-2*4096],
		"text":                      []byte("hello"),
	} {
		p := filepath.Join(t.TempDir(), "bad")
		if err := os.WriteFile(p, bad, 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := Open(p, nil)
		if err == nil {
			t.Errorf("%s: no error", name)
		}
		t.Logf("%s: %v", name, err)
	}
	flipped := append([]byte(nil), body...)
	flipped[len(flipped)/2] ^= 1
	p := filepath.Join(t.TempDir(), "flipped")
	if err := os.WriteFile(p, flipped, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(p, nil); !errors.Is(err, ErrChecksum) {
		t.Errorf("a flipped byte: %v, want ErrChecksum", err)
	}
}

// emptyDB returns an empty engine in a temporary directory.
func emptyDB(t *testing.T) *engine.DB {
	t.Helper()
	cfg := config.Default()
	cfg.DBPath = t.TempDir()
	db, err := engine.Open(cfg, engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}
