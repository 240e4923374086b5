package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/stratadb/strata/compression"
)

// Unmapped is one setting of an imported RocksDB OPTIONS file that Strata
// did not take over, with the reason. A whole section that is skipped (a
// column family other than "default", a table format other than
// BlockBasedTable) is one Unmapped with an empty Key. A value that was taken
// over only approximately (a size rounded up to whole MB) is listed too.
type Unmapped struct {
	// Section is the section as its header names it, without brackets
	// (`CFOptions "default"`); empty before the first section.
	Section string
	// Key is the option name; empty for a whole section,
	// "compression_opts.max_dict_bytes" for a part of a struct value,
	// "strata: name" for a "# strata:" comment.
	Key string
	// Value is the option's value as written, unescaped.
	Value string
	// Reason says why Strata did not take it over, or how it changed it.
	Reason string
}

// String returns "[section] key=value: reason".
func (u Unmapped) String() string {
	s := "[" + u.Section + "]"
	if u.Key != "" {
		s += " " + u.Key + "=" + u.Value
	}
	return s + ": " + u.Reason
}

// ImportRocksDBOptions reads a RocksDB OPTIONS file (RocksDB's INI format:
// [Section "argument"] headers, key=value statements, # comments, also at
// the end of a line, values escaped with \: \# \\ \n \r) and returns Default()
// with every setting the file has a Strata equivalent for laid over it,
// together with the settings it did not take over.
//
// Mapped are, from [DBOptions]: wal_dir, use_direct_reads,
// use_direct_io_for_flush_and_compaction, max_background_jobs; from
// [CFOptions "default"]: write_buffer_size, max_write_buffer_number,
// min_write_buffer_number_to_merge, compaction_style,
// level_compaction_dynamic_level_bytes, target_file_size_base,
// max_bytes_for_level_base, optimize_filters_for_hits, compression,
// bottommost_compression,
// compression_per_level and the level in compression_opts and
// bottommost_compression_opts; from [TableOptions/BlockBasedTable
// "default"]: block_size, cache_index_and_filter_blocks,
// pin_l0_filter_and_index_blocks_in_cache, partition_filters and
// filter_policy (bloomfilter:N). Sizes in bytes become MB; a size that is not
// a whole number of MB is rounded up and listed as Unmapped. Values that
// agree with what Strata does anyway (create_if_missing=true, num_levels=7,
// target_file_size_multiplier=1, index_type, ...) are accepted silently;
// everything else, including codecs Pebble cannot store (kZlibCompression),
// other column families and unknown keys, is listed as Unmapped and leaves
// the default in place. As RocksDB does, a bottommost_compression of
// kDisableCompressionOption means the bottommost level keeps the codec of
// compression_per_level or compression.
//
// The "# strata: key=value" comments of a file written by RocksDBOptions are
// read back as well, so importing Strata's own file yields the Config it was
// written from. A "strata:" codec spelling that disagrees with the RocksDB
// keys loses to them and is listed as Unmapped.
//
// Malformed input (a line that is neither a section, a statement nor a
// comment, a repeated section or key, a value of the wrong type for a mapped
// key) is an error naming the line. If the mapped values fail Validate, the
// Config and the Unmapped list are returned with the *ValidationError, whose
// keys are Strata's.
func ImportRocksDBOptions(r io.Reader) (*Config, []Unmapped, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, nil, fmt.Errorf("config: reading RocksDB options: %w", err)
	}
	imp := &importer{
		cfg:      Default(),
		sections: map[string]int{},
		keys:     map[string]int{},
	}
	for i, line := range bytes.Split(data, []byte{'\n'}) {
		imp.line = i + 1
		if err := imp.parseLine(strings.TrimSuffix(string(line), "\r")); err != nil {
			return nil, nil, fmt.Errorf("config: RocksDB options: line %d: %w", imp.line, err)
		}
	}
	imp.resolveCodecs()
	if err := imp.cfg.Validate(); err != nil {
		return imp.cfg, imp.unmapped, &prefixedError{prefix: "config: RocksDB options give an invalid Strata config: ", err: err}
	}
	return imp.cfg, imp.unmapped, nil
}

// sectionKind is what the importer does with the statements of a section.
type sectionKind uint8

const (
	inNone sectionKind = iota // before the first section header
	inVersion
	inDB
	inCF
	inTable
	inSkipped // a section that is Unmapped as a whole
)

// importer holds the state of one ImportRocksDBOptions call.
type importer struct {
	cfg      *Config
	unmapped []Unmapped
	line     int
	section  string
	kind     sectionKind
	sections map[string]int // section -> line of its header
	keys     map[string]int // section + "\x00" + key -> line

	// Codec settings, combined by resolveCodecs once the file is read.
	compression     *compression.Codec // nil: not given or unusable
	bottommost      *compression.Codec // nil: not given, unusable or kDisableCompressionOption
	bottommostBad   bool               // given as a codec Pebble cannot store
	perLevel        []compression.Codec
	perLevelRaw     string
	numLevels       int
	optsLevel       int // 0: the codec's default level
	bottomOptsLevel int
	bottomOptsOn    bool
	spellDefault    *spelling
	spellBottommost *spelling
	optsLevelRaw    string
	bottomOptsRaw   string
}

// spelling is a "# strata: compression_*=" comment: the codec as the config
// spelled it.
type spelling struct {
	section, value string
}

func (imp *importer) skip(key, value, reason string) {
	imp.unmapped = append(imp.unmapped, Unmapped{Section: imp.section, Key: key, Value: value, Reason: reason})
}

func (imp *importer) parseLine(line string) error {
	t := strings.TrimLeft(line, " \t")
	switch {
	case t == "":
		return nil
	case t[0] == '#':
		rest := strings.TrimLeft(t[1:], " \t")
		if body, ok := strings.CutPrefix(rest, strataPrefix); ok {
			return imp.strataComment(body)
		}
		return nil
	case t[0] == '[':
		return imp.header(strings.TrimRight(stripComment(t), " \t"))
	}
	stmt := stripComment(t)
	eq := strings.IndexByte(stmt, '=')
	if eq < 0 {
		return fmt.Errorf("expected key=value, a [section] or a # comment, found %q", clip(t))
	}
	key := strings.TrimSpace(stmt[:eq])
	if key == "" {
		return fmt.Errorf("statement without a key: %q", clip(t))
	}
	if imp.kind == inNone {
		return fmt.Errorf("%s=... before the first [section]", clip(key))
	}
	id := imp.section + "\x00" + key
	if first, ok := imp.keys[id]; ok {
		return fmt.Errorf("%s is set again in [%s] (first on line %d)", key, imp.section, first)
	}
	imp.keys[id] = imp.line
	value := unescapeTrim(stmt[eq+1:])
	switch imp.kind {
	case inVersion:
		return imp.version(key, value)
	case inDB:
		return imp.dbOption(key, value)
	case inCF:
		return imp.cfOption(key, value)
	case inTable:
		return imp.tableOption(key, value)
	}
	return nil // inSkipped
}

// header starts a section: [Title] or [Title "argument"].
func (imp *importer) header(h string) error {
	if !strings.HasSuffix(h, "]") || len(h) < 3 {
		return fmt.Errorf("malformed section header %q: expected [Title] or [Title \"argument\"]", clip(h))
	}
	inner := strings.TrimSpace(h[1 : len(h)-1])
	title, arg, hasArg := strings.Cut(inner, " ")
	name := title
	if hasArg {
		arg = strings.TrimSpace(arg)
		if len(arg) < 2 || arg[0] != '"' || arg[len(arg)-1] != '"' || strings.Contains(arg[1:len(arg)-1], `"`) {
			return fmt.Errorf("malformed section header %q: the argument must be in double quotes", clip(h))
		}
		arg = arg[1 : len(arg)-1]
		name = title + ` "` + arg + `"`
	}
	if title == "" || strings.ContainsAny(title, "\"[]") {
		return fmt.Errorf("malformed section header %q", clip(h))
	}
	if first, ok := imp.sections[name]; ok {
		return fmt.Errorf("section [%s] appears again (first on line %d)", name, first)
	}
	imp.sections[name] = imp.line
	imp.section = name
	switch {
	case name == sectionVersion:
		imp.kind = inVersion
	case name == sectionDB:
		imp.kind = inDB
	case name == sectionCF:
		imp.kind = inCF
	case name == sectionTable:
		imp.kind = inTable
	case title == "CFOptions" || title == "TableOptions/BlockBasedTable":
		imp.kind = inSkipped
		imp.skip("", "", "only the default column family is mapped: a Strata database has one keyspace")
	case strings.HasPrefix(title, "TableOptions/"):
		imp.kind = inSkipped
		imp.skip("", "", "Pebble writes block-based tables only")
	default:
		imp.kind = inSkipped
		imp.skip("", "", "unknown section")
	}
	return nil
}

func (imp *importer) version(key, value string) error {
	switch key {
	case "rocksdb_version":
	case "options_file_version":
		if major, _, _ := strings.Cut(value, "."); major != "1" {
			return fmt.Errorf("options_file_version=%s: only version 1.x is understood", clip(value))
		}
	default:
		imp.skip(key, value, "unknown key")
	}
	return nil
}

// Reasons for common RocksDB options Strata has no setting for.
var unmappedReasons = map[string]string{
	"max_open_files":                     "no Strata setting: Pebble's table cache keeps its default size",
	"max_background_compactions":         "deprecated in RocksDB: max_background_jobs sets the budget",
	"max_background_flushes":             "deprecated in RocksDB: max_background_jobs sets the budget",
	"use_direct_writes":                  "RocksDB 4 name: use_direct_io_for_flush_and_compaction is the setting",
	"db_log_dir":                         "Pebble writes no info LOG: Strata logs through its Logger",
	"max_total_wal_size":                 "no Strata setting: Pebble flushes by memtable size",
	"bytes_per_sync":                     "no Strata setting: Pebble's BytesPerSync keeps its default",
	"wal_bytes_per_sync":                 "no Strata setting: Pebble's WALBytesPerSync keeps its default",
	"compaction_pri":                     "Pebble picks compactions by its own score",
	"level0_file_num_compaction_trigger": "no Strata setting: Pebble's L0CompactionThreshold keeps its default",
	"level0_slowdown_writes_trigger":     "Pebble has no write slowdown, only a stop",
	"level0_stop_writes_trigger":         "no Strata setting: Pebble's L0StopWritesThreshold keeps its default",
	"max_bytes_for_level_multiplier":     "Strata keeps Pebble's level multiplier of 10",
	"block_restart_interval":             "no Strata setting: Pebble's restart interval of 16 is used",
	"whole_key_filtering":                "Pebble's filters are always on whole keys",
	"format_version":                     "Pebble has its own table format versions",
	"checksum":                           "Pebble chooses its own block checksum",
	"merge_operator":                     "Strata has no merge operator",
	"prefix_extractor":                   "Strata has no prefix extractor",
	"compaction_filter":                  "Strata has no compaction filter",
	"compaction_filter_factory":          "Strata has no compaction filter",
}

func (imp *importer) unknown(key, value string) {
	reason, ok := unmappedReasons[key]
	if !ok {
		reason = "no Strata setting"
	}
	// Values that say what Pebble and Strata do anyway are not worth a line.
	switch {
	case key == "merge_operator" && value == "nullptr",
		key == "prefix_extractor" && value == "nullptr",
		key == "compaction_filter" && value == "nullptr",
		key == "compaction_filter_factory" && value == "nullptr":
		return
	case key == "max_bytes_for_level_multiplier":
		if f, err := strconv.ParseFloat(value, 64); err == nil && f == 10 {
			return
		}
	}
	imp.skip(key, value, reason)
}

func (imp *importer) dbOption(key, value string) error {
	c := imp.cfg
	switch key {
	case "wal_dir":
		c.WALDir = value
	case "use_direct_reads":
		return parseBool(key, value, &c.UseDirectReads)
	case "use_direct_io_for_flush_and_compaction":
		return parseBool(key, value, &c.UseDirectIOForFlushAndCompaction)
	case "max_background_jobs":
		return parseInt(key, value, &c.MaxBackgroundJobs)
	case "create_if_missing":
		var b bool
		if err := parseBool(key, value, &b); err != nil {
			return err
		}
		if !b {
			imp.skip(key, value, "Strata always creates a missing database")
		}
	default:
		imp.unknown(key, value)
	}
	return nil
}

func (imp *importer) cfOption(key, value string) error {
	c := imp.cfg
	switch key {
	case "write_buffer_size":
		return imp.megabytes(key, value, "memtable_size_mb", &c.MemtableSizeMB)
	case "max_write_buffer_number":
		return parseInt(key, value, &c.MaxWriteBufferNumber)
	case "min_write_buffer_number_to_merge":
		return parseInt(key, value, &c.MinWriteBufferNumberToMerge)
	case "compaction_style":
		switch value {
		case "kCompactionStyleLevel":
			c.UseUniversalCompaction = false
		case "kCompactionStyleUniversal":
			c.UseUniversalCompaction = true
		default:
			imp.skip(key, value, "Strata has leveled (and, rejected at open, universal) compaction only")
		}
	case "level_compaction_dynamic_level_bytes":
		return parseBool(key, value, &c.DynamicLevelBytes)
	case "target_file_size_base":
		return imp.megabytes(key, value, "target_file_size_base_mb", &c.TargetFileSizeBaseMB)
	case "max_bytes_for_level_base":
		return imp.megabytes(key, value, "max_bytes_for_level_base_mb", &c.MaxBytesForLevelBaseMB)
	case "optimize_filters_for_hits":
		return parseBool(key, value, &c.OptimizeFiltersForHits)
	case "target_file_size_multiplier":
		if value != "1" {
			imp.skip(key, value, "Strata uses target_file_size_base on every level (multiplier 1)")
		}
	case "num_levels":
		n, err := strconv.Atoi(value)
		if err != nil || n < 1 {
			return fmt.Errorf("num_levels=%s: expected a positive integer", clip(value))
		}
		imp.numLevels = n
		if n != numLevels {
			imp.skip(key, value, fmt.Sprintf("Pebble always has %d levels; compression_per_level is read for %d", numLevels, n))
		}
	case "compression":
		if codec, ok := imp.rocksDBCodec(key, value); ok {
			imp.compression = &codec
		}
	case "bottommost_compression":
		if value == "kDisableCompressionOption" {
			return nil // the bottommost level keeps the codec of the other settings
		}
		if codec, ok := imp.rocksDBCodec(key, value); ok {
			imp.bottommost = &codec
		} else {
			imp.bottommostBad = true
		}
	case "compression_per_level":
		imp.perLevel, imp.perLevelRaw = nil, value
		if value == "" {
			return nil
		}
		for _, name := range strings.Split(value, ":") {
			codec, err := compression.ParseRocksDBName(name)
			if err != nil {
				imp.perLevel = nil
				imp.skip(key, value, fmt.Sprintf("level codec %s has no Pebble equivalent: compression is used", strings.TrimSpace(name)))
				return nil
			}
			imp.perLevel = append(imp.perLevel, codec)
		}
	case "compression_opts":
		imp.optsLevelRaw = value
		imp.optsLevel, _ = imp.compressionOpts(key, value)
	case "bottommost_compression_opts":
		imp.bottomOptsRaw = value
		imp.bottomOptsLevel, imp.bottomOptsOn = imp.compressionOpts(key, value)
	case "comparator":
		if value != "leveldb.BytewiseComparator" {
			imp.skip(key, value, "Strata orders keys bytewise; data written with another comparator cannot be read")
		}
	case "table_factory":
		if value != "BlockBasedTable" {
			imp.skip(key, value, "Pebble writes block-based tables only")
		}
	default:
		imp.unknown(key, value)
	}
	return nil
}

func (imp *importer) tableOption(key, value string) error {
	c := imp.cfg
	switch key {
	case "block_size":
		return parseInt(key, value, &c.BlockSize)
	case "cache_index_and_filter_blocks":
		return parseBool(key, value, &c.CacheIndexAndFilterBlocks)
	case "pin_l0_filter_and_index_blocks_in_cache":
		return parseBool(key, value, &c.PinL0FilterAndIndexBlocksInCache)
	case "partition_filters":
		return parseBool(key, value, &c.PartitionFilters)
	case "cache_index_and_filter_blocks_with_high_priority":
		if value != "true" && value != "1" {
			imp.skip(key, value, reasonHighPri)
		}
	case "index_type":
		// Pebble switches to a two-level index by itself; partition_filters
		// records the wish.
		if value != "kBinarySearch" && value != "kTwoLevelIndexSearch" {
			imp.skip(key, value, "Pebble has binary-search indexes only (two-level when large)")
		}
	case "filter_policy":
		imp.filterPolicy(key, value)
	default:
		imp.unknown(key, value)
	}
	return nil
}

// filterPolicy maps "bloomfilter:N" and "bloomfilter:N:B" (B, RocksDB's old
// block-based builder flag, is ignored) and "nullptr" (no filter).
func (imp *importer) filterPolicy(key, value string) {
	if value == "" || value == "nullptr" {
		imp.cfg.BloomBitsPerKey = 0
		return
	}
	parts := strings.Split(value, ":")
	if parts[0] == "bloomfilter" && (len(parts) == 2 || (len(parts) == 3 && (parts[2] == "false" || parts[2] == "true"))) {
		bits, err := strconv.ParseFloat(parts[1], 64)
		if err == nil && bits >= 0 && bits <= 64 && bits == math.Trunc(bits) {
			imp.cfg.BloomBitsPerKey = int(bits)
			return
		}
		imp.skip(key, value, "bits per key must be a whole number from 0 to 64: bloom_bits_per_key keeps its default")
		return
	}
	imp.skip(key, value, "only bloomfilter:<bits per key>[:false] is understood: bloom_bits_per_key keeps its default")
}

// rocksDBCodec parses a RocksDB codec name; a codec Pebble cannot store is
// listed as Unmapped.
func (imp *importer) rocksDBCodec(key, value string) (compression.Codec, bool) {
	codec, err := compression.ParseRocksDBName(value)
	if err != nil {
		imp.skip(key, value, "no Pebble equivalent: Strata's default codec stays (Pebble stores none, snappy, zstd and minlz; lz4 as minlz)")
		return codec, false
	}
	return codec, true
}

// compressionOpts reads the level and the enabled flag of RocksDB's
// CompressionOptions, written as a struct ({level=3;enabled=true;...}) or in
// the old positional form (window_bits:level:strategy:max_dict_bytes:
// zstd_max_train_bytes:parallel_threads:enabled:...). RocksDB's default
// level, 32767, and zstd's 0 are returned as 0. Dictionary compression and
// parallel threads are listed as Unmapped when set.
func (imp *importer) compressionOpts(key, value string) (level int, enabled bool) {
	fields := map[string]string{}
	if strings.HasPrefix(value, "{") && strings.HasSuffix(value, "}") {
		for _, part := range strings.Split(value[1:len(value)-1], ";") {
			k, v, ok := strings.Cut(part, "=")
			if k = strings.TrimSpace(k); ok && k != "" {
				fields[k] = strings.TrimSpace(v)
			} else if strings.TrimSpace(part) != "" {
				imp.skip(key, value, "unreadable compression options: the codec's default level is kept")
				return 0, false
			}
		}
	} else {
		names := []string{"window_bits", "level", "strategy", "max_dict_bytes", "zstd_max_train_bytes", "parallel_threads", "enabled", "max_dict_buffer_bytes"}
		for i, v := range strings.Split(value, ":") {
			if i < len(names) {
				fields[names[i]] = strings.TrimSpace(v)
			}
		}
	}
	if v, ok := fields["level"]; ok {
		n, err := strconv.Atoi(v)
		if err != nil {
			imp.skip(key, value, "unreadable level: the codec's default level is kept")
		} else if n != kDefaultCompressionLevel {
			level = n
		}
	}
	enabled = fields["enabled"] == "true" || fields["enabled"] == "1"
	for _, k := range []string{"max_dict_bytes", "zstd_max_train_bytes"} {
		if v, ok := fields[k]; ok && v != "0" {
			imp.skip(key+"."+k, v, "Pebble has no dictionary compression")
		}
	}
	if v, ok := fields["parallel_threads"]; ok && v != "1" {
		imp.skip(key+".parallel_threads", v, "Pebble compresses each block on one thread")
	}
	return level, enabled
}

// megabytes converts a size in bytes to whole MB, rounding up.
func (imp *importer) megabytes(key, value, strataKey string, dst *int64) error {
	n, err := strconv.ParseUint(value, 10, 64)
	if err != nil {
		return fmt.Errorf("%s=%s: expected a size in bytes", key, clip(value))
	}
	mb := n / mib
	if n%mib != 0 {
		mb++
		imp.skip(key, value, fmt.Sprintf("not a whole number of MB: %s = %d (rounded up)", strataKey, mb))
	}
	*dst = int64(mb)
	return nil
}

// strataComment reads a "# strata: key=value" comment.
func (imp *importer) strataComment(body string) error {
	key, raw, ok := strings.Cut(body, "=")
	key = strings.TrimSpace(key)
	if !ok || key == "" {
		imp.skip(strings.TrimSpace(strataPrefix+" "+body), "", "not a Strata key=value comment")
		return nil
	}
	value := unescapeTrim(raw)
	c := imp.cfg
	switch key {
	case "db_path":
		c.DBPath = value
	case "wal_failover_dir":
		c.WALFailoverDir = value
	case "db_paths":
		paths, err := parseDBPaths(raw)
		if err != nil {
			return fmt.Errorf("strata: db_paths: %w", err)
		}
		c.DBPaths = paths
	case "zstd_level":
		return parseInt("strata: "+key, value, &c.ZstdLevel)
	case "tiering_move_rate_mb":
		return parseInt("strata: "+key, value, &c.TieringMoveRateMB)
	case "bottommost_block_size":
		return parseInt("strata: "+key, value, &c.BottommostBlockSize)
	case "block_cache_size_mb":
		return parseInt("strata: "+key, value, &c.BlockCacheSizeMB)
	case "high_pri_pool_ratio":
		f, err := strconv.ParseFloat(value, 64)
		if err != nil {
			return fmt.Errorf("strata: %s=%s: expected a number", key, clip(value))
		}
		c.HighPriPoolRatio = f
	case "direct_io_fallback":
		return parseBool("strata: "+key, value, &c.DirectIOFallback)
	case "enable_wal":
		return parseBool("strata: "+key, value, &c.EnableWAL)
	case "sync":
		return parseBool("strata: "+key, value, &c.Sync)
	case "compression_default":
		imp.spellDefault = &spelling{section: imp.section, value: value}
	case "compression_bottommost":
		imp.spellBottommost = &spelling{section: imp.section, value: value}
	default:
		imp.skip(strataPrefix+" "+key, value, "unknown Strata setting")
	}
	return nil
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

// resolveCodecs combines the codec settings as RocksDB does:
// compression_per_level overrides compression; bottommost_compression, if
// set, overrides the last level; bottommost_compression_opts applies to the
// last level when enabled, compression_opts otherwise. Strata keeps one
// codec for levels 0-5 and one for level 6; a "# strata:" spelling of the
// same codec then replaces the derived name.
func (imp *importer) resolveCodecs() {
	c := imp.cfg
	n := imp.numLevels
	if n == 0 {
		n = numLevels
	}
	levels, bottom := imp.compression, imp.compression
	if len(imp.perLevel) > 0 {
		at := func(level int) compression.Codec { return imp.perLevel[min(level, len(imp.perLevel)-1)] }
		uniform := true
		for l := 1; l < n-1; l++ {
			uniform = uniform && at(l) == at(0)
		}
		if uniform && n > 1 {
			first := at(0)
			levels = &first
		} else if n > 1 {
			imp.unmapped = append(imp.unmapped, Unmapped{Section: sectionCF, Key: "compression_per_level", Value: imp.perLevelRaw,
				Reason: "levels 0-5 use different codecs; Strata has one codec for them: compression is used"})
		}
		last := at(n - 1)
		bottom = &last
	}
	if imp.bottommost != nil || imp.bottommostBad {
		bottom = imp.bottommost // an unusable codec leaves Strata's default
	}
	bottomLevel := imp.optsLevel
	bottomRaw, bottomKey := imp.optsLevelRaw, "compression_opts"
	if imp.bottomOptsOn {
		bottomLevel, bottomRaw, bottomKey = imp.bottomOptsLevel, imp.bottomOptsRaw, "bottommost_compression_opts"
	}
	if levels != nil {
		c.CompressionDefault = imp.codecName(*levels, imp.optsLevel, "compression_opts", imp.optsLevelRaw)
	}
	if bottom != nil {
		c.CompressionBottommost = imp.codecName(*bottom, bottomLevel, bottomKey, bottomRaw)
	}
	imp.applySpelling("compression_default", imp.spellDefault, &c.CompressionDefault, levels != nil)
	imp.applySpelling("compression_bottommost", imp.spellBottommost, &c.CompressionBottommost, bottom != nil)
}

// codecName returns the config spelling of a RocksDB codec at a zstd level
// (0: the default): "zstd" when the level is zstd_level's, "zstd:N" otherwise.
func (imp *importer) codecName(codec compression.Codec, level int, key, raw string) string {
	if codec.Algorithm != compression.Zstd || level == 0 {
		return codec.Algorithm.String()
	}
	if level < 1 || level > compression.MaxZstdLevel {
		imp.unmapped = append(imp.unmapped, Unmapped{Section: sectionCF, Key: key, Value: raw,
			Reason: fmt.Sprintf("zstd level %d is outside 1-%d: zstd_level is used", level, compression.MaxZstdLevel)})
		return "zstd"
	}
	if level == imp.cfg.ZstdLevel {
		return "zstd"
	}
	return fmt.Sprintf("zstd:%d", level)
}

// applySpelling replaces a codec name derived from the RocksDB keys by the
// "# strata:" spelling when both mean the same codec, and sets it when no
// RocksDB key named the codec.
func (imp *importer) applySpelling(key string, s *spelling, dst *string, derived bool) {
	if s == nil {
		return
	}
	if !derived {
		*dst = s.value
		return
	}
	want, err := imp.cfg.codec(key, *dst)
	got, err2 := imp.cfg.codec(key, s.value)
	if err == nil && err2 == nil && want == got {
		*dst = s.value
		return
	}
	imp.unmapped = append(imp.unmapped, Unmapped{Section: s.section, Key: strataPrefix + " " + key, Value: s.value,
		Reason: fmt.Sprintf("disagrees with the RocksDB compression keys, which give %s", *dst)})
}

func parseBool(key, value string, dst *bool) error {
	switch value {
	case "true", "1":
		*dst = true
	case "false", "0":
		*dst = false
	default:
		return fmt.Errorf("%s=%s: expected true or false", key, clip(value))
	}
	return nil
}

func parseInt[T int | int64](key, value string, dst *T) error {
	var zero T
	bits := 64
	if _, isInt := any(zero).(int); isInt {
		bits = strconv.IntSize
	}
	n, err := strconv.ParseInt(value, 10, bits)
	if err != nil {
		if errors.Is(err, strconv.ErrRange) {
			return fmt.Errorf("%s=%s: integer out of range", key, clip(value))
		}
		return fmt.Errorf("%s=%s: expected an integer", key, clip(value))
	}
	*dst = T(n)
	return nil
}

// stripComment cuts a statement at its first unescaped '#'.
func stripComment(s string) string {
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '#':
			return s[:i]
		}
	}
	return s
}

// splitUnescaped splits s at each unescaped sep, keeping escapes.
func splitUnescaped(s string, sep byte) []string {
	var parts []string
	start := 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case sep:
			parts = append(parts, s[start:i])
			start = i + 1
		}
	}
	return append(parts, s[start:])
}

// lastUnescaped returns the index of the last unescaped sep in s, or -1.
func lastUnescaped(s string, sep byte) int {
	last := -1
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case sep:
			last = i
		}
	}
	return last
}

// unescapeTrim undoes escapeValue: it drops unescaped spaces and tabs at
// both ends and resolves \n, \r and \x (any other x stands for itself).
func unescapeTrim(s string) string {
	out := make([]byte, 0, len(s))
	start, end := -1, 0 // the kept range of out: from the first to past the last significant byte
	for i := 0; i < len(s); i++ {
		ch, escaped := s[i], false
		if ch == '\\' && i+1 < len(s) {
			i++
			ch, escaped = s[i], true
			switch ch {
			case 'n':
				ch = '\n'
			case 'r':
				ch = '\r'
			}
		}
		if escaped || (ch != ' ' && ch != '\t') {
			if start < 0 {
				start = len(out)
			}
			end = len(out) + 1
		}
		out = append(out, ch)
	}
	if start < 0 {
		return ""
	}
	return string(out[start:end])
}

// clip shortens a piece of input quoted in an error message.
func clip(s string) string {
	const n = 60
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}
