package config

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestValidateDefault(t *testing.T) {
	if err := Default().Validate(); err != nil {
		t.Fatalf("Default().Validate() = %v", err)
	}
}

// problems returns the FieldErrors of a Validate result, failing the test if
// it is not a *ValidationError.
func problems(t *testing.T, err error) []*FieldError {
	t.Helper()
	if err == nil {
		return nil
	}
	var verr *ValidationError
	if !errors.As(err, &verr) {
		t.Fatalf("error %v (%T) is not a *ValidationError", err, err)
	}
	return verr.Problems
}

func TestValidateRules(t *testing.T) {
	cwd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		change func(*Config)
		want   string // the whole FieldError message
	}{
		{"db_path empty", func(c *Config) { c.DBPath = "" }, `db_path = "": must not be empty`},
		{"db_path blank", func(c *Config) { c.DBPath = "  " }, `db_path = "  ": must not be empty`},
		{"unknown codec", func(c *Config) { c.CompressionDefault = "lz5" },
			`compression_default = "lz5": must be one of none, snappy, lz4, zstd, zstd:<1-22>, minlz`},
		{"zlib", func(c *Config) { c.CompressionBottommost = "zlib" },
			`compression_bottommost = "zlib": must be one of none, snappy, lz4, zstd, zstd:<1-22>, minlz`},
		{"zstd level in codec", func(c *Config) { c.CompressionBottommost = "zstd:23" },
			`compression_bottommost = "zstd:23": zstd level must be an integer from 1 to 22`},
		{"key codec unknown", func(c *Config) { c.EnableBlobFiles, c.KeyCompression = true, "lz5" },
			`key_compression = "lz5": must be one of none, snappy, lz4, zstd, zstd:<1-22>, minlz`},
		{"key codec without blob files", func(c *Config) { c.KeyCompression = "lz4" },
			`key_compression = "lz4": requires enable_blob_files = true: without blob files the tables hold the values, and the level's codec compresses them; set key_compression = "" or enable_blob_files = true`},
		{"zstd_level 0", func(c *Config) { c.ZstdLevel = 0 }, `zstd_level = 0: must be from 1 to 22`},
		{"zstd_level 23", func(c *Config) { c.ZstdLevel = 23 }, `zstd_level = 23: must be from 1 to 22`},
		{"block_size small", func(c *Config) { c.BlockSize = 1023 }, `block_size = 1023: must be from 1024 to 1048576`},
		{"block_size large", func(c *Config) { c.BlockSize = 1<<20 + 1 }, `block_size = 1048577: must be from 1024 to 1048576`},
		{"bottommost block small", func(c *Config) { c.BottommostBlockSize = 512 }, `bottommost_block_size = 512: must be 0 (block_size) or from 1024 to 1048576`},
		{"bottommost block large", func(c *Config) { c.BottommostBlockSize = 2 << 20 }, `bottommost_block_size = 2097152: must be 0 (block_size) or from 1024 to 1048576`},
		{"block cache negative", func(c *Config) { c.BlockCacheSizeMB = -1 }, `block_cache_size_mb = -1: must be from 0 to 1048576`},
		{"high_pri above 1", func(c *Config) { c.HighPriPoolRatio = 1.5 }, `high_pri_pool_ratio = 1.5: must be from 0 to 1`},
		{"high_pri negative", func(c *Config) { c.HighPriPoolRatio = -0.1 }, `high_pri_pool_ratio = -0.1: must be from 0 to 1`},
		{"high_pri NaN", func(c *Config) { c.HighPriPoolRatio = math.NaN() }, `high_pri_pool_ratio = NaN: must be from 0 to 1`},
		{"bloom 65", func(c *Config) { c.BloomBitsPerKey = 65 }, `bloom_bits_per_key = 65: must be from 0 to 64`},
		{"memtable negative", func(c *Config) { c.MemtableSizeMB = -4 }, `memtable_size_mb = -4: must be from 1 to 4095`},
		{"memtable 4 GiB", func(c *Config) { c.MemtableSizeMB = 4096 }, `memtable_size_mb = 4096: must be from 1 to 4095`},
		{"write buffers 0", func(c *Config) { c.MaxWriteBufferNumber = 0 }, `max_write_buffer_number = 0: must be from 1 to 64`},
		{"write buffers 65", func(c *Config) { c.MaxWriteBufferNumber = 65 }, `max_write_buffer_number = 65: must be from 1 to 64`},
		{"merge 0", func(c *Config) { c.MinWriteBufferNumberToMerge = 0 }, `min_write_buffer_number_to_merge = 0: must be from 1 to 64`},
		{"target file 0", func(c *Config) { c.TargetFileSizeBaseMB = 0 }, `target_file_size_base_mb = 0: must be from 1 to 4096`},
		{"target file large", func(c *Config) { c.TargetFileSizeBaseMB = 4097 }, `target_file_size_base_mb = 4097: must be from 1 to 4096`},
		{"level base 0", func(c *Config) { c.MaxBytesForLevelBaseMB = 0 }, `max_bytes_for_level_base_mb = 0: must be from 1 to 1048576`},
		{"jobs 0", func(c *Config) { c.MaxBackgroundJobs = 0 }, `max_background_jobs = 0: must be from 1 to 256`},
		{"jobs 257", func(c *Config) { c.MaxBackgroundJobs = 257 }, `max_background_jobs = 257: must be from 1 to 256`},
		{"sync without WAL", func(c *Config) { c.Sync, c.EnableWAL = true, false },
			`sync = true: requires enable_wal = true: sync waits for the write's WAL record`},
		{"blob files on tiers", func(c *Config) { c.EnableBlobFiles, c.DBPaths = true, []DBPath{{"/fast", 1 << 30}, {"/slow", 1 << 40}} },
			`enable_blob_files = true: cannot be used with db_paths (2 paths): blob files stay on the path they were written to; set enable_blob_files = false, or use one path`},
		{"min blob size negative", func(c *Config) { c.MinBlobSize = -1 }, `min_blob_size = -1: must be from 0 to 1073741824`},
		{"failover is wal_dir", func(c *Config) { c.WALDir, c.WALFailoverDir = "/wal", "/wal/" },
			`wal_failover_dir = "/wal/": must be another directory than wal_dir`},
		{"failover is db_path", func(c *Config) { c.WALFailoverDir = filepath.Join(cwd, "data/strata") },
			`wal_failover_dir = "` + filepath.Join(cwd, "data/strata") + `": must be another directory than db_path (where the WAL lives when wal_dir is empty)`},
		{"db_paths empty path", func(c *Config) { c.DBPaths = []DBPath{{Path: "", TargetSizeBytes: 1}} },
			`db_paths[0].path = "": must not be empty`},
		{"db_paths zero size", func(c *Config) { c.DBPaths = []DBPath{{Path: "/a", TargetSizeBytes: 0}} },
			`db_paths[0].target_size_bytes = 0: must be from 1 to 9223372036854775807`},
		{"db_paths huge size", func(c *Config) { c.DBPaths = []DBPath{{Path: "/a", TargetSizeBytes: math.MaxUint64}} },
			`db_paths[0].target_size_bytes = 18446744073709551615: must be from 1 to 9223372036854775807`},
		{"db_paths duplicate", func(c *Config) { c.DBPaths = []DBPath{{"/a/b", 1}, {"/a/./b/", 1}} },
			`db_paths[1].path = "/a/./b/": is the same directory as db_paths[0].path ("/a/b"): entries must be distinct`},
		{"db_paths duplicate relative", func(c *Config) { c.DBPaths = []DBPath{{"hot", 1}, {filepath.Join(cwd, "hot"), 1}} },
			`db_paths[1].path = "` + filepath.Join(cwd, "hot") + `": is the same directory as db_paths[0].path ("hot"): entries must be distinct`},
		{"db_paths nested", func(c *Config) { c.DBPaths = []DBPath{{"/data", 1}, {"/data/hot", 1}} },
			`db_paths[1].path = "/data/hot": lies inside db_paths[0].path ("/data"): entries must not nest`},
		{"db_paths containing", func(c *Config) { c.DBPaths = []DBPath{{"/data/hot", 1}, {"/data", 1}} },
			`db_paths[1].path = "/data": contains db_paths[0].path ("/data/hot"): entries must not nest`},
		{"db_paths under root", func(c *Config) { c.DBPaths = []DBPath{{"/", 1}, {"/data", 1}} },
			`db_paths[1].path = "/data": lies inside db_paths[0].path ("/"): entries must not nest`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Default()
			tt.change(c)
			ps := problems(t, c.Validate())
			if len(ps) != 1 {
				t.Fatalf("Validate() found %d problems %v, want 1", len(ps), ps)
			}
			if got := ps[0].Error(); got != tt.want {
				t.Errorf("Validate() =\n  %s\nwant\n  %s", got, tt.want)
			}
		})
	}
}

func TestValidateAccepts(t *testing.T) {
	tests := []struct {
		name   string
		change func(*Config)
	}{
		{"limits low", func(c *Config) {
			c.ZstdLevel, c.BlockSize, c.BlockCacheSizeMB, c.HighPriPoolRatio, c.BloomBitsPerKey = 1, 1024, 0, 0, 0
			c.MemtableSizeMB, c.MaxWriteBufferNumber, c.MinWriteBufferNumberToMerge = 1, 1, 1
			c.TargetFileSizeBaseMB, c.MaxBytesForLevelBaseMB, c.MaxBackgroundJobs = 1, 1, 1
			c.BottommostBlockSize = 1024
		}},
		{"limits high", func(c *Config) {
			c.ZstdLevel, c.BlockSize, c.BlockCacheSizeMB, c.HighPriPoolRatio, c.BloomBitsPerKey = 22, 1<<20, 1<<20, 1, 64
			c.MemtableSizeMB, c.MaxWriteBufferNumber, c.MinWriteBufferNumberToMerge = 4095, 64, 64
			c.TargetFileSizeBaseMB, c.MaxBytesForLevelBaseMB, c.MaxBackgroundJobs = 4096, 1<<20, 256
			c.BottommostBlockSize = 1 << 20
		}},
		{"bottommost block size 0 (block_size)", func(c *Config) { c.BottommostBlockSize = 0 }},
		// The engine, not Validate, refuses what Pebble cannot deliver.
		{"universal compaction", func(c *Config) { c.UseUniversalCompaction = true }},
		{"direct I/O", func(c *Config) { c.UseDirectReads, c.UseDirectIOForFlushAndCompaction = true, true }},
		{"several db_paths", func(c *Config) {
			c.DBPaths = []DBPath{{"/nvme2/strata", 500 << 30}, {"/nvme3/strata", 500 << 30}, {"/nvme20/strata", 1}}
		}},
		{"db_paths[0] is db_path", func(c *Config) {
			c.DBPath = "/data/vccdb"
			c.DBPaths = []DBPath{{"/data/vccdb", 500 << 30}, {"/data/vccdb_hot", 500 << 30}}
		}},
		{"WAL off", func(c *Config) { c.EnableWAL, c.Sync = false, false }},
		{"sync", func(c *Config) { c.EnableWAL, c.Sync = true, true }},
		{"every codec", func(c *Config) { c.CompressionDefault, c.CompressionBottommost = "none", "minlz" }},
		{"codec spelling", func(c *Config) { c.CompressionDefault, c.CompressionBottommost = " Snappy ", "ZSTD-19" }},
		{"failover elsewhere", func(c *Config) { c.WALDir, c.WALFailoverDir = "/wal1", "/wal2" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Default()
			tt.change(c)
			if err := c.Validate(); err != nil {
				t.Fatalf("Validate() = %v, want nil", err)
			}
		})
	}
}

func TestValidateReportsEveryProblem(t *testing.T) {
	c := Default()
	c.DBPath = ""
	c.CompressionDefault = "lz5"
	c.MemtableSizeMB = -4
	c.HighPriPoolRatio = 2
	c.DBPaths = []DBPath{{"/a", 0}, {"/a", 1}}
	c.Sync, c.EnableWAL = true, false
	c.MaxBackgroundJobs = 0
	err := c.Validate()
	var keys []string
	for _, p := range problems(t, err) {
		keys = append(keys, p.Key)
	}
	want := []string{"db_path", "db_paths[0].target_size_bytes", "db_paths[1].path", "compression_default",
		"high_pri_pool_ratio", "memtable_size_mb", "sync", "max_background_jobs"}
	if !reflect.DeepEqual(keys, want) {
		t.Errorf("problem keys = %q\nwant (field order) %q", keys, want)
	}
	// The message lists them all; errors.As reaches each FieldError.
	if msg := err.Error(); !strings.HasPrefix(msg, "config: 8 invalid setting(s):") || !strings.Contains(msg, "memtable_size_mb = -4: must be from 1 to 4095") {
		t.Errorf("message = %q", msg)
	}
	var fe *FieldError
	if !errors.As(err, &fe) || fe.Key != "db_path" {
		t.Errorf("errors.As(*FieldError) = %v, want the db_path problem", fe)
	}
}

func TestValidateIsPure(t *testing.T) {
	c := Default()
	c.DBPaths = []DBPath{{"rel/./a", 0}, {"rel/a", 1}}
	c.MemtableSizeMB = 0
	before := c.Clone()
	_ = c.Validate()
	if !reflect.DeepEqual(c, before) {
		t.Errorf("Validate changed the config:\n%+v\nwas\n%+v", c, before)
	}
}
