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
