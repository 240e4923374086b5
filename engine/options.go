package engine

import (
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/sstable"
	"github.com/stratadb/strata/config"
)

// ErrCannotDeliver is returned by Open for a setting whose behaviour no
// Pebble-based engine can deliver; the error names the key and what to use
// instead.
var ErrCannotDeliver = errors.New("engine: setting cannot be delivered")

// checkDeliverable rejects settings Strata cannot honour. It runs after
// Validate, so every value is in range.
func checkDeliverable(cfg *config.Config) error {
	if cfg.UseUniversalCompaction {
		return fmt.Errorf("%w: use_universal_compaction = true: Pebble has only leveled compaction; set use_universal_compaction = false (leveled, with dynamic level sizes)", ErrCannotDeliver)
	}
	return nil
}

// pebbleCacheBytes is the size of the Pebble cache that gives Strata a block
// cache of block_cache_size_mb. Pebble reserves each memtable's full size in
// its block cache (db.go, newMemTable: Cache.Reserve), so a cache of exactly
// block_cache_size_mb next to memtables as large (the default: 256 MB each)
// would hold no blocks at all once the memtables have grown. RocksDB keeps
// write buffers apart from the block cache; so does Strata, by adding the
// most memtable memory Pebble can reserve: max_write_buffer_number
// memtables (the stop-writes threshold) plus the one Pebble keeps for
// recycling. The reservation takes no memory; it only bounds what the
// cache may use, so blocks plus memtables stay within block_cache_size_mb
// plus the memtable budget.
func pebbleCacheBytes(cfg *config.Config) int64 {
	return cfg.BlockCacheSizeMB<<20 + memTableBudget(cfg)
}

// memTableBudget is the most memtable memory Pebble reserves in its cache:
// max_write_buffer_number memtables (at least 2, the stop-writes threshold)
// plus the one it keeps for recycling.
func memTableBudget(cfg *config.Config) int64 {
	return int64(max(2, cfg.MaxWriteBufferNumber)+1) * (cfg.MemtableSizeMB << 20)
}

// PebbleOptions converts a validated Config into the Pebble options Strata
// opens its database with. It is the one place where Config fields become
// Pebble settings; benchmarks use it to open raw Pebble with identical
// settings. The caller owns the returned block cache reference and must call
// opts.Cache.Unref() once the database is open (or was not opened).
//
// Pebble's log lines are dropped, as in a Strata database opened without a
// Logger. The file system, event listener and WAL placement are not set
// here; Open adds them.
func PebbleOptions(cfg *config.Config) (*pebble.Options, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return pebbleOptions(cfg)
}

// pebbleOptions is PebbleOptions for a config already validated.
func pebbleOptions(cfg *config.Config) (*pebble.Options, error) {
	levels, bottom, err := cfg.Codecs()
	if err != nil {
		return nil, err
	}
	opts := &pebble.Options{
		FormatMajorVersion:          pebble.FormatNewest, // MinLZ needs table format v6+
		Cache:                       pebble.NewCache(pebbleCacheBytes(cfg)),
		MemTableSize:                uint64(cfg.MemtableSizeMB) << 20,
		MemTableStopWritesThreshold: max(2, cfg.MaxWriteBufferNumber),
		LBaseMaxBytes:               cfg.MaxBytesForLevelBaseMB << 20,
		DisableWAL:                  !cfg.EnableWAL,
		Logger:                      pebbleLogger{}, // silent, as Strata without a Logger
	}
	// RocksDB's target_file_size_base with multiplier 1: every level, L0
	// (whose size also bounds flush output) included, aims at the same size.
	for i := range opts.TargetFileSizes {
		opts.TargetFileSizes[i] = cfg.TargetFileSizeBaseMB << 20
	}
	// RocksDB's split of max_background_jobs: a quarter (at least one) for
	// flushes, the rest (at least one) for compactions.
	compactions := max(1, cfg.MaxBackgroundJobs-max(1, cfg.MaxBackgroundJobs/4))
	opts.CompactionConcurrencyRange = func() (int, int) { return 1, compactions }

	levelProfile, bottomProfile := levels.PebbleProfile(), bottom.PebbleProfile()
	for i := range opts.Levels {
		l := &opts.Levels[i]
		// block_size on L0-L5, bottommost_block_size on L6: larger blocks
		// where the cold data and zstd are, small ones where reads are hot.
		l.BlockSize = cfg.LevelBlockSize(i)
		if cfg.BloomBitsPerKey > 0 {
			l.FilterPolicy = bloom.FilterPolicy(cfg.BloomBitsPerKey)
		}
		profile := levelProfile
		if i == len(opts.Levels)-1 {
			profile = bottomProfile
		}
		l.Compression = func() *sstable.CompressionProfile { return profile }
	}
	opts.EnsureDefaults()
	return opts, nil
}
