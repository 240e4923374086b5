package config

import (
	"reflect"
	"strings"
	"testing"
)

func noteKeys(notes []Note) []string {
	var keys []string
	for _, n := range notes {
		keys = append(keys, n.Key)
	}
	return keys
}

func TestNotesDefault(t *testing.T) {
	got := Default().Notes()
	want := []Note{
		{"compression_default", "lz4", "lz4 is stored as MinLZ: Pebble's block format has no LZ4"},
		{"pin_l0_filter_and_index_blocks_in_cache", true, "Pebble has no pinning of blocks in the cache"},
		{"partition_filters", true, "Pebble keeps one filter per table; it switches to a two-level index by itself when an index grows"},
		{"high_pri_pool_ratio", 0.5, "Pebble's CLOCK-Pro block cache has no priority pools"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Default().Notes() =\n%v\nwant\n%v", got, want)
	}
}

func TestNotesEveryRule(t *testing.T) {
	c := Default()
	c.CompressionBottommost = " LZ4"
	c.CacheIndexAndFilterBlocks = false
	c.MaxWriteBufferNumber = 1
	c.MinWriteBufferNumberToMerge = 2
	c.DynamicLevelBytes = false
	got := noteKeys(c.Notes())
	want := []string{ // field order
		"compression_default",
		"compression_bottommost",
		"cache_index_and_filter_blocks",
		"pin_l0_filter_and_index_blocks_in_cache",
		"partition_filters",
		"high_pri_pool_ratio",
		"max_write_buffer_number",
		"min_write_buffer_number_to_merge",
		"dynamic_level_bytes",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Notes() keys = %q\nwant %q", got, want)
	}
}

func TestNotesNone(t *testing.T) {
	c := Default()
	c.CompressionDefault = "snappy"
	c.PinL0FilterAndIndexBlocksInCache = false
	c.PartitionFilters = false
	c.HighPriPoolRatio = 0
	if got := c.Notes(); got != nil {
		t.Errorf("Notes() = %v, want nil", got)
	}
	c.CompressionDefault = "not a codec" // Validate's business, not a note
	if got := c.Notes(); got != nil {
		t.Errorf("Notes() with an invalid codec = %v, want nil", got)
	}
}

func TestNoteString(t *testing.T) {
	tests := []struct {
		note Note
		want string
	}{
		{Note{"compression_default", "lz4", reasonLZ4}, `compression_default = "lz4": lz4 is stored as MinLZ: Pebble's block format has no LZ4`},
		{Note{"high_pri_pool_ratio", 0.5, reasonHighPri}, `high_pri_pool_ratio = 0.5: Pebble's CLOCK-Pro block cache has no priority pools`},
		{Note{"max_write_buffer_number", 1, reasonMaxWBN}, `max_write_buffer_number = 1: raised to 2, as RocksDB does: one memtable must be able to flush while the next fills`},
	}
	for _, tt := range tests {
		if got := tt.note.String(); got != tt.want {
			t.Errorf("String() = %q, want %q", got, tt.want)
		}
	}
}

// TestNotesCompressionLevels: beside compression_levels, a codec of
// compression_default or compression_bottommost other than the default has
// no effect and says so; lz4 among the levels is noted as stored as MinLZ.
func TestNotesCompressionLevels(t *testing.T) {
	c := Default()
	c.CompressionLevels = []string{"none", "none", "zstd", "zstd", "zstd", "zstd", "zstd:9"}
	codecNotes := func() []string {
		var got []string
		for _, n := range c.Notes() {
			if strings.HasPrefix(n.Key, "compression_") {
				got = append(got, n.String())
			}
		}
		return got
	}
	if got := codecNotes(); got != nil {
		t.Errorf("Notes() with the default codecs beside compression_levels = %q, want none on codecs", got)
	}
	c.CompressionBottommost = "snappy"
	c.CompressionLevels[1] = "lz4"
	want := []string{
		`compression_bottommost = "snappy": no effect: compression_levels gives every level's codec`,
		`compression_levels = ["none", "lz4", "zstd", "zstd", "zstd", "zstd", "zstd:9"]: lz4 is stored as MinLZ: Pebble's block format has no LZ4`,
	}
	if got := codecNotes(); !reflect.DeepEqual(got, want) {
		t.Errorf("Notes() =\n%q\nwant\n%q", got, want)
	}
}
