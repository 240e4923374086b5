package mvcc

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

func auxString(t *testing.T, s *Store, prefix string) string {
	t.Helper()
	kvs, err := s.ReadAux([]byte(prefix))
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	for _, kv := range kvs {
		fmt.Fprintf(&b, "%s=%s ", kv.Key, kv.Value)
	}
	return b.String()
}

// TestAux: aux writes record their log index atomically, make no
// revision, are read back by prefix, survive a reopen and travel in a
// snapshot; a replayed index changes nothing.
func TestAux(t *testing.T) {
	fs := vfs.NewMem()
	db := openEngine(t, fs, true)
	s := openStore(t, db, Options{})
	if err := s.Entry(3).WriteAux([]AuxWrite{{Key: []byte("a/x"), Value: []byte("1")}, {Key: []byte("a/y"), Value: []byte("2")}, {Key: []byte("b"), Value: []byte("3")}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Entry(4).WriteAux([]AuxWrite{{Key: []byte("a/x")}}); err != nil { // nil value: delete
		t.Fatal(err)
	}
	if err := s.Entry(4).WriteAux([]AuxWrite{{Key: []byte("a/z"), Value: []byte("9")}}); !errors.Is(err, ErrAlreadyApplied) {
		t.Fatalf("a replayed index: %v, want ErrAlreadyApplied", err)
	}
	if err := s.Entry(5).WriteAux(nil); err != nil { // the index alone
		t.Fatal(err)
	}
	if err := s.Entry(6).WriteAux([]AuxWrite{{Key: nil, Value: []byte("v")}}); !errors.Is(err, ErrEmptyKey) {
		t.Fatalf("an empty key: %v, want ErrEmptyKey", err)
	}
	if got := auxString(t, s, "a/"); got != "a/y=2 " {
		t.Errorf("aux a/: %q", got)
	}
	if s.Rev() != 1 || s.AppliedIndex() != 6 {
		t.Errorf("revision %d, applied index %d; want 1 (aux writes make none) and 6", s.Rev(), s.AppliedIndex())
	}

	var snap bytes.Buffer
	if _, err := s.WriteSnapshot(&snap); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openStore(t, db, Options{})
	if got := auxString(t, s, ""); got != "a/y=2 b=3 " || s.AppliedIndex() != 6 {
		t.Errorf("after reopen: aux %q, applied index %d", got, s.AppliedIndex())
	}
	_ = s.Close()
	_ = db.Close()

	dst, _ := newMemStore(t, Options{})
	if err := dst.Entry(1).WriteAux([]AuxWrite{{Key: []byte("old"), Value: []byte("x")}}); err != nil {
		t.Fatal(err)
	}
	if err := dst.RestoreSnapshot(&snap); err != nil {
		t.Fatal(err)
	}
	if got := auxString(t, dst, ""); got != "a/y=2 b=3 " || dst.AppliedIndex() != 6 {
		t.Errorf("restored: aux %q, applied index %d; want the snapshot's", got, dst.AppliedIndex())
	}
}
