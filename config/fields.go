package config

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"

	"github.com/stratadb/strata/compression"
)

// The table of Config's keys. Each top-level key of the file (the [server]
// and [cluster] sections aside) is one row of fields, which holds every fact
// about it but its doc comment: the RocksDB section and option name it is
// written under, the unit conversion, the allowed range, the default and any
// further rule. Default, Validate, the OPTIONS writer (RocksDBOptions), the
// importer (ImportRocksDBOptions) and a test of docs/config.md's table all
// read it, so the writer and the importer are one mapping read two ways, as
// Pebble's options.go has one parser under Parse and CheckCompatibility.
//
// The rows are in the order of the OPTIONS file; byField is the same rows in
// the order of Config's fields, which Validate and the documentation follow.

// Sections of a RocksDB OPTIONS file; sectionHeader is the comment block
// before the first section.
const (
	sectionHeader  = ""
	sectionVersion = "Version"
	sectionDB      = "DBOptions"
	sectionCF      = `CFOptions "default"`
	sectionTable   = `TableOptions/BlockBasedTable "default"`
)

// field is one row of the table.
type field struct {
	// key is the file key ("memtable_size_mb"), which is also the Config
	// field's toml tag; empty for a RocksDB option that Strata writes with a
	// value of its own choosing (fixed or text).
	key string
	// section is the OPTIONS section the line goes in.
	section string
	// rocksdb is RocksDB's name of the option; empty writes the value as a
	// "# strata: key=value" comment, which RocksDB's parser skips.
	rocksdb string
	// readAs is a RocksDB name that is read (by the importer and in config
	// files) but not written, for an option RocksDB keeps out of its
	// OPTIONS file (block_cache); its unit is scale's, as rocksdb's.
	readAs string
	// scale converts units: RocksDB's value is the Config value times scale
	// (mib: the file's MB are RocksDB's bytes). 0 means 1.
	scale int64
	// limits is the allowed range of a number; nil for other kinds.
	limits *limits
	// def is the Default() value: a string, bool, int or float64.
	def any
	// check adds problems beyond the range (Validate).
	check func(v *validator, c *Config, f *field)
	// comment is written on the line above.
	comment string
	// fixed is the value a row without key always writes; a file that gives
	// another is listed as Unmapped with reason. Booleans compare as
	// booleans ("1" is "true").
	fixed string
	// noteIf reports whether the value in r is accepted without effect (or
	// with a changed one), which reason explains (Notes).
	noteIf func(r *Resolved) bool
	reason string
	// noteWhy, if set in place of noteIf, returns the reason of the note,
	// "" for none.
	noteWhy func(r *Resolved) string
	// text reads and writes a value that is not a plain string, bool or
	// number (or, with key empty, the whole line).
	text *textForm
	// sets names the Config keys a row without key sets (the codec
	// options): a config file that gives both names is refused.
	sets []string
	// index locates the Config field (from the toml tags).
	index []int
}

// textForm is the OPTIONS text of a row that is not a plain value.
type textForm struct {
	// format returns the escaped text of the value; false leaves the line out.
	format func(r *Resolved) (string, bool)
	// parse takes the value of the line over into imp. value is unescaped,
	// raw is as written (without a trailing comment).
	parse func(imp *importer, f *field, value, raw string) error
}

// limits is an allowed range of a number, inclusive.
type limits struct {
	min, max float64
	// sentinelMeans, if set, allows sentinel as well, meaning what it says
	// (bottommost_block_size = 0 is "block_size", max_open_files = -1
	// keeps every file open).
	sentinel      float64
	sentinelMeans string
}

func (l *limits) allows(x float64) bool {
	return (x >= l.min && x <= l.max) || (l.sentinelMeans != "" && x == l.sentinel) // NaN fails both
}

// String is the range as docs/config.md's table shows it: "1 to 4095".
func (l *limits) String() string {
	s := formatNumber(l.min) + " to " + formatNumber(l.max)
	if l.sentinelMeans != "" {
		s = formatNumber(l.sentinel) + " (" + l.sentinelMeans + ") or " + s
	}
	return s
}

// rule is what a FieldError says when the value is outside the range.
func (l *limits) rule() string {
	if l.sentinelMeans != "" {
		return fmt.Sprintf("must be %s (%s) or from %s to %s", formatNumber(l.sentinel), l.sentinelMeans, formatNumber(l.min), formatNumber(l.max))
	}
	return fmt.Sprintf("must be from %s to %s", formatNumber(l.min), formatNumber(l.max))
}

func inRange(min, max float64) *limits { return &limits{min: min, max: max} }

func formatNumber(x float64) string { return strconv.FormatFloat(x, 'f', -1, 64) }

const mib = 1 << 20

// numLevels is the number of levels of a Pebble LSM, the last one being the
// bottommost.
const numLevels = 7

// kDefaultCompressionLevel is RocksDB's compression_opts.level for "the
// codec's default level".
const kDefaultCompressionLevel = 32767

// The RocksDB version whose option names and formats the file follows, and
// the options file format version.
const (
	rocksDBVersion     = "8.11.0"
	optionsFileVersion = "1.1"
)

var (
	// fields is the table, in the order of the OPTIONS file.
	fields []field
	// byField is the rows with a key, in the order of Config's fields.
	byField []*field
	// rocksDBRows finds a row by section and RocksDB name
	// (section + "\x00" + name); strataRows by the key of a "# strata:"
	// comment.
	rocksDBRows, strataRows map[string]*field
	// fileRows finds a row by the RocksDB name a config file may give in
	// place of the Strata key (rocksdb_names.go): every RocksDB name of the
	// table outside [Version] that is not also the Strata key.
	fileRows map[string]*field
)

func init() {
	fields = []field{
		// Before the first section: settings RocksDB keeps nowhere.
		{key: "db_path", def: "data/strata", check: (*validator).notEmpty},
		{key: "wal_failover_dir", def: "", check: (*validator).walFailoverDir},
		{key: "db_paths", check: (*validator).dbPaths, text: dbPathsText},
		{key: "tiering_move_rate_mb", limits: inRange(0, 1<<20), def: 64},
		{key: "zstd_level", limits: inRange(1, compression.MaxZstdLevel), def: compression.DefaultZstdLevel},

		{section: sectionVersion, rocksdb: "rocksdb_version", fixed: rocksDBVersion},
		{section: sectionVersion, rocksdb: "options_file_version", fixed: optionsFileVersion, text: fileVersionText},

		{key: "wal_dir", section: sectionDB, rocksdb: "wal_dir", def: ""},
		{key: "use_direct_reads", section: sectionDB, rocksdb: "use_direct_reads", def: false},
		{key: "use_direct_io_for_flush_and_compaction", section: sectionDB, rocksdb: "use_direct_io_for_flush_and_compaction", def: false},
		{key: "direct_io_fallback", section: sectionDB, def: false},
		{key: "max_background_jobs", section: sectionDB, rocksdb: "max_background_jobs", limits: inRange(1, 256), def: 2},
		{key: "max_open_files", section: sectionDB, rocksdb: "max_open_files", limits: &limits{min: 20, max: 1 << 24, sentinel: -1, sentinelMeans: "keep every file open"}, def: -1,
			noteIf: func(r *Resolved) bool { return r.Config.MaxOpenFiles >= 0 && r.Config.MaxOpenFiles < 74 },
			reason: "Pebble's file cache holds at least 64 files, and the engine keeps about 10 more open: values under 74 act as 74"},
		{section: sectionDB, rocksdb: "create_if_missing", fixed: "true", reason: "Strata always creates a missing database"},
		{key: "enable_wal", section: sectionDB, def: true,
			comment: "enable_wal and sync are per-write options in RocksDB (WriteOptions::disableWAL, ::sync)"},
		{key: "sync", section: sectionDB, def: false, check: (*validator).syncNeedsWAL},

		{key: "memtable_size_mb", section: sectionCF, rocksdb: "write_buffer_size", scale: mib, limits: inRange(1, 4095), def: 256},
		{key: "max_write_buffer_number", section: sectionCF, rocksdb: "max_write_buffer_number", limits: inRange(1, 64), def: 3,
			noteIf: func(r *Resolved) bool { return r.Config.MaxWriteBufferNumber == 1 }, reason: reasonMaxWBN},
		{key: "min_write_buffer_number_to_merge", section: sectionCF, rocksdb: "min_write_buffer_number_to_merge", limits: inRange(1, 64), def: 1,
			noteIf: func(r *Resolved) bool { return r.Config.MinWriteBufferNumberToMerge > 1 }, reason: reasonMinMerge},
		{key: "use_universal_compaction", section: sectionCF, rocksdb: "compaction_style", def: false, text: compactionStyleText},
		{key: "dynamic_level_bytes", section: sectionCF, rocksdb: "level_compaction_dynamic_level_bytes", def: true,
			noteIf: func(r *Resolved) bool { return !r.Config.DynamicLevelBytes }, reason: reasonDynamic},
		{section: sectionCF, rocksdb: "num_levels", fixed: strconv.Itoa(numLevels), text: numLevelsText},
		{key: "target_file_size_base_mb", section: sectionCF, rocksdb: "target_file_size_base", scale: mib, limits: inRange(1, 4096), def: 64},
		{section: sectionCF, rocksdb: "target_file_size_multiplier", fixed: "1",
			reason: "Strata uses target_file_size_base on every level (multiplier 1)"},
		{key: "max_bytes_for_level_base_mb", section: sectionCF, rocksdb: "max_bytes_for_level_base", scale: mib, limits: inRange(1, 1<<20), def: 256},
		{key: "optimize_filters_for_hits", section: sectionCF, rocksdb: "optimize_filters_for_hits", def: false},
		{key: "enable_blob_files", section: sectionCF, rocksdb: "enable_blob_files", def: false, check: (*validator).blobFilesOnOnePath},
		{key: "min_blob_size", section: sectionCF, rocksdb: "min_blob_size", limits: inRange(0, 1<<30), def: 0},
		{key: "enable_blob_garbage_collection", section: sectionCF, rocksdb: "enable_blob_garbage_collection", def: false},
		{key: "key_compression", section: sectionCF, def: "", check: (*validator).keyCodec,
			comment: "RocksDB's tables and blob files have separate codecs, not a level's keys and values"},
		{section: sectionCF, rocksdb: "compression", text: compressionText, sets: []string{"compression_default", "compression_levels"}},
		{section: sectionCF, rocksdb: "bottommost_compression", text: bottommostCompressionText, sets: []string{"compression_bottommost", "compression_levels"}},
		{section: sectionCF, rocksdb: "compression_per_level", text: perLevelText, sets: []string{"compression_default", "compression_bottommost", "compression_levels"}},
		{section: sectionCF, rocksdb: "compression_opts", text: compressionOptsText, sets: []string{"compression_default", "compression_levels"}},
		{section: sectionCF, rocksdb: "bottommost_compression_opts", text: bottommostOptsText, sets: []string{"compression_bottommost", "compression_levels"}},
		{key: "compression_default", section: sectionCF, def: "lz4", check: (*validator).codec, text: spellingText,
			noteWhy: func(r *Resolved) string { return namedCodecNote(r, 0) }},
		{key: "compression_bottommost", section: sectionCF, def: "zstd", check: (*validator).codec, text: spellingText,
			noteWhy: func(r *Resolved) string { return namedCodecNote(r, 1) }},
		{key: "compression_levels", section: sectionCF, check: (*validator).codecLevels, text: levelsText,
			noteIf: levelsRequestLZ4, reason: reasonLZ4},

		{key: "block_size", section: sectionTable, rocksdb: "block_size", limits: inRange(1<<10, 1<<20), def: 4096},
		{key: "bottommost_block_size", section: sectionTable, limits: &limits{min: 1 << 10, max: 1 << 20, sentinelMeans: "block_size"}, def: 6144,
			comment: "RocksDB has one block_size; Strata gives the bottommost level its own (0 = block_size)"},
		{key: "cache_index_and_filter_blocks", section: sectionTable, rocksdb: "cache_index_and_filter_blocks", def: true,
			noteIf: func(r *Resolved) bool { return !r.Config.CacheIndexAndFilterBlocks }, reason: reasonCacheIndex},
		{section: sectionTable, rocksdb: "cache_index_and_filter_blocks_with_high_priority", fixed: "true", reason: reasonHighPri},
		{key: "pin_l0_filter_and_index_blocks_in_cache", section: sectionTable, rocksdb: "pin_l0_filter_and_index_blocks_in_cache", def: true,
			noteIf: func(r *Resolved) bool { return r.Config.PinL0FilterAndIndexBlocksInCache }, reason: reasonPin},
		{key: "partition_filters", section: sectionTable, rocksdb: "partition_filters", def: true,
			noteIf: func(r *Resolved) bool { return r.Config.PartitionFilters }, reason: reasonPartition},
		{section: sectionTable, rocksdb: "index_type", text: indexTypeText},
		{key: "bloom_bits_per_key", section: sectionTable, rocksdb: "filter_policy", limits: inRange(0, 64), def: 10, text: filterPolicyText},
		{key: "block_cache_size_mb", section: sectionTable, readAs: "block_cache", scale: mib, limits: inRange(0, 1<<20), def: 256,
			comment: "RocksDB does not keep the block cache in its options file"},
		{key: "high_pri_pool_ratio", section: sectionTable, limits: inRange(0, 1), def: 0.5,
			noteIf: func(r *Resolved) bool { return r.Config.HighPriPoolRatio != 0 }, reason: reasonHighPri},
	}
	indexFields()
}

// Reasons for common RocksDB options Strata has no setting for: the
// importer lists them as Unmapped with the reason. An option that gets a
// row in fields leaves this list (a test checks).
var unmappedReasons = map[string]string{
	"max_background_compactions":              "deprecated in RocksDB: max_background_jobs sets the budget",
	"max_background_flushes":                  "deprecated in RocksDB: max_background_jobs sets the budget",
	"use_direct_writes":                       "RocksDB 4 name: use_direct_io_for_flush_and_compaction is the setting",
	"db_log_dir":                              "Pebble writes no info LOG: Strata logs through its Logger",
	"max_total_wal_size":                      "no Strata setting: Pebble flushes by memtable size",
	"bytes_per_sync":                          "no Strata setting: Pebble's BytesPerSync keeps its default",
	"wal_bytes_per_sync":                      "no Strata setting: Pebble's WALBytesPerSync keeps its default",
	"compaction_pri":                          "Pebble picks compactions by its own score",
	"level0_file_num_compaction_trigger":      "no Strata setting: Pebble's L0CompactionThreshold keeps its default",
	"level0_slowdown_writes_trigger":          "Pebble has no write slowdown, only a stop",
	"level0_stop_writes_trigger":              "no Strata setting: Pebble's L0StopWritesThreshold keeps its default",
	"max_bytes_for_level_multiplier":          "Strata keeps Pebble's level multiplier of 10",
	"block_restart_interval":                  "no Strata setting: Pebble's restart interval of 16 is used",
	"whole_key_filtering":                     "Pebble's filters are always on whole keys",
	"format_version":                          "Pebble has its own table format versions",
	"checksum":                                "Pebble chooses its own block checksum",
	"merge_operator":                          "Strata has no merge operator",
	"prefix_extractor":                        "Strata has no prefix extractor",
	"compaction_filter":                       "Strata has no compaction filter",
	"compaction_filter_factory":               "Strata has no compaction filter",
	"comparator":                              "Strata orders keys bytewise; data written with another comparator cannot be read",
	"table_factory":                           "Pebble writes block-based tables only",
	"blob_file_size":                          "Pebble sizes a blob file by the flush or compaction that writes it",
	"blob_compression_type":                   "a blob file takes the codec of the level it is written for",
	"blob_garbage_collection_age_cutoff":      "Pebble rewrites a blob file by its garbage ratio and age (enable_blob_garbage_collection), not by its place among the oldest",
	"blob_garbage_collection_force_threshold": "enable_blob_garbage_collection rewrites at a tenth of garbage",
	"blob_compaction_readahead_size":          "no Strata setting: Pebble reads blob files through its block cache",
	"blob_file_starting_level":                "Pebble separates values from the first flush on",
	"prepopulate_blob_cache":                  "blob values share Pebble's block cache",
}

// agreeing holds, for RocksDB options Strata has no setting for, the value
// that says what Pebble and Strata do anyway: not worth a line.
var agreeing = map[string]string{
	"merge_operator":            "nullptr",
	"prefix_extractor":          "nullptr",
	"compaction_filter":         "nullptr",
	"compaction_filter_factory": "nullptr",
	"comparator":                "leveldb.BytewiseComparator",
	"table_factory":             "BlockBasedTable",
}

// indexFields finds each row's Config field by its toml tag, orders byField
// and fills the lookup maps. A row whose key names no field, or a simple
// Config field without a row, is a programming error caught by every test.
func indexFields() {
	t := reflect.TypeFor[Config]()
	tags := map[string][]int{}
	for i := range t.NumField() {
		tags[t.Field(i).Tag.Get("toml")] = t.Field(i).Index
	}
	rocksDBRows, strataRows, fileRows = map[string]*field{}, map[string]*field{}, map[string]*field{}
	byField = byField[:0]
	for i := range fields {
		f := &fields[i]
		for _, name := range []string{f.rocksdb, f.readAs} {
			if name == "" {
				continue
			}
			rocksDBRows[f.section+"\x00"+name] = f
			if name != f.key && f.section != sectionVersion {
				if _, ok := fileRows[name]; ok {
					panic("config: field table: RocksDB name " + name + " in two sections")
				}
				fileRows[name] = f
			}
		}
		if f.key == "" {
			continue
		}
		idx, ok := tags[f.key]
		if !ok {
			panic("config: field table: no Config field has the key " + f.key)
		}
		f.index = idx
		if f.rocksdb == "" {
			strataRows[f.key] = f
		}
		byField = append(byField, f)
	}
	// Config's field order; Server and Cluster are not rows.
	pos := func(f *field) int { return f.index[0] }
	for i := 1; i < len(byField); i++ {
		for j := i; j > 0 && pos(byField[j]) < pos(byField[j-1]); j-- {
			byField[j], byField[j-1] = byField[j-1], byField[j]
		}
	}
}

// fieldByKey returns the row of a Config key, nil if there is none.
func fieldByKey(key string) *field {
	for _, f := range byField {
		if f.key == key {
			return f
		}
	}
	return nil
}

// value returns the Config field of the row.
func (f *field) value(c *Config) reflect.Value {
	return reflect.ValueOf(c).Elem().FieldByIndex(f.index)
}

// number returns a numeric field's value as a float64 (for limits).
func (f *field) number(c *Config) float64 {
	v := f.value(c)
	if v.CanInt() {
		return float64(v.Int())
	}
	return v.Float()
}

// setDefault sets the field of c to the row's default.
func (f *field) setDefault(c *Config) {
	if f.def == nil {
		return
	}
	v := f.value(c)
	v.Set(reflect.ValueOf(f.def).Convert(v.Type()))
}

// defaultText is the default as docs/config.md's table shows it.
func (f *field) defaultText() string {
	switch d := f.def.(type) {
	case nil:
		return "[]"
	case string:
		if d == "" {
			return `""`
		}
		return d
	default:
		return fmt.Sprint(d)
	}
}

// rangeText is what docs/config.md's Range column says for the row: the
// limits of a number, the codec names of a codec, "-" otherwise.
func (f *field) rangeText() string {
	switch {
	case f.limits != nil:
		return f.limits.String()
	case f.text == spellingText:
		return strings.Join(compression.Names(), ", ")
	case f.text == levelsText:
		return fmt.Sprintf("[] or %d codecs, L0 first", NumLevels)
	}
	return "-"
}

// format returns the escaped OPTIONS text of the row's value in r, and
// whether the line is written.
func (f *field) format(r *Resolved) (string, bool) {
	switch {
	case f.text != nil && f.text.format != nil:
		return f.text.format(r)
	case f.key == "":
		return f.fixed, true
	}
	v := f.value(r.Config)
	switch v.Kind() {
	case reflect.String:
		special := rocksDBSpecial
		if f.rocksdb == "" {
			special = strataSpecial
		}
		return escapeValue(v.String(), special), true
	case reflect.Bool:
		return strconv.FormatBool(v.Bool()), true
	case reflect.Float64:
		return strconv.FormatFloat(v.Float(), 'g', -1, 64), true
	default:
		if f.rocksdb == "" {
			return strconv.FormatInt(v.Int(), 10), true // a "# strata:" comment, in the key's unit
		}
		return strconv.FormatInt(v.Int()*max(f.scale, 1), 10), true
	}
}

// parse takes a value of the row from an OPTIONS file over into imp.cfg;
// name is the option as the file wrote it, for messages.
func (f *field) parse(imp *importer, name, value, raw string) error {
	switch {
	case f.text != nil && f.text.parse != nil:
		return f.text.parse(imp, f, value, raw)
	case f.key == "":
		return imp.fixedValue(f, value)
	}
	v := f.value(imp.cfg)
	switch v.Kind() {
	case reflect.String:
		v.SetString(value)
	case reflect.Bool:
		b, err := parseBool(name, value)
		if err != nil {
			return err
		}
		v.SetBool(b)
	case reflect.Float64:
		x, err := strconv.ParseFloat(value, 64)
		if err != nil {
			return fmt.Errorf("%s=%s: expected a number", name, clip(value))
		}
		v.SetFloat(x)
	default:
		if f.scale > 1 && (name == f.rocksdb || name == f.readAs) {
			n, err := imp.scaled(f, name, value)
			if err != nil {
				return err
			}
			v.SetInt(n)
			return nil
		}
		n, err := parseInt(name, value, v.Type().Bits())
		if err != nil {
			return err
		}
		v.SetInt(n)
	}
	return nil
}
