package compression

import (
	"strings"
	"testing"
)

func TestParseCodec(t *testing.T) {
	for _, tc := range []struct {
		in       string
		want     Codec
		str      string
		profile  string
		rocksdb  string
		stored   Algorithm
		describe string
	}{
		{"none", Codec{None, 0}, "none", "NoCompression", "kNoCompression", None, "none"},
		{"", Codec{None, 0}, "none", "NoCompression", "kNoCompression", None, "none"},
		{" Snappy ", Codec{Snappy, 0}, "snappy", "Snappy", "kSnappyCompression", Snappy, "snappy"},
		{"lz4", Codec{LZ4, 0}, "lz4", "MinLZ", "kLZ4Compression", MinLZ, "lz4 (stored as minlz)"},
		{"minlz", Codec{MinLZ, 0}, "minlz", "MinLZ", "kMinLZCompression", MinLZ, "minlz"},
		{"zstd", Codec{Zstd, 3}, "zstd", "ZSTD", "kZSTD", Zstd, "zstd"},
		{"ZSTD:9", Codec{Zstd, 9}, "zstd:9", "ZSTD9", "kZSTD", Zstd, "zstd:9"},
		{"zstd-1", Codec{Zstd, 1}, "zstd:1", "ZSTD1", "kZSTD", Zstd, "zstd:1"},
	} {
		c, err := ParseCodec(tc.in)
		if err != nil || c != tc.want {
			t.Errorf("ParseCodec(%q) = %v, %v; want %v", tc.in, c, err, tc.want)
			continue
		}
		if c.String() != tc.str || c.PebbleProfile().Name != tc.profile || c.RocksDBName() != tc.rocksdb ||
			c.Effective().Algorithm != tc.stored || c.Describe() != tc.describe {
			t.Errorf("%q: String %q, profile %q, RocksDB %q, stored %v, Describe %q", tc.in, c, c.PebbleProfile().Name, c.RocksDBName(), c.Effective().Algorithm, c.Describe())
		}
		if back, err := ParseCodec(c.String()); err != nil || back != c {
			t.Errorf("%q does not round-trip through %q", tc.in, c.String())
		}
	}
	for _, bad := range []string{"lz5", "zlib", "zstd:0", "zstd:23", "zstd:x"} {
		_, err := ParseCodec(bad)
		if err == nil || !strings.Contains(err.Error(), bad) {
			t.Errorf("ParseCodec(%q) = %v, want an error naming it", bad, err)
		}
	}
}

func TestZstdLevelProfile(t *testing.T) {
	p := (Codec{Zstd, 7}).PebbleProfile()
	if p.DataBlocks.Level != 7 || p.OtherBlocks.Level != 7 || p.ValueBlocks.Level != 7 {
		t.Errorf("zstd:7 profile levels %v %v %v", p.DataBlocks, p.OtherBlocks, p.ValueBlocks)
	}
	if (Codec{Zstd, 3}).PebbleProfile().Name != "ZSTD" {
		t.Error("zstd:3 is not Pebble's own ZSTD profile")
	}
}

func TestParseRocksDBName(t *testing.T) {
	for in, want := range map[string]Codec{
		"kNoCompression": {None, 0}, "kDisableCompressionOption": {None, 0}, "kSnappyCompression": {Snappy, 0},
		"kLZ4Compression": {LZ4, 0}, "kZSTD": {Zstd, 3}, "kMinLZCompression": {MinLZ, 0},
	} {
		if c, err := ParseRocksDBName(in); err != nil || c != want {
			t.Errorf("ParseRocksDBName(%q) = %v, %v", in, c, err)
		}
	}
	for _, bad := range []string{"kZlibCompression", "kBZip2Compression", "kLZ4HCCompression", "kXpressCompression"} {
		if _, err := ParseRocksDBName(bad); err == nil || !strings.Contains(err.Error(), bad) {
			t.Errorf("ParseRocksDBName(%q) = %v", bad, err)
		}
	}
}
