package config

import "github.com/stratadb/strata/compression"

// NumLevels is the number of levels of the LSM (Pebble's), L0 to L6; the
// last is the bottommost.
const NumLevels = numLevels

// Resolved is a validated Config together with what is derived from it:
// the typed codec of every level, the settings without effect and the split
// of the one Pebble cache. Config.Resolve computes it once; the engine, its
// Stats, the OPTIONS file and the tools read it instead of parsing the codec
// names again.
type Resolved struct {
	// Config is the configuration resolved. It must not be changed.
	Config *Config
	// Codecs is the codec of each level, L0 first: compression_default on
	// L0-L5, compression_bottommost on L6, zstd_level in place of a plain
	// "zstd"'s level.
	Codecs [NumLevels]compression.Codec
	// Notes lists the settings accepted without (or with a changed) effect.
	Notes []Note
	// Cache is the split of Pebble's cache between blocks and memtables.
	Cache CacheSplit

	// codecErr holds the errors of compression_default and
	// compression_bottommost for a Config that was not validated (the
	// OPTIONS writer of an invalid Config); nil after Resolve.
	codecErr [2]error
}

// CacheSplit is how Strata sizes Pebble's one cache. Pebble reserves each
// memtable's full size in its block cache (db.go, newMemTable:
// Cache.Reserve), so a cache of exactly block_cache_size_mb next to
// memtables as large (the default: 256 MB each) would hold no blocks once
// the memtables have grown. RocksDB keeps write buffers apart from the block
// cache; so does Strata, by adding the most memtable memory Pebble can
// reserve: max_write_buffer_number memtables (at least 2, the stop-writes
// threshold) plus the one Pebble keeps for recycling. The reservation takes
// no memory; it only bounds what the cache may use, so blocks plus
// memtables stay within CapacityBytes.
type CacheSplit struct {
	// BlockShareBytes is block_cache_size_mb in bytes.
	BlockShareBytes int64
	// MemTableBudgetBytes is (max(2, max_write_buffer_number) + 1) x
	// memtable_size_mb in bytes.
	MemTableBudgetBytes int64
	// CapacityBytes is the size of Pebble's cache: the sum of both.
	CapacityBytes int64
}

// Resolve validates c and returns it resolved. The Resolved refers to a
// copy of c, so later changes to c do not reach it.
func (c *Config) Resolve() (*Resolved, error) {
	r := c.Clone().resolve()
	if err := r.Config.validate(r); err != nil {
		return nil, err
	}
	return r, nil
}

// resolve derives the values of c without validating it: an invalid codec
// name leaves its levels "none" and its error in codecErr.
func (c *Config) resolve() *Resolved {
	r := &Resolved{Config: c}
	levels, err0 := c.codec(c.CompressionDefault)
	bottom, err1 := c.codec(c.CompressionBottommost)
	r.codecErr = [2]error{err0, err1}
	for l := range r.Codecs {
		r.Codecs[l] = levels
	}
	r.Codecs[NumLevels-1] = bottom
	budget := int64(max(2, c.MaxWriteBufferNumber)+1) * (c.MemtableSizeMB << 20)
	r.Cache = CacheSplit{
		BlockShareBytes:     c.BlockCacheSizeMB << 20,
		MemTableBudgetBytes: budget,
		CapacityBytes:       c.BlockCacheSizeMB<<20 + budget,
	}
	r.Notes = c.notes(r)
	return r
}

// codec parses a codec name and applies zstd_level to a plain "zstd".
func (c *Config) codec(name string) (compression.Codec, error) {
	codec, err := compression.ParseCodec(name)
	if err != nil {
		return codec, err
	}
	return codec.WithDefaultLevel(c.ZstdLevel), nil
}

// Codecs returns the codecs of levels 0-5 and of the bottommost level,
// with zstd_level applied where a codec says plain "zstd". An invalid name
// yields an error naming the key. Code that holds a Resolved reads its
// Codecs instead.
func (c *Config) Codecs() (levels, bottommost compression.Codec, err error) {
	r := c.resolve()
	for i, key := range []string{"compression_default", "compression_bottommost"} {
		if e := r.codecErr[i]; e != nil {
			name := []string{c.CompressionDefault, c.CompressionBottommost}[i]
			return r.Codecs[0], r.Codecs[NumLevels-1], &FieldError{Key: key, Value: name, Rule: e.Error()}
		}
	}
	return r.Codecs[0], r.Codecs[NumLevels-1], nil
}

// LevelBlockSize returns the data block size of level (0..6):
// bottommost_block_size for 6 (block_size when it is 0), block_size for
// 0-5.
func (c *Config) LevelBlockSize(level int) int {
	if level == NumLevels-1 && c.BottommostBlockSize != 0 {
		return c.BottommostBlockSize
	}
	return c.BlockSize
}
