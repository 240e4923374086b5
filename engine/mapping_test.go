package engine

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/stratadb/strata/config"
)

// mappingCase pins where one Config field lands: a config that differs from
// the base only in that field must give a different observation.
type mappingCase struct {
	field string
	// base adjusts the base config, for a field that only acts beside
	// another (direct_io_fallback needs direct I/O on); nil keeps defaults.
	base func(c *config.Config)
	// change sets the field to a valid non-default value.
	change func(c *config.Config)
	// observe reads the place the field must reach: Pebble's options, our
	// hooks' state, or Open's error.
	observe func(db *DB, err error) string
}

// notEngineFields are Config fields the engine does not map, with why.
var notEngineFields = map[string]string{
	"Server":            "the [server] section, read by strata serve",
	"Cluster":           "the [cluster] section, read by the cluster layer",
	"TieringMoveRateMB": "handed to tiering.Options in engine/tiering.go; package tiering's tests pin its effect",
}

func levelOpt(l int, f func(db *DB, l int) any) func(db *DB, err error) string {
	return func(db *DB, err error) string {
		if err != nil {
			return "open error: " + err.Error()
		}
		return fmt.Sprint(f(db, l))
	}
}

func dbState(f func(db *DB) any) func(db *DB, err error) string {
	return func(db *DB, err error) string {
		if err != nil {
			return "open error: " + err.Error()
		}
		return fmt.Sprint(f(db))
	}
}

func noteState(key string) func(db *DB, err error) string {
	return dbState(func(db *DB) any {
		for _, n := range db.res.Notes {
			if n.Key == key {
				return n.String()
			}
		}
		return "no note"
	})
}

// TestConfigToPebbleMapping is the table-driven contract of internal/pebbleconf
// and Open: every Config field, changed alone, changes the Pebble option or
// hook state it is documented to set. Removing a field from the mapping
// (BlockSize, MemTableStopWritesThreshold, CompactionConcurrencyRange, ...)
// or hard-coding a value (bloom bits) makes its case fail, and a new Config
// field without a case fails the coverage check.
func TestConfigToPebbleMapping(t *testing.T) {
	cases := []mappingCase{
		{field: "DBPath", change: func(c *config.Config) { c.DBPath += "-other" },
			observe: dbState(func(db *DB) any {
				return filepath.Base(db.cfg.DBPath) + " " + fmt.Sprint(fileExists(db, db.cfg.DBPath, config.RocksDBOptionsFileName))
			})},
		{field: "WALDir", change: func(c *config.Config) { c.WALDir = c.DBPath + "-wal" },
			observe: dbState(func(db *DB) any { return filepath.Base(db.popts.WALDir) })},
		{field: "WALFailoverDir", change: func(c *config.Config) { c.WALFailoverDir = c.DBPath + "-failover" },
			observe: dbState(func(db *DB) any { return db.popts.WALFailover != nil })},
		{field: "DBPaths", change: func(c *config.Config) {
			c.DBPaths = []config.DBPath{{Path: c.DBPath, TargetSizeBytes: 1 << 20}, {Path: c.DBPath + "-cold", TargetSizeBytes: 1 << 30}}
		}, observe: dbState(func(db *DB) any { _, ok := db.Tiering(); return ok })},
		{field: "CompressionDefault", change: func(c *config.Config) { c.CompressionDefault = "snappy" },
			observe: levelOpt(0, func(db *DB, l int) any { return db.popts.Levels[l].Compression().Name })},
		{field: "CompressionBottommost", change: func(c *config.Config) { c.CompressionBottommost = "snappy" },
			observe: levelOpt(6, func(db *DB, l int) any { return db.popts.Levels[l].Compression().Name })},
		{field: "CompressionLevels", change: func(c *config.Config) {
			c.CompressionLevels = []string{"none", "snappy", "lz4", "zstd:1", "zstd:2", "zstd:4", "zstd"}
		}, observe: dbState(func(db *DB) any {
			names := make([]string, len(db.popts.Levels))
			for l := range db.popts.Levels {
				names[l] = db.popts.Levels[l].Compression().Name
			}
			return names
		})},
		{field: "ZstdLevel", change: func(c *config.Config) { c.ZstdLevel = 7 },
			observe: levelOpt(6, func(db *DB, l int) any { return db.popts.Levels[l].Compression().Name })},
		{field: "BlockSize", change: func(c *config.Config) { c.BlockSize = 16 << 10 },
			observe: levelOpt(0, func(db *DB, l int) any { return db.popts.Levels[l].BlockSize })},
		{field: "BottommostBlockSize", change: func(c *config.Config) { c.BottommostBlockSize = 64 << 10 },
			observe: levelOpt(6, func(db *DB, l int) any { return db.popts.Levels[l].BlockSize })},
		{field: "BlockCacheSizeMB", change: func(c *config.Config) { c.BlockCacheSizeMB = 16 },
			observe: dbState(func(db *DB) any { return db.popts.Cache.MaxSize() })},
		{field: "CacheIndexAndFilterBlocks", change: func(c *config.Config) { c.CacheIndexAndFilterBlocks = false },
			observe: noteState("cache_index_and_filter_blocks")},
		{field: "PinL0FilterAndIndexBlocksInCache", change: func(c *config.Config) { c.PinL0FilterAndIndexBlocksInCache = false },
			observe: noteState("pin_l0_filter_and_index_blocks_in_cache")},
		{field: "PartitionFilters", change: func(c *config.Config) { c.PartitionFilters = false },
			observe: noteState("partition_filters")},
		{field: "HighPriPoolRatio", change: func(c *config.Config) { c.HighPriPoolRatio = 0.25 },
			observe: noteState("high_pri_pool_ratio")},
		{field: "BloomBitsPerKey", change: func(c *config.Config) { c.BloomBitsPerKey = 14 },
			observe: dbState(func(db *DB) any {
				var s []string
				for _, l := range db.popts.Levels {
					s = append(s, fmt.Sprint(l.FilterPolicy))
				}
				return s
			})},
		{field: "OptimizeFiltersForHits", change: func(c *config.Config) { c.OptimizeFiltersForHits = !config.Default().OptimizeFiltersForHits },
			observe: dbState(func(db *DB) any { return db.useL6Filters() })},
		{field: "MemtableSizeMB", change: func(c *config.Config) { c.MemtableSizeMB = 32 },
			observe: dbState(func(db *DB) any { return db.popts.MemTableSize })},
		{field: "MaxWriteBufferNumber", change: func(c *config.Config) { c.MaxWriteBufferNumber = 5 },
			observe: dbState(func(db *DB) any { return db.popts.MemTableStopWritesThreshold })},
		{field: "MinWriteBufferNumberToMerge", change: func(c *config.Config) { c.MinWriteBufferNumberToMerge = 2 },
			observe: noteState("min_write_buffer_number_to_merge")},
		{field: "UseUniversalCompaction", change: func(c *config.Config) { c.UseUniversalCompaction = true },
			observe: func(db *DB, err error) string { return fmt.Sprint(errors.Is(err, ErrCannotDeliver)) }},
		{field: "DynamicLevelBytes", change: func(c *config.Config) { c.DynamicLevelBytes = false },
			observe: noteState("dynamic_level_bytes")},
		{field: "TargetFileSizeBaseMB", change: func(c *config.Config) { c.TargetFileSizeBaseMB = 8 },
			observe: dbState(func(db *DB) any { return db.popts.TargetFileSizes })},
		{field: "MaxBytesForLevelBaseMB", change: func(c *config.Config) { c.MaxBytesForLevelBaseMB = 32 },
			observe: dbState(func(db *DB) any { return db.popts.LBaseMaxBytes })},
		{field: "EnableBlobFiles", change: func(c *config.Config) { c.EnableBlobFiles = true },
			observe: dbState(func(db *DB) any { return db.popts.Experimental.ValueSeparationPolicy() })},
		{field: "MinBlobSize", base: func(c *config.Config) { c.EnableBlobFiles = true }, change: func(c *config.Config) { c.MinBlobSize = 4096 },
			observe: dbState(func(db *DB) any { return db.popts.Experimental.ValueSeparationPolicy().MinimumSize })},
		{field: "EnableBlobGarbageCollection", base: func(c *config.Config) { c.EnableBlobFiles = true }, change: func(c *config.Config) { c.EnableBlobGarbageCollection = true },
			observe: dbState(func(db *DB) any { return db.popts.Experimental.ValueSeparationPolicy().TargetGarbageRatio })},
		{field: "KeyCompression", base: func(c *config.Config) { c.EnableBlobFiles = true }, change: func(c *config.Config) { c.KeyCompression = "snappy" },
			observe: dbState(func(db *DB) any { return db.popts.Levels[6].Compression().Name })},
		{field: "UseDirectReads", change: func(c *config.Config) { c.UseDirectReads, c.DirectIOFallback = true, true },
			observe: dbState(func(db *DB) any { return db.directIOMetrics().Reads })},
		{field: "UseDirectIOForFlushAndCompaction", change: func(c *config.Config) { c.UseDirectIOForFlushAndCompaction, c.DirectIOFallback = true, true },
			observe: dbState(func(db *DB) any { return db.directIOMetrics().Writes })},
		{field: "DirectIOFallback",
			base: func(c *config.Config) {
				c.UseDirectReads = true
				c.DBPath = "/dev/shm/" + filepath.Base(filepath.Dir(c.DBPath)) + "-db"
			},
			change: func(c *config.Config) { c.DirectIOFallback = true },
			observe: func(db *DB, err error) string {
				if err != nil {
					return "open error"
				}
				return fmt.Sprint(db.directIOMetrics().FallbackPaths != nil)
			}},
		{field: "EnableWAL", change: func(c *config.Config) { c.EnableWAL, c.Sync = false, false },
			observe: dbState(func(db *DB) any { return db.popts.DisableWAL })},
		{field: "Sync", change: func(c *config.Config) { c.Sync = !config.Default().Sync },
			observe: dbState(func(db *DB) any { return db.wo.Sync })},
		{field: "MaxBackgroundJobs", change: func(c *config.Config) { c.MaxBackgroundJobs = 8 },
			observe: dbState(func(db *DB) any { lo, hi := db.popts.CompactionConcurrencyRange(); return [2]int{lo, hi} })},
		{field: "MaxOpenFiles", change: func(c *config.Config) { c.MaxOpenFiles = 64 },
			observe: dbState(func(db *DB) any { return db.popts.MaxOpenFiles })},
	}

	covered := map[string]bool{}
	for _, c := range cases {
		covered[c.field] = true
	}
	for _, f := range reflect.VisibleFields(reflect.TypeOf(config.Config{})) {
		if _, skip := notEngineFields[f.Name]; !skip && !covered[f.Name] {
			t.Errorf("config field %s has no mapping case: add one saying where it lands in Pebble's options", f.Name)
		}
	}

	for _, tc := range cases {
		t.Run(tc.field, func(t *testing.T) {
			if _, ok := reflect.TypeOf(config.Config{}).FieldByName(tc.field); !ok {
				t.Fatalf("no config field %s", tc.field)
			}
			observe := func(mutate func(c *config.Config)) string {
				cfg := testConfig(t)
				cfg.MemtableSizeMB = 4
				if tc.base != nil {
					tc.base(cfg)
					if strings.HasPrefix(cfg.DBPath, "/dev/shm/") {
						if !dirExists("/dev/shm") {
							t.Skip("needs /dev/shm, a file system without O_DIRECT")
						}
						t.Cleanup(func() { _ = removeAll(cfg.DBPath) })
					}
				}
				if mutate != nil {
					mutate(cfg)
				}
				db, err := Open(cfg)
				got := tc.observe(db, err)
				if err == nil {
					if cerr := db.Close(); cerr != nil {
						t.Fatal(cerr)
					}
				}
				return got
			}
			before, after := observe(nil), observe(tc.change)
			if before == after {
				t.Errorf("changing %s alone left its mapping unchanged: %s", tc.field, before)
			}
		})
	}
}

func fileExists(db *DB, dir, name string) bool {
	_, err := db.fs.Stat(db.fs.PathJoin(dir, name))
	return err == nil
}

func dirExists(dir string) bool {
	info, err := os.Stat(dir)
	return err == nil && info.IsDir()
}

func removeAll(dir string) error { return os.RemoveAll(dir) }
