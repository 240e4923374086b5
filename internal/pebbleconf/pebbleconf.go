// Package pebbleconf converts a resolved config.Config into the Pebble
// options Strata opens its database with: the one place where Config fields
// become Pebble settings. The engine opens with it, and the tools (tune's
// "vs Pebble" peer, the engine's benchmarks) open raw Pebble with it, so
// both run with identical settings. It is internal: an embedded user opens
// an engine.DB and never sees Pebble's options.
//
//	r, err := cfg.Resolve()
//	if err != nil { ... }
//	opts := pebbleconf.Options(r)
//	defer opts.Cache.Unref() // once the database is open, or was not opened
//	db, err := pebble.Open(cfg.DBPath, opts)
package pebbleconf

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/sstable"
	"github.com/stratadb/strata/config"
)

// Options returns the Pebble options of r. The caller owns the returned
// block cache reference and must call opts.Cache.Unref() once the database
// is open (or was not opened).
//
// Pebble's log lines are dropped, as in a Strata database opened without a
// Logger. The file system, event listener and WAL placement are not set
// here; engine.Open adds them.
func Options(r *config.Resolved) *pebble.Options {
	cfg := r.Config
	opts := &pebble.Options{
		FormatMajorVersion:          pebble.FormatNewest, // MinLZ needs table format v6+
		Cache:                       pebble.NewCache(r.Cache.CapacityBytes),
		MemTableSize:                uint64(cfg.MemtableSizeMB) << 20,
		MemTableStopWritesThreshold: max(2, cfg.MaxWriteBufferNumber),
		LBaseMaxBytes:               cfg.MaxBytesForLevelBaseMB << 20,
		DisableWAL:                  !cfg.EnableWAL,
		MaxOpenFiles:                MaxOpenFiles(cfg.MaxOpenFiles),
		Logger:                      silent{},
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
	opts.Experimental.CompactionScheduler = newCompactionPacer()

	for i := range opts.Levels {
		l := &opts.Levels[i]
		// block_size on L0-L5, bottommost_block_size on L6: larger blocks
		// where the cold data and zstd are, small ones where reads are hot.
		l.BlockSize = cfg.LevelBlockSize(i)
		if cfg.BloomBitsPerKey > 0 {
			l.FilterPolicy = bloom.FilterPolicy(cfg.BloomBitsPerKey)
		}
		profile := r.Profile(i)
		l.Compression = func() *sstable.CompressionProfile { return profile }
	}
	if cfg.EnableBlobFiles {
		policy := valueSeparation(cfg)
		opts.Experimental.ValueSeparationPolicy = func() pebble.ValueSeparationPolicy { return policy }
	}
	opts.EnsureDefaults()
	return opts
}

// Blob file settings RocksDB has no option for, at the values CockroachDB
// runs Pebble's value separation with.
const (
	// maxBlobReferenceDepth bounds how many overlapping blob files a
	// compaction's output may reference before the compaction rewrites the
	// values into new ones (Pebble sums it over the input levels, each L0
	// table counting). 40 rather than CockroachDB's 10: on one CPU, an L0
	// 10 tables behind made its compaction rewrite every value of
	// those tables, which took seconds while L0 reached Pebble's write
	// stop; a long pod load with server.reclaim_history had 5-6 seconds
	// without a completed put at 10 and none at 40 (docs/mvcc-compaction.md).
	maxBlobReferenceDepth = 40
	// blobRewriteMinimumAge keeps a young blob file, whose garbage may yet
	// grow, from being rewritten. A minute rather than CockroachDB's 5:
	// 100,000 pods updated 1,000,000 times and compacted every 30 s left
	// 1,551 MB on disk instead of 2,419, and 776-1,085 instead of 2,048
	// with server.reclaim_history (etcd 3.7.3: 3,631), for 3-8% more
	// server CPU in single runs (docs/mvcc-compaction.md).
	blobRewriteMinimumAge = time.Minute
	// blobGarbageRatio is the share of unreferenced values at which
	// enable_blob_garbage_collection rewrites a blob file. A tenth rather
	// than a fifth: 2 GB of pods on 3 members left 19% of
	// the blob bytes garbage at 0.2 (45 MB per member, 14% of its
	// disk) and 8% at 0.1 (docs/benchmarks-server.md).
	blobGarbageRatio = 0.1
)

// valueSeparation is RocksDB's integrated BlobDB (enable_blob_files,
// min_blob_size, enable_blob_garbage_collection) as Pebble's policy.
func valueSeparation(cfg *config.Config) pebble.ValueSeparationPolicy {
	garbage := 1.0 // never rewrite: a blob file goes when nothing references it
	if cfg.EnableBlobGarbageCollection {
		garbage = blobGarbageRatio
	}
	return pebble.ValueSeparationPolicy{
		Enabled:               true,
		MinimumSize:           int(max(1, cfg.MinBlobSize)), // RocksDB's 0 is every value; Pebble's floor is 1
		MaxBlobReferenceDepth: maxBlobReferenceDepth,
		RewriteMinimumAge:     blobRewriteMinimumAge,
		TargetGarbageRatio:    garbage,
	}
}

// silent is a Pebble logger that drops informational lines; Fatalf still
// ends the process, as Pebble's default logger does.
type silent struct{}

func (silent) Infof(string, ...any)  {}
func (silent) Errorf(string, ...any) {}
func (silent) Fatalf(format string, args ...any) {
	panic(fmt.Sprintf("pebble: "+format, args...))
}

// FormatCodecCounts renders table counts by stored codec (the engine's
// LevelMetrics.TableCodecs) as "MinLZ:1,ZSTD:2", sorted by codec name; ""
// when there are none. The engine's Stats and tune's tables show them alike.
func FormatCodecCounts(counts map[string]int) string {
	names := make([]string, 0, len(counts))
	for name := range counts {
		names = append(names, name)
	}
	sort.Strings(names)
	parts := make([]string, len(names))
	for i, name := range names {
		parts[i] = fmt.Sprintf("%s:%d", name, counts[name])
	}
	return strings.Join(parts, ",")
}
