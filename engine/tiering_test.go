package engine

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stratadb/strata/config"
)

func sstFiles(t *testing.T, dir string) (n int, size int64) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".sst") {
			info, _ := e.Info()
			n++
			size += info.Size()
		}
	}
	return n, size
}

// TestTieredLayout opens a database over three db_paths with small targets
// and checks the engine wiring: tables spread over the paths by level, the
// metadata and the WAL stay out of them, every key reads back, Stats and the
// OPTIONS file show the level-to-path map, and a changed db_paths list
// moves the tables at the next open. (Package tiering proves the placement
// rule, the mover's crash safety and its concurrency in depth.)
func TestTieredLayout(t *testing.T) {
	root := t.TempDir()
	cfg := testConfig(t)
	cfg.DBPath = filepath.Join(root, "hot")
	cfg.WALDir = filepath.Join(root, "wal")
	cfg.MemtableSizeMB = 1
	cfg.TargetFileSizeBaseMB = 1
	cfg.MaxBytesForLevelBaseMB = 1
	cfg.CompressionDefault, cfg.CompressionBottommost = "none", "none"
	cfg.DBPaths = []config.DBPath{
		{Path: cfg.DBPath, TargetSizeBytes: 2 << 20},
		{Path: filepath.Join(root, "warm"), TargetSizeBytes: 4 << 20},
		{Path: filepath.Join(root, "cold"), TargetSizeBytes: 1 << 30},
	}
	db := mustOpen(t, cfg)
	const n = 12000 // about 12 MB
	for i := range n {
		if err := db.Put(key(i), doc(i, 1000)); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.CompactAll(); err != nil {
		t.Fatal(err)
	}
	if err := db.layout.Rebalance(context.Background()); err != nil {
		t.Fatal(err)
	}
	ts, ok := db.Tiering()
	if !ok {
		t.Fatal("no tiering stats")
	}
	used := 0
	for i, p := range cfg.DBPaths {
		files, _ := sstFiles(t, p.Path)
		if files > 0 {
			used++
		}
		if ts.Paths[i].Files != files {
			t.Errorf("db_paths[%d]: Stats says %d files, the directory holds %d", i, ts.Paths[i].Files, files)
		}
	}
	if used < 2 {
		t.Errorf("tables in only %d of 3 paths: %s", used, ts)
	}
	if files, _ := sstFiles(t, cfg.WALDir); files != 0 {
		t.Error("tables in wal_dir")
	}
	for _, name := range []string{"MANIFEST-000001", "OPTIONS-rocksdb"} {
		if _, err := os.Stat(filepath.Join(cfg.DBPath, name)); err != nil && !strings.HasPrefix(name, "MANIFEST") {
			t.Errorf("%s not in db_path: %v", name, err)
		}
	}
	for i := range n {
		if v, err := db.Get(key(i)); err != nil || !bytes.Equal(v, doc(i, 1000)) {
			t.Fatalf("key %d: %v", i, err)
		}
	}
	s, _ := db.Stats()
	for _, want := range []string{"Tiered layout (db_paths): level-to-path map", "db_paths[0] " + cfg.DBPath, "db_paths[2] "} {
		if !strings.Contains(s, want) {
			t.Errorf("Stats lacks %q:\n%s", want, s)
		}
	}
	_ = db.Close()
	opts, _ := os.ReadFile(filepath.Join(cfg.DBPath, config.RocksDBOptionsFileName))
	if !strings.Contains(string(opts), "level-to-path map at open") {
		t.Error("OPTIONS file lacks the level-to-path map")
	}

	// Drop the warm path: its tables move to the others.
	changed := cfg.Clone()
	changed.DBPaths = []config.DBPath{cfg.DBPaths[0], cfg.DBPaths[2]}
	db = mustOpen(t, changed)
	defer db.Close()
	if err := db.layout.Rebalance(context.Background()); err != nil {
		t.Fatal(err)
	}
	if files, _ := sstFiles(t, cfg.DBPaths[1].Path); files != 0 {
		t.Errorf("%d tables left in the dropped path", files)
	}
	for i := range n {
		if v, err := db.Get(key(i)); err != nil || !bytes.Equal(v, doc(i, 1000)) {
			t.Fatalf("after dropping a path, key %d: %v", i, err)
		}
	}
}

// issueRunConfig is the configuration of a user's run that once left
// a path over its target after compact:
// three db_paths of 3 MB, 16 MB and 1 GB, 1 MB memtables, tables and base
// level, no compression, the WAL in its own directory.
func issueRunConfig(root string) *config.Config {
	cfg := config.Default()
	cfg.DBPath = filepath.Join(root, "fast")
	cfg.WALDir = filepath.Join(root, "wal")
	cfg.BlockCacheSizeMB = 8
	cfg.MemtableSizeMB = 1
	cfg.TargetFileSizeBaseMB = 1
	cfg.MaxBytesForLevelBaseMB = 1
	cfg.CompressionDefault, cfg.CompressionBottommost = "none", "none"
	cfg.DBPaths = []config.DBPath{
		{Path: cfg.DBPath, TargetSizeBytes: 3 << 20},
		{Path: filepath.Join(root, "warm"), TargetSizeBytes: 16 << 20},
		{Path: filepath.Join(root, "cold"), TargetSizeBytes: 1 << 30},
	}
	return cfg
}

// checkPathsWithinTarget checks, on disk, that every path but the last
// holds at most its target: RocksDB's "close to, but not larger than".
func checkPathsWithinTarget(t *testing.T, cfg *config.Config) {
	t.Helper()
	for i, p := range cfg.DBPaths[:len(cfg.DBPaths)-1] {
		if _, size := sstFiles(t, p.Path); size > int64(p.TargetSizeBytes) {
			t.Errorf("db_paths[%d] %s holds %d bytes of tables, over its target of %d",
				i, p.Path, size, p.TargetSizeBytes)
		}
	}
}

func checkAllKeys(t *testing.T, db *DB, n int) {
	t.Helper()
	for i := range n {
		if v, err := db.Get(key(i)); err != nil || !bytes.Equal(v, doc(i, 1000)) {
			t.Fatalf("key %d: %v", i, err)
		}
	}
}

// TestCompactAllSettlesTheLayout reproduces that run: ~19 MB of JSON
// over three small db_paths, CompactAll, then a fresh open: every path but
// the last is within its target on disk, every
// key reads back; then a reopen with other targets and CompactAll: the new
// targets hold too.
func TestCompactAllSettlesTheLayout(t *testing.T) {
	root := t.TempDir()
	cfg := issueRunConfig(root)
	const n = 19000 // ~19 MB
	db := mustOpen(t, cfg)
	for i := 0; i < n; i += 100 {
		b := db.NewBatch()
		for j := i; j < i+100; j++ {
			if err := b.Put(key(j), doc(j, 1000)); err != nil {
				t.Fatal(err)
			}
		}
		if err := b.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.CompactAll(); err != nil {
		t.Fatal(err)
	}
	ts, _ := db.Tiering()
	t.Logf("after CompactAll:\n%s", ts)
	checkPathsWithinTarget(t, cfg)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	db = mustOpen(t, cfg)
	checkPathsWithinTarget(t, cfg)
	checkAllKeys(t, db, n)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	// Other targets: the fast path grows, the warm one shrinks.
	changed := cfg.Clone()
	changed.DBPaths[0].TargetSizeBytes = 6 << 20
	changed.DBPaths[1].TargetSizeBytes = 4 << 20
	db = mustOpen(t, changed)
	if err := db.CompactAll(); err != nil {
		t.Fatal(err)
	}
	ts, _ = db.Tiering()
	t.Logf("after reopening with 6 MB, 4 MB, 1 GB and CompactAll:\n%s", ts)
	checkPathsWithinTarget(t, changed)
	if _, size := sstFiles(t, changed.DBPaths[1].Path); size == 0 {
		t.Errorf("the warm path is empty: %s", ts)
	}
	checkAllKeys(t, db, n)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestTieringMoveRateValidated checks a bad tiering_move_rate_mb is
// refused with the key, the value and the allowed range.
func TestTieringMoveRateValidated(t *testing.T) {
	cfg := issueRunConfig(t.TempDir())
	cfg.TieringMoveRateMB = -1
	_, err := Open(cfg)
	if err == nil || !strings.Contains(err.Error(), "tiering_move_rate_mb") || !strings.Contains(err.Error(), "-1") || !strings.Contains(err.Error(), "0 to 1048576") {
		t.Fatalf("Open with tiering_move_rate_mb = -1: %v", err)
	}
}

// TestRewrittenTablesLandInTheirPath checks the codec rewrite writes its
// tables into the path of their level (rewriteTablePath), so the ingestion
// links them in place: with the layout settled before, CompactAll's
// rewrites into L6 need no move.
func TestRewrittenTablesLandInTheirPath(t *testing.T) {
	root := t.TempDir()
	cfg := issueRunConfig(root)
	cfg.CompressionDefault, cfg.CompressionBottommost = "snappy", "zstd"
	cfg.DBPaths = []config.DBPath{
		// Less than one L6 table: L6 stays off the first path also after
		// CompactAll, where empty levels take no room.
		{Path: cfg.DBPath, TargetSizeBytes: 512 << 10},
		{Path: filepath.Join(root, "cold"), TargetSizeBytes: 1 << 30},
	}
	db := mustOpen(t, cfg)
	defer db.Close()
	if got := db.rewriteTablePath(6, "x.sst"); filepath.Dir(got) != cfg.DBPaths[1].Path {
		t.Errorf("rewriteTablePath(6) = %s, want a name in %s", got, cfg.DBPaths[1].Path)
	}
	const n = 6000 // in key order: Pebble moves the snappy L0 tables to L6 unchanged
	for i := range n {
		if err := db.Put(key(i), doc(i, 1000)); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := db.layout.Settle(ctx); err != nil {
		t.Fatal(err)
	}
	before, _ := db.Tiering()
	if err := db.CompactAll(); err != nil {
		t.Fatal(err)
	}
	after, _ := db.Tiering()
	m, err := db.Metrics()
	if err != nil {
		t.Fatal(err)
	}
	rw := m.Rewrites
	t.Logf("rewrites %+v; tiering after CompactAll:\n%s", rw, after)
	if rw.Tables == 0 {
		t.Fatalf("no table rewritten: the test needs tables with another level's codec")
	}
	if moved := after.MovedFiles - before.MovedFiles; moved != 0 {
		t.Errorf("CompactAll moved %d tables after rewriting %d: the rewritten tables did not land in their path", moved, rw.Tables)
	}
	checkPathsWithinTarget(t, cfg)
	checkAllKeys(t, db, n)
}
