package tune

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stratadb/strata/config"
)

// BenchmarkMeasure runs the whole `tune compression` measurement (write,
// flush, full compaction, reopen, reads, scan) of 1000 entities of 2 KB, on
// Strata and on raw Pebble with identical options, so benchstat can compare
// them:
//
//	go test ./internal/tune -run '^$' -bench Measure -count 6 > bench.txt
//	benchstat -col /impl bench.txt
func BenchmarkMeasure(b *testing.B) {
	data, err := GenerateDataset(1000, 2048, 1)
	if err != nil {
		b.Fatal(err)
	}
	order := readOrder(data.Len(), 1)
	for _, profile := range []Profile{{Default: "none", Bottommost: "none"}, {Default: "lz4", Bottommost: "zstd"}} {
		for _, impl := range []Implementation{Strata, Pebble} {
			b.Run(fmt.Sprintf("profile=%s/impl=%s", slug(profile.String()), impl), func(b *testing.B) {
				b.ReportAllocs()
				b.SetBytes(data.RawBytes())
				n := 0
				for b.Loop() {
					n++
					dir := filepath.Join(b.TempDir(), fmt.Sprint(n))
					cfg := runConfig(config.Default(), profile.Default, profile.Bottommost, dir)
					if _, err := measure(context.Background(), runSpec{impl: impl, cfg: cfg, data: data, order: order, minTime: testMinTime}); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
