//go:build rocksdb

package tune

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stratadb/strata/config"
)

// TestCompressionRocksDB runs the profiles on real RocksDB beside Strata:
// every value read back from RocksDB is checked by the measuring code, the
// databases are RocksDB's (its own OPTIONS file records the codecs Strata's
// file asked for), and the table has RocksDB's rows and the ratios.
func TestCompressionRocksDB(t *testing.T) {
	profiles, _ := ParseProfiles("none/none,snappy/zstd")
	dir := t.TempDir()
	res, err := RunCompression(context.Background(), CompressionOptions{MinTime: testMinTime, Data: smallData(t), Profiles: profiles, RocksDB: true, Repeat: 2, Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	for _, row := range res.Rows {
		if len(row.RocksDBRuns) != 2 || row.RocksDB == nil {
			t.Fatalf("%s: %d RocksDB runs, want 2", row.Name, len(row.RocksDBRuns))
		}
		if !(row.WriteCPUVsRocksDB > 0 && row.ReadCPUVsRocksDB > 0 && row.IngestCPUVsRocksDB > 0 && row.WriteVsRocksDB > 0 && row.ReadVsRocksDB > 0) {
			t.Errorf("%s: vs RocksDB %+v, want > 0", row.Name, row)
		}
		if !(row.RocksDB.Ratio > 0 && row.RocksDB.ReadMBps > 0) {
			t.Errorf("%s: RocksDB row %+v", row.Name, row.RocksDB)
		}
	}
	// RocksDB rewrote its OPTIONS file from what it loaded: snappy above zstd.
	opts, _ := filepath.Glob(filepath.Join(res.Dir, "02-*", "run1-rocksdb", "OPTIONS-*"))
	if len(opts) == 0 {
		t.Fatalf("no RocksDB OPTIONS file under %s", res.Dir)
	}
	text, err := os.ReadFile(opts[len(opts)-1])
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"compression=kSnappyCompression", "bottommost_compression=kZSTD", "write_buffer_size=268435456"} {
		if !strings.Contains(string(text), want) {
			t.Errorf("RocksDB's %s lacks %q", opts[len(opts)-1], want)
		}
	}
	rows := jsonRows(t, res.Table())
	if len(rows) != 4 || rows[1]["compression"] != "RocksDB: none / none" {
		t.Fatalf("rows %v", rows)
	}
	for _, key := range []string{"write_cpu_vs_rocksdb", "read_cpu_vs_rocksdb", "ingest_cpu_vs_rocksdb", "ingest_mb_per_cpu_s", "write_vs_rocksdb", "read_vs_rocksdb"} {
		if _, ok := rows[0][key]; !ok {
			t.Errorf("JSON row lacks %q", key)
		}
	}
}

// TestRocksDBCompressionLevels opens real RocksDB with the OPTIONS file
// Strata writes for a config with compression_levels: RocksDB loads the
// per-level codecs (its own OPTIONS file records them), and importing
// RocksDB's file gives the same compression_levels back.
func TestRocksDBCompressionLevels(t *testing.T) {
	cfg := config.Default()
	cfg.DBPath = filepath.Join(t.TempDir(), "rocksdb")
	cfg.MemtableSizeMB, cfg.BlockCacheSizeMB = 8, 8
	cfg.CompressionLevels = []string{"none", "none", "lz4", "lz4", "lz4", "zstd", "zstd"}
	s, err := openRocksDB(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.close(); err != nil {
		t.Fatal(err)
	}
	opts, _ := filepath.Glob(filepath.Join(cfg.DBPath, "OPTIONS-*"))
	if len(opts) == 0 {
		t.Fatalf("no RocksDB OPTIONS file in %s", cfg.DBPath)
	}
	text, err := os.ReadFile(opts[len(opts)-1])
	if err != nil {
		t.Fatal(err)
	}
	want := "compression_per_level=kNoCompression:kNoCompression:kLZ4Compression:kLZ4Compression:kLZ4Compression:kZSTD:kZSTD"
	if !strings.Contains(string(text), want) {
		t.Errorf("RocksDB's %s lacks %q", opts[len(opts)-1], want)
	}
	back, _, err := config.ImportRocksDBOptions(strings.NewReader(string(text)))
	if err != nil {
		t.Fatalf("importing RocksDB's own OPTIONS file: %v", err)
	}
	if !slices.Equal(back.CompressionLevels, cfg.CompressionLevels) {
		t.Errorf("imported compression_levels = %q, want %q", back.CompressionLevels, cfg.CompressionLevels)
	}
}
