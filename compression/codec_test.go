package compression

import (
	"errors"
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
		{"none", Codec{None, 0, false}, "none", "NoCompression", "kNoCompression", None, "none"},
		{"", Codec{None, 0, false}, "none", "NoCompression", "kNoCompression", None, "none"},
		{" Snappy ", Codec{Snappy, 0, false}, "snappy", "Snappy", "kSnappyCompression", Snappy, "snappy"},
		{"lz4", Codec{LZ4, 0, false}, "lz4", "MinLZ", "kLZ4Compression", MinLZ, "lz4 (stored as minlz)"},
		{"minlz", Codec{MinLZ, 0, false}, "minlz", "MinLZ", "kMinLZCompression", MinLZ, "minlz"},
		{"zstd", Codec{Zstd, 3, true}, "zstd", "ZSTD", "kZSTD", Zstd, "zstd"},
		{"ZSTD:9", Codec{Zstd, 9, false}, "zstd:9", "ZSTD9", "kZSTD", Zstd, "zstd:9"},
		{"zstd-1", Codec{Zstd, 1, false}, "zstd:1", "ZSTD1", "kZSTD", Zstd, "zstd:1"},
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
		if back, err := ParseCodec(c.String()); err != nil || back.WithDefaultLevel(back.Level) != c.WithDefaultLevel(c.Level) {
			t.Errorf("%q does not round-trip through %q", tc.in, c.String())
		}
	}
	for bad, kind := range map[string]error{"lz5": ErrUnknownCodec, "zlib": ErrUnknownCodec, "zstd:0": ErrZstdLevel, "zstd:23": ErrZstdLevel, "zstd:x": ErrZstdLevel} {
		_, err := ParseCodec(bad)
		if err == nil || !strings.Contains(err.Error(), bad) || !errors.Is(err, kind) {
			t.Errorf("ParseCodec(%q) = %v, want an error naming it that wraps %v", bad, err, kind)
		}
	}
}

func TestZstdLevelProfile(t *testing.T) {
	p := (Codec{Zstd, 7, false}).PebbleProfile()
	if p.DataBlocks.Level != 7 || p.OtherBlocks.Level != 7 || p.ValueBlocks.Level != 7 {
		t.Errorf("zstd:7 profile levels %v %v %v", p.DataBlocks, p.OtherBlocks, p.ValueBlocks)
	}
	if (Codec{Zstd, 3, false}).PebbleProfile().Name != "ZSTD" {
		t.Error("zstd:3 is not Pebble's own ZSTD profile")
	}
}

func TestParseRocksDBName(t *testing.T) {
	for in, want := range map[string]Codec{
		"kNoCompression": {None, 0, false}, "kDisableCompressionOption": {None, 0, false}, "kSnappyCompression": {Snappy, 0, false},
		"kLZ4Compression": {LZ4, 0, false}, "kZSTD": {Zstd, 3, true}, "kMinLZCompression": {MinLZ, 0, false},
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

func TestWithDefaultLevel(t *testing.T) {
	plain, _ := ParseCodec("zstd")
	explicit, _ := ParseCodec("zstd:3")
	if got := plain.WithDefaultLevel(9); got != (Codec{Algorithm: Zstd, Level: 9}) {
		t.Errorf("zstd with default level 9 = %+v", got)
	}
	if got := explicit.WithDefaultLevel(9); got != explicit {
		t.Errorf("zstd:3 with default level 9 = %+v, want its own level", got)
	}
	if got := (Codec{Algorithm: LZ4}).WithDefaultLevel(9); got != (Codec{Algorithm: LZ4}) {
		t.Errorf("lz4 with default level 9 = %+v", got)
	}
}
