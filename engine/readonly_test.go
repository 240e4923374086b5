package engine

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestReadOnlyOpen checks Options.ReadOnly: every key reads back (the WAL
// replayed into memory included), every call that would change the
// database returns ErrReadOnly, and no file in db_path or the WAL directory
// changes (names, sizes, modification times).
func TestReadOnlyOpen(t *testing.T) {
	cfg := testConfig(t)
	cfg.WALDir = cfg.DBPath + "-wal"
	db := mustOpen(t, cfg)
	for i := range 500 {
		mustPut(t, db, key(i), doc(i, 300))
	}
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	mustPut(t, db, []byte("in-the-wal"), []byte("only"))
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	listing := func() string {
		var b strings.Builder
		for _, dir := range []string{cfg.DBPath, cfg.WALDir} {
			entries, err := os.ReadDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range entries {
				info, err := e.Info()
				if err != nil {
					t.Fatal(err)
				}
				b.WriteString(filepath.Join(dir, e.Name()) + " " + info.ModTime().String() + " " + strconv.FormatInt(info.Size(), 10) + "\n")
			}
		}
		return b.String()
	}
	before := listing()

	ro, err := Open(cfg, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if v, err := ro.Get([]byte("in-the-wal")); err != nil || string(v) != "only" {
		t.Errorf("WAL-only key: %q, %v", v, err)
	}
	for i := range 500 {
		if v, err := ro.Get(key(i)); err != nil || !bytes.Equal(v, doc(i, 300)) {
			t.Fatalf("key %d: %v", i, err)
		}
	}
	for name, err := range map[string]error{
		"Put":        ro.Put([]byte("k"), []byte("v")),
		"Delete":     ro.Delete([]byte("k")),
		"Batch":      func() error { b := ro.NewBatch(); defer b.Close(); _ = b.Put([]byte("k"), nil); return b.Commit() }(),
		"Flush":      ro.Flush(),
		"CompactAll": ro.CompactAll(),
		"Checkpoint": ro.Checkpoint(filepath.Join(t.TempDir(), "cp")),
	} {
		if !errors.Is(err, ErrReadOnly) {
			t.Errorf("%s on a read-only database = %v, want ErrReadOnly", name, err)
		}
	}
	if _, err := ro.Metrics(); err != nil {
		t.Error(err)
	}
	if err := ro.Close(); err != nil {
		t.Fatal(err)
	}
	if after := listing(); after != before {
		t.Errorf("a read-only open changed files:\nbefore\n%s\nafter\n%s", before, after)
	}

	if _, err := Open(testConfig(t), Options{ReadOnly: true}); err == nil {
		t.Error("read-only open of a missing database succeeded")
	}
}
