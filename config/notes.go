package config

import (
	"slices"

	"github.com/stratadb/strata/compression"
)

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
	reasonLevels     = "no effect: compression_levels gives every level's codec"
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
		reason := ""
		switch {
		case f.noteWhy != nil:
			reason = f.noteWhy(r)
		case f.noteIf != nil && f.noteIf(r):
			reason = f.reason
		}
		if reason != "" {
			notes = append(notes, Note{Key: f.key, Value: f.value(c).Interface(), Reason: reason})
		}
	}
	return notes
}

// namedCodecNote is the note of codec i (0: compression_default, 1:
// compression_bottommost) of r: lz4 stored as MinLZ, or, beside
// compression_levels, no effect at all (said of a value other than the
// default only: Default() sets both).
func namedCodecNote(r *Resolved, i int) string {
	f := fieldByKey([]string{"compression_default", "compression_bottommost"}[i])
	switch {
	case r.perLevel() && f.value(r.Config).String() != f.def:
		return reasonLevels
	case !r.perLevel() && r.codecErr[i] == nil && r.named[i].Algorithm == compression.LZ4:
		return reasonLZ4
	}
	return ""
}

// levelsRequestLZ4 reports whether compression_levels is valid and names
// lz4 for some level.
func levelsRequestLZ4(r *Resolved) bool {
	return r.perLevel() && r.codecsOK() && slices.ContainsFunc(r.Codecs[:], func(c compression.Codec) bool {
		return c.Algorithm == compression.LZ4
	})
}
