package config

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// kv is one key of a test file with its value written as a literal that
// TOML, YAML (flow style) and JSON read alike: a number, true or false, a
// double-quoted string or a list of them.
type kv struct{ key, literal string }

// render writes keys as a file of format, in order.
func render(format string, keys []kv) []byte {
	var b strings.Builder
	for i, k := range keys {
		switch format {
		case "toml":
			fmt.Fprintf(&b, "%s = %s\n", k.key, k.literal)
		case "yaml":
			fmt.Fprintf(&b, "%s: %s\n", k.key, k.literal)
		case "json":
			sep := ","
			if i == len(keys)-1 {
				sep = ""
			}
			fmt.Fprintf(&b, "  %q: %s%s\n", k.key, k.literal, sep)
		}
	}
	if format == "json" {
		return []byte("{\n" + b.String() + "}\n")
	}
	return []byte(b.String())
}

var formats = []string{"toml", "yaml", "json"}

const (
	lz4Bottom = `["kLZ4Compression", "kLZ4Compression", "kLZ4Compression", "kLZ4Compression", "kLZ4Compression", "kLZ4Compression", "kZSTD"]`
)

// TestRocksDBNamesMapped loads every RocksDB name a config file takes, in
// RocksDB's unit and form, in each format, and checks the Strata setting
// it gives. A RocksDB name of the table of fields without a case here
// fails the test.
func TestRocksDBNamesMapped(t *testing.T) {
	tests := []struct {
		name   string // the RocksDB name the case covers
		file   []kv
		change func(*Config)
	}{
		{"write_buffer_size", []kv{{"write_buffer_size", "134217728"}},
			func(c *Config) { c.MemtableSizeMB = 128 }},
		// Sizes take RocksDB's suffixes, as its option strings do.
		{"write_buffer_size", []kv{{"write_buffer_size", `"64m"`}, {"target_file_size_base", `"32M"`}, {"max_bytes_for_level_base", `"1g"`}},
			func(c *Config) { c.MemtableSizeMB, c.TargetFileSizeBaseMB, c.MaxBytesForLevelBaseMB = 64, 32, 1024 }},
		{"block_cache", []kv{{"block_cache", "1073741824"}}, func(c *Config) { c.BlockCacheSizeMB = 1024 }},
		{"block_cache", []kv{{"block_cache", `"2G"`}}, func(c *Config) { c.BlockCacheSizeMB = 2048 }},
		{"compaction_style", []kv{{"compaction_style", `"kCompactionStyleUniversal"`}},
			func(c *Config) { c.UseUniversalCompaction = true }},
		{"compaction_style", []kv{{"compaction_style", `"kCompactionStyleLevel"`}}, func(c *Config) {}},
		{"level_compaction_dynamic_level_bytes", []kv{{"level_compaction_dynamic_level_bytes", "false"}},
			func(c *Config) { c.DynamicLevelBytes = false }},
		{"num_levels", []kv{{"num_levels", "7"}}, func(c *Config) {}},
		{"target_file_size_base", []kv{{"target_file_size_base", "33554432"}},
			func(c *Config) { c.TargetFileSizeBaseMB = 32 }},
		{"target_file_size_multiplier", []kv{{"target_file_size_multiplier", "1"}}, func(c *Config) {}},
		{"max_bytes_for_level_base", []kv{{"max_bytes_for_level_base", "536870912"}},
			func(c *Config) { c.MaxBytesForLevelBaseMB = 512 }},
		// compression alone is every level's codec, as in RocksDB.
		{"compression", []kv{{"compression", `"kLZ4Compression"`}},
			func(c *Config) { c.CompressionDefault, c.CompressionBottommost = "lz4", "lz4" }},
		{"compression", []kv{{"compression", `"kSnappyCompression"`}, {"compression_bottommost", `"zstd:6"`}},
			func(c *Config) { c.CompressionDefault, c.CompressionBottommost = "snappy", "zstd:6" }},
		{"bottommost_compression", []kv{{"compression", `"kNoCompression"`}, {"bottommost_compression", `"kZSTD"`}},
			func(c *Config) { c.CompressionDefault, c.CompressionBottommost = "none", "zstd" }},
		{"compression_per_level", []kv{{"compression_per_level", lz4Bottom}},
			func(c *Config) { c.CompressionDefault, c.CompressionBottommost = "lz4", "zstd" }},
		{"compression_per_level", []kv{{"compression_per_level", `["none", "none", "none", "none", "none", "none", "zstd:9"]`}},
			func(c *Config) { c.CompressionDefault, c.CompressionBottommost = "none", "zstd:9" }},
		{"compression_per_level", []kv{{"compression_per_level", `"kSnappyCompression:kSnappyCompression:kSnappyCompression:kSnappyCompression:kSnappyCompression:kSnappyCompression:kZSTD"`}},
			func(c *Config) { c.CompressionDefault, c.CompressionBottommost = "snappy", "zstd" }},
		// Different codecs on L0-L5 are compression_levels.
		{"compression_per_level", []kv{{"compression_per_level", `["kNoCompression", "kNoCompression", "kLZ4Compression", "kLZ4Compression", "kLZ4Compression", "kZSTD", "kZSTD"]`}},
			func(c *Config) { c.CompressionLevels = []string{"none", "none", "lz4", "lz4", "lz4", "zstd", "zstd"} }},
		{"compression_per_level", []kv{{"compression_per_level", `"kNoCompression:kSnappyCompression:kZSTD"`}, {"compression_opts", `"{level=2;}"`}},
			func(c *Config) {
				c.CompressionLevels = []string{"none", "snappy", "zstd:2", "zstd:2", "zstd:2", "zstd:2", "zstd:2"}
			}},
		{"compression_per_level", []kv{{"compression_per_level", `["none", "zstd:1", "zstd:1", "zstd:1", "zstd:1", "zstd:6", "zstd:9"]`}},
			func(c *Config) {
				c.CompressionLevels = []string{"none", "zstd:1", "zstd:1", "zstd:1", "zstd:1", "zstd:6", "zstd:9"}
			}},
		// A short list: the levels after it take its last codec, as in RocksDB.
		{"compression_per_level", []kv{{"compression_per_level", `["kMinLZCompression"]`}},
			func(c *Config) { c.CompressionDefault, c.CompressionBottommost = "minlz", "minlz" }},
		{"compression_per_level", []kv{{"zstd_level", "7"}, {"compression_per_level", `["lz4", "lz4", "lz4", "lz4", "lz4", "lz4", "zstd:7"]`}},
			func(c *Config) { c.CompressionDefault, c.CompressionBottommost, c.ZstdLevel = "lz4", "zstd", 7 }},
		{"compression_opts", []kv{{"compression", `"kZSTD"`}, {"compression_opts", `"{level=6;enabled=false;}"`}},
			func(c *Config) { c.CompressionDefault, c.CompressionBottommost = "zstd:6", "zstd:6" }},
		{"bottommost_compression_opts", []kv{{"bottommost_compression", `"kZSTD"`}, {"bottommost_compression_opts", `"{level=9;enabled=true;}"`}},
			func(c *Config) { c.CompressionBottommost = "zstd:9" }},
		{"filter_policy", []kv{{"filter_policy", `"bloomfilter:12:false"`}},
			func(c *Config) { c.BloomBitsPerKey = 12 }},
		{"filter_policy", []kv{{"filter_policy", `"nullptr"`}},
			func(c *Config) { c.BloomBitsPerKey = 0 }},
		{"create_if_missing", []kv{{"create_if_missing", "true"}}, func(c *Config) {}},
		{"cache_index_and_filter_blocks_with_high_priority", []kv{{"cache_index_and_filter_blocks_with_high_priority", "true"}}, func(c *Config) {}},
		{"index_type", []kv{{"index_type", `"kTwoLevelIndexSearch"`}}, func(c *Config) {}},
		// RocksDB options Strata has no setting for, at the value Strata
		// has anyway.
		{"", []kv{{"max_bytes_for_level_multiplier", "10"}, {"comparator", `"leveldb.BytewiseComparator"`}}, func(c *Config) {}},
		// A RocksDB user's file: the names and units of a RocksDB config
		// beside Strata's own keys.
		{"", []kv{
			{"db_path", `"/var/lib/strata"`},
			{"write_buffer_size", "67108864"},
			{"max_write_buffer_number", "4"},
			{"compression_per_level", lz4Bottom},
			{"max_bytes_for_level_base", "268435456"},
			{"target_file_size_base", "67108864"},
			{"block_size", "16384"},
			{"filter_policy", `"bloomfilter:10:false"`},
			{"block_cache_size_mb", "512"},
		}, func(c *Config) {
			c.DBPath, c.MemtableSizeMB, c.MaxWriteBufferNumber = "/var/lib/strata", 64, 4
			c.CompressionDefault, c.CompressionBottommost = "lz4", "zstd"
			c.MaxBytesForLevelBaseMB, c.TargetFileSizeBaseMB, c.BlockSize, c.BlockCacheSizeMB = 256, 64, 16384, 512
		}},
	}
	covered := map[string]bool{}
	for _, tt := range tests {
		covered[tt.name] = true
		for _, format := range formats {
			t.Run(tt.name+"/"+format, func(t *testing.T) {
				data := render(format, tt.file)
				got, err := Parse(data, format)
				if err != nil {
					t.Fatalf("Parse:\n%s\n= %v", data, err)
				}
				want := Default()
				tt.change(want)
				if !reflect.DeepEqual(got, want) {
					t.Errorf("Parse:\n%s\n=\n%+v\nwant\n%+v", data, got, want)
				}
			})
		}
	}
	for _, name := range fileRowNames() {
		if !covered[name] {
			t.Errorf("RocksDB name %s has no case here", name)
		}
	}
}

// TestRocksDBNamesRefused checks what a config file may not say by
// RocksDB's names: values the OPTIONS importer would take over only
// approximately, one setting named twice, and RocksDB options Strata has
// no setting for.
func TestRocksDBNamesRefused(t *testing.T) {
	tests := []struct {
		file []kv
		want []string
	}{
		{[]kv{{"write_buffer_size", "100000000"}}, []string{
			"write_buffer_size = 100000000: not a whole number of MiB (1048576 bytes), the unit of memtable_size_mb: the nearest are 99614720 and 100663296"}},
		{[]kv{{"write_buffer_size", "8589934592"}}, []string{
			"write_buffer_size = 8589934592: must be from 1048576 to 4293918720 bytes (memtable_size_mb: 1 to 4095 MiB)"}},
		{[]kv{{"max_bytes_for_level_base", "0"}}, []string{
			"max_bytes_for_level_base = 0: must be from 1048576 to 1099511627776 bytes (max_bytes_for_level_base_mb: 1 to 1048576 MiB)"}},
		{[]kv{{"target_file_size_base", "-1"}}, []string{
			`target_file_size_base = -1: expected a size in bytes: a non-negative integer, or a string with RocksDB's suffix k, m, g or t ("64m")`}},
		{[]kv{{"write_buffer_size", `"64MB"`}}, []string{
			`write_buffer_size = "64MB": expected a size in bytes, with or without one of RocksDB's suffixes k, m, g, t (64m)`}},
		{[]kv{{"block_cache", `"17000000000000000t"`}}, []string{
			`block_cache = "17000000000000000t": expected a size in bytes, with or without one of RocksDB's suffixes k, m, g, t (64m)`}},
		{[]kv{{"block_cache", `"2t"`}}, []string{
			`block_cache = "2t": must be from 0 to 1099511627776 bytes (block_cache_size_mb: 0 to 1048576 MiB)`}},
		{[]kv{{"block_cache_size_mb", "64"}, {"block_cache", `"64m"`}}, []string{
			`block_cache = "64m": the file sets block_cache_size_mb too, which is the same setting: keep one of the two`}},
		{[]kv{{"memtable_size_mb", "64"}, {"write_buffer_size", "67108864"}}, []string{
			"write_buffer_size = 67108864: the file sets memtable_size_mb too, which is the same setting: keep one of the two"}},
		{[]kv{{"compression_per_level", lz4Bottom}, {"compression_bottommost", `"zstd"`}}, []string{
			`compression_per_level = ["kLZ4Compression", "kLZ4Compression", "kLZ4Compression", "kLZ4Compression", "kLZ4Compression", "kLZ4Compression", "kZSTD"]: the file sets compression_bottommost too, which is the same setting: keep one of the two`}},
		{[]kv{{"bloom_bits_per_key", "10"}, {"filter_policy", `"bloomfilter:10:false"`}}, []string{
			`filter_policy = "bloomfilter:10:false": the file sets bloom_bits_per_key too, which is the same setting: keep one of the two`}},
		{[]kv{{"compression_levels", `["none", "none", "lz4", "lz4", "lz4", "zstd", "zstd"]`}, {"compression_per_level", `["kNoCompression", "kLZ4Compression"]`}}, []string{
			`compression_per_level = ["kNoCompression", "kLZ4Compression"]: the file sets compression_levels too, which is the same setting: keep one of the two`}},
		{[]kv{{"compression_levels", `["none", "lz4", "zstd"]`}}, []string{
			`compression_levels = ["none", "lz4", "zstd"]: must name 7 codecs, one per level, L0 first (or be empty), not 3`}},
		{[]kv{{"compression_levels", `["none", "none", "lz4", "lz5", "lz4", "zstd:30", "zstd"]`}}, []string{
			`compression_levels[3] = "lz5": must be one of none, snappy, lz4, zstd, zstd:<1-22>, minlz`,
			`compression_levels[5] = "zstd:30": zstd level must be an integer from 1 to 22`}},
		{[]kv{{"compression_levels", `["none", 3]`}}, []string{
			`compression_levels[1] = 3: expected a codec name`}},
		{[]kv{{"compression_levels", `"lz4"`}}, []string{
			`compression_levels = "lz4": expected a list of codec names, L0 first`}},
		{[]kv{{"compression_levels", `["none", "none", "lz4", "lz4", "lz4", "zstd", "zstd"]`}, {"compression", `"kZSTD"`}}, []string{
			`compression = "kZSTD": the file sets compression_levels too, which is the same setting: keep one of the two`}},
		{[]kv{{"compression_per_level", `["kNoCompression", "kNoCompression", "kLZ4HCCompression", "kLZ4Compression", "kLZ4Compression", "kZSTD", "kZSTD"]`}}, []string{
			`compression_per_level = ["kNoCompression", "kNoCompression", "kLZ4HCCompression", "kLZ4Compression", "kLZ4Compression", "kZSTD", "kZSTD"]: level codec "kLZ4HCCompression" has no Pebble equivalent: allowed are ` + rocksDBCodecNames}},
		{[]kv{{"compression_per_level", `["kZlibCompression", "kZSTD"]`}}, []string{
			`compression_per_level = ["kZlibCompression", "kZSTD"]: level codec "kZlibCompression" has no Pebble equivalent: allowed are ` + rocksDBCodecNames}},
		{[]kv{{"compression_per_level", `["lz4", 6]`}}, []string{
			`compression_per_level[1] = 6: expected a codec name`}},
		{[]kv{{"bottommost_compression", `"kLZ4HCCompression"`}}, []string{
			`bottommost_compression = "kLZ4HCCompression": no Pebble equivalent: allowed are ` + rocksDBCodecNames}},
		{[]kv{{"compression_opts", `"{level=6}"`}}, []string{
			`compression_opts = "{level=6}": sets the level of the codec that compression, compression_per_level or bottommost_compression names, and the file gives none of them`}},
		{[]kv{{"compression", `"kZSTD"`}, {"compression_opts", `"{level=40;max_dict_bytes=16384}"`}}, []string{
			`compression_opts.max_dict_bytes = "16384": not applicable: Pebble has no dictionary compression`,
			`compression_opts = "{level=40;max_dict_bytes=16384}": zstd level 40 is outside 1-22`}},
		{[]kv{{"bottommost_compression", `"kZSTD"`}, {"bottommost_compression_opts", `"{level=9}"`}}, []string{
			`bottommost_compression_opts = "{level=9}": has no effect without enabled=true, as in RocksDB`}},
		{[]kv{{"filter_policy", `"bloomfilter:100:false"`}}, []string{
			`filter_policy = "bloomfilter:100:false": bits per key must be a whole number from 0 to 64`}},
		{[]kv{{"filter_policy", `"ribbonfilter:10"`}}, []string{
			`filter_policy = "ribbonfilter:10": expected bloomfilter:<bits per key>[:false] or nullptr (no filter)`}},
		{[]kv{{"compaction_style", `"kCompactionStyleFIFO"`}}, []string{
			`compaction_style = "kCompactionStyleFIFO": not applicable: Strata has leveled (and, rejected at open, universal) compaction only`}},
		{[]kv{{"num_levels", "5"}}, []string{"num_levels = 5: not applicable: Pebble always has 7 levels"}},
		{[]kv{{"target_file_size_multiplier", "2"}}, []string{
			"target_file_size_multiplier = 2: not applicable: Strata uses target_file_size_base on every level (multiplier 1)"}},
		{[]kv{{"create_if_missing", "false"}}, []string{"create_if_missing = false: not applicable: Strata always creates a missing database"}},
		{[]kv{{"level0_file_num_compaction_trigger", "8"}, {"level0_slowdown_writes_trigger", "20"}, {"max_bytes_for_level_multiplier", "8"}}, []string{
			"level0_file_num_compaction_trigger = 8: not applicable: " + unmappedReasons["level0_file_num_compaction_trigger"],
			"level0_slowdown_writes_trigger = 20: not applicable: Pebble has no write slowdown, only a stop",
			"max_bytes_for_level_multiplier = 8: not applicable: Strata keeps Pebble's level multiplier of 10"}},
	}
	for _, tt := range tests {
		for _, format := range formats {
			t.Run(tt.file[0].key+"/"+format, func(t *testing.T) {
				data := render(format, tt.file)
				cfg, err := Parse(data, format)
				wantProblems(t, cfg, err, tt.want)
			})
		}
	}
}

// TestUnknownKeySuggestions checks "did you mean": a key close to a Strata
// key or to a RocksDB name a file takes gets the nearest; a key close to
// nothing gets none.
func TestUnknownKeySuggestions(t *testing.T) {
	tests := map[string]string{
		"bloom_bitz":                     "unknown key (did you mean bloom_bits_per_key?)",
		"bloom_bits":                     "unknown key (did you mean bloom_bits_per_key?)",
		"memtable_sise_mb":               "unknown key (did you mean memtable_size_mb?)",
		"Block_Size":                     "unknown key (did you mean block_size?)",
		"synk":                           "unknown key (did you mean sync?)",
		"write_bufer_size":               "unknown key (did you mean write_buffer_size?)",
		"compresion_per_level":           "unknown key (did you mean compression_per_level?)",
		"filter_polcy":                   "unknown key (did you mean filter_policy?)",
		"max_subcompactions":             "unknown key",
		"foo":                            "unknown key",
		"level0_stop_writes_trigger_max": "unknown key",
	}
	for key, want := range tests {
		_, err := Parse([]byte(key+" = 1\n"), "toml")
		ps := problems(t, err)
		if len(ps) != 1 || ps[0].Key != key || ps[0].Rule != want {
			t.Errorf("%s: problems %v, want one %q", key, ps, want)
		}
	}
}

// TestParseReportsEveryProblem checks that one file's problems of every
// kind come back together: a value of the wrong type does not hide the
// invalid values Validate finds in the same file.
func TestParseReportsEveryProblem(t *testing.T) {
	file := []kv{
		{"memtable_size_mb", `"big"`},
		{"compression_default", `"zlib"`},
		{"bloom_bits_per_key", "99"},
		{"bloom_bitz", "3"},
		{"sync", "true"},
		{"enable_wal", "false"},
	}
	want := []string{
		`memtable_size_mb = "big": expected an integer`,
		`bloom_bitz = 3: unknown key (did you mean bloom_bits_per_key?)`,
		`compression_default = "zlib": must be one of none, snappy, lz4, zstd, zstd:<1-22>, minlz`,
		`bloom_bits_per_key = 99: must be from 0 to 64`,
		`sync = true: requires enable_wal = true: sync waits for the write's WAL record`,
	}
	for _, format := range formats {
		t.Run(format, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "strata."+format)
			if err := os.WriteFile(path, render(format, file), 0o644); err != nil {
				t.Fatal(err)
			}
			cfg, err := Load(path)
			wantProblems(t, cfg, err, want)
			if err != nil && !strings.HasPrefix(err.Error(), "config: "+path+": 5 invalid setting(s):") {
				t.Errorf("message = %q", err.Error())
			}
		})
	}
}

// TestDocsRocksDBNames holds docs/config.md's table of RocksDB names to the
// table of fields: every RocksDB name a file takes, in the table's order,
// each with the Strata keys it sets, and for a size in bytes (of a key in
// MiB) its range in bytes.
func TestDocsRocksDBNames(t *testing.T) {
	var got []string
	for _, cells := range docsTableCells(t, "| RocksDB name | Strata key | Unit and form |", 3) {
		unit := cells[2]
		if !strings.HasPrefix(unit, "bytes") {
			unit = "(not bytes)"
		}
		unit, _, _ = strings.Cut(unit, " (") // a remark may follow the range
		got = append(got, cells[0]+" | "+cells[1]+" | "+unit)
	}
	var want []string
	for i := range fields {
		f := &fields[i]
		name := f.rocksdb
		if name == "" {
			name = f.readAs
		}
		if name == "" || f.section == sectionVersion {
			continue
		}
		keys := f.sets
		if f.key != "" {
			keys = []string{f.key}
		}
		sets := "-"
		if len(keys) > 0 {
			sets = "`" + strings.Join(keys, "`, `") + "`"
		}
		unit := "(not bytes)"
		if f.scale == mib {
			unit = fmt.Sprintf("bytes, a whole number of MiB: %d to %d", int64(f.limits.min)*mib, int64(f.limits.max)*mib)
		}
		want = append(want, "`"+name+"` | "+sets+" | "+unit)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("docs/config.md's RocksDB names =\n  %s\nthe table of fields gives\n  %s",
			strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}
