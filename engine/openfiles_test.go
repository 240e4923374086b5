package engine

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestMaxOpenFilesBoundsOpenTables reads every key of a database of many
// tables in random order and counts the table files the process holds
// open: with max_open_files = -1 (RocksDB's default) every table stays
// open once read, so a random read never reopens one; with 74 no more
// than 64 are (Pebble's smallest file cache, which a smaller setting gets
// too).
func TestMaxOpenFilesBoundsOpenTables(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("counts open files in /proc/self/fd")
	}
	const tables, perTable = 100, 10
	cfg := testConfig(t)
	db := mustOpen(t, cfg)
	// Each flush writes keys above the last one's: a table of its own
	// that compactions move down whole.
	for f := range tables {
		for i := range perTable {
			if err := db.Put(key(f*perTable+i), doc(i, 100)); err != nil {
				t.Fatal(err)
			}
		}
		if err := db.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		setting  int
		min, max int
	}{
		{setting: -1, min: tables, max: tables},
		{setting: 74, min: 1, max: 64},
	} {
		cfg.MaxOpenFiles = tc.setting
		db := mustOpen(t, cfg)
		m, err := db.Metrics()
		if err != nil {
			t.Fatal(err)
		}
		var n int64
		for _, l := range m.Levels {
			n += l.Tables
		}
		if n != tables {
			t.Fatalf("max_open_files = %d: %d tables after %d flushes, want as many", tc.setting, n, tables)
		}
		for _, i := range rand.New(rand.NewPCG(1, 2)).Perm(tables * perTable) {
			if _, err := db.Get(key(i)); err != nil {
				t.Fatalf("Get(%s): %v", key(i), err)
			}
		}
		// Pebble closes the files its cache evicts on a goroutine of
		// each shard, so under load a few may still be open for a moment:
		// wait for the count to settle, within a generous deadline.
		open := openTables(t, cfg.DBPath)
		for deadline := time.Now().Add(10 * time.Second); (open < tc.min || open > tc.max) && time.Now().Before(deadline); {
			time.Sleep(10 * time.Millisecond)
			open = openTables(t, cfg.DBPath)
		}
		if open < tc.min || open > tc.max {
			t.Errorf("max_open_files = %d: %d table files open after reading every key, want %d to %d", tc.setting, open, tc.min, tc.max)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// openTables counts the process's open descriptors of table files in dir.
func openTables(t *testing.T, dir string) int {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, fd := range fds {
		target, err := os.Readlink(filepath.Join("/proc/self/fd", fd.Name()))
		if err == nil && filepath.Dir(target) == dir && strings.HasSuffix(target, ".sst") {
			n++
		}
	}
	return n
}
