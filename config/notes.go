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
// no note, Validate reports it. A Resolved holds them already.
func (c *Config) Notes() []Note { return c.resolve().Notes }

// notes lists the rows whose noteIf holds for r, in field order.
func (c *Config) notes(r *Resolved) []Note {
	var notes []Note
	for _, f := range byField {
		if f.noteIf != nil && f.noteIf(r) {
			notes = append(notes, Note{Key: f.key, Value: f.value(c).Interface(), Reason: f.reason})
		}
	}
	return notes
}

// requestsLZ4 reports whether codec i (0: compression_default, 1:
// compression_bottommost) of r is a valid lz4.
func requestsLZ4(r *Resolved, i int) bool {
	return r.codecErr[i] == nil && r.Codecs[i*(NumLevels-1)].Algorithm == compression.LZ4
}
