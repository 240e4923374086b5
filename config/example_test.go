package config_test

import (
	"fmt"
	"strings"

	"github.com/stratadb/strata/config"
)

func ExampleConfig_Validate() {
	cfg := config.Default()
	cfg.MemtableSizeMB = -4
	cfg.CompressionBottommost = "zlib"
	cfg.Sync, cfg.EnableWAL = true, false
	fmt.Println(cfg.Validate())
	// Output:
	// config: 3 invalid setting(s):
	//   compression_bottommost = "zlib": must be one of none, snappy, lz4, zstd, zstd:<1-22>, minlz
	//   memtable_size_mb = -4: must be from 1 to 4095
	//   sync = true: requires enable_wal = true: sync waits for the write's WAL record
}

func ExampleParse() {
	cfg, err := config.Parse([]byte(`
memtable_size_mb = 512
compression_bottommost = "zstd:6"
`), "toml")
	if err != nil {
		panic(err)
	}
	fmt.Println(cfg.MemtableSizeMB, cfg.CompressionBottommost, cfg.CompressionDefault)
	for _, n := range cfg.Notes() {
		fmt.Println("note:", n)
	}
	// Output:
	// 512 zstd:6 lz4
	// note: compression_default = "lz4": lz4 is stored as MinLZ: Pebble's block format has no LZ4
	// note: pin_l0_filter_and_index_blocks_in_cache = true: Pebble has no pinning of blocks in the cache
	// note: partition_filters = true: Pebble keeps one filter per table; it switches to a two-level index by itself when an index grows
	// note: high_pri_pool_ratio = 0.5: Pebble's CLOCK-Pro block cache has no priority pools
}

func ExampleImportRocksDBOptions() {
	cfg, unmapped, err := config.ImportRocksDBOptions(strings.NewReader(`
[CFOptions "default"]
  write_buffer_size=134217728
  compression=kSnappyCompression
  bottommost_compression=kZlibCompression
  compaction_pri=kMinOverlappingRatio
`))
	if err != nil {
		panic(err)
	}
	fmt.Println(cfg.MemtableSizeMB, cfg.CompressionDefault, cfg.CompressionBottommost)
	for _, u := range unmapped {
		fmt.Println(u)
	}
	// Output:
	// 128 snappy zstd
	// [CFOptions "default"] bottommost_compression=kZlibCompression: no Pebble equivalent: Strata's default codec stays (Pebble stores none, snappy, zstd and minlz; lz4 as minlz)
	// [CFOptions "default"] compaction_pri=kMinOverlappingRatio: Pebble picks compactions by its own score
}
