package config

import (
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

func TestRocksDBOptionsGolden(t *testing.T) {
	path := filepath.Join("testdata", "default.OPTIONS")
	got := Default().RocksDBOptions()
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Errorf("Default().RocksDBOptions() differs from %s (run go test ./config -run Golden -update to rewrite):\n%s", path, got)
	}
}

func TestRocksDBOptionsFileName(t *testing.T) {
	// Pebble takes OPTIONS-<digits> for its own and deletes older ones.
	if regexp.MustCompile(`^OPTIONS-\d+$`).MatchString(RocksDBOptionsFileName) {
		t.Errorf("RocksDBOptionsFileName %q looks like one of Pebble's OPTIONS files", RocksDBOptionsFileName)
	}
}

// grep returns the lines of s containing word, trimmed.
func grep(s, word string) []string {
	var out []string
	for _, line := range strings.Split(s, "\n") {
		if strings.Contains(line, word) {
			out = append(out, strings.TrimSpace(line))
		}
	}
	return out
}

func TestRocksDBOptionsCompression(t *testing.T) {
	// THEMIS's check: cat OPTIONS-* | grep compression.
	c := Default()
	c.CompressionBottommost = "zstd:6"
	got := strings.Join(grep(c.RocksDBOptions(), "compression"), "\n")
	for _, want := range []string{
		"# compression (levels 0-5): requested lz4, effective minlz",
		"# bottommost_compression (level 6): requested zstd level 6, effective zstd level 6",
		"compression=kLZ4Compression",
		"bottommost_compression=kZSTD",
		"compression_per_level=kLZ4Compression:kLZ4Compression:kLZ4Compression:kLZ4Compression:kLZ4Compression:kLZ4Compression:kZSTD",
		"compression_opts={window_bits=-14;level=32767;strategy=0;max_dict_bytes=0;zstd_max_train_bytes=0;parallel_threads=1;enabled=false;max_dict_buffer_bytes=0;use_zstd_dict_trainer=true;}",
		"bottommost_compression_opts={window_bits=-14;level=6;strategy=0;max_dict_bytes=0;zstd_max_train_bytes=0;parallel_threads=1;enabled=true;max_dict_buffer_bytes=0;use_zstd_dict_trainer=true;}",
		"# strata: compression_default=lz4",
		"# strata: compression_bottommost=zstd:6",
	} {
		if !strings.Contains(got, want+"\n") && !strings.HasSuffix(got, want) {
			t.Errorf("grep compression lacks\n  %s\ngot:\n%s", want, got)
		}
	}
	if lz4 := grep(c.RocksDBOptions(), "lz4 is stored as MinLZ"); len(lz4) != 1 {
		t.Errorf("the lz4 substitution is explained %d times, want once", len(lz4))
	}
}

func TestRocksDBOptionsMinLZ(t *testing.T) {
	c := Default()
	c.CompressionDefault = "minlz"
	s := c.RocksDBOptions()
	if !strings.Contains(s, "compression=kMinLZCompression") || len(grep(s, "RocksDB itself cannot load this file")) != 1 {
		t.Errorf("minlz is not written as kMinLZCompression with a warning:\n%s", s)
	}
}

func TestRocksDBOptionsNotes(t *testing.T) {
	c := allChanged()
	c.MaxWriteBufferNumber = 1
	c.PinL0FilterAndIndexBlocksInCache = true
	s := c.RocksDBOptions()
	var want []string
	for _, n := range c.Notes() {
		if n.Reason != reasonLZ4 { // the codec lines of the header say it
			want = append(want, "# not applicable: "+n.String())
		}
	}
	got := grep(s, "# not applicable:")
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("not-applicable comments =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for _, line := range []string{
		"compaction_style=kCompactionStyleUniversal",
		"level_compaction_dynamic_level_bytes=false",
		"write_buffer_size=536870912",
		"index_type=kBinarySearch",
		"filter_policy=bloomfilter:14:false",
		"# strata: db_paths=/nvme2/strata:536870912000",
		"# strata: wal_failover_dir=/nvme2/strata-wal",
		"# strata: enable_wal=false",
	} {
		if len(grep(s, line)) != 1 {
			t.Errorf("missing line %q in\n%s", line, s)
		}
	}
	c.BloomBitsPerKey = 0
	if len(grep(c.RocksDBOptions(), "filter_policy=nullptr")) != 1 {
		t.Errorf("bloom_bits_per_key = 0 is not filter_policy=nullptr")
	}
}

func TestRocksDBOptionsInvalidCodec(t *testing.T) {
	c := Default()
	c.CompressionDefault = "lz5"
	s := c.RocksDBOptions()
	if len(grep(s, `invalid codec "lz5"`)) != 1 || len(grep(s, "  compression=")) != 0 {
		t.Errorf("an invalid codec should be a comment and leave out the compression keys:\n%s", s)
	}
}

func TestEscapeValue(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", ""},
		{"/plain/path", "/plain/path"},
		{"E:/logs", `E\:/logs`},
		{`a\b#c`, `a\\b\#c`},
		{"two\nlines\r", `two\nlines\r`},
		{" padded\t", `\ padded\` + "\t"},
		{"in ner", "in ner"},
	}
	for _, tt := range tests {
		got := escapeValue(tt.in, rocksDBSpecial)
		if got != tt.want {
			t.Errorf("escapeValue(%q) = %q, want %q", tt.in, got, tt.want)
		}
		if back := unescapeTrim("  " + got + " \t"); back != tt.in {
			t.Errorf("unescapeTrim(escapeValue(%q)) = %q", tt.in, back)
		}
	}
	if got := escapeValue("D:/a,b#c", dbPathSpecial); got != `D\:/a\,b#c` {
		t.Errorf("escapeValue(dbPathSpecial) = %q", got)
	}
	if got := escapeValue("zstd:6 #1", strataSpecial); got != `zstd:6 #1` {
		t.Errorf("escapeValue(strataSpecial) = %q", got)
	}
}
