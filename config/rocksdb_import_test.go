package config

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func importString(t *testing.T, s string) (*Config, []Unmapped) {
	t.Helper()
	c, unmapped, err := ImportRocksDBOptions(strings.NewReader(s))
	if err != nil {
		t.Fatalf("ImportRocksDBOptions: %v\ninput:\n%s", err, s)
	}
	return c, unmapped
}

func TestImportRoundTrip(t *testing.T) {
	for name, c := range roundTripConfigs() {
		t.Run(name, func(t *testing.T) {
			file := c.RocksDBOptions()
			got, unmapped := importString(t, file)
			if len(unmapped) != 0 {
				t.Errorf("importing Strata's own file left unmapped: %v", unmapped)
			}
			// OPTIONS holds the engine's keys; the [server] section is
			// not among them and comes back as its default.
			want := c.Clone()
			want.Server = Default().Server
			want.Cluster = Default().Cluster
			if !reflect.DeepEqual(got, want) {
				t.Errorf("Import(RocksDBOptions(c)) =\n%+v\nwant\n%+v\nfile:\n%s", got, want, file)
			}
		})
	}
}

func TestImportGoldenFile(t *testing.T) {
	f, err := os.Open(filepath.Join("testdata", "default.OPTIONS"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	got, unmapped, err := ImportRocksDBOptions(f)
	if err != nil || len(unmapped) != 0 || !reflect.DeepEqual(got, Default()) {
		t.Errorf("importing default.OPTIONS = %+v, %v, %v; want Default()", got, unmapped, err)
	}
}

func TestImportRocksDBExample(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "rocksdb_example.OPTIONS"))
	if err != nil {
		t.Fatal(err)
	}
	got, unmapped := importString(t, string(data))

	want := Default()
	want.WALDir = "E:/logs/vccdb_wal"
	want.UseDirectIOForFlushAndCompaction = true
	want.MaxBackgroundJobs = 8
	want.MemtableSizeMB = 128
	want.MaxWriteBufferNumber = 4
	want.MinWriteBufferNumberToMerge = 2
	want.TargetFileSizeBaseMB = 64
	want.MaxBytesForLevelBaseMB = 512
	want.CompressionDefault = "lz4"
	want.CompressionBottommost = "zstd:6"
	want.BlockSize = 16384
	if !reflect.DeepEqual(got, want) {
		t.Errorf("imported\n%+v\nwant\n%+v", got, want)
	}

	var keys []string
	for _, u := range unmapped {
		keys = append(keys, "["+u.Section+"] "+u.Key)
	}
	wantKeys := []string{
		"[DBOptions] max_subcompactions",
		"[DBOptions] create_missing_column_families",
		"[DBOptions] paranoid_checks",
		"[DBOptions] db_log_dir",
		"[DBOptions] use_fsync",
		"[DBOptions] bytes_per_sync",
		"[DBOptions] wal_bytes_per_sync",
		"[DBOptions] max_total_wal_size",
		"[DBOptions] keep_log_file_num",
		"[DBOptions] stats_dump_period_sec",
		`[CFOptions "default"] compaction_pri`,
		`[CFOptions "default"] level0_file_num_compaction_trigger`,
		`[CFOptions "default"] level0_slowdown_writes_trigger`,
		`[CFOptions "default"] level0_stop_writes_trigger`,
		`[CFOptions "default"] max_compaction_bytes`,
		`[CFOptions "default"] ttl`,
		`[CFOptions "default"] disable_auto_compactions`,
		`[TableOptions/BlockBasedTable "default"] flush_block_policy_factory`,
		`[TableOptions/BlockBasedTable "default"] block_restart_interval`,
		`[TableOptions/BlockBasedTable "default"] metadata_block_size`,
		`[TableOptions/BlockBasedTable "default"] whole_key_filtering`,
		`[TableOptions/BlockBasedTable "default"] format_version`,
		`[TableOptions/BlockBasedTable "default"] checksum`,
		`[TableOptions/BlockBasedTable "default"] no_block_cache`,
		`[CFOptions "archive"] `,
		`[TableOptions/BlockBasedTable "archive"] `,
	}
	if !reflect.DeepEqual(keys, wantKeys) {
		t.Errorf("unmapped =\n  %s\nwant\n  %s", strings.Join(keys, "\n  "), strings.Join(wantKeys, "\n  "))
	}
	for _, u := range unmapped {
		if u.Reason == "" {
			t.Errorf("%v has no reason", u)
		}
	}
	if s := unmapped[0].String(); s != "[DBOptions] max_subcompactions=1: no Strata setting" {
		t.Errorf("Unmapped.String() = %q", s)
	}
	if s := unmapped[len(unmapped)-2].String(); s != `[CFOptions "archive"]: only the default column family is mapped: a Strata database has one keyspace` {
		t.Errorf("Unmapped.String() of a section = %q", s)
	}
}

// cf wraps statements in a [CFOptions "default"] section.
func cf(lines ...string) string {
	return "[CFOptions \"default\"]\n" + strings.Join(lines, "\n") + "\n"
}

func table(lines ...string) string {
	return "[TableOptions/BlockBasedTable \"default\"]\n" + strings.Join(lines, "\n") + "\n"
}

func TestImportMapping(t *testing.T) {
	tests := []struct {
		name     string
		in       string
		change   func(*Config) // applied to Default() for the expected config
		unmapped []string      // Key=Value of the expected Unmapped entries
	}{
		{"zlib keeps the default codec", cf("compression=kZlibCompression"),
			func(c *Config) {}, []string{"compression=kZlibCompression"}},
		{"zlib bottommost keeps the default codec", cf("compression=kSnappyCompression", "bottommost_compression=kZlibCompression",
			"compression_per_level=kSnappyCompression:kSnappyCompression:kSnappyCompression:kSnappyCompression:kSnappyCompression:kSnappyCompression:kSnappyCompression"),
			func(c *Config) { c.CompressionDefault = "snappy" }, []string{"bottommost_compression=kZlibCompression"}},
		{"bottommost follows compression", cf("compression=kSnappyCompression", "bottommost_compression=kDisableCompressionOption"),
			func(c *Config) { c.CompressionDefault, c.CompressionBottommost = "snappy", "snappy" }, nil},
		{"no bottommost key", cf("compression=kNoCompression"),
			func(c *Config) { c.CompressionDefault, c.CompressionBottommost = "none", "none" }, nil},
		{"per level uniform", cf("compression=kSnappyCompression",
			"compression_per_level=kZSTD:kZSTD:kZSTD:kZSTD:kZSTD:kZSTD:kSnappyCompression",
			"compression_opts={level=7;enabled=false}", "bottommost_compression=kDisableCompressionOption"),
			func(c *Config) { c.CompressionDefault, c.CompressionBottommost = "zstd:7", "snappy" }, nil},
		{"per level mixed", cf("compression=kSnappyCompression",
			"compression_per_level=kNoCompression:kNoCompression:kLZ4Compression:kLZ4Compression:kLZ4Compression:kLZ4Compression:kZSTD"),
			func(c *Config) { c.CompressionLevels = []string{"none", "none", "lz4", "lz4", "lz4", "lz4", "zstd"} }, nil},
		{"per level mixed, zstd levels", cf("compression_per_level=kNoCompression:kNoCompression:kLZ4Compression:kLZ4Compression:kLZ4Compression:kZSTD:kZSTD",
			"compression_opts={level=1;}", "bottommost_compression_opts={level=9;enabled=true;}"),
			func(c *Config) {
				c.CompressionLevels = []string{"none", "none", "lz4", "lz4", "lz4", "zstd:1", "zstd:9"}
			}, nil},
		{"per level short list", cf("compression_per_level=kLZ4Compression:kZSTD", "bottommost_compression=kSnappyCompression"),
			func(c *Config) {
				c.CompressionLevels = []string{"lz4", "zstd", "zstd", "zstd", "zstd", "zstd", "snappy"}
			}, nil},
		{"per level, strata spelling", cf("compression_per_level=kNoCompression:kSnappyCompression:kSnappyCompression:kSnappyCompression:kSnappyCompression:kZSTD:kZSTD",
			"compression_opts={level=4;}", "# strata: compression_levels=none,snappy,snappy,snappy,snappy,zstd-4,zstd:4", "# strata: compression_default=minlz"),
			func(c *Config) {
				c.CompressionLevels = []string{"none", "snappy", "snappy", "snappy", "snappy", "zstd-4", "zstd:4"}
				c.CompressionDefault = "minlz"
			}, nil},
		{"per level, strata spelling disagrees", cf("compression_per_level=kNoCompression:kSnappyCompression:kSnappyCompression:kSnappyCompression:kSnappyCompression:kZSTD:kZSTD",
			"# strata: compression_levels=none,none,none,none,none,none,zstd"),
			func(c *Config) {
				c.CompressionLevels = []string{"none", "snappy", "snappy", "snappy", "snappy", "zstd", "zstd"}
			},
			[]string{"strata: compression_levels=none,none,none,none,none,none,zstd"}},
		{"per level with zlib", cf("compression_per_level=kZlibCompression:kZSTD"),
			func(c *Config) {}, []string{"compression_per_level=kZlibCompression:kZSTD"}},
		{"six levels (RocksDB's example)", cf("num_levels=6", "compression=kSnappyCompression",
			"compression_per_level=kNoCompression:kNoCompression:kNoCompression:kSnappyCompression:kSnappyCompression:kSnappyCompression"),
			func(c *Config) {
				c.CompressionLevels = []string{"none", "none", "none", "snappy", "snappy", "snappy", "snappy"}
			}, []string{"num_levels=6"}},
		{"old positional compression_opts", cf("compression=kZSTD", "compression_opts=-14:5:0:0"),
			func(c *Config) { c.CompressionDefault, c.CompressionBottommost = "zstd:5", "zstd:5" }, nil},
		{"zstd level equal to zstd_level", cf("bottommost_compression=kZSTD", "bottommost_compression_opts={level=3;enabled=true;}"),
			func(c *Config) {}, nil},
		{"bottommost opts disabled", cf("bottommost_compression=kZSTD", "compression_opts={level=9;}", "bottommost_compression_opts={level=4;enabled=false;}"),
			func(c *Config) { c.CompressionBottommost = "zstd:9" }, nil},
		{"zstd level out of range", cf("bottommost_compression=kZSTD", "bottommost_compression_opts={level=30;enabled=true;}"),
			func(c *Config) {}, []string{"bottommost_compression_opts={level=30;enabled=true;}"}},
		{"dictionary compression", cf("compression_opts={level=32767;max_dict_bytes=16384;parallel_threads=4;}"),
			func(c *Config) {}, []string{"compression_opts.max_dict_bytes=16384", "compression_opts.parallel_threads=4"}},
		{"sizes not whole MB", cf("write_buffer_size=100000000", "target_file_size_base=1"),
			func(c *Config) { c.MemtableSizeMB, c.TargetFileSizeBaseMB = 96, 1 },
			[]string{"write_buffer_size=100000000", "target_file_size_base=1"}},
		{"sizes with RocksDB's suffixes", cf("write_buffer_size=64m", "max_bytes_for_level_base=1G"),
			func(c *Config) { c.MemtableSizeMB, c.MaxBytesForLevelBaseMB = 64, 1024 }, nil},
		{"block cache, as an option string gives it", table("block_cache=1073741824"),
			func(c *Config) { c.BlockCacheSizeMB = 1024 }, nil},
		{"optimize filters for hits", cf("optimize_filters_for_hits=true"),
			func(c *Config) { c.OptimizeFiltersForHits = true }, nil},
		{"bottommost block size", table("# strata: bottommost_block_size=0"),
			func(c *Config) { c.BottommostBlockSize = 0 }, nil},
		{"universal", cf("compaction_style=kCompactionStyleUniversal"),
			func(c *Config) { c.UseUniversalCompaction = true }, nil},
		{"FIFO", cf("compaction_style=kCompactionStyleFIFO"),
			func(c *Config) {}, []string{"compaction_style=kCompactionStyleFIFO"}},
		{"multiplier", cf("target_file_size_multiplier=2", "max_bytes_for_level_multiplier=8"),
			func(c *Config) {}, []string{"target_file_size_multiplier=2", "max_bytes_for_level_multiplier=8"}},
		{"other comparator", cf("comparator=rocksdb.ReverseBytewiseComparator"),
			func(c *Config) {}, []string{"comparator=rocksdb.ReverseBytewiseComparator"}},
		{"bloom bits", table("filter_policy=bloomfilter:12"), func(c *Config) { c.BloomBitsPerKey = 12 }, nil},
		{"no filter", table("filter_policy=nullptr"), func(c *Config) { c.BloomBitsPerKey = 0 }, nil},
		{"fractional bloom", table("filter_policy=bloomfilter:9.9:false"),
			func(c *Config) {}, []string{"filter_policy=bloomfilter:9.9:false"}},
		{"ribbon filter", table("filter_policy=ribbonfilter:10"),
			func(c *Config) {}, []string{"filter_policy=ribbonfilter:10"}},
		{"RocksDB 4 filter", table("filter_policy=rocksdb.BuiltinBloomFilter"),
			func(c *Config) {}, []string{"filter_policy=rocksdb.BuiltinBloomFilter"}},
		{"hash index", table("index_type=kHashSearch", "cache_index_and_filter_blocks_with_high_priority=false"),
			func(c *Config) {}, []string{"index_type=kHashSearch", "cache_index_and_filter_blocks_with_high_priority=false"}},
		{"table flags", table("cache_index_and_filter_blocks=false", "pin_l0_filter_and_index_blocks_in_cache=0", "partition_filters=false", "block_size=8192"),
			func(c *Config) {
				c.CacheIndexAndFilterBlocks, c.PinL0FilterAndIndexBlocksInCache, c.PartitionFilters, c.BlockSize = false, false, false, 8192
			}, nil},
		{"create_if_missing=false", "[DBOptions]\ncreate_if_missing=false\n", func(c *Config) {}, []string{"create_if_missing=false"}},
		{"comments, spaces, CRLF", "# head\r\n[DBOptions]   # the DB\r\n\twal_dir =  /w\\#1  # where the WAL goes\r\n  max_background_jobs= 4\r\n",
			func(c *Config) { c.WALDir, c.MaxBackgroundJobs = "/w#1", 4 }, nil},
		{"strata spelling disagrees", cf("compression=kSnappyCompression", "# strata: compression_default=lz4"),
			func(c *Config) { c.CompressionDefault, c.CompressionBottommost = "snappy", "snappy" },
			[]string{"strata: compression_default=lz4"}},
		{"strata comments alone", "# strata: compression_default=none\n# strata: zstd_level=7\n# strata: db_paths=/a:1,/b\\:c\\,d:2\n",
			func(c *Config) {
				c.CompressionDefault, c.ZstdLevel = "none", 7
				c.DBPaths = []DBPath{{"/a", 1}, {"/b:c,d", 2}}
			}, nil},
		{"unknown strata comment", "# strata: colour=blue\n# strata:\n", func(c *Config) {}, []string{"strata: colour=blue", "strata:="}},
		{"unknown section", "[Mystery]\na=1\n[TableOptions/PlainTable \"default\"]\nb=2\n", func(c *Config) {}, []string{"=", "="}},
		{"version keys", "[Version]\nrocksdb_version=9.0.0\noptions_file_version=1.1\nsomething=1\n", func(c *Config) {}, []string{"something=1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, unmapped := importString(t, tt.in)
			want := Default()
			tt.change(want)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("imported\n%+v\nwant\n%+v", got, want)
			}
			var keys []string
			for _, u := range unmapped {
				keys = append(keys, u.Key+"="+u.Value)
				if u.Reason == "" {
					t.Errorf("%v has no reason", u)
				}
			}
			if !reflect.DeepEqual(keys, tt.unmapped) {
				t.Errorf("unmapped = %q, want %q\n%v", keys, tt.unmapped, unmapped)
			}
		})
	}
}

func TestImportErrors(t *testing.T) {
	tests := []struct{ in, want string }{
		{"[DBOptions]\nnot a statement\n", "line 2: expected key=value"},
		{"[DBOptions]\n=5\n", "line 2: statement without a key"},
		{"max_open_files=5\n", "line 1: max_open_files=... before the first [section]"},
		{"[DBOptions\n", "line 1: malformed section header"},
		{"[CFOptions default]\n", "line 1: malformed section header"},
		{"[]\n", "line 1: malformed section header"},
		{"[DBOptions]\n[DBOptions]\n", "line 2: section [DBOptions] appears again (first on line 1)"},
		{"[DBOptions]\nwal_dir=a\n\nwal_dir=b\n", "line 4: wal_dir is set again in [DBOptions] (first on line 2)"},
		{"[DBOptions]\nuse_direct_reads=maybe\n", "line 2: use_direct_reads=maybe: expected true or false"},
		{"[DBOptions]\nmax_background_jobs=many\n", "line 2: max_background_jobs=many: expected an integer"},
		{"[DBOptions]\nmax_background_jobs=99999999999999999999\n", "line 2: max_background_jobs=99999999999999999999: integer out of range"},
		{cf("write_buffer_size=-1"), "line 2: write_buffer_size=-1: expected a size in bytes"},
		{cf("num_levels=0"), "line 2: num_levels=0: expected a positive integer"},
		{"[Version]\noptions_file_version=2.0\n", "line 2: options_file_version=2.0: only version 1.x is understood"},
		{"# strata: zstd_level=high\n", "line 1: strata: zstd_level=high: expected an integer"},
		{"# strata: db_paths=/a\n", `line 1: strata: db_paths: entry "/a": expected path:target_size_bytes`},
		{"# strata: db_paths=/a:-1\n", `line 1: strata: db_paths: entry "/a:-1": target_size_bytes must be a non-negative integer`},
		{"# strata: high_pri_pool_ratio=half\n", "line 1: strata: high_pri_pool_ratio=half: expected a number"},
	}
	for _, tt := range tests {
		c, unmapped, err := ImportRocksDBOptions(strings.NewReader(tt.in))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Import(%q) = %v, want an error with %q", tt.in, err, tt.want)
		}
		if c != nil || unmapped != nil {
			t.Errorf("Import(%q) returned results with a syntax error", tt.in)
		}
	}
}

func TestImportInvalidForStrata(t *testing.T) {
	c, unmapped, err := ImportRocksDBOptions(strings.NewReader(cf("write_buffer_size=8589934592", "max_write_buffer_number=100", "ttl=0")))
	var verr *ValidationError
	if !errors.As(err, &verr) || len(verr.Problems) != 2 ||
		verr.Problems[0].Error() != "memtable_size_mb = 8192: must be from 1 to 4095" ||
		verr.Problems[1].Key != "max_write_buffer_number" {
		t.Fatalf("err = %v, want the memtable_size_mb and max_write_buffer_number problems", err)
	}
	if !strings.HasPrefix(err.Error(), "config: RocksDB options give an invalid Strata config: 2 invalid setting(s)") {
		t.Errorf("message = %q", err.Error())
	}
	if c == nil || c.MemtableSizeMB != 8192 || len(unmapped) != 1 {
		t.Errorf("config and unmapped should come with the validation error: %+v %v", c, unmapped)
	}
}

// FuzzImportRocksDBOptions checks that no input makes the importer panic, and
// that a config it accepts is valid and survives RocksDBOptions and a second
// import unchanged, with nothing unmapped. CI runs the seed corpus only.
func FuzzImportRocksDBOptions(f *testing.F) {
	for _, name := range []string{"default.OPTIONS", "rocksdb_example.OPTIONS"} {
		data, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte(allChanged().RocksDBOptions()))
	f.Add([]byte(cf("compression_per_level=kZSTD:kLZ4Compression", "compression_opts={level=-5;}", "num_levels=1")))
	f.Add([]byte("# strata: db_paths=\\ a\\::1,b:2\n# strata: compression_bottommost=zstd:4\n[DBOptions]\nwal_dir=\\\n"))
	f.Add([]byte(table("filter_policy=bloomfilter:64:true", "block_size=1024")))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, _, err := ImportRocksDBOptions(strings.NewReader(string(data)))
		if err != nil {
			return
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("imported an invalid config without error: %v", err)
		}
		again, unmapped, err := ImportRocksDBOptions(strings.NewReader(c.RocksDBOptions()))
		if err != nil || len(unmapped) != 0 || !reflect.DeepEqual(again, c) {
			t.Fatalf("re-import = %+v, %v, %v\nwant %+v", again, unmapped, err, c)
		}
	})
}
