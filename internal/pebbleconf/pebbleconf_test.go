package pebbleconf

import (
	"testing"

	"github.com/stratadb/strata/config"
)

func TestOptionsTakeTheResolvedValues(t *testing.T) {
	cfg := config.Default()
	cfg.CompressionDefault, cfg.CompressionBottommost, cfg.ZstdLevel = "lz4", "zstd", 9
	r, err := cfg.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	opts := Options(r)
	defer opts.Cache.Unref()
	if got := opts.Cache.MaxSize(); got != r.Cache.CapacityBytes {
		t.Errorf("cache size %d, want the resolved capacity %d", got, r.Cache.CapacityBytes)
	}
	for l, want := range map[int]string{0: "MinLZ", 5: "MinLZ", 6: "ZSTD9"} {
		if got := opts.Levels[l].Compression().Name; got != want {
			t.Errorf("L%d compression %s, want %s (lz4 stored as MinLZ, zstd at zstd_level 9)", l, got, want)
		}
	}
	if _, err := (&config.Config{}).Resolve(); err == nil {
		t.Error("an empty Config resolved without error")
	}
}

func TestFormatCodecCounts(t *testing.T) {
	for _, tc := range []struct {
		in   map[string]int
		want string
	}{
		{nil, ""},
		{map[string]int{"ZSTD": 2, "MinLZ": 1}, "MinLZ:1,ZSTD:2"},
	} {
		if got := FormatCodecCounts(tc.in); got != tc.want {
			t.Errorf("FormatCodecCounts(%v) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestMaxOpenFiles checks max_open_files' mapping: a number as given, and
// -1 three quarters of the process's open-file limit.
func TestMaxOpenFiles(t *testing.T) {
	if got := MaxOpenFiles(5000); got != 5000 {
		t.Errorf("MaxOpenFiles(5000) = %d", got)
	}
	want := max(minOpenFiles, int(min(openFileLimit(), 1<<24)*3/4))
	if got := MaxOpenFiles(-1); got != want || got < minOpenFiles {
		t.Errorf("MaxOpenFiles(-1) = %d, want %d (3/4 of the open-file limit %d)", got, want, openFileLimit())
	}
	cfg := config.Default()
	cfg.MaxOpenFiles = -1
	r, err := cfg.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	opts := Options(r)
	defer opts.Cache.Unref()
	if opts.MaxOpenFiles != want {
		t.Errorf("Options(max_open_files = -1).MaxOpenFiles = %d, want %d", opts.MaxOpenFiles, want)
	}
}
