package admin

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stratadb/strata/config"
	"github.com/stratadb/strata/engine"
	"github.com/stratadb/strata/internal/fsutil"
)

// fileListing is fsutil.Listing for a test.
func fileListing(t *testing.T, dirs ...string) []string {
	t.Helper()
	l, err := fsutil.Listing(dirs...)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestReadCommandsOnTieredDatabase opens a database created with several
// db_paths and a separate wal_dir through --db DIR alone: get, scan and
// stats find the recorded layout, every key reads back, and the listing of
// every file with its size and mtime is the same before and after.
func TestReadCommandsOnTieredDatabase(t *testing.T) {
	root := t.TempDir()
	cfg := config.Default()
	cfg.DBPath = filepath.Join(root, "hot")
	cfg.WALDir = filepath.Join(root, "wal")
	cfg.MemtableSizeMB, cfg.TargetFileSizeBaseMB, cfg.MaxBytesForLevelBaseMB = 1, 1, 1
	cfg.BlockCacheSizeMB = 8
	cfg.DBPaths = []config.DBPath{
		{Path: cfg.DBPath, TargetSizeBytes: 64 << 10}, // less than a table: L6 goes to cold
		{Path: filepath.Join(root, "cold"), TargetSizeBytes: 1 << 30},
	}
	db, err := engine.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	const n = 6000
	value := func(i int) string { return fmt.Sprintf("value %d %s", i, strings.Repeat("x", 500)) }
	for i := range n {
		if err := db.Put(fmt.Appendf(nil, "k%06d", i), []byte(value(i))); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.CompactAll(); err != nil {
		t.Fatal(err)
	}
	// Unflushed writes live only in the WAL in wal_dir.
	if err := db.Put([]byte("k-wal-only"), []byte("in the WAL")); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	cold, _ := os.ReadDir(filepath.Join(root, "cold"))
	if len(cold) == 0 {
		t.Fatal("the set-up left no table in the cold path; the test would not read a tiered layout")
	}
	before := fileListing(t, root)

	out := mustRun(t, "--db", cfg.DBPath, "scan")
	if got := strings.Count(out, "\n"); got != n+1 {
		t.Errorf("scan printed %d lines, want %d", got, n+1)
	}
	for _, i := range []int{0, n / 2, n - 1} {
		if got := mustRun(t, "--db", cfg.DBPath, "get", fmt.Sprintf("k%06d", i)); got != value(i)+"\n" {
			t.Errorf("get k%06d = %.30q", i, got)
		}
	}
	if got := mustRun(t, "--db", cfg.DBPath, "get", "k-wal-only"); got != "in the WAL\n" {
		t.Errorf("get of the WAL-only key = %q", got)
	}
	if out := mustRun(t, "--db", cfg.DBPath, "stats"); !strings.Contains(out, "L6") {
		t.Errorf("stats: %s", out)
	}
	after := fileListing(t, root)
	if strings.Join(before, "\n") != strings.Join(after, "\n") {
		t.Errorf("read commands changed files:\nbefore:\n%s\nafter:\n%s", strings.Join(before, "\n"), strings.Join(after, "\n"))
	}

	// A writing command with --db alone uses the recorded layout too.
	mustRun(t, "--db", cfg.DBPath, "put", "k-new", "v")
	if got := mustRun(t, "--db", cfg.DBPath, "get", fmt.Sprintf("k%06d", n-1)); got != value(n-1)+"\n" {
		t.Errorf("after a put through --db: get = %.30q", got)
	}
	rec, err := config.ReadRecorded(cfg.DBPath, nil)
	if err != nil || rec.Config == nil || len(rec.Config.DBPaths) != 2 || rec.Config.WALDir != cfg.WALDir {
		t.Errorf("after put --db the recorded config lost the layout: %+v, %v", rec, err)
	}
}
