package config

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/stratadb/strata/compression"
)

// RocksDBOptionsFileName is the name of the RocksDB-format OPTIONS file Strata
// writes into db_path on every open. It is not numeric, so Pebble never takes
// it for one of its own OPTIONS-NNNNNN files (which it would renumber and
// delete).
const RocksDBOptionsFileName = "OPTIONS-rocksdb"

// The RocksDB version whose option names and formats the file follows, and
// the options file format version.
const (
	rocksDBVersion     = "8.11.0"
	optionsFileVersion = "1.1"
)

// Section names of a RocksDB OPTIONS file.
const (
	sectionVersion = "Version"
	sectionDB      = "DBOptions"
	sectionCF      = `CFOptions "default"`
	sectionTable   = `TableOptions/BlockBasedTable "default"`
)

// strataPrefix starts a comment that carries a Strata setting RocksDB does
// not persist: "# strata: key=value".
const strataPrefix = "strata:"

// numLevels is the number of levels of a Pebble LSM, the last one being the
// bottommost.
const numLevels = 7

// kDefaultCompressionLevel is RocksDB's compression_opts.level for "the
// codec's default level".
const kDefaultCompressionLevel = 32767

const mib = 1 << 20

// RocksDBOptions renders c as a RocksDB OPTIONS file (see
// RocksDBOptionsFileName), so that `grep compression` and RocksDB's tools
// show the configuration under RocksDB's option names, and
// ImportRocksDBOptions can read it back: importing the file yields a Config
// equal to c.
//
// The file has RocksDB's four sections, [Version], [DBOptions],
// [CFOptions "default"] and [TableOptions/BlockBasedTable "default"], with
// sizes in bytes. A header of comments gives the requested and the
// effective codec of each level, and each Note as "# not applicable: key =
// value: reason" (codec notes are covered by the codec lines). Settings
// RocksDB does not keep in its OPTIONS file (db_path, db_paths,
// wal_failover_dir, zstd_level, enable_wal, sync, the block cache, the
// codec names as written) are "# strata: key=value" comments, which
// RocksDB's own parser skips. Values of RocksDB keys are escaped as RocksDB
// escapes them (\: \# \\ \n \r).
//
// c should be valid; an invalid codec name is written in a comment and
// leaves out the compression keys. A requested minlz is written as
// kMinLZCompression, a name RocksDB itself does not know; the header says so.
func (c *Config) RocksDBOptions() string {
	w := &optionsWriter{}
	levels, levelsErr := c.codec("compression_default", c.CompressionDefault)
	bottom, bottomErr := c.codec("compression_bottommost", c.CompressionBottommost)
	codecsOK := levelsErr == nil && bottomErr == nil

	w.comment("RocksDB-format options file written by Strata (github.com/stratadb/strata).")
	w.comment("Strata stores its data with Pebble, which neither reads nor needs this file:")
	w.comment("it records the configuration under RocksDB's option names, and Strata's")
	w.comment("config.ImportRocksDBOptions reads it back. Settings that RocksDB does not keep")
	w.comment("in its options file are the comments starting with \"strata:\" below.")
	w.comment("")
	w.codecLine("compression (levels 0-5)", c.CompressionDefault, levels, levelsErr)
	w.codecLine("bottommost_compression (level 6)", c.CompressionBottommost, bottom, bottomErr)
	if (levelsErr == nil && levels.Algorithm == compression.LZ4) || (bottomErr == nil && bottom.Algorithm == compression.LZ4) {
		w.comment(reasonLZ4)
	}
	if (levelsErr == nil && levels.Algorithm == compression.MinLZ) || (bottomErr == nil && bottom.Algorithm == compression.MinLZ) {
		w.comment("kMinLZCompression is Strata's name for MinLZ, which RocksDB does not have:")
		w.comment("RocksDB itself cannot load this file as it is.")
	}
	notes := false
	for _, n := range c.Notes() {
		if n.Reason == reasonLZ4 {
			continue
		}
		if !notes {
			w.comment("")
			notes = true
		}
		w.comment("not applicable: " + n.String())
	}
	w.comment("")
	w.strata("db_path", escapeValue(c.DBPath, strataSpecial))
	w.strata("wal_failover_dir", escapeValue(c.WALFailoverDir, strataSpecial))
	w.strata("db_paths", formatDBPaths(c.DBPaths))
	w.strata("tiering_move_rate_mb", strconv.FormatInt(c.TieringMoveRateMB, 10))
	w.strata("zstd_level", strconv.Itoa(c.ZstdLevel))

	w.section(sectionVersion)
	w.key("rocksdb_version", rocksDBVersion)
	w.key("options_file_version", optionsFileVersion)

	w.section(sectionDB)
	w.key("wal_dir", escapeValue(c.WALDir, rocksDBSpecial))
	w.key("use_direct_reads", strconv.FormatBool(c.UseDirectReads))
	w.key("use_direct_io_for_flush_and_compaction", strconv.FormatBool(c.UseDirectIOForFlushAndCompaction))
	w.strata("direct_io_fallback", strconv.FormatBool(c.DirectIOFallback))
	w.key("max_background_jobs", strconv.Itoa(c.MaxBackgroundJobs))
	w.key("create_if_missing", "true")
	w.comment("enable_wal and sync are per-write options in RocksDB (WriteOptions::disableWAL, ::sync)")
	w.strata("enable_wal", strconv.FormatBool(c.EnableWAL))
	w.strata("sync", strconv.FormatBool(c.Sync))

	w.section(sectionCF)
	w.key("write_buffer_size", strconv.FormatInt(c.MemtableSizeMB*mib, 10))
	w.key("max_write_buffer_number", strconv.Itoa(c.MaxWriteBufferNumber))
	w.key("min_write_buffer_number_to_merge", strconv.Itoa(c.MinWriteBufferNumberToMerge))
	style := "kCompactionStyleLevel"
	if c.UseUniversalCompaction {
		style = "kCompactionStyleUniversal"
	}
	w.key("compaction_style", style)
	w.key("level_compaction_dynamic_level_bytes", strconv.FormatBool(c.DynamicLevelBytes))
	w.key("num_levels", strconv.Itoa(numLevels))
	w.key("target_file_size_base", strconv.FormatInt(c.TargetFileSizeBaseMB*mib, 10))
	w.key("target_file_size_multiplier", "1")
	w.key("max_bytes_for_level_base", strconv.FormatInt(c.MaxBytesForLevelBaseMB*mib, 10))
	w.key("optimize_filters_for_hits", strconv.FormatBool(c.OptimizeFiltersForHits))
	if codecsOK {
		perLevel := make([]string, numLevels)
		for i := range perLevel {
			perLevel[i] = levels.RocksDBName()
		}
		perLevel[numLevels-1] = bottom.RocksDBName()
		w.key("compression", levels.RocksDBName())
		w.key("bottommost_compression", bottom.RocksDBName())
		w.key("compression_per_level", strings.Join(perLevel, ":"))
		w.key("compression_opts", compressionOpts(levels, false))
		w.key("bottommost_compression_opts", compressionOpts(bottom, true))
	}
	w.strata("compression_default", escapeValue(c.CompressionDefault, strataSpecial))
	w.strata("compression_bottommost", escapeValue(c.CompressionBottommost, strataSpecial))

	w.section(sectionTable)
	w.key("block_size", strconv.Itoa(c.BlockSize))
	w.comment("RocksDB has one block_size; Strata gives the bottommost level its own (0 = block_size)")
	w.strata("bottommost_block_size", strconv.Itoa(c.BottommostBlockSize))
	w.key("cache_index_and_filter_blocks", strconv.FormatBool(c.CacheIndexAndFilterBlocks))
	w.key("cache_index_and_filter_blocks_with_high_priority", "true")
	w.key("pin_l0_filter_and_index_blocks_in_cache", strconv.FormatBool(c.PinL0FilterAndIndexBlocksInCache))
	w.key("partition_filters", strconv.FormatBool(c.PartitionFilters))
	index := "kBinarySearch"
	if c.PartitionFilters {
		index = "kTwoLevelIndexSearch" // RocksDB drops partition_filters without it
	}
	w.key("index_type", index)
	filter := "nullptr"
	if c.BloomBitsPerKey != 0 {
		filter = fmt.Sprintf("bloomfilter:%d:false", c.BloomBitsPerKey)
	}
	w.key("filter_policy", filter)
	w.comment("RocksDB does not keep the block cache in its options file")
	w.strata("block_cache_size_mb", strconv.FormatInt(c.BlockCacheSizeMB, 10))
	w.strata("high_pri_pool_ratio", strconv.FormatFloat(c.HighPriPoolRatio, 'g', -1, 64))
	return w.b.String()
}

// optionsWriter writes the lines of an OPTIONS file; inside a section every
// line is indented by two spaces, as RocksDB writes them.
type optionsWriter struct {
	b      strings.Builder
	indent string
}

func (w *optionsWriter) comment(text string) {
	if text == "" {
		w.b.WriteString(w.indent + "#\n")
		return
	}
	w.b.WriteString(w.indent + "# " + text + "\n")
}

func (w *optionsWriter) strata(key, escaped string) {
	w.comment(strataPrefix + " " + key + "=" + escaped)
}

func (w *optionsWriter) section(name string) {
	w.b.WriteString("\n[" + name + "]\n")
	w.indent = "  "
}

func (w *optionsWriter) key(key, escaped string) {
	w.b.WriteString(w.indent + key + "=" + escaped + "\n")
}

func (w *optionsWriter) codecLine(what, name string, codec compression.Codec, err error) {
	if err != nil {
		w.comment(fmt.Sprintf("%s: invalid codec %q", what, name))
		return
	}
	w.comment(fmt.Sprintf("%s: requested %s, effective %s", what, describeCodec(codec), describeCodec(codec.Effective())))
}

// describeCodec names a codec with its zstd level spelled out.
func describeCodec(c compression.Codec) string {
	if c.Algorithm == compression.Zstd {
		return fmt.Sprintf("zstd level %d", c.Level)
	}
	return c.Algorithm.String()
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

// formatDBPaths renders db_paths as path:size,path:size, with ':' and ','
// escaped in the paths.
func formatDBPaths(paths []DBPath) string {
	parts := make([]string, len(paths))
	for i, p := range paths {
		parts[i] = escapeValue(p.Path, dbPathSpecial) + ":" + strconv.FormatUint(p.TargetSizeBytes, 10)
	}
	return strings.Join(parts, ",")
}

// Characters escaped with a backslash besides the backslash itself: in the
// value of a RocksDB key, as RocksDB escapes them; in a "# strata:" comment,
// which only Strata reads, none; in a path of db_paths, the separators.
const (
	rocksDBSpecial = ":#"
	strataSpecial  = ""
	dbPathSpecial  = ":,"
)

// escapeValue escapes s for an OPTIONS file as RocksDB does: a backslash
// before '\\' and each character of special, and \n and \r for line breaks.
// Leading and trailing spaces and tabs are escaped too, so that the reader,
// which trims unescaped ones, keeps them.
func escapeValue(s, special string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		ch := s[i]
		switch {
		case ch == '\n':
			b.WriteString(`\n`)
		case ch == '\r':
			b.WriteString(`\r`)
		case ch == '\\' || strings.IndexByte(special, ch) >= 0,
			(ch == ' ' || ch == '\t') && (i == 0 || i == len(s)-1):
			b.WriteByte('\\')
			b.WriteByte(ch)
		default:
			b.WriteByte(ch)
		}
	}
	return b.String()
}
