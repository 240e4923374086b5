package engine

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// Collector returns a Prometheus collector exporting Metrics under the
// strata_ prefix. Register it with a prometheus.Registerer; each scrape
// reads the metrics afresh.
func (db *DB) Collector() prometheus.Collector { return &collector{db: db} }

type collector struct{ db *DB }

var (
	descLevelTables    = prometheus.NewDesc("strata_level_tables", "Number of table files in the level.", []string{"level"}, nil)
	descLevelBytes     = prometheus.NewDesc("strata_level_bytes", "Bytes of table files in the level.", []string{"level"}, nil)
	descLevelCodec     = prometheus.NewDesc("strata_level_tables_by_codec", "Tables in the level by the codec they carry.", []string{"level", "codec"}, nil)
	descWriteAmp       = prometheus.NewDesc("strata_write_amplification", "Bytes written to tables per byte of user writes.", nil, nil)
	descCacheHits      = prometheus.NewDesc("strata_block_cache_hits_total", "Block cache hits.", nil, nil)
	descCacheMisses    = prometheus.NewDesc("strata_block_cache_misses_total", "Block cache misses.", nil, nil)
	descCacheBytes     = prometheus.NewDesc("strata_block_cache_bytes", "Bytes of blocks held by the block cache.", nil, nil)
	descCacheCapacity  = prometheus.NewDesc("strata_block_cache_capacity_bytes", "Size of the cache that holds blocks and memtable reservations together.", nil, nil)
	descCacheShare     = prometheus.NewDesc("strata_block_cache_block_share_bytes", "block_cache_size_mb: the room blocks keep when memtables are at their largest.", nil, nil)
	descMemBudget      = prometheus.NewDesc("strata_memtable_budget_bytes", "Memtable memory the cache is sized for.", nil, nil)
	descMemReserved    = prometheus.NewDesc("strata_memtable_reserved_bytes", "Memtable memory reserved in the cache now.", nil, nil)
	descFilterHits     = prometheus.NewDesc("strata_bloom_filter_useful_total", "Lookups a bloom filter answered without a block read.", nil, nil)
	descFilterMisses   = prometheus.NewDesc("strata_bloom_filter_not_useful_total", "Lookups a bloom filter could not answer.", nil, nil)
	descWALBytes       = prometheus.NewDesc("strata_wal_bytes_written_total", "Bytes written to WAL files.", nil, nil)
	descWALSyncs       = prometheus.NewDesc("strata_wal_syncs_total", "Syncs of WAL files.", nil, nil)
	descStalls         = prometheus.NewDesc("strata_write_stalls_total", "Write stalls.", nil, nil)
	descStallSeconds   = prometheus.NewDesc("strata_write_stall_seconds_total", "Time spent in write stalls.", nil, nil)
	descCompactions    = prometheus.NewDesc("strata_compactions_total", "Compactions run.", nil, nil)
	descDebt           = prometheus.NewDesc("strata_compaction_debt_bytes", "Estimated bytes still to compact.", nil, nil)
	descFlushes        = prometheus.NewDesc("strata_flushes_total", "Memtable flushes.", nil, nil)
	descRewrites       = prometheus.NewDesc("strata_codec_rewrites_total", "Tables rewritten into their level's codec.", nil, nil)
	descDiskUsage      = prometheus.NewDesc("strata_disk_usage_bytes", "Bytes used on disk by tables, WAL and metadata.", nil, nil)
	descDirectReads    = prometheus.NewDesc("strata_direct_read_bytes_total", "Bytes read from table files with O_DIRECT.", nil, nil)
	descDirectWrites   = prometheus.NewDesc("strata_direct_write_bytes_total", "Bytes written to table files with O_DIRECT.", nil, nil)
	descPathBytes      = prometheus.NewDesc("strata_path_bytes", "Bytes of table files in a db_paths directory.", []string{"path"}, nil)
	descPathFill       = prometheus.NewDesc("strata_path_fill_ratio", "Bytes in a db_paths directory over its target size.", []string{"path"}, nil)
	descMovedBytes     = prometheus.NewDesc("strata_tier_moved_bytes_total", "Bytes the tiering mover copied between paths.", nil, nil)
	descOpenSnapshots  = prometheus.NewDesc("strata_open_snapshots", "Snapshots not yet closed.", nil, nil)
	descBlobBytes      = prometheus.NewDesc("strata_blob_file_bytes", "Bytes of live blob files (enable_blob_files).", nil, nil)
	descBlobReferenced = prometheus.NewDesc("strata_blob_referenced_value_bytes", "Uncompressed bytes of blob file values a key still refers to.", nil, nil)
	descBlobValues     = prometheus.NewDesc("strata_blob_value_bytes", "Uncompressed bytes of every value in live blob files, garbage included.", nil, nil)
)

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descLevelTables, descLevelBytes, descLevelCodec, descWriteAmp, descCacheHits,
		descCacheMisses, descCacheBytes, descCacheCapacity, descCacheShare, descMemBudget, descMemReserved, descFilterHits, descFilterMisses, descWALBytes, descWALSyncs, descStalls,
		descStallSeconds, descCompactions, descDebt, descFlushes, descRewrites, descDiskUsage, descOpenSnapshots, descDirectReads, descDirectWrites, descPathBytes, descPathFill, descMovedBytes,
		descBlobBytes, descBlobReferenced, descBlobValues} {
		ch <- d
	}
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	m, err := c.db.Metrics()
	if err != nil {
		ch <- prometheus.NewInvalidMetric(descDiskUsage, err)
		return
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter := func(d *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v)
	}
	for l, lm := range m.Levels {
		level := strconv.Itoa(l)
		gauge(descLevelTables, float64(lm.Tables), level)
		gauge(descLevelBytes, float64(lm.Bytes), level)
		for codec, n := range lm.TableCodecs {
			gauge(descLevelCodec, float64(n), level, codec)
		}
	}
	gauge(descWriteAmp, m.WriteAmp)
	counter(descCacheHits, float64(m.BlockCache.Hits))
	counter(descCacheMisses, float64(m.BlockCache.Misses))
	gauge(descCacheBytes, float64(m.BlockCache.UsedBytes))
	gauge(descCacheCapacity, float64(m.BlockCache.CapacityBytes))
	gauge(descCacheShare, float64(m.BlockCache.BlockShareBytes))
	gauge(descMemBudget, float64(m.BlockCache.MemTableBudgetBytes))
	gauge(descMemReserved, float64(m.BlockCache.MemTableReservedBytes))
	counter(descFilterHits, float64(m.Filter.Hits))
	counter(descFilterMisses, float64(m.Filter.Misses))
	counter(descWALBytes, float64(m.WAL.FS.BytesWritten))
	counter(descWALSyncs, float64(m.WAL.FS.Syncs))
	counter(descStalls, float64(m.Stalls.Count))
	counter(descStallSeconds, m.Stalls.Total.Seconds())
	counter(descCompactions, float64(m.Compaction.Count))
	gauge(descDebt, float64(m.Compaction.EstimatedDebtBytes))
	counter(descFlushes, float64(m.Compaction.Flushes))
	counter(descRewrites, float64(m.Rewrites.Tables))
	gauge(descDiskUsage, float64(m.DiskUsageBytes))
	gauge(descOpenSnapshots, float64(m.OpenSnapshots))
	gauge(descBlobBytes, float64(m.BlobFiles.Bytes))
	gauge(descBlobValues, float64(m.BlobFiles.ValueBytes))
	gauge(descBlobReferenced, float64(m.BlobFiles.ReferencedValueBytes))
	if t := m.Tiering; t != nil {
		for _, p := range t.Paths {
			gauge(descPathBytes, float64(p.Bytes), p.Dir)
			gauge(descPathFill, p.FillPercent/100, p.Dir)
		}
		counter(descMovedBytes, float64(t.MovedBytes))
	}
	counter(descDirectReads, float64(m.DirectIO.DirectReadBytes))
	counter(descDirectWrites, float64(m.DirectIO.DirectWriteBytes))
}
