package engine

import (
	"sort"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/stratadb/strata/config"
	"github.com/stratadb/strata/tiering"
	"github.com/stratadb/strata/wal"
)

// NumLevels is the number of LSM levels (L0..L6).
const NumLevels = config.NumLevels

// Metrics is a structured snapshot of the database's state and counters.
type Metrics struct {
	// Levels holds one entry per level, L0 first.
	Levels [NumLevels]LevelMetrics
	// Since is when this DB was opened: the counters below (bytes in and
	// written, write amplification, cache, filter, WAL, stalls, compactions,
	// rewrites, moves) count from there, in this process only. Levels'
	// tables, sizes, scores and codecs are the database's own state.
	Since time.Time
	// WriteAmp is bytes written to tables (flushes, compactions, ingestions)
	// divided by bytes written to the memtables through the WAL path; 0
	// before anything was flushed.
	WriteAmp float64
	// UserBytesIn is the logical bytes written by the user (the WAL's bytes
	// in; with the WAL disabled, the bytes flushed to L0).
	UserBytesIn uint64
	// TableBytesWritten is the bytes written to tables and blob files by
	// flushes and compactions, rewrites included.
	TableBytesWritten uint64
	// DiskUsageBytes is the space used by tables, WAL and metadata files.
	DiskUsageBytes uint64

	// BlobFiles describes the values kept apart from the keys
	// (enable_blob_files); zero without.
	BlobFiles BlobMetrics

	BlockCache CacheMetrics
	Filter     FilterMetrics
	WAL        WALMetrics
	Stalls     StallMetrics
	// BackgroundErrors counts the errors of Pebble's background work
	// (flushes, compactions, table deletions), which no call returns.
	BackgroundErrors BackgroundErrorMetrics
	Compaction       CompactionMetrics
	Rewrites         RewriteMetrics
	DirectIO         DirectIOMetrics
	// Tiering describes the tiered layout over db_paths: per path the files,
	// bytes, target, fill and levels, the level-to-path map and the mover's
	// counts. nil when db_paths is empty.
	Tiering *tiering.Stats

	// MemTableBytes and MemTableCount describe the memtables in memory.
	MemTableBytes uint64
	MemTableCount int64
	// OpenSnapshots is the number of snapshots not yet closed.
	OpenSnapshots int64
	// NotApplicable lists settings accepted without (full) effect on Pebble,
	// with the reason.
	NotApplicable []config.Note
}

// LevelMetrics describes one level.
type LevelMetrics struct {
	// Tables and Bytes count the level's table files and their size.
	Tables int64
	Bytes  int64
	// Score is Pebble's compaction score (>= 1 means compaction is due).
	Score float64
	// Sublevels is the number of L0 sublevels (the read amplification of
	// L0; Pebble compacts L0 from L0CompactionThreshold on); 0 or 1 below.
	Sublevels int32
	// Codec is the codec configured for the level, as written in the config;
	// StoredCodec is Pebble's name for what tables written now carry
	// ("MinLZ" for a requested lz4).
	Codec       string
	StoredCodec string
	// TableCodecs counts the level's tables by the codec they actually carry
	// (their rocksdb.compression property), so a table that kept another
	// level's codec shows up.
	TableCodecs map[string]int
	// Mismatched counts the level's tables not written with the level's
	// options (codec, block size, index block size, filter): tables Pebble
	// moved down unchanged, or written under another config. CompactAll
	// rewrites them.
	Mismatched int
	// BytesIn is the bytes entering the level (from the WAL for L0, from the
	// level above otherwise); BytesWritten the bytes of tables and blob
	// files written for it.
	BytesIn, BytesWritten uint64
}

// BlobMetrics describes the blob files of enable_blob_files.
type BlobMetrics struct {
	// Files and Bytes are the live blob files and their size on disk.
	Files, Bytes uint64
	// ValueBytes is the uncompressed size of every value in the live blob
	// files; ReferencedValueBytes of those a key still refers to. The
	// difference is garbage that rewriting the files would give back
	// (enable_blob_garbage_collection).
	ValueBytes, ReferencedValueBytes uint64
	// Rewrites counts the blob files rewritten to drop garbage, in this
	// process.
	Rewrites int64
}

// CacheMetrics describes the block cache: Pebble's one cache, which holds
// the blocks and, as reservations, the memtables.
//
// CapacityBytes is the cache's real size: BlockShareBytes (block_cache_size_mb)
// plus MemTableBudgetBytes, the most memtable memory Pebble can reserve in it
// (see config.CacheSplit). Blocks may use whatever the memtables do not hold
// at the moment (CapacityBytes - MemTableReservedBytes), so with small
// memtables they can take more than block_cache_size_mb; blocks plus
// memtables never exceed CapacityBytes. UsedBytes counts the blocks only.
type CacheMetrics struct {
	// CapacityBytes is the size of the cache, blocks and memtables together.
	CapacityBytes int64
	// BlockShareBytes is block_cache_size_mb: the room blocks keep when the
	// memtables are at their largest.
	BlockShareBytes int64
	// MemTableBudgetBytes is the memtable memory the cache is sized for:
	// (max(2, max_write_buffer_number) + 1) memtables of memtable_size_mb.
	MemTableBudgetBytes int64
	// MemTableReservedBytes is the memtable memory reserved in the cache
	// now (Pebble reserves each memtable's full size when it allocates it).
	MemTableReservedBytes int64
	// UsedBytes is the bytes of blocks held; Blocks their number.
	UsedBytes    int64
	Blocks       int64
	Hits, Misses int64
	// HitRate is hits/(hits+misses), 0 before any access.
	HitRate float64
}

// FilterMetrics describes the bloom filters' usefulness.
type FilterMetrics struct {
	// Hits counts lookups a filter answered "absent", saving a data block
	// read; Misses counts lookups that had to read the block.
	Hits, Misses int64
	// Usefulness is hits/(hits+misses).
	Usefulness float64
}

// WALMetrics describes the write-ahead log.
type WALMetrics struct {
	// Enabled is false when enable_wal = false.
	Enabled bool
	// Dir is where WAL files are written.
	Dir string
	// LiveFiles and LiveBytes describe the WAL files still needed.
	LiveFiles int64
	LiveBytes uint64
	// RecycledFiles and RecycledBytes describe the WAL files no longer
	// needed that Pebble keeps to reuse for the next WALs (counted in
	// DiskUsageBytes, holding no data).
	RecycledFiles int64
	RecycledBytes uint64
	// BytesIn is the logical bytes written to the WAL.
	BytesIn uint64
	// FS counts files, bytes and syncs at the file system.
	FS wal.Stats
	// Sync reports whether every write waits for its WAL sync.
	Sync bool
}

// StallMetrics describes write stalls (memtables or L0 full).
type StallMetrics struct {
	Count int64
	Total time.Duration
	// LastReason is Pebble's reason for the most recent stall.
	LastReason string
}

// BackgroundErrorMetrics counts the errors of background work. Pebble
// retries the work; a count that keeps growing means the disk or the file
// system refuses it.
type BackgroundErrorMetrics struct {
	Count int64
	// Last is the most recent error, nil when Count is 0.
	Last error
}

// CompactionMetrics describes background work.
type CompactionMetrics struct {
	Count, MoveCount, InProgress int64
	// EstimatedDebtBytes is the bytes that still need compacting to reach a
	// stable shape (RocksDB's estimate-pending-compaction-bytes).
	EstimatedDebtBytes uint64
	Duration           time.Duration
	Flushes            int64
	FlushesInProgress  int64
}

// Metrics returns the current metrics. It reads every table's properties to
// report the codecs tables carry, so it is meant for monitoring, not hot
// paths.
func (db *DB) Metrics() (*Metrics, error) {
	if err := db.enterOp(); err != nil {
		return nil, err
	}
	defer db.leaveOp()
	return db.metrics()
}

// metrics is Metrics for a caller inside the op gate.
func (db *DB) metrics() (*Metrics, error) {
	pm := db.pdb.Metrics()
	m := &Metrics{NotApplicable: db.res.Notes, Since: db.opened}
	tables, err := db.pdb.SSTables(pebble.WithProperties())
	if err != nil {
		return nil, err
	}
	for l := range NumLevels {
		lm := &pm.Levels[l]
		out := LevelMetrics{
			Tables:       lm.TablesCount,
			Bytes:        lm.TablesSize,
			Score:        lm.Score,
			Sublevels:    lm.Sublevels,
			Codec:        db.res.Codecs[l].String(),
			StoredCodec:  db.res.Profile(l).Name,
			TableCodecs:  map[string]int{},
			BytesIn:      lm.TableBytesIn,
			BytesWritten: lm.TableBytesFlushed + lm.TableBytesCompacted + lm.TableBytesIngested + lm.BlobBytesFlushed + lm.BlobBytesCompacted,
		}
		for _, t := range tables[l] {
			name := "unknown"
			if t.Properties != nil {
				name = t.Properties.CompressionName
			}
			out.TableCodecs[name]++
			if t.Properties != nil && levelMismatch(t.Properties, &db.popts.Levels[l], out.StoredCodec, db.res.InlineProfile(l).Name) != "" {
				out.Mismatched++
			}
		}
		m.TableBytesWritten += out.BytesWritten
		m.Levels[l] = out
	}
	m.UserBytesIn = pm.WAL.BytesIn
	if !db.cfg.EnableWAL {
		m.UserBytesIn = pm.Levels[0].TableBytesFlushed
	}
	if m.UserBytesIn > 0 {
		m.WriteAmp = float64(m.TableBytesWritten) / float64(m.UserBytesIn)
	}
	// Pebble counts the local live blob files from the changes it made
	// since this open, not from the blob files it opened with (a reopened
	// database reported none); every Strata file is local, so the live
	// blob bytes of the version replace that count.
	m.DiskUsageBytes = pm.DiskSpaceUsage() - pm.BlobFiles.Local.LiveSize + pm.BlobFiles.LiveSize
	m.BlobFiles = BlobMetrics{
		Files:                pm.BlobFiles.LiveCount,
		Bytes:                pm.BlobFiles.LiveSize,
		ValueBytes:           pm.BlobFiles.ValueSize,
		ReferencedValueBytes: pm.BlobFiles.ReferencedValueSize,
		Rewrites:             pm.Compact.BlobFileRewriteCount,
	}
	bc := pm.BlockCache
	m.BlockCache = CacheMetrics{
		CapacityBytes:         db.res.Cache.CapacityBytes,
		BlockShareBytes:       db.res.Cache.BlockShareBytes,
		MemTableBudgetBytes:   db.res.Cache.MemTableBudgetBytes,
		MemTableReservedBytes: int64(pm.MemTable.Size),
		UsedBytes:             bc.Size, Blocks: bc.Count, Hits: bc.Hits, Misses: bc.Misses, HitRate: ratio(bc.Hits, bc.Misses),
	}
	m.Filter = FilterMetrics{Hits: pm.Filter.Hits, Misses: pm.Filter.Misses, Usefulness: ratio(pm.Filter.Hits, pm.Filter.Misses)}
	m.WAL = WALMetrics{Enabled: db.cfg.EnableWAL, Dir: db.walDirDescription(), LiveFiles: pm.WAL.Files, LiveBytes: pm.WAL.Size,
		RecycledFiles: pm.WAL.ObsoleteFiles, RecycledBytes: pm.WAL.ObsoletePhysicalSize, BytesIn: pm.WAL.BytesIn, FS: db.walFS.Stats(), Sync: db.cfg.Sync}
	count, total, why := db.stalls.load()
	m.Stalls = StallMetrics{Count: count, Total: total, LastReason: why}
	m.BackgroundErrors = db.bgErrors.load()
	m.Compaction = CompactionMetrics{
		Count: pm.Compact.Count, MoveCount: pm.Compact.MoveCount, InProgress: pm.Compact.NumInProgress,
		EstimatedDebtBytes: pm.Compact.EstimatedDebt, Duration: pm.Compact.Duration,
		Flushes: pm.Flush.Count, FlushesInProgress: pm.Flush.NumInProgress,
	}
	m.Rewrites = db.rewrite.load()
	m.DirectIO = db.directIOMetrics()
	if ts, ok := db.Tiering(); ok {
		m.Tiering = &ts
	}
	m.MemTableBytes, m.MemTableCount = pm.MemTable.Size, pm.MemTable.Count
	m.OpenSnapshots = db.openSnapshots.Load()
	return m, nil
}

func ratio(hits, misses int64) float64 {
	if hits+misses == 0 {
		return 0
	}
	return float64(hits) / float64(hits+misses)
}

// TableInfo describes one table file.
type TableInfo struct {
	Level   int
	FileNum uint64
	Size    uint64
	// Codec is the table's rocksdb.compression property: the Pebble profile
	// it was written with ("MinLZ", "ZSTD", ...).
	Codec string
	// Smallest and Largest are the table's first and last user keys.
	Smallest, Largest []byte
	// Entries is the number of entries (keys and tombstones).
	Entries uint64
}

// Tables lists every table, by level then key order.
func (db *DB) Tables() ([]TableInfo, error) {
	if err := db.enterOp(); err != nil {
		return nil, err
	}
	defer db.leaveOp()
	levels, err := db.pdb.SSTables(pebble.WithProperties())
	if err != nil {
		return nil, err
	}
	var out []TableInfo
	for l, tables := range levels {
		for _, t := range tables {
			info := TableInfo{Level: l, FileNum: uint64(t.FileNum), Size: t.Size,
				Smallest: t.Smallest.UserKey, Largest: t.Largest.UserKey}
			if t.Properties != nil {
				info.Codec = t.Properties.CompressionName
				info.Entries = t.Properties.NumEntries
			}
			out = append(out, info)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Level < out[j].Level })
	return out, nil
}
