// Package config holds Strata's file-facing configuration: the fields of a
// RocksDB-wrapper-style config (the THEMIS RocksDBWrapper::Config), their
// defaults, validation, loading from TOML, YAML or JSON, and the
// RocksDB-format OPTIONS file written on every open and importable back.
//
//	cfg := config.Default()
//	cfg.DBPath = "/var/lib/strata"
//	cfg.CompressionBottommost = "zstd:6"
//	if err := cfg.Validate(); err != nil { ... } // every problem, each naming its key
//
// A config file may also name a setting as RocksDB does, in RocksDB's units
// (write_buffer_size = 134217728, compression_per_level = [...]): the
// OPTIONS importer reads those names, row by row (rocksdb_names.go).
//
// Every key's facts (RocksDB name, unit, range, default) are one row of the
// table in fields.go; Resolve derives the typed codecs, the notes and the
// cache split once. The conversion into Pebble options is in one place
// (internal/pebbleconf); this package knows nothing of Pebble beyond the
// codec names it validates.
package config

// DBPath is one entry of db_paths: a directory for table files and the number
// of bytes of tables it is meant to hold, as RocksDB's DbPath.
type DBPath struct {
	// Path is the directory. It is created at open if missing.
	Path string `toml:"path" yaml:"path" json:"path"`
	// TargetSizeBytes is the number of table bytes this path should hold
	// before lower levels spill to the next path; the last path takes the
	// rest. Must be > 0.
	TargetSizeBytes uint64 `toml:"target_size_bytes" yaml:"target_size_bytes" json:"target_size_bytes"`
}

// Config is the whole configuration of a Strata database. File keys are the
// snake_case names in the struct tags. Sizes given in MB are mebibytes.
//
// A Config is plain data: Validate checks it without side effects, and
// engine.Open never mutates the caller's struct.
type Config struct {
	// DBPath is the database directory: MANIFEST, OPTIONS files, the lock and
	// (when db_paths is empty) every table file live here. Must not be empty.
	// The default value is "data/strata".
	DBPath string `toml:"db_path" yaml:"db_path" json:"db_path"`

	// WALDir is the directory of the write-ahead log, for example a separate
	// fast device. Empty means db_path. Realised by Pebble's Options.WALDir;
	// created at open if missing. The default value is "" (db_path).
	WALDir string `toml:"wal_dir" yaml:"wal_dir" json:"wal_dir"`

	// WALFailoverDir is a secondary WAL directory (ideally another device) that
	// Pebble switches the WAL to when writes to wal_dir stall, and back when
	// they recover (Pebble's Options.WALFailover). Empty disables failover.
	// The default value is "".
	WALFailoverDir string `toml:"wal_failover_dir" yaml:"wal_failover_dir" json:"wal_failover_dir"`

	// DBPaths spreads table files over several directories by level, as
	// RocksDB's db_paths: each level goes to the first path whose remaining
	// target size still holds it, the last path takes the rest (see
	// docs/tiering.md). Empty means every table lives in db_path. Each path
	// must be distinct and not nested in another. The default value is empty.
	DBPaths []DBPath `toml:"db_paths" yaml:"db_paths" json:"db_paths"`

	// TieringMoveRateMB caps, in MiB per second, how fast the tiered
	// layout's mover copies tables between db_paths (after the LSM changes
	// shape, when db_paths changes, and in CompactAll's final settling), so
	// that moving does not starve foreground reads, flushes and
	// compactions. 0 means unlimited. Only used with db_paths. The default
	// value is 64.
	TieringMoveRateMB int64 `toml:"tiering_move_rate_mb" yaml:"tiering_move_rate_mb" json:"tiering_move_rate_mb"`

	// CompressionDefault is the block codec of levels 0-5: none, snappy, lz4,
	// zstd, zstd:N or minlz. lz4 is stored as minlz (Pebble's block format has
	// no LZ4; see package compression). The default value is "lz4".
	CompressionDefault string `toml:"compression_default" yaml:"compression_default" json:"compression_default"`

	// CompressionBottommost is the block codec of the bottommost level (L6),
	// where most data lives once the database has grown. Same names as
	// compression_default. A full compaction (engine.DB.CompactAll) rewrites
	// every table into its level's codec. The default value is "zstd".
	CompressionBottommost string `toml:"compression_bottommost" yaml:"compression_bottommost" json:"compression_bottommost"`

	// CompressionLevels is the block codec of each level, L0 first: seven
	// names as compression_default takes them, as RocksDB users set
	// compression_per_level (["none", "none", "lz4", "lz4", "lz4", "zstd",
	// "zstd"]: cheap flushes, lz4 where data is rewritten often, zstd where
	// it settles). When set it replaces compression_default and
	// compression_bottommost, which then have no effect, and a config file
	// may not give it beside them. Levels are Pebble's absolute levels
	// (Levels[i].Compression); RocksDB with level_compaction_dynamic_level_bytes
	// counts the entries after L0 from its base level instead (see
	// docs/config.md). Empty means compression_default on L0-L5 and
	// compression_bottommost on L6. The default value is empty.
	CompressionLevels []string `toml:"compression_levels" yaml:"compression_levels" json:"compression_levels"`

	// ZstdLevel is the zstd level used where a codec says just "zstd"
	// (RocksDB's compression_opts.level); "zstd:N" overrides it per setting.
	// 1..22. The default value is 3.
	ZstdLevel int `toml:"zstd_level" yaml:"zstd_level" json:"zstd_level"`

	// BlockSize is the target uncompressed size of a table data block, in
	// bytes (RocksDB's block_size). Larger blocks compress better and cost
	// more per point read. 1 KiB..1 MiB. The default value is 4096.
	BlockSize int `toml:"block_size" yaml:"block_size" json:"block_size"`

	// BottommostBlockSize is the target uncompressed size of a data block in
	// the bottommost level (L6) only, in bytes; 0 means block_size. RocksDB
	// has one block_size for every level; Pebble sets it per level, and
	// Strata uses that to give the bottommost level, where most data lives
	// and zstd runs, blocks that compress better, while L0-L5 keep
	// block_size for hot reads. A point read that misses the block cache
	// decompresses a whole block, so the size trades disk against the CPU of
	// cold reads: on 2 GB of 2 KB JSON documents behind an 8 MB cache, lz4
	// above zstd stores 1.83x with 4 KB blocks, 1.95x with 6 KB, 2.04x with
	// 8 KB and 2.38x with 32 KB, and reads at 1.06x, 1.03x, 0.93-0.97x and
	// 0.57x RocksDB's MB per CPU-second (RocksDB 7.8 with 4 KB blocks
	// stores 1.87x; docs/data/rocksdb-speed.md). The default, 6 KB, is the
	// one of these sizes at which Strata both stores more than RocksDB and
	// reads at its speed. 0 or 1 KiB..1 MiB. The default value is 6144.
	BottommostBlockSize int `toml:"bottommost_block_size" yaml:"bottommost_block_size" json:"bottommost_block_size"`

	// BlockCacheSizeMB is the size of the shared block cache in MB, holding
	// data, index and filter blocks (pebble.NewCache). 0 gives Pebble's
	// minimum. The default value is 256.
	BlockCacheSizeMB int64 `toml:"block_cache_size_mb" yaml:"block_cache_size_mb" json:"block_cache_size_mb"`

	// CacheIndexAndFilterBlocks puts index and filter blocks in the block
	// cache. Pebble always does so, so true is what Strata delivers; false is
	// accepted and reported as not applicable. The default value is true.
	CacheIndexAndFilterBlocks bool `toml:"cache_index_and_filter_blocks" yaml:"cache_index_and_filter_blocks" json:"cache_index_and_filter_blocks"`

	// PinL0FilterAndIndexBlocksInCache pins L0 index and filter blocks in the
	// cache. Pebble has no pinning; accepted and reported as not applicable.
	// The default value is true.
	PinL0FilterAndIndexBlocksInCache bool `toml:"pin_l0_filter_and_index_blocks_in_cache" yaml:"pin_l0_filter_and_index_blocks_in_cache" json:"pin_l0_filter_and_index_blocks_in_cache"`

	// PartitionFilters splits filters into partitions. Pebble keeps one filter
	// per table and switches to a two-level index by itself when an index
	// grows; accepted and reported as not applicable. The default value is true.
	PartitionFilters bool `toml:"partition_filters" yaml:"partition_filters" json:"partition_filters"`

	// HighPriPoolRatio is the share of the block cache reserved for index and
	// filter blocks in RocksDB's LRU cache. Pebble's CLOCK-Pro cache has no
	// priority pools; accepted (0..1) and reported as not applicable. The
	// default value is 0.5.
	HighPriPoolRatio float64 `toml:"high_pri_pool_ratio" yaml:"high_pri_pool_ratio" json:"high_pri_pool_ratio"`

	// BloomBitsPerKey is the bloom filter size per key on every level
	// (bloom.FilterPolicy); 10 gives about 1% false positives. 0 disables
	// filters. 0..64. The default value is 10.
	BloomBitsPerKey int `toml:"bloom_bits_per_key" yaml:"bloom_bits_per_key" json:"bloom_bits_per_key"`

	// OptimizeFiltersForHits skips the bloom filters of the bottommost
	// level on point reads, as RocksDB's option of the same name: right
	// when nearly every key read exists, since L6 filters are large and
	// then only cost cache space and a check. false (RocksDB's default)
	// consults them, so a read of an absent key skips L6's data blocks:
	// Strata's Get then reads through a prefix seek with Pebble's
	// UseL6Filters, as Pebble's own Get never reads L6 filters (see
	// engine/filters.go). No effect with bloom_bits_per_key = 0. The
	// default value is false.
	OptimizeFiltersForHits bool `toml:"optimize_filters_for_hits" yaml:"optimize_filters_for_hits" json:"optimize_filters_for_hits"`

	// MemtableSizeMB is the size of one memtable in MB (RocksDB's
	// write_buffer_size, Pebble's MemTableSize; Pebble ramps up to it). 1..4095.
	// The default value is 256.
	MemtableSizeMB int64 `toml:"memtable_size_mb" yaml:"memtable_size_mb" json:"memtable_size_mb"`

	// MaxWriteBufferNumber is the number of memtables (active plus waiting
	// to flush) at which writes stop (Pebble's MemTableStopWritesThreshold).
	// RocksDB raises 1 to 2, and so does Strata. 1..64. The default value is 3.
	MaxWriteBufferNumber int `toml:"max_write_buffer_number" yaml:"max_write_buffer_number" json:"max_write_buffer_number"`

	// MinWriteBufferNumberToMerge is the number of immutable memtables merged
	// into one flush. Pebble flushes all ready memtables together, which is
	// what 1 asks for; larger values are accepted and reported as not
	// applicable. 1..64. The default value is 1.
	MinWriteBufferNumberToMerge int `toml:"min_write_buffer_number_to_merge" yaml:"min_write_buffer_number_to_merge" json:"min_write_buffer_number_to_merge"`

	// UseUniversalCompaction selects RocksDB's universal compaction. Pebble
	// has only leveled compaction, so true fails Open with an error that says
	// to use leveled compaction. The default value is false.
	UseUniversalCompaction bool `toml:"use_universal_compaction" yaml:"use_universal_compaction" json:"use_universal_compaction"`

	// DynamicLevelBytes sizes levels from the bottom up. Pebble's level sizing
	// is always dynamic, which is what true asks for; false is accepted and
	// reported as not applicable. The default value is true.
	DynamicLevelBytes bool `toml:"dynamic_level_bytes" yaml:"dynamic_level_bytes" json:"dynamic_level_bytes"`

	// TargetFileSizeBaseMB is the target size of table files in MB, on every
	// level from Lbase down (RocksDB's target_file_size_base with multiplier
	// 1; Pebble's TargetFileSizes[1..6]). 1..4096. The default value is 64.
	TargetFileSizeBaseMB int64 `toml:"target_file_size_base_mb" yaml:"target_file_size_base_mb" json:"target_file_size_base_mb"`

	// MaxBytesForLevelBaseMB is the target size of the base level in MB
	// (Pebble's LBaseMaxBytes). 1..1048576. The default value is 256.
	MaxBytesForLevelBaseMB int64 `toml:"max_bytes_for_level_base_mb" yaml:"max_bytes_for_level_base_mb" json:"max_bytes_for_level_base_mb"`

	// EnableBlobFiles keeps values of at least min_blob_size bytes in blob
	// files apart from the keys (RocksDB's integrated BlobDB, Pebble's value
	// separation). A compaction then moves a reference to the value, not the
	// value, so a large value is written about once instead of once per
	// level, and a scan of keys alone reads no values. Reads of a separated
	// value take one more block lookup. Blob files take the codec and block
	// size of the level they are written for. The default value is false
	// (`strata serve` turns it on: see config.ServeDefault).
	EnableBlobFiles bool `toml:"enable_blob_files" yaml:"enable_blob_files" json:"enable_blob_files"`

	// MinBlobSize is the smallest value, in bytes, kept in a blob file when
	// enable_blob_files is set; smaller values stay in the tables. 0 (RocksDB's
	// default) separates every value. 0..1073741824. The default value is 0.
	MinBlobSize int64 `toml:"min_blob_size" yaml:"min_blob_size" json:"min_blob_size"`

	// EnableBlobGarbageCollection rewrites blob files once a tenth of their
	// values are no longer referenced and they are at least a minute
	// old, so that deleted and overwritten values give their space back
	// (Pebble's blob rewrite compactions, TargetGarbageRatio 0.1). With
	// false a blob file is deleted only when no key references any of its
	// values. The default value is false.
	EnableBlobGarbageCollection bool `toml:"enable_blob_garbage_collection" yaml:"enable_blob_garbage_collection" json:"enable_blob_garbage_collection"`

	// KeyCompression is the codec of the tables' data and index blocks when
	// values live in blob files (enable_blob_files): the keys, the
	// references to blob values and the values under min_blob_size. The
	// level's codec (compression_default, compression_bottommost,
	// compression_levels) then compresses the values in blob files. Every
	// point read goes through a table's data block, so a zstd level's keys
	// cost a zstd decompression on each cache miss while its values,
	// most of its bytes, are what zstd shrinks. Same names as
	// compression_default; RocksDB has no such option (its
	// blob_compression_type is one codec for every blob file). Requires
	// enable_blob_files. Empty means the level's codec for the tables too.
	// The default value is empty (`strata serve`: "lz4", see
	// config.ServeKeyCodec).
	KeyCompression string `toml:"key_compression" yaml:"key_compression" json:"key_compression"`

	// UseDirectReads reads table files with O_DIRECT, bypassing the OS page
	// cache. The default value is false.
	UseDirectReads bool `toml:"use_direct_reads" yaml:"use_direct_reads" json:"use_direct_reads"`

	// UseDirectIOForFlushAndCompaction writes the table files of flushes and
	// compactions with O_DIRECT; the WAL and MANIFEST stay buffered. The
	// default value is false.
	UseDirectIOForFlushAndCompaction bool `toml:"use_direct_io_for_flush_and_compaction" yaml:"use_direct_io_for_flush_and_compaction" json:"use_direct_io_for_flush_and_compaction"`

	// DirectIOFallback makes Open use buffered I/O, instead of failing, for
	// a table directory whose filesystem refuses O_DIRECT (tmpfs, some
	// overlay or FUSE setups) while use_direct_reads or
	// use_direct_io_for_flush_and_compaction is set; the fallback is reported
	// in Stats and one log line. The default value is false.
	DirectIOFallback bool `toml:"direct_io_fallback" yaml:"direct_io_fallback" json:"direct_io_fallback"`

	// EnableWAL writes every batch to the write-ahead log first. false disables
	// the WAL for the whole database (Pebble's DisableWAL): unflushed writes are
	// lost in a crash. The default value is true.
	EnableWAL bool `toml:"enable_wal" yaml:"enable_wal" json:"enable_wal"`

	// Sync makes every write wait until its WAL record is on stable storage
	// (RocksDB's WriteOptions.sync; pebble.Sync). With false an acknowledged
	// write survives a process crash but not a machine crash. Requires
	// enable_wal. The default value is false.
	Sync bool `toml:"sync" yaml:"sync" json:"sync"`

	// MaxBackgroundJobs is the number of background flushes and compactions.
	// Pebble runs one flush at a time outside this budget; Strata gives
	// compactions max(1, jobs - max(1, jobs/4)), RocksDB's split. 1..256. The
	// default value is 2.
	MaxBackgroundJobs int `toml:"max_background_jobs" yaml:"max_background_jobs" json:"max_background_jobs"`

	// MaxOpenFiles is how many table and blob files the engine keeps open
	// (Pebble's file cache, MaxOpenFiles). A read in a file that is not
	// open opens it and reads its footer, index and properties first: with
	// more files than this, random reads pay that again and again (a
	// Kubernetes-sized store has thousands of small blob files). -1,
	// RocksDB's default, keeps every file open, up to three quarters of the
	// process's open-file limit (RLIMIT_NOFILE), the rest left for
	// connections and logs. -1 or 20..16777216. The default value is -1.
	MaxOpenFiles int `toml:"max_open_files" yaml:"max_open_files" json:"max_open_files"`

	// Server is the [server] section of `strata serve` (see ServerConfig);
	// the engine ignores it.
	Server ServerConfig `toml:"server" yaml:"server" json:"server"`

	// Cluster is the [cluster] section of `strata serve`: the members of a
	// replicated cluster (see ClusterConfig); the engine ignores it.
	Cluster ClusterConfig `toml:"cluster" yaml:"cluster" json:"cluster"`
}

// Default returns the configuration the THEMIS tuning guide recommends: lz4
// on levels 0-5, zstd on the bottommost level, 10 bloom bits per key, index
// and filter blocks cached, a 256 MB memtable, three write buffers, leveled
// compaction with dynamic level sizes, 64 MB files, a 256 MB base level,
// buffered I/O and the WAL on.
//
// The values are the defaults of the table of fields (fields.go).
func Default() *Config {
	c := &Config{Server: defaultServer(), Cluster: defaultCluster()}
	for _, f := range byField {
		f.setDefault(c)
	}
	return c
}

// Clone returns a deep copy.
func (c *Config) Clone() *Config {
	out := *c
	out.DBPaths = append([]DBPath(nil), c.DBPaths...)
	out.CompressionLevels = append([]string(nil), c.CompressionLevels...)
	out.Cluster.Members = append([]ClusterMember(nil), c.Cluster.Members...)
	return &out
}
