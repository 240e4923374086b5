package config

import (
	"strings"
	"testing"
)

// TestBottommostProfileName: the bottommost level's profile gets a name of
// its own exactly when a level above stores the same name with another
// block size, so that a table moved down unchanged can be told apart.
func TestBottommostProfileName(t *testing.T) {
	for _, tc := range []struct {
		levels, bottom, keys string
		bottomBlock          int
		want                 string
	}{
		{"zstd", "zstd", "", 8192, "ZSTD, 8 KB blocks"},
		{"none", "none", "", 1536, "NoCompression, 1536 B blocks"},
		{"lz4", "zstd", "", 8192, "ZSTD"},  // the codec's name tells the levels apart
		{"zstd", "zstd", "", 0, "ZSTD"},    // one block size everywhere
		{"zstd", "zstd", "", 4096, "ZSTD"}, // the same, spelled out
		{"lz4", "zstd", "lz4", 32768, "ZSTD values, MinLZ keys"},
		{"zstd", "zstd", "lz4", 32768, "ZSTD values, MinLZ keys, 32 KB blocks"},
	} {
		c := Default()
		c.CompressionDefault, c.CompressionBottommost, c.KeyCompression = tc.levels, tc.bottom, tc.keys
		c.BlockSize, c.BottommostBlockSize = 4096, tc.bottomBlock
		c.EnableBlobFiles = tc.keys != ""
		r, err := c.Resolve()
		if err != nil {
			t.Fatal(err)
		}
		if got := r.Profile(NumLevels - 1).Name; got != tc.want {
			t.Errorf("%s/%s keys %q, bottom blocks %d: L6 profile %q, want %q", tc.levels, tc.bottom, tc.keys, tc.bottomBlock, got, tc.want)
		}
		for l := range NumLevels - 1 {
			if got := r.Profile(l).Name; strings.HasSuffix(got, " blocks") {
				t.Errorf("%s/%s: L%d profile %q, want the codec's own name", tc.levels, tc.bottom, l, got)
			}
		}
	}
}
