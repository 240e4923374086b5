//go:build unix

package tiering

import (
	"bytes"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// threePathLayout makes a layout over 2 MB, 4 MB and 1 GB paths with
// testShape's levels (LBaseMaxBytes 1 MB, 256 KB tables).
func threePathLayout(t *testing.T) *Layout {
	t.Helper()
	root := t.TempDir()
	l, err := New(vfs.Default, filepath.Join(root, "p0"), []Path{
		{filepath.Join(root, "p0"), 2 << 20},
		{filepath.Join(root, "p1"), 4 << 20},
		{filepath.Join(root, "p2"), 1 << 30},
	}, Options{Shape: testShape()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// TestOverflowPlacedAsNextLevel: one compaction into L4 (Lbase, target
// 1 MB, on path 0; L5 on path 1) writes four 1 MB tables, as an L0
// compaction into an empty Lbase does. The first fills L4's target and
// stays in path 0; the others are beyond it, so they are placed where
// L5's tables go, where Pebble moves or compacts them next. This needs the
// job's real table sizes: by the 256 KB estimates alone, all four would
// fit L4's 1 MB.
func TestOverflowPlacedAsNextLevel(t *testing.T) {
	l := threePathLayout(t)
	var targets [NumLevels]uint64
	targets[0], targets[4], targets[5], targets[6] = 1<<20, 1<<20, 10<<20, 100<<20
	l.mu.Lock()
	l.plan = placeFor(targets, 4, l.shape, l.targets)
	plan := l.plan
	l.mu.Unlock()
	if got := plan.LevelPaths(); got[4] != 0 || got[5] != 1 {
		t.Fatalf("plan %s: want L4 on path 0 and L5 on path 1", plan)
	}

	el := l.EventListener()
	const job = 7
	el.CompactionBegin(pebble.CompactionInfo{JobID: job, Output: pebble.LevelInfo{Level: 4}})
	data := bytes.Repeat([]byte("x"), 1<<20)
	for num := uint64(100); num < 104; num++ {
		f, err := l.FS().Create(filepath.Join(l.dbDir, tableName(num)), "pebble-compaction")
		if err != nil {
			t.Fatal(err)
		}
		info := pebble.TableCreateInfo{JobID: job}
		reflect.ValueOf(&info).Elem().FieldByName("FileNum").SetUint(num)
		el.TableCreated(info)
		if _, err := f.Write(data); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
	}
	el.CompactionEnd(pebble.CompactionInfo{JobID: job})

	want := []int{0, 1, 1, 1}
	l.mu.Lock()
	for i, w := range want {
		name := tableName(uint64(100 + i))
		if got := l.files[name].loc; got != w {
			t.Errorf("%s (L4 table %d of 4, 1 MB each, L4 target 1 MB) in path %d, want %d", name, i+1, got, w)
		}
	}
	l.mu.Unlock()
	if got := l.Counters().PlacedOverflow; got != 3 {
		t.Errorf("PlacedOverflow = %d, want 3", got)
	}
}

// sstInfo is an L-level table of the LSM as DB.SSTables reports it.
func sstInfo(num uint64, size uint64) pebble.SSTableInfo {
	var info pebble.SSTableInfo
	info.Size = size
	v := reflect.ValueOf(&info).Elem()
	v.FieldByName("TableInfo").FieldByName("FileNum").SetUint(num)
	v.FieldByName("BackingSSTNum").SetUint(num)
	return info
}

// TestLazyMoverLeavesDebtBelow: path 1 (4 MB, L5's first share) holds its
// 4 MB of L5 and L4 tables placed there beyond L4's 1 MB target. As far as
// L4 is over its target, those are compaction debt on their way to L5,
// which a lazy pass leaves alone; beyond that they are L4 tables in a path
// over its target, which a lazy pass moves to L4's path.
func TestLazyMoverLeavesDebtBelow(t *testing.T) {
	const tbl = 256 << 10
	for _, tc := range []struct {
		name                 string
		l4OnPath0, l4OnPath1 int
		wantMoves            int
	}{
		{"L4 3 MB", 4, 8, 0},    // 2 MB over target: all of path 1's 2 MB of L4 is debt
		{"L4 2 MB", 0, 8, 4},    // 1 MB over: path 1's other 1 MB of L4 moves
		{"L4 1 MB", 0, 4, 4},    // at target: no debt
		{"L4 0.25 MB", 0, 1, 0}, // path 1 within its target plus one table
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := threePathLayout(t)
			levels := make([][]pebble.SSTableInfo, NumLevels)
			num := uint64(1)
			add := func(level, loc, n int) {
				for range n {
					levels[level] = append(levels[level], sstInfo(num, tbl))
					l.files[tableName(num)] = &fileEntry{loc: loc, size: tbl, level: -1, placedAs: level}
					num++
				}
			}
			add(4, 0, tc.l4OnPath0)
			add(4, 1, tc.l4OnPath1)
			add(5, 1, 16)
			add(6, 2, 40)
			moves, blocked := l.planMoves(levels, false, nil)
			if got := l.plan.LevelPaths(); got[4] != 0 || got[5] != 1 {
				t.Fatalf("plan %s: want L4 on path 0 and L5 on path 1", l.plan)
			}
			if len(moves) != tc.wantMoves || blocked != 0 {
				t.Errorf("plan %s: %d moves (%d blocked), want %d", l.plan, len(moves), blocked, tc.wantMoves)
			}
			for _, m := range moves {
				if m.level != 4 || m.from != 1 || m.to != 0 {
					t.Errorf("move %+v: want L4 tables from path 1 to path 0", m)
				}
			}
		})
	}
}
