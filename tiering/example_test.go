package tiering_test

import (
	"fmt"

	"github.com/stratadb/strata/tiering"
)

// A 111 GB database over a fast 8 GB path, a 40 GB path and a large slow
// one, with Pebble's default level sizing (LBaseMaxBytes 64 MB, multiplier
// 10) and 64 MB tables.
func ExampleCompute() {
	const GB = 1 << 30
	sizes := [tiering.NumLevels]uint64{0: 50 << 20, 3: 100 << 20, 4: 1 * GB, 5: 10 * GB, 6: 100 * GB}
	shape := tiering.LevelShape{LBaseMaxBytes: 64 << 20, LevelMultiplier: 10}
	for i := range shape.TargetFileSizes {
		shape.TargetFileSizes[i] = 64 << 20
	}
	targets, base := tiering.LevelTargets(sizes, shape)
	fmt.Printf("Lbase = L%d\n", base)
	for level, t := range targets {
		fmt.Printf("L%d target %.2f GB\n", level, float64(t)/GB)
	}
	plan := tiering.Compute(sizes, shape, []uint64{8 * GB, 40 * GB, 1 << 40})
	fmt.Println(plan)
	fmt.Println("level paths:", plan.LevelPaths())
	// Output:
	// Lbase = L2
	// L0 target 0.06 GB
	// L1 target 0.00 GB
	// L2 target 0.06 GB
	// L3 target 0.40 GB
	// L4 target 2.50 GB
	// L5 target 15.82 GB
	// L6 target 100.03 GB
	// L0:0 L1:0 L2:0 L3:0(404.8MB)+2 L4:0(2.5GB)+2 L5:0(5.1GB)+1(10.8GB)+2 L6:1(29.2GB)+2
	// level paths: [0 0 0 0 0 0 1]
}
