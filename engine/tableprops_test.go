package engine

import (
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/sstable"
)

// TestLevelMismatch judges tables described by their stock properties
// against a level's options: what holds, and what each difference reads as.
func TestLevelMismatch(t *testing.T) {
	level := func(block int, bits int) *pebble.LevelOptions {
		lo := &pebble.LevelOptions{BlockSize: block, IndexBlockSize: block}
		if bits > 0 {
			lo.FilterPolicy = bloom.FilterPolicy(bits)
		}
		return lo
	}
	// table is 10,000 entries of ~1 KB in blocks of the given size, with a
	// single-level index and a bloom filter of bits per key (none for 0).
	table := func(codec string, block, bits int) *sstable.Properties {
		p := &sstable.Properties{}
		p.CompressionName = codec
		p.NumEntries = 10000
		p.RawKeySize, p.RawValueSize = 10000*16, 10000*1000
		p.NumDataBlocks = (p.RawKeySize + p.RawValueSize + uint64(block) - 1) / uint64(block)
		p.IndexSize = uint64(block) / 2
		if bits > 0 {
			p.FilterPolicyName = bloom.FilterPolicy(bits).Name()
			lines := (10000*bits + 511) / 512
			if lines%2 == 0 {
				lines++
			}
			p.FilterSize = uint64(lines*64 + 5)
		}
		return p
	}
	for _, tc := range []struct {
		name  string
		props *sstable.Properties
		level *pebble.LevelOptions
		want  string // "" when the table holds
	}{
		{"same options", table("ZSTD", 32768, 10), level(32768, 10), ""},
		{"4 KB blocks in a 32 KB level", table("ZSTD", 4096, 10), level(32768, 10), "data blocks of ~4.0 KB, the level's are 32 KB"},
		{"32 KB blocks in a 4 KB level", table("ZSTD", 32768, 10), level(4096, 10), "data blocks of ~31.9 KB, the level's are 4 KB"},
		{"another codec", table("MinLZ", 32768, 10), level(32768, 10), "codec MinLZ, the level's is ZSTD"},
		{"20 bits in a 10-bit level", table("ZSTD", 4096, 20), level(4096, 10), "a filter of 20.0 bits per key, the level's has 10"},
		{"5 bits in a 10-bit level", table("ZSTD", 4096, 5), level(4096, 10), "a filter of 5.1 bits per key, the level's has 10"},
		{"a filter where the level has none", table("ZSTD", 4096, 10), level(4096, 0), `filter "rocksdb.BuiltinBloomFilter", the level's is ""`},
	} {
		got := levelMismatch(tc.props, tc.level, "ZSTD", "ZSTD")
		if got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
	// Under key_compression a level's tables carry the split profile, and
	// those the engine writes with their values inline the level's codec:
	// both hold, another does not.
	split := level(32768, 10)
	for codec, want := range map[string]string{"ZSTD values, MinLZ keys": "", "ZSTD": "", "MinLZ": "codec MinLZ, the level's is ZSTD values, MinLZ keys"} {
		if got := levelMismatch(table(codec, 32768, 10), split, "ZSTD values, MinLZ keys", "ZSTD"); got != want {
			t.Errorf("a %s table in a level of split codecs: %q, want %q", codec, got, want)
		}
	}
	// A table whose values are in blob files holds only their references in
	// its blocks, though RawValueSize counts the values whole: 300 pods of
	// 14 KB behind 20 KB of keys in 4 blocks of a 32 KB level hold.
	separated := table("ZSTD", 32768, 0)
	separated.RawKeySize, separated.RawValueSize, separated.NumDataBlocks, separated.NumValuesInBlobFiles = 20_000, 300*14_000, 4, 300
	if got := levelMismatch(separated, level(32768, 0), "ZSTD", "ZSTD"); got != "" {
		t.Errorf("a table of 300 values in blob files in 4 blocks of a 32 KB level: %q, want it to hold", got)
	}
	// Its keys alone still tell blocks far over the target.
	separated.RawKeySize, separated.NumDataBlocks = 4*300_000, 4
	if got := levelMismatch(separated, level(32768, 0), "ZSTD", "ZSTD"); !strings.HasPrefix(got, "data blocks of ~293") {
		t.Errorf("4 blocks of 300 KB of keys in a 32 KB level: %q, want a data block mismatch", got)
	}
	// A one-block table fits every target it does not exceed.
	small := table("ZSTD", 4096, 10)
	small.RawKeySize, small.RawValueSize, small.NumDataBlocks = 100, 3000, 1
	if got := levelMismatch(small, level(32768, 10), "ZSTD", "ZSTD"); got != "" {
		t.Errorf("a 3 KB one-block table in a 32 KB level: %q, want it to hold", got)
	}
	// Index partitions of 4 KB where the level's index blocks are 32 KB.
	parts := table("ZSTD", 32768, 10)
	parts.IndexPartitions, parts.IndexSize, parts.TopLevelIndexSize = 8, 8*4096+200, 200
	if got := levelMismatch(parts, level(32768, 10), "ZSTD", "ZSTD"); !strings.HasPrefix(got, "index blocks of ~") {
		t.Errorf("4 KB index partitions in a 32 KB level: %q, want an index block mismatch", got)
	}
}
