package engine

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stratadb/strata/config"
)

// TestOnCorruption damages a table and reads it back: every read that
// meets the damage fails with an error that errors.Is finds
// ErrCorruption in and that names the file, and OnCorruption is told of
// it before the read returns; sound keys read.
func TestOnCorruption(t *testing.T) {
	cfg := config.Default()
	cfg.DBPath = t.TempDir()
	db, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2000 {
		if err := db.Put(fmt.Appendf(nil, "key/%06d", i), []byte(strings.Repeat("v", 100))); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := db.Put([]byte("sound"), []byte("v")); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	tables, _ := filepath.Glob(filepath.Join(cfg.DBPath, "*.sst"))
	if len(tables) != 1 {
		t.Fatalf("tables: %v, want one", tables)
	}
	data, err := os.ReadFile(tables[0])
	if err != nil {
		t.Fatal(err)
	}
	for i := len(data) / 4; i < len(data)/4+64; i++ {
		data[i] ^= 0xff
	}
	if err := os.WriteFile(tables[0], data, 0o644); err != nil {
		t.Fatal(err)
	}

	var mu sync.Mutex
	var seen []error
	db, err = Open(cfg, Options{OnCorruption: func(err error) {
		mu.Lock()
		seen = append(seen, err)
		mu.Unlock()
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := db.Close(); err != nil {
			t.Error(err)
		}
	}()
	if v, err := db.Get([]byte("sound")); err != nil || string(v) != "v" {
		t.Fatalf("Get(sound) = %q, %v", v, err)
	}
	file := strings.TrimSuffix(filepath.Base(tables[0]), ".sst")
	check := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, ErrCorruption) || !strings.Contains(err.Error(), "file "+file) {
			t.Fatalf("%s: error %v, want ErrCorruption naming file %s", what, err, file)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(seen) == 0 || seen[len(seen)-1] != err && !errors.Is(err, seen[len(seen)-1]) {
			t.Fatalf("%s: OnCorruption saw %v, want %v", what, seen, err)
		}
	}
	// The damaged block holds keys from about a quarter in.
	it, err := db.NewIter(nil)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for ok := it.First(); ok; ok = it.Next() {
		n++
	}
	check("iterator", it.Error())
	if err := it.Close(); err != nil {
		check("iterator close", err)
	}
	var bad []byte
	for i := range 2000 {
		k := fmt.Appendf(nil, "key/%06d", i)
		if _, err := db.Get(k); err != nil {
			check("Get", err)
			bad = k
			break
		}
	}
	if bad == nil {
		t.Fatalf("no Get failed (the scan stopped after %d keys)", n)
	}
	snap, err := db.NewSnapshot()
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Close()
	_, err = snap.Get(bad)
	check("Snapshot.Get", err)
}
