package tiering

import (
	"fmt"
	"testing"
)

func TestPlace(t *testing.T) {
	const MB = 1 << 20
	var split [NumLevels]uint64
	for i := range split {
		split[i] = 1 * MB
	}
	// Levels: L0 10, L4 10, L5 40, L6 200 (MB); Lbase L4.
	targets := [NumLevels]uint64{0: 10 * MB, 4: 10 * MB, 5: 40 * MB, 6: 200 * MB}
	tests := []struct {
		paths []uint64
		want  string
	}{
		{[]uint64{1000 * MB}, "L0:0 L1:0 L2:0 L3:0 L4:0 L5:0 L6:0"},
		// Whole levels fit: RocksDB's rule.
		{[]uint64{20 * MB, 40 * MB, 1000 * MB}, "L0:0 L1:0 L2:0 L3:0 L4:0 L5:1 L6:2"},
		// A path smaller than one level (rocksdb#10841) still takes a share.
		{[]uint64{5 * MB, 1000 * MB}, "L0:0(5.0MB)+1 L1:1 L2:1 L3:1 L4:1 L5:1 L6:1"},
		// Levels straddling the end of a path are split.
		{[]uint64{30 * MB, 50 * MB, 1000 * MB}, "L0:0 L1:0 L2:0 L3:0 L4:0 L5:0(10.0MB)+1 L6:1(20.0MB)+2"},
		// Less than one table left: not worth a split, the level moves on.
		{[]uint64{20*MB + MB/2, 1000 * MB}, "L0:0 L1:0 L2:0 L3:0 L4:0 L5:1 L6:1"},
		// A level larger than several paths spans them all.
		{[]uint64{20 * MB, 10 * MB, 10 * MB, 1000 * MB}, "L0:0 L1:0 L2:0 L3:0 L4:0 L5:1(10.0MB)+2(10.0MB)+3 L6:3"},
		// The last path takes the rest even when it is small.
		{[]uint64{20 * MB, 1 * MB}, "L0:0 L1:0 L2:0 L3:0 L4:0 L5:1 L6:1"},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprint(tc.paths), func(t *testing.T) {
			if got := Place(targets, 4, tc.paths, split).String(); got != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}

func TestLevelTargets(t *testing.T) {
	shape := LevelShape{LBaseMaxBytes: 64 << 20, LevelMultiplier: 10}
	tests := []struct {
		name  string
		sizes [NumLevels]uint64
		base  int
		want  [NumLevels]uint64
	}{
		{"empty", [NumLevels]uint64{}, 6, [NumLevels]uint64{0: 64 << 20, 6: 64 << 20}},
		{"only L0", [NumLevels]uint64{0: 10 << 20}, 6, [NumLevels]uint64{0: 64 << 20, 6: 64 << 20}},
		// 1 GB in L6: bottom 0.9 GB; divided back, L5 would hold 92 MB > 64
		// MB and L4 9 MB, so Lbase is L4 at 64 MB; L5 sits between by the
		// smoothed multiplier sqrt(0.9 GB / 64 MB) = 3.9.
		{"one level", [NumLevels]uint64{6: 1 << 30}, 4, [NumLevels]uint64{0: 64 << 20, 4: 64 << 20, 5: 254660234, 6: 966367642}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, base := LevelTargets(tc.sizes, shape)
			if base != tc.base || got != tc.want {
				t.Errorf("LevelTargets = %v, base L%d; want %v, base L%d", got, base, tc.want, tc.base)
			}
		})
	}
}

// TestComputeEmptyLevelsTakeNoRoom: after a full compaction (19 MB, all in
// L6) over 6 MB, 4 MB and 1 GB paths, the plan as the LSM is gives the
// empty L0 and Lbase no room, so L6 fills both fast paths; the plan ahead
// (placeFor on LevelTargets, as RocksDB's walk) keeps their room.
func TestComputeEmptyLevelsTakeNoRoom(t *testing.T) {
	const MB = 1 << 20
	shape := LevelShape{LBaseMaxBytes: 1 * MB, LevelMultiplier: 10}
	for i := range shape.TargetFileSizes {
		shape.TargetFileSizes[i] = 1 * MB
	}
	paths := []uint64{6 * MB, 4 * MB, 1 << 30}
	sizes := [NumLevels]uint64{6: 19 * MB}
	if got, want := Compute(sizes, shape, paths).String(), "L0:0 L1:0 L2:0 L3:0 L4:0 L5:0 L6:0(6.0MB)+1(4.0MB)+2"; got != want {
		t.Errorf("Compute: got  %s\nwant %s", got, want)
	}
	targets, base := LevelTargets(sizes, shape)
	if got := placeFor(targets, base, shape.withDefaults(), paths).LevelPaths(); got[6] == 0 {
		t.Errorf("reserving room for every level, L6 starts on path 0: %v", got)
	}
	// A level that holds data keeps its target's room.
	sizes[0] = 1 * MB
	if got, want := Compute(sizes, shape, paths).String(), "L0:0 L1:0 L2:0 L3:0 L4:0 L5:0 L6:0(5.0MB)+1(4.0MB)+2"; got != want {
		t.Errorf("Compute with 1 MB in L0: got  %s\nwant %s", got, want)
	}
}
