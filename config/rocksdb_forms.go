package config

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/stratadb/strata/compression"
)

// The OPTIONS text of the rows of fields that are not a plain value: each
// form writes and reads its option in one place, so the writer and the
// importer cannot drift apart.

// dbPathsText is db_paths as path:size,path:size, with ':' and ',' escaped
// in the paths.
var dbPathsText = &textForm{
	format: func(r *Resolved) (string, bool) {
		parts := make([]string, len(r.Config.DBPaths))
		for i, p := range r.Config.DBPaths {
			parts[i] = escapeValue(p.Path, dbPathSpecial) + ":" + strconv.FormatUint(p.TargetSizeBytes, 10)
		}
		return strings.Join(parts, ","), true
	},
	parse: func(imp *importer, _ *field, _, raw string) error {
		paths, err := parseDBPaths(raw)
		if err != nil {
			return fmt.Errorf("strata: db_paths: %w", err)
		}
		imp.cfg.DBPaths = paths
		return nil
	},
}

// parseDBPaths reads path:size,path:size; ',' and ':' inside a path are
// escaped.
func parseDBPaths(raw string) ([]DBPath, error) {
	if strings.TrimSpace(raw) == "" {
		return nil, nil
	}
	var paths []DBPath
	for _, entry := range splitUnescaped(raw, ',') {
		colon := lastUnescaped(entry, ':')
		if colon < 0 {
			return nil, fmt.Errorf("entry %q: expected path:target_size_bytes", clip(unescapeTrim(entry)))
		}
		size, err := strconv.ParseUint(strings.TrimSpace(entry[colon+1:]), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("entry %q: target_size_bytes must be a non-negative integer", clip(unescapeTrim(entry)))
		}
		paths = append(paths, DBPath{Path: unescapeTrim(entry[:colon]), TargetSizeBytes: size})
	}
	return paths, nil
}

// fileVersionText accepts options files of format version 1.x.
var fileVersionText = &textForm{
	parse: func(_ *importer, f *field, value, _ string) error {
		if major, _, _ := strings.Cut(value, "."); major != "1" {
			return fmt.Errorf("%s=%s: only version 1.x is understood", f.rocksdb, clip(value))
		}
		return nil
	},
}

// namedBool is the text form of a boolean that RocksDB writes as one of two
// names. set, if not nil, takes the name read back over; another name is
// Unmapped with reason.
func namedBool(get func(*Config) bool, set func(*Config, bool), falseName, trueName, reason string) *textForm {
	return &textForm{
		format: func(r *Resolved) (string, bool) {
			if get(r.Config) {
				return trueName, true
			}
			return falseName, true
		},
		parse: func(imp *importer, f *field, value, _ string) error {
			switch {
			case value != falseName && value != trueName:
				imp.skip(f.rocksdb, value, reason)
			case set != nil:
				set(imp.cfg, value == trueName)
			}
			return nil
		},
	}
}

// compactionStyleText is use_universal_compaction as RocksDB's
// compaction_style.
var compactionStyleText = namedBool(
	func(c *Config) bool { return c.UseUniversalCompaction },
	func(c *Config, b bool) { c.UseUniversalCompaction = b },
	"kCompactionStyleLevel", "kCompactionStyleUniversal",
	"Strata has leveled (and, rejected at open, universal) compaction only")

// numLevelsText reads num_levels, which says how many entries of
// compression_per_level count.
var numLevelsText = &textForm{
	parse: func(imp *importer, f *field, value, _ string) error {
		n, err := strconv.Atoi(value)
		if err != nil || n < 1 {
			return fmt.Errorf("%s=%s: expected a positive integer", f.rocksdb, clip(value))
		}
		imp.numLevels = n
		if n != numLevels {
			imp.lossy(f.rocksdb, value, fmt.Sprintf("Pebble always has %d levels; compression_per_level is read for %d", numLevels, n),
				fmt.Sprintf("not applicable: Pebble always has %d levels", numLevels))
		}
		return nil
	},
}

// indexTypeText writes the index type partition_filters needs (RocksDB drops
// partition_filters without a two-level index). Pebble switches to a
// two-level index by itself, so either type is accepted on import and sets
// nothing.
var indexTypeText = namedBool(
	func(c *Config) bool { return c.PartitionFilters }, nil,
	"kBinarySearch", "kTwoLevelIndexSearch",
	"Pebble has binary-search indexes only (two-level when large)")

// filterPolicyText is bloom_bits_per_key as RocksDB's filter_policy:
// "bloomfilter:N:false", or "nullptr" for no filter. On import
// "bloomfilter:N:B" (B, RocksDB's old block-based builder flag, is ignored)
// and "bloomfilter:N" are read.
var filterPolicyText = &textForm{
	format: func(r *Resolved) (string, bool) {
		if r.Config.BloomBitsPerKey == 0 {
			return "nullptr", true
		}
		return fmt.Sprintf("bloomfilter:%d:false", r.Config.BloomBitsPerKey), true
	},
	parse: func(imp *importer, f *field, value, _ string) error {
		if value == "" || value == "nullptr" {
			imp.cfg.BloomBitsPerKey = 0
			return nil
		}
		parts := strings.Split(value, ":")
		if parts[0] == "bloomfilter" && (len(parts) == 2 || (len(parts) == 3 && (parts[2] == "false" || parts[2] == "true"))) {
			bits, err := strconv.ParseFloat(parts[1], 64)
			if err == nil && f.limits.allows(bits) && bits == math.Trunc(bits) {
				imp.cfg.BloomBitsPerKey = int(bits)
				return nil
			}
			imp.lossy(f.rocksdb, value, "bits per key must be a whole number from "+f.limits.String()+": "+f.key+" keeps its default",
				"bits per key must be a whole number from "+f.limits.String())
			return nil
		}
		imp.lossy(f.rocksdb, value, "only bloomfilter:<bits per key>[:false] is understood: "+f.key+" keeps its default",
			"expected bloomfilter:<bits per key>[:false] or nullptr (no filter)")
		return nil
	},
}

// The codec options. RocksDB spreads the two codecs of a Config over five
// options; the writer derives each from the resolved codecs, the importer
// collects them and combines them once the file is read (resolveCodecs).
// An invalid codec leaves the five out.

var compressionText = &textForm{
	format: func(r *Resolved) (string, bool) { return r.Codecs[0].RocksDBName(), r.codecsOK() },
	parse: func(imp *importer, f *field, value, _ string) error {
		if codec, ok := imp.rocksDBCodec(f.rocksdb, value); ok {
			imp.codecs.compression = &codec
		}
		return nil
	},
}

var bottommostCompressionText = &textForm{
	format: func(r *Resolved) (string, bool) { return r.Codecs[numLevels-1].RocksDBName(), r.codecsOK() },
	parse: func(imp *importer, f *field, value, _ string) error {
		if value == "kDisableCompressionOption" {
			return nil // the bottommost level keeps the codec of the other settings
		}
		if codec, ok := imp.rocksDBCodec(f.rocksdb, value); ok {
			imp.codecs.bottommost = &codec
		} else {
			imp.codecs.bottommostBad = true
		}
		return nil
	},
}

var perLevelText = &textForm{
	format: func(r *Resolved) (string, bool) {
		names := make([]string, numLevels)
		for i, c := range r.Codecs {
			names[i] = c.RocksDBName()
		}
		return strings.Join(names, ":"), r.codecsOK()
	},
	parse: func(imp *importer, f *field, value, _ string) error {
		var names []string
		if value != "" {
			names = strings.Split(value, ":")
		}
		imp.perLevel(f.rocksdb, names, value)
		return nil
	},
}

// perLevel takes compression_per_level over: the codec of each level, L0
// first; raw is the value as written. An OPTIONS file gives it as one
// colon-separated string, a config file as a list.
func (imp *importer) perLevel(key string, names []string, raw string) {
	imp.codecs.perLevel, imp.codecs.perLevelRaw = nil, raw
	for _, name := range names {
		codec, err := imp.parseCodec(name)
		if err != nil {
			imp.codecs.perLevel = nil
			imp.lossy(key, raw, fmt.Sprintf("level codec %s has no Pebble equivalent: compression is used", strings.TrimSpace(name)),
				fmt.Sprintf("level codec %q has no Pebble equivalent: allowed are %s", strings.TrimSpace(name), rocksDBCodecNames))
			return
		}
		imp.codecs.perLevel = append(imp.codecs.perLevel, codec)
	}
}

var compressionOptsText = &textForm{
	format: func(r *Resolved) (string, bool) { return compressionOpts(upperZstd(r), false), r.codecsOK() },
	parse: func(imp *importer, f *field, value, _ string) error {
		imp.codecs.opts = imp.compressionOpts(f.rocksdb, value)
		return nil
	},
}

var bottommostOptsText = &textForm{
	format: func(r *Resolved) (string, bool) { return compressionOpts(r.Codecs[numLevels-1], true), r.codecsOK() },
	parse: func(imp *importer, f *field, value, _ string) error {
		imp.codecs.bottomOpts = imp.compressionOpts(f.rocksdb, value)
		return nil
	},
}

// upperZstd returns the codec whose level compression_opts carries: the
// first zstd of levels 0-5 (RocksDB has one level for them), else L0's.
func upperZstd(r *Resolved) compression.Codec {
	for _, c := range r.Codecs[:numLevels-1] {
		if c.Algorithm == compression.Zstd {
			return c
		}
	}
	return r.Codecs[0]
}

// levelsText is compression_levels as a "# strata:" comment, the names as
// the config spelled them, comma-separated: it carries what RocksDB's
// compression_per_level cannot (several zstd levels among L0-L5, "lz4"
// against "minlz" spelled as kLZ4Compression). The importer takes it when
// it means the codecs the RocksDB keys give.
var levelsText = &textForm{
	format: func(r *Resolved) (string, bool) {
		names := make([]string, len(r.Config.CompressionLevels))
		for i, n := range r.Config.CompressionLevels {
			names[i] = escapeValue(n, levelsSpecial)
		}
		return strings.Join(names, ","), len(names) > 0
	},
	parse: func(imp *importer, f *field, _, raw string) error {
		var names []string
		for _, n := range splitUnescaped(raw, ',') {
			names = append(names, unescapeTrim(n))
		}
		imp.codecs.levelsSpelling = &levelsSpelling{section: imp.section, names: names}
		return nil
	},
}

// spellingText is a codec as the config spelled it ("# strata:
// compression_default=lz4"); the importer lets it replace the name derived
// from the RocksDB keys when both mean the same codec.
var spellingText = &textForm{
	parse: func(imp *importer, f *field, value, _ string) error {
		imp.codecs.spellings[f.key] = &spelling{section: imp.section, value: value}
		return nil
	},
}

// compressionOpts renders RocksDB's CompressionOptions struct. Only level
// carries Strata's setting: the zstd level, or RocksDB's "default level" for
// the other codecs. enabled tells RocksDB to use bottommost_compression_opts
// rather than compression_opts on the bottommost level.
func compressionOpts(c compression.Codec, bottommost bool) string {
	level := kDefaultCompressionLevel
	if c.Algorithm == compression.Zstd {
		level = c.Level
	}
	return fmt.Sprintf("{window_bits=-14;level=%d;strategy=0;max_dict_bytes=0;zstd_max_train_bytes=0;"+
		"parallel_threads=1;enabled=%t;max_dict_buffer_bytes=0;use_zstd_dict_trainer=true;}", level, bottommost)
}
