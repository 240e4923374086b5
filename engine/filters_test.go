package engine

import (
	"errors"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stratadb/strata/config"
)

// filterConfig is the default config with a 1 MB block cache and 4 MB
// memtables, so that a few MB of data outgrow the cache.
func filterConfig(dir string, optimizeForHits bool) *config.Config {
	cfg := config.Default()
	cfg.DBPath = dir
	cfg.MemtableSizeMB = 4
	cfg.BlockCacheSizeMB = 1
	cfg.OptimizeFiltersForHits = optimizeForHits
	return cfg
}

// filterTestDB opens a database with n keys (0, 2, 4, ...; the odd ones
// are absent) of values of about size bytes written and pushed to
// L6 by CompactAll, so every read meets L6 tables only.
func filterTestDB(t testing.TB, dir string, optimizeForHits bool, n, size int) *DB {
	t.Helper()
	db, err := Open(filterConfig(dir, optimizeForHits))
	if err != nil {
		t.Fatal(err)
	}
	b := db.NewBatch()
	for i := range n {
		if err := b.Put(key(2*i), doc(i, size)); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := db.CompactAll(); err != nil {
		t.Fatal(err)
	}
	m, err := db.Metrics()
	if err != nil {
		t.Fatal(err)
	}
	for l := range 6 {
		if m.Levels[l].Tables != 0 {
			t.Fatalf("L%d holds %d tables after CompactAll; the test needs every table in L6", l, m.Levels[l].Tables)
		}
	}
	return db
}

// TestGetConsultsL6Filters proves the effect of optimize_filters_for_hits:
// with false (the default) reads of absent keys are answered by the L6
// bloom filters (Pebble counts each as a useful filter check), with true
// they are not (Pebble's Get skips L6 filters), and both return the same
// values.
func TestGetConsultsL6Filters(t *testing.T) {
	const n = 500
	for _, hits := range []bool{false, true} {
		t.Run(fmt.Sprintf("optimize_filters_for_hits=%v", hits), func(t *testing.T) {
			db := filterTestDB(t, filepath.Join(t.TempDir(), "db"), hits, n, 256)
			defer db.Close()
			before, err := db.Metrics()
			if err != nil {
				t.Fatal(err)
			}
			for i := range n {
				if _, err := db.Get(key(2*i + 1)); !errors.Is(err, ErrNotFound) {
					t.Fatalf("Get of absent %s: %v, want ErrNotFound", key(2*i+1), err)
				}
				if err := db.View(key(2*i+1), func([]byte) error { return nil }); !errors.Is(err, ErrNotFound) {
					t.Fatalf("View of absent %s: %v, want ErrNotFound", key(2*i+1), err)
				}
				v, err := db.Get(key(2 * i))
				if err != nil || string(v) != string(doc(i, 256)) {
					t.Fatalf("Get %s = %q, %v", key(2*i), v, err)
				}
			}
			after, err := db.Metrics()
			if err != nil {
				t.Fatal(err)
			}
			useful := after.Filter.Hits - before.Filter.Hits
			if !hits && useful < n {
				t.Errorf("optimize_filters_for_hits = false: L6 filters answered %d of %d absent-key reads, want (nearly) all", useful, 2*n)
			}
			if hits && useful != 0 {
				t.Errorf("optimize_filters_for_hits = true: L6 filters answered %d reads, want none (Pebble's Get skips them)", useful)
			}
		})
	}
}

// TestL6FilterReadSemantics checks the prefix-seek read against what a
// point read must return: memtable values, tombstones, overwrites, range
// deletions, and keys that are a prefix of a stored key.
func TestL6FilterReadSemantics(t *testing.T) {
	db := filterTestDB(t, filepath.Join(t.TempDir(), "db"), false, 50, 256)
	defer db.Close()
	steps := []struct {
		op   func() error
		key  string
		want string // "" means absent
	}{
		{func() error { return db.Put([]byte("ab"), []byte("1")) }, "a", ""},
		{nil, "ab", "1"},
		{func() error { return db.Put([]byte("ab"), []byte("2")) }, "ab", "2"},
		{func() error { return db.Flush() }, "ab", "2"},
		{func() error { return db.Delete([]byte("ab")) }, "ab", ""},
		{func() error { return db.Put([]byte("ab\x00"), []byte("3")) }, "ab", ""},
		{nil, "ab\x00", "3"},
		{func() error { return db.DeleteRange(key(0), key(10)) }, string(key(4)), ""},
		{nil, string(key(10)), string(doc(5, 256))},
		{func() error { return db.Put(key(4), []byte("back")) }, string(key(4)), "back"},
	}
	for i, s := range steps {
		if s.op != nil {
			if err := s.op(); err != nil {
				t.Fatalf("step %d: %v", i, err)
			}
		}
		v, err := db.Get([]byte(s.key))
		switch {
		case s.want == "" && !errors.Is(err, ErrNotFound):
			t.Errorf("step %d: Get %q = %q, %v; want ErrNotFound", i, s.key, v, err)
		case s.want != "" && (err != nil || string(v) != s.want):
			t.Errorf("step %d: Get %q = %q, %v; want %q", i, s.key, v, err, s.want)
		}
	}
}
