package tune

import (
	"context"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/stratadb/strata/config"
	"github.com/stratadb/strata/internal/pebbleconf"
)

// TestCompressionTableLevelProperties runs every profile of the compression
// table and reads the tables back with stock Pebble's table properties:
// after the full compaction every table carries its level's codec, data
// blocks of its level's size (bottommost_block_size, 32 KB, on L6), its
// level's filter and index partitions of its level's index block size.
// With the same codec on every level (zstd / zstd) Pebble moves the flushed
// tables to L6 unchanged, 4 KB blocks and all, and a compaction that
// compares codecs only left them so: zstd / zstd then stored less than
// lz4 / zstd, whose tables the codec rewrite gave 32 KB blocks. So the test
// also checks, on the workload generator's JSON documents (mixed fields and
// natural-language text, internal/workload), that zstd / zstd stores at
// least what lz4 / zstd does.
func TestCompressionTableLevelProperties(t *testing.T) {
	data, err := GenerateDataset(2500, 2048, 1)
	if err != nil {
		t.Fatal(err)
	}
	res, err := RunCompression(context.Background(), CompressionOptions{MinTime: testMinTime, Data: data, Dir: t.TempDir(), Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	size := map[string]float64{}
	for _, row := range res.Rows {
		size[row.Profile.String()] = row.DBSizeBytes
		cfg := row.Profile.runConfig(config.Default(), row.Runs[0].Dir)
		checkLevelProperties(t, row.Name, cfg)
	}
	t.Logf("table bytes after the full compaction: %v", size)
	// A table records its codec's name: the bottommost level's "ZSTD, 8 KB
	// blocks" (see config.Resolved.Profile) takes a few bytes more than
	// "ZSTD", nothing like the 12% more that 4 KB blocks moved down store.
	if size["zstd/zstd"] > size["lz4/zstd"]*1.0001 {
		t.Errorf("zstd / zstd stores %.0f bytes, lz4 / zstd %.0f: want zstd / zstd no larger", size["zstd/zstd"], size["lz4/zstd"])
	}
}

// checkLevelProperties opens cfg's database with stock Pebble and checks
// every table's properties against its level's options.
func checkLevelProperties(t *testing.T, name string, cfg *config.Config) {
	t.Helper()
	r, err := cfg.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	opts := pebbleconf.Options(r)
	opts.ReadOnly = true
	db, err := pebble.Open(cfg.DBPath, opts)
	opts.Cache.Unref()
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	levels, err := db.SSTables(pebble.WithProperties())
	if err != nil {
		t.Fatal(err)
	}
	l6 := 0
	for level, tables := range levels {
		codec := r.Profile(level).Name
		block := cfg.LevelBlockSize(level)
		for _, tab := range tables {
			p := tab.Properties
			if level == 6 {
				l6++
			}
			if p.CompressionName != codec {
				t.Errorf("%s: L%d table %d carries %s, want %s", name, level, tab.FileNum, p.CompressionName, codec)
			}
			// Every data block but the last holds at least half the
			// target (Pebble cuts a block at 60% or more of it), so the
			// raw bytes of the others average at least that much.
			if raw := p.RawKeySize + p.RawValueSize; p.NumDataBlocks > 1 {
				if avg := raw / (p.NumDataBlocks - 1); avg < uint64(block)/2 || raw/p.NumDataBlocks > 2*uint64(block) {
					t.Errorf("%s: L%d table %d: %d data blocks for %d raw bytes (~%d per block), want blocks of %d bytes",
						name, level, tab.FileNum, p.NumDataBlocks, raw, raw/p.NumDataBlocks, block)
				}
			}
			if p.IndexPartitions > 1 {
				if avg := (p.IndexSize - p.TopLevelIndexSize) / (p.IndexPartitions - 1); avg < uint64(block)/2 {
					t.Errorf("%s: L%d table %d: %d index partitions of ~%d bytes, want the index block size %d",
						name, level, tab.FileNum, p.IndexPartitions, avg, block)
				}
			}
			if want := bloom.FilterPolicy(cfg.BloomBitsPerKey).Name(); p.FilterPolicyName != want {
				t.Errorf("%s: L%d table %d filter %q, want %q", name, level, tab.FileNum, p.FilterPolicyName, want)
			}
		}
	}
	if l6 == 0 {
		t.Errorf("%s: no table in L6 after the full compaction: %v", name, levels)
	}
}
