package engine

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stratadb/strata/config"
)

// TestBottommostBlockSize checks that bottommost_block_size sets L6's data
// block size only (0 meaning block_size), that it takes effect on disk
// (larger L6 blocks compress the same documents smaller), and that Stats
// shows both sizes and whether Get consults the L6 filters.
func TestBottommostBlockSize(t *testing.T) {
	for _, tc := range []struct{ bottom, want int }{{0, 4096}, {32768, 32768}, {131072, 131072}} {
		cfg := config.Default()
		cfg.BottommostBlockSize = tc.bottom
		opts, err := pebbleOptions(cfg)
		if err != nil {
			t.Fatal(err)
		}
		opts.Cache.Unref()
		for l := range opts.Levels {
			want := cfg.BlockSize
			if l == 6 {
				want = tc.want
			}
			if got := opts.Levels[l].BlockSize; got != want {
				t.Errorf("bottommost_block_size = %d: L%d block size %d, want %d", tc.bottom, l, got, want)
			}
		}
	}

	sizes := map[int]int64{}
	for _, bottom := range []int{4096, 65536} {
		cfg := config.Default()
		cfg.DBPath = filepath.Join(t.TempDir(), fmt.Sprint(bottom))
		cfg.BottommostBlockSize = bottom
		db, err := Open(cfg)
		if err != nil {
			t.Fatal(err)
		}
		for i := range 2000 {
			if err := db.Put(key(i), doc(i, 1024)); err != nil {
				t.Fatal(err)
			}
		}
		if err := db.CompactAll(); err != nil {
			t.Fatal(err)
		}
		m, err := db.Metrics()
		if err != nil {
			t.Fatal(err)
		}
		sizes[bottom] = m.Levels[6].Bytes
		stats, err := db.Stats()
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{fmt.Sprintf("L0-L5 4096 bytes, L6 %d bytes (bottommost_block_size)", bottom), "L6 filters consulted true (optimize_filters_for_hits = false)"} {
			if !strings.Contains(stats, want) {
				t.Errorf("Stats lacks %q:\n%s", want, stats)
			}
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if !(sizes[65536] < sizes[4096]*95/100) {
		t.Errorf("L6 holds %d bytes with 64 KB blocks, %d with 4 KB: want at least 5%% smaller", sizes[65536], sizes[4096])
	}
}
