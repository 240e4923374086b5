package config

import "github.com/stratadb/strata/compression"

// Note reports one setting that Strata accepts but that has no effect, or a
// changed effect, on Pebble: the value is valid and is kept, and Reason says
// what Pebble does instead.
type Note struct {
	// Key is the file key ("partition_filters").
	Key string
	// Value is the configured value.
	Value any
	// Reason says why the value has no or a changed effect.
	Reason string
}

// String returns "key = value: reason".
func (n Note) String() string {
	return n.Key + " = " + formatValue(n.Value) + ": " + n.Reason
}

// The reasons of the notes, shared with the OPTIONS writer.
const (
	reasonLZ4        = "lz4 is stored as MinLZ: Pebble's block format has no LZ4"
	reasonCacheIndex = "Pebble always caches index and filter blocks through the block cache"
	reasonPin        = "Pebble has no pinning of blocks in the cache"
	reasonPartition  = "Pebble keeps one filter per table; it switches to a two-level index by itself when an index grows"
	reasonHighPri    = "Pebble's CLOCK-Pro block cache has no priority pools"
	reasonMaxWBN     = "raised to 2, as RocksDB does: one memtable must be able to flush while the next fills"
	reasonMinMerge   = "Pebble flushes all ready memtables together"
	reasonDynamic    = "Pebble's level sizing is always dynamic"
)

// Notes lists, in field order, the settings of c that are accepted but have
// no or a changed effect on Pebble (see docs of each field). A Config with
// none returns nil. Notes does not validate c: an invalid codec name yields
// no note, Validate reports it.
func (c *Config) Notes() []Note {
	var notes []Note
	add := func(key string, value any, reason string) {
		notes = append(notes, Note{Key: key, Value: value, Reason: reason})
	}
	if isLZ4(c.CompressionDefault) {
		add("compression_default", c.CompressionDefault, reasonLZ4)
	}
	if isLZ4(c.CompressionBottommost) {
		add("compression_bottommost", c.CompressionBottommost, reasonLZ4)
	}
	if !c.CacheIndexAndFilterBlocks {
		add("cache_index_and_filter_blocks", false, reasonCacheIndex)
	}
	if c.PinL0FilterAndIndexBlocksInCache {
		add("pin_l0_filter_and_index_blocks_in_cache", true, reasonPin)
	}
	if c.PartitionFilters {
		add("partition_filters", true, reasonPartition)
	}
	if c.HighPriPoolRatio != 0 {
		add("high_pri_pool_ratio", c.HighPriPoolRatio, reasonHighPri)
	}
	if c.MaxWriteBufferNumber == 1 {
		add("max_write_buffer_number", 1, reasonMaxWBN)
	}
	if c.MinWriteBufferNumberToMerge > 1 {
		add("min_write_buffer_number_to_merge", c.MinWriteBufferNumberToMerge, reasonMinMerge)
	}
	if !c.DynamicLevelBytes {
		add("dynamic_level_bytes", false, reasonDynamic)
	}
	return notes
}

func isLZ4(name string) bool {
	codec, err := compression.ParseCodec(name)
	return err == nil && codec.Algorithm == compression.LZ4
}
