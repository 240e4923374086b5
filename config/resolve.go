package config

import (
	"fmt"
	"strings"

	"github.com/cockroachdb/pebble/v2/sstable"
	"github.com/stratadb/strata/compression"
)

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
	// Codecs is the codec of each level, L0 first: compression_levels when
	// set, else compression_default on L0-L5 and compression_bottommost on
	// L6; zstd_level in place of a plain "zstd"'s level.
	Codecs [NumLevels]compression.Codec
	// KeyCodec is key_compression's codec (with zstd_level applied), and
	// HasKeyCodec whether it is set: then every level's tables keep their
	// keys in KeyCodec and Codecs compress the blob files' values.
	KeyCodec    compression.Codec
	HasKeyCodec bool
	// Notes lists the settings accepted without (or with a changed) effect.
	Notes []Note
	// Cache is the split of Pebble's cache between blocks and memtables.
	Cache CacheSplit

	// named holds the codecs of compression_default and
	// compression_bottommost, and codecErr their errors, levelErrs those of
	// compression_levels' entries, for a Config that was not validated (the
	// OPTIONS writer of an invalid Config); all nil after Resolve.
	named     [2]compression.Codec
	codecErr  [2]error
	levelErrs []error
}

// perLevel reports whether compression_levels gives the codecs.
func (r *Resolved) perLevel() bool { return len(r.Config.CompressionLevels) > 0 }

// codecsOK reports whether every codec setting in effect parsed.
func (r *Resolved) codecsOK() bool {
	if r.perLevel() {
		if len(r.levelErrs) != NumLevels {
			return false
		}
		for _, err := range r.levelErrs {
			if err != nil {
				return false
			}
		}
		return true
	}
	return r.codecErr[0] == nil && r.codecErr[1] == nil
}

// DescribeCodecs returns the codec of every level, runs of one codec
// merged, and key_compression's if set: "L0-L5 lz4 (stored as minlz), L6
// zstd; keys lz4 (stored as minlz)".
func (r *Resolved) DescribeCodecs() string {
	var parts []string
	for start := 0; start < NumLevels; {
		end := start
		for end+1 < NumLevels && r.Codecs[end+1] == r.Codecs[start] {
			end++
		}
		levels := fmt.Sprintf("L%d", start)
		if end > start {
			levels += fmt.Sprintf("-L%d", end)
		}
		parts = append(parts, levels+" "+r.Codecs[start].Describe())
		start = end + 1
	}
	if r.HasKeyCodec {
		return strings.Join(parts, ", ") + "; keys " + r.KeyCodec.Describe()
	}
	return strings.Join(parts, ", ")
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
	r.named, r.codecErr = [2]compression.Codec{levels, bottom}, [2]error{err0, err1}
	for l := range r.Codecs {
		r.Codecs[l] = levels
	}
	r.Codecs[NumLevels-1] = bottom
	if r.perLevel() {
		r.levelErrs = make([]error, len(c.CompressionLevels))
		var codecs [NumLevels]compression.Codec
		for l, name := range c.CompressionLevels {
			codec, err := c.codec(name)
			r.levelErrs[l] = err
			if l < NumLevels {
				codecs[l] = codec
			}
		}
		if r.codecsOK() {
			r.Codecs = codecs
		}
	}
	if c.KeyCompression != "" {
		if codec, err := c.codec(c.KeyCompression); err == nil {
			r.KeyCodec, r.HasKeyCodec = codec, true
		}
	}
	budget := int64(max(2, c.MaxWriteBufferNumber)+1) * (c.MemtableSizeMB << 20)
	r.Cache = CacheSplit{
		BlockShareBytes:     c.BlockCacheSizeMB << 20,
		MemTableBudgetBytes: budget,
		CapacityBytes:       c.BlockCacheSizeMB<<20 + budget,
	}
	r.Notes = c.notes(r)
	return r
}

// Profile returns the Pebble compression profile of level: the level's
// codec, or with key_compression set the level's codec for values and
// KeyCodec for the tables' keys (compression.Codec.PebbleProfileSplit).
// The engine opens Pebble with it, and its full compaction rewrites a
// table whose stored profile name is not this one's.
func (r *Resolved) Profile(level int) *sstable.CompressionProfile {
	if r.HasKeyCodec {
		return r.bottommostNamed(level, func(l int) *sstable.CompressionProfile {
			return r.Codecs[l].PebbleProfileSplit(r.KeyCodec)
		})
	}
	return r.InlineProfile(level)
}

// InlineProfile returns the profile of a table that holds its values in
// its own data blocks although the level's values go to blob files: the
// tables the engine writes itself, to restore a snapshot or rewrite a
// level's codec, which Pebble's table writer fills without blob files.
// Their data blocks are values, so they take the level's codec on every
// block, not key_compression.
func (r *Resolved) InlineProfile(level int) *sstable.CompressionProfile {
	return r.bottommostNamed(level, func(l int) *sstable.CompressionProfile { return r.Codecs[l].PebbleProfile() })
}

// bottommostNamed returns profile(level), with a name of its own for the
// bottommost level's, "ZSTD, 8 KB blocks", when a level above stores the
// same profile name with another block size. A table keeps the name it was
// written with (stock Pebble's table properties show it), and Pebble moves
// a table down a level without rewriting it: with one codec on every
// level, a table flushed with block_size blocks and moved to the bottom
// could not be told by its codec's name from one written there, nor
// reliably by its average block size when the two sizes are a factor of
// two apart. With the name, a full compaction finds it and rewrites it.
func (r *Resolved) bottommostNamed(level int, profile func(level int) *sstable.CompressionProfile) *sstable.CompressionProfile {
	p := profile(level)
	bottom := NumLevels - 1
	if level != bottom || r.Config.LevelBlockSize(bottom) == r.Config.BlockSize {
		return p
	}
	for l := range bottom {
		if profile(l).Name == p.Name {
			named := *p
			named.Name = fmt.Sprintf("%s, %s blocks", p.Name, blockSizeName(r.Config.LevelBlockSize(bottom)))
			return &named
		}
	}
	return p
}

// blockSizeName renders a block size: "8 KB", or "1536 B" when it is not a
// whole number of KiB.
func blockSizeName(size int) string {
	if size%1024 == 0 {
		return fmt.Sprintf("%d KB", size>>10)
	}
	return fmt.Sprintf("%d B", size)
}

// codec parses a codec name and applies zstd_level to a plain "zstd".
func (c *Config) codec(name string) (compression.Codec, error) {
	codec, err := compression.ParseCodec(name)
	if err != nil {
		return codec, err
	}
	return codec.WithDefaultLevel(c.ZstdLevel), nil
}

// Codecs returns the codecs of level 0 and of the bottommost level (with
// compression_levels unset: those of levels 0-5 and of L6), with
// zstd_level applied where a codec says plain "zstd". An invalid name
// yields an error naming the key. Code that holds a Resolved reads its
// Codecs instead.
func (c *Config) Codecs() (levels, bottommost compression.Codec, err error) {
	r := c.resolve()
	if !r.codecsOK() {
		var v validator
		v.codecs(c, r)
		return r.Codecs[0], r.Codecs[NumLevels-1], v.problems[0]
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
