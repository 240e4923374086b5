package config

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// themisExample is the example configuration of the THEMIS tuning guide, as
// testdata/example.{toml,yaml,json} write it.
func themisExample() *Config {
	c := Default()
	c.DBPath = "D:/data/vccdb"
	c.WALDir = "E:/logs/vccdb_wal"
	c.DBPaths = []DBPath{
		{Path: "D:/data/vccdb", TargetSizeBytes: 500 << 30},
		{Path: "F:/data/vccdb_hot", TargetSizeBytes: 500 << 30},
	}
	c.MemtableSizeMB = 512
	c.BlockCacheSizeMB = 4096
	c.MaxWriteBufferNumber = 4
	c.TargetFileSizeBaseMB = 128
	c.MaxBytesForLevelBaseMB = 1024
	c.UseDirectIOForFlushAndCompaction = true
	return c
}

// allChanged returns a valid Config in which every field differs from
// Default() except Sync: sync=true needs enable_wal=true, and enable_wal is
// changed to false here (syncOn covers the other combination).
func allChanged() *Config {
	return &Config{
		DBPath:                           "/srv/strata/db",
		WALDir:                           "/nvme1/strata-wal",
		WALFailoverDir:                   "/nvme2/strata-wal",
		DBPaths:                          []DBPath{{"/nvme2/strata", 500 << 30}}, // one path: blob files are on
		CompressionDefault:               "snappy",
		CompressionBottommost:            "zstd:9",
		CompressionLevels:                []string{"none", "none", "lz4", "lz4", "zstd:1", "zstd", "zstd:9"},
		ZstdLevel:                        5,
		BlockSize:                        16384,
		BottommostBlockSize:              65536,
		BlockCacheSizeMB:                 4096,
		CacheIndexAndFilterBlocks:        false,
		PinL0FilterAndIndexBlocksInCache: false,
		PartitionFilters:                 false,
		HighPriPoolRatio:                 0.25,
		BloomBitsPerKey:                  14,
		OptimizeFiltersForHits:           true,
		MemtableSizeMB:                   512,
		MaxWriteBufferNumber:             4,
		MinWriteBufferNumberToMerge:      2,
		UseUniversalCompaction:           true,
		DynamicLevelBytes:                false,
		TargetFileSizeBaseMB:             128,
		MaxBytesForLevelBaseMB:           1024,
		EnableBlobFiles:                  true,
		MinBlobSize:                      2048,
		EnableBlobGarbageCollection:      true,
		KeyCompression:                   "snappy",
		UseDirectReads:                   true,
		UseDirectIOForFlushAndCompaction: true,
		DirectIOFallback:                 true,
		EnableWAL:                        false,
		Sync:                             false,
		MaxBackgroundJobs:                8,
		MaxOpenFiles:                     5000,
		Server: ServerConfig{
			Listen:               "0.0.0.0:12379",
			ListenMetricsURLs:    []string{"http://127.0.0.1:12381", "https://[::1]:12381"},
			ListenClientURLs:     []string{"http://127.0.0.1:14001"},
			MaxRequestBytes:      4 << 20,
			MaxTxnOps:            512,
			MaxValueBytes:        1 << 20,
			CertFile:             "/etc/strata/server.pem",
			KeyFile:              "/etc/strata/server-key.pem",
			ClientCAFile:         "/etc/strata/ca.pem",
			MaxConcurrentStreams: 100,
			MemoryBudgetMB:       256,

			WatchProgressNotifyIntervalMS: 60000,
			InitialCorruptCheck:           true,
			CorruptCheckIntervalMS:        300000,
			CompactHashCheck:              true,
			CompactHashCheckIntervalMS:    30000,

			AuthToken:    "jwt,pub-key=/etc/strata/jwt.pub,priv-key=/etc/strata/jwt.key,sign-method=RS256,ttl=10m",
			AuthTokenTTL: 600,
			BcryptCost:   12,

			QuotaBackendBytes: 8 << 30,
			MinFreeDiskBytes:  1 << 30,

			AutoCompactionMode:      "revision",
			AutoCompactionRetention: "1000",
		},
		Cluster: ClusterConfig{
			Name:       "s2",
			ListenPeer: "0.0.0.0:12380",
			Members: []ClusterMember{
				{Name: "s1", PeerURL: "http://10.0.0.1:2380", ClientURL: "http://10.0.0.1:2379"},
				{Name: "s2", PeerURL: "https://10.0.0.2:2380", ClientURL: "https://10.0.0.2:2379"},
			},
			Token:               "prod-1",
			Join:                true,
			RaftDir:             "/nvme/strata-raft",
			HeartbeatIntervalMS: 50,
			ElectionTimeoutMS:   500,
			SnapshotEntries:     5000,
		},
	}
}

func syncOn() *Config {
	c := Default()
	c.Sync = true
	return c
}

// roundTripConfigs are valid configs every text form must carry unchanged.
func roundTripConfigs() map[string]*Config {
	odd := Default()
	odd.DBPath = "  /odd: path#1\\x, with \"quotes\"\tand\nnewline "
	odd.WALDir = "C:\\wal # not a comment"
	odd.DBPaths = []DBPath{{"/a,b:c", 1}, {" /d ", 1 << 62}, {"ü/日本", 9}}
	odd.CompressionDefault = " ZSTD "
	odd.CompressionBottommost = "zstd-19"
	odd.HighPriPoolRatio = 0.1
	minlz := Default()
	minlz.CompressionDefault, minlz.CompressionBottommost = "minlz", "none"
	zstd := Default()
	zstd.CompressionDefault, zstd.CompressionBottommost, zstd.ZstdLevel = "zstd:6", "zstd", 5
	perLevel := Default()
	perLevel.CompressionLevels = []string{"none", "none", "lz4", "lz4", "lz4", "zstd", "zstd"}
	uniform := Default()
	uniform.CompressionLevels = []string{"snappy", "snappy", "snappy", "snappy", "snappy", "snappy", "minlz"}
	return map[string]*Config{
		"per level":         perLevel,
		"per level uniform": uniform,
		"default":           Default(),
		"all changed":       allChanged(),
		"sync":              syncOn(),
		"themis":            themisExample(),
		"odd strings":       odd,
		"minlz":             minlz,
		"zstd levels":       zstd,
	}
}

func TestAllChangedChangesEveryField(t *testing.T) {
	d, c := reflect.ValueOf(*Default()), reflect.ValueOf(*allChanged())
	for i := range d.NumField() {
		name := d.Type().Field(i).Name
		same := reflect.DeepEqual(d.Field(i).Interface(), c.Field(i).Interface())
		if same != (name == "Sync") {
			t.Errorf("field %s: equal to the default = %v", name, same)
		}
	}
	if err := allChanged().Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestStructTagsAgree(t *testing.T) {
	for _, typ := range []reflect.Type{reflect.TypeFor[Config](), reflect.TypeFor[DBPath]()} {
		for i := range typ.NumField() {
			f := typ.Field(i)
			key := f.Tag.Get("toml")
			if key == "" || f.Tag.Get("yaml") != key || f.Tag.Get("json") != key {
				t.Errorf("%s.%s: tags disagree: %s", typ.Name(), f.Name, f.Tag)
			}
		}
	}
}

func TestLoadExamples(t *testing.T) {
	want := themisExample()
	for _, name := range []string{"example.toml", "example.yaml", "example.json"} {
		t.Run(name, func(t *testing.T) {
			got, err := Load(filepath.Join("testdata", name))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("Load(%s) =\n%+v\nwant\n%+v", name, got, want)
			}
		})
	}
}

func TestLoadExtensions(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"a.TOML", "b.yml", "c.Yaml", "d.json"} {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := Load(path); err != nil {
			t.Errorf("Load(%s) = %v", name, err)
		}
	}
}

func TestParseEmptyIsDefault(t *testing.T) {
	inputs := map[string][]string{
		"toml": {"", "\n\n", "# only a comment\n"},
		"yaml": {"", "\n", "# only a comment\n", "---\n", "~\n"},
		"json": {"", "  \n", "{}"},
	}
	for format, list := range inputs {
		for _, in := range list {
			got, err := Parse([]byte(in), format)
			if err != nil {
				t.Errorf("Parse(%q, %s) = %v", in, format, err)
				continue
			}
			if !reflect.DeepEqual(got, Default()) {
				t.Errorf("Parse(%q, %s) = %+v, want Default()", in, format, got)
			}
		}
	}
}

func TestLoadFileErrors(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing.toml")
	_, err := Load(missing)
	if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), missing) {
		t.Errorf("Load(missing) = %v, want fs.ErrNotExist naming the path", err)
	}

	ini := filepath.Join(dir, "strata.ini")
	_, err = Load(ini)
	if err == nil || !strings.Contains(err.Error(), ini) || !strings.Contains(err.Error(), ".toml, .yaml, .yml, .json") {
		t.Errorf("Load(.ini) = %v, want an error naming the file and the extensions", err)
	}

	asDir := filepath.Join(dir, "dir.yaml")
	if err := os.Mkdir(asDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err = Load(asDir); err == nil || !strings.Contains(err.Error(), asDir) {
		t.Errorf("Load(directory) = %v, want an error naming the path", err)
	}

	bad := filepath.Join(dir, "bad.toml")
	if err := os.WriteFile(bad, []byte("memtable_size_mb = \"big\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = Load(bad)
	want := "config: " + bad + ": 1 invalid setting(s):\n  memtable_size_mb = \"big\": expected an integer"
	if err == nil || err.Error() != want {
		t.Errorf("Load(bad) = %v\nwant %s", err, want)
	}
	var fe *FieldError
	if !errors.As(err, &fe) || fe.Key != "memtable_size_mb" {
		t.Errorf("errors.As(*FieldError) = %v", fe)
	}
}

func TestParseBadInput(t *testing.T) {
	tests := []struct {
		format, in string
		want       []string // the FieldErrors, in order
	}{
		// Wrong types.
		{"toml", `memtable_size_mb = "big"`, []string{`memtable_size_mb = "big": expected an integer`}},
		{"yaml", `memtable_size_mb: big`, []string{`memtable_size_mb = "big": expected an integer`}},
		{"json", `{"memtable_size_mb": "big"}`, []string{`memtable_size_mb = "big": expected an integer`}},
		{"toml", `memtable_size_mb = 512.0`, []string{`memtable_size_mb = 512.0: expected an integer`}},
		{"yaml", `memtable_size_mb: 1.5`, []string{`memtable_size_mb = 1.5: expected an integer`}},
		{"json", `{"memtable_size_mb": 1e3}`, []string{`memtable_size_mb = 1000.0: expected an integer`}},
		{"toml", `db_path = 7`, []string{`db_path = 7: expected a string`}},
		{"yaml", `db_path: [a]`, []string{`db_path = [...]: expected a string`}},
		{"toml", `db_path = 1979-05-27`, []string{`db_path = <a datetime>: expected a string`}},
		{"yaml", `sync: yes`, []string{`sync = "yes": expected true or false`}},
		{"json", `{"sync": 1}`, []string{`sync = 1: expected true or false`}},
		{"yaml", `wal_dir: ~`, []string{`wal_dir = null: expected a string`}},
		{"json", `{"wal_dir": null}`, []string{`wal_dir = null: expected a string`}},
		{"toml", `high_pri_pool_ratio = "half"`, []string{`high_pri_pool_ratio = "half": expected a number`}},
		{"json", `{"zstd_level": 99999999999999999999}`, []string{`zstd_level = 99999999999999999999: integer out of range: must fit in 64 bits`}},
		// db_paths.
		{"toml", "[[db_paths]]\npath = 1\ntarget_size_bytes = -1", []string{
			`db_paths[0].path = 1: expected a string`,
			`db_paths[0].target_size_bytes = -1: expected a non-negative integer`}},
		{"yaml", "db_paths:\n  - /a\n  - path: /b\n    size: 5\n", []string{
			`db_paths[0] = "/a": expected a table with keys path and target_size_bytes`,
			`db_paths[1].size = 5: unknown key`}},
		{"json", `{"db_paths": {"path": "/a"}}`, []string{`db_paths = {...}: expected a list of tables with keys path and target_size_bytes`}},
		// Unknown and repeated keys.
		{"toml", `memtable_sise_mb = 512`, []string{`memtable_sise_mb = 512: unknown key (did you mean memtable_size_mb?)`}},
		{"yaml", `Memtable_Size_MB: 512`, []string{`Memtable_Size_MB = 512: unknown key (did you mean memtable_size_mb?)`}},
		{"json", `{"MEMTABLE_SIZE_MB": 512}`, []string{`MEMTABLE_SIZE_MB = 512: unknown key (did you mean memtable_size_mb?)`}},
		{"toml", "[rocksdb]\nmax_open_files = 5", []string{`rocksdb = {...}: unknown key`}},
		{"yaml", "memtable_size_mb: 1\nmemtable_size_mb: 2", []string{`memtable_size_mb = 2: is set more than once`}},
		{"json", `{"memtable_size_mb": 1, "memtable_size_mb": 2}`, []string{`memtable_size_mb = 2: is set more than once`}},
		// Valid types, invalid values: Validate's problems.
		{"toml", "memtable_size_mb = -4\nsync = true\nenable_wal = false", []string{
			`memtable_size_mb = -4: must be from 1 to 4095`,
			`sync = true: requires enable_wal = true: sync waits for the write's WAL record`}},
		{"yaml", "compression_default: zlib", []string{`compression_default = "zlib": must be one of none, snappy, lz4, zstd, zstd:<1-22>, minlz`}},
		{"json", `{"db_paths": [{"path": "/a", "target_size_bytes": 0}]}`, []string{`db_paths[0].target_size_bytes = 0: must be from 1 to 9223372036854775807`}},
		// Several problems at once, in file order.
		{"toml", "foo = 1\nblock_size = \"4k\"\nbar = true", []string{
			`foo = 1: unknown key`, `block_size = "4k": expected an integer`, `bar = true: unknown key`}},
	}
	for _, tt := range tests {
		t.Run(tt.format+"/"+tt.in, func(t *testing.T) {
			cfg, err := Parse([]byte(tt.in), tt.format)
			wantProblems(t, cfg, err, tt.want)
		})
	}
}

// wantProblems checks that a Parse or Load returned no config and exactly
// the problems want, in order.
func wantProblems(t *testing.T, cfg *Config, err error, want []string) {
	t.Helper()
	if cfg != nil {
		t.Errorf("a config came back along with the error")
	}
	var got []string
	for _, p := range problems(t, err) {
		got = append(got, p.Error())
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("problems =\n  %s\nwant\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

func TestParseSyntaxErrors(t *testing.T) {
	tests := []struct {
		format, in, want string
	}{
		{"toml", "a = 1\nb = \n", "line 2"},
		{"toml", "a = 1\na = 2\n", "line 2"},
		{"yaml", "a: 1\nb: [1\n", "yaml: line 1"},
		{"yaml", "- 1\n- 2\n", "top level must be a mapping"},
		{"yaml", "a: 1\n---\nb: 2\n", "one document"},
		{"json", "{\n\"a\": 1,\n}", "json: line 3"},
		{"json", "[1]", "top level must be an object"},
		{"json", "{} {}", "after the top-level object"},
		{"json", `{"a": `, "unexpected end"},
		{"ini", "", `unknown format "ini"`},
	}
	for _, tt := range tests {
		_, err := Parse([]byte(tt.in), tt.format)
		if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.HasPrefix(err.Error(), "config: ") {
			t.Errorf("Parse(%q, %s) = %v, want an error with %q", tt.in, tt.format, err, tt.want)
		}
	}
}

func TestParseNullDBPaths(t *testing.T) {
	for format, in := range map[string]string{"yaml": "db_paths:\n", "json": `{"db_paths": null}`, "toml": "db_paths = []"} {
		got, err := Parse([]byte(in), format)
		if err != nil || got.DBPaths != nil {
			t.Errorf("Parse(%q, %s) = %+v, %v; want no db_paths", in, format, got, err)
		}
	}
}

func TestMarshalRoundTrip(t *testing.T) {
	dir := t.TempDir()
	for name, c := range roundTripConfigs() {
		for _, format := range []string{"toml", "yaml", "json"} {
			t.Run(name+"/"+format, func(t *testing.T) {
				if err := c.Validate(); err != nil {
					t.Fatal(err)
				}
				data, err := c.Marshal(format)
				if err != nil {
					t.Fatal(err)
				}
				path := filepath.Join(dir, strings.ReplaceAll(name, " ", "_")+"."+format)
				if err := os.WriteFile(path, data, 0o644); err != nil {
					t.Fatal(err)
				}
				got, err := Load(path)
				if err != nil {
					t.Fatalf("Load(Marshal(c)) = %v\n%s", err, data)
				}
				if !reflect.DeepEqual(got, c) {
					t.Errorf("Load(Marshal(c)) =\n%+v\nwant\n%+v\nfile:\n%s", got, c, data)
				}
			})
		}
	}
}

func TestMarshalUnknownFormat(t *testing.T) {
	if _, err := Default().Marshal("ini"); err == nil {
		t.Error("Marshal(ini) = nil error")
	}
	if _, err := Default().Marshal("yml"); err != nil {
		t.Errorf("Marshal(yml) = %v", err)
	}
}

// FuzzParse checks that no input makes Parse panic, that a config Parse
// accepts is valid, and that it survives Marshal and Parse unchanged. CI runs
// the seed corpus only; `go test -fuzz FuzzParse ./config` explores.
func FuzzParse(f *testing.F) {
	formats := []string{"toml", "yaml", "json"}
	for i, format := range formats {
		data, err := os.ReadFile(filepath.Join("testdata", "example."+format))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data, uint8(i))
	}
	f.Add([]byte("memtable_size_mb = \"big\"\n[[db_paths]]\npath = 1\n"), uint8(0))
	f.Add([]byte("db_paths:\n  - path: /a\n    target_size_bytes: 1\n  - *x\nsync: &x yes\n"), uint8(1))
	f.Add([]byte(`{"high_pri_pool_ratio": 1e400, "db_paths": [[[[[[1]]]]]], "a": {"b": {"c": {}}}}`), uint8(2))
	f.Add([]byte("zstd_level: 0x10\nblock_size: 1_024\nhigh_pri_pool_ratio: .nan\n"), uint8(1))
	f.Add([]byte("write_buffer_size = \"64m\"\ncompression_per_level = [\"lz4\", \"kZSTD\"]\ncompression_opts = \"{level=4}\"\n"+
		"filter_policy = \"bloomfilter:9\"\nblock_cache = 1048576\nmax_bytes_for_level_multiplier = 10.0\n"), uint8(0))
	f.Add([]byte(`{"compression": "kZSTD", "bottommost_compression_opts": "{level=7;enabled=true}", "compression_bottommost": "none", "num_levels": 7}`), uint8(2))
	f.Fuzz(func(t *testing.T, data []byte, which uint8) {
		format := formats[int(which)%len(formats)]
		c, err := Parse(data, format)
		if err != nil {
			return
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("Parse accepted an invalid config: %v", err)
		}
		out, err := c.Marshal(format)
		if err != nil {
			t.Fatalf("Marshal: %v", err)
		}
		c2, err := Parse(out, format)
		if err != nil {
			t.Fatalf("Parse(Marshal(c)) = %v\n%s", err, out)
		}
		if !reflect.DeepEqual(c, c2) {
			t.Fatalf("Parse(Marshal(c)) =\n%+v\nwant\n%+v", c2, c)
		}
	})
}
