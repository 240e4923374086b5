package tune_test

import (
	"fmt"

	"github.com/stratadb/strata/internal/tune"
)

func ExampleParseProfiles() {
	profiles, err := tune.ParseProfiles("none/none,lz4/zstd,zstd:1/zstd:6")
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, p := range profiles {
		fmt.Printf("levels 0-5: %-6s bottommost: %s\n", p.Default, p.Bottommost)
	}
	_, err = tune.ParseProfiles("lz4/brotli")
	fmt.Println(err)
	// Output:
	// levels 0-5: none   bottommost: none
	// levels 0-5: lz4    bottommost: zstd
	// levels 0-5: zstd:1 bottommost: zstd:6
	// --profiles: profile "lz4/brotli": unknown codec "brotli": allowed are none, snappy, lz4, zstd, zstd:<1-22>, minlz
}
