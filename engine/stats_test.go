package engine

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stratadb/strata/config"
)

func TestStatsAndMetrics(t *testing.T) {
	cfg := testConfig(t)
	db := mustOpen(t, cfg)
	defer db.Close()
	for i := range 2000 {
		_ = db.Put(key(i), doc(i, 500))
	}
	_ = db.Flush()
	for i := range 2000 {
		_, _ = db.Get(key(i))
		_, _ = db.Get(append(key(i), 'x')) // absent: the bloom filter answers
	}
	s, err := db.Stats()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"L0", "L6", "lz4", "MinLZ", "stored as MinLZ", "Write amplification", "Block cache", "hit rate",
		"Bloom filter: 10 bits/key", "WAL: dir", "Stalls", "Compactions", "pin_l0_filter_and_index_blocks_in_cache"} {
		if !strings.Contains(s, want) {
			t.Errorf("Stats lacks %q:\n%s", want, s)
		}
	}
	m, _ := db.Metrics()
	if m.Levels[0].Tables != 1 || m.Levels[0].TableCodecs["MinLZ"] != 1 {
		t.Errorf("L0: %+v", m.Levels[0])
	}
	if m.Filter.Hits == 0 {
		t.Errorf("bloom filter never useful over 2000 absent keys: %+v", m.Filter)
	}
	if m.BlockCache.Hits+m.BlockCache.Misses == 0 {
		t.Error("block cache unused")
	}
	if m.WriteAmp <= 0 {
		t.Errorf("write amp %v", m.WriteAmp)
	}

	reg := prometheus.NewRegistry()
	if err := reg.Register(db.Collector()); err != nil {
		t.Fatal(err)
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, f := range families {
		names[f.GetName()] = true
	}
	for _, want := range []string{"strata_level_tables", "strata_block_cache_hits_total", "strata_wal_syncs_total", "strata_level_tables_by_codec", "strata_block_cache_capacity_bytes", "strata_block_cache_block_share_bytes", "strata_memtable_budget_bytes", "strata_memtable_reserved_bytes"} {
		if !names[want] {
			t.Errorf("collector lacks %s", want)
		}
	}
}

func TestOptionsFileWritten(t *testing.T) {
	cfg := testConfig(t)
	cfg.CompressionDefault, cfg.CompressionBottommost = "lz4", "zstd"
	db := mustOpen(t, cfg)
	_ = db.Put([]byte("k"), []byte("v"))
	_ = db.Close()

	path := filepath.Join(cfg.DBPath, config.RocksDBOptionsFileName)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var compressionLines []string
	for _, line := range strings.Split(string(data), "\n") {
		if strings.Contains(line, "compression") {
			compressionLines = append(compressionLines, line)
		}
	}
	joined := strings.Join(compressionLines, "\n")
	for _, want := range []string{"compression_per_level=kLZ4Compression:kLZ4Compression:kLZ4Compression:kLZ4Compression:kLZ4Compression:kLZ4Compression:kZSTD", "bottommost_compression=kZSTD", "minlz"} {
		if !strings.Contains(strings.ToLower(joined), strings.ToLower(want)) {
			t.Errorf("grep compression lacks %q:\n%s", want, joined)
		}
	}
	f, _ := os.Open(path)
	defer f.Close()
	back, _, err := config.ImportRocksDBOptions(f)
	if err != nil {
		t.Fatal(err)
	}
	if back.CompressionDefault != "lz4" || back.CompressionBottommost != "zstd" || back.DBPath != cfg.DBPath {
		t.Errorf("imported %+v", back)
	}

	// Pebble's own OPTIONS file is untouched and the database reopens.
	matches, _ := filepath.Glob(filepath.Join(cfg.DBPath, "OPTIONS-0*"))
	if len(matches) != 1 {
		t.Errorf("Pebble OPTIONS files: %v", matches)
	}
	db = mustOpen(t, cfg)
	_ = db.Close()
	matches, _ = filepath.Glob(filepath.Join(cfg.DBPath, "OPTIONS-*"))
	if len(matches) != 2 {
		t.Errorf("OPTIONS files after reopen: %v", matches)
	}
}
