package tiering

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// placementSetup returns the number of records of valueSize bytes the
// placement test writes, tens of MB (fewer under the race detector, which
// is ~10x slower), and the paths before and after the reopen, scaled so
// that every path is used.
func placementSetup() (records int, before, after []Path) {
	if raceEnabled {
		return 6000, []Path{{"p0", 1 << 20}, {"p1", 2 << 20}, {"p2", 1 << 30}},
			[]Path{{"p0", 2 << 20}, {"p3", 1 << 20}, {"p2", 1 << 30}}
	}
	return 24000, []Path{{"p0", 2 << 20}, {"p1", 6 << 20}, {"p2", 1 << 30}},
		[]Path{{"p0", 5 << 20}, {"p3", 3 << 20}, {"p2", 1 << 30}}
}

// TestPlacementThreePaths writes tens of MB over three small paths and
// checks every table sits where the rule puts its level, each path but the
// last stays within its target, every key reads back, and reopening with a
// different db_paths list moves the files to match it.
func TestPlacementThreePaths(t *testing.T) {
	root := t.TempDir()
	var o Options
	n, paths, reopened := placementSetup()
	d := openTestDBWAL(t, root, paths, o, filepath.Join(root, "wal"))
	d.write(0, n, 1)
	d.settle()
	st := d.layout.Stats()
	t.Logf("after %d MB:\n%s", n*valueSize>>20, st)
	checkConsistent(t, d.layout, d.db)
	checkPlacement(t, d.layout, d.db, 1<<20)
	checkPebbleParity(t, d)
	if st.PlacedInFirstPath != 0 {
		t.Errorf("%d files created with an unknown level", st.PlacedInFirstPath)
	}
	// Every path has levels; p0's (L0 to Lbase) may be empty once
	// compactions have settled, the others hold tables.
	for i := range st.Paths {
		if len(st.Paths[i].Levels) == 0 || (i > 0 && st.Paths[i].Files == 0) {
			t.Errorf("path %d unused: %+v", i, st.Paths[i])
		}
	}
	verifyKeys(t, d.db, 0, n)
	d.close()

	// Reopen: p1 leaves the list (drained), p3 joins, p0 grows.
	paths = reopened
	d = openTestDBWAL(t, root, paths, o, filepath.Join(root, "wal"))
	d.settle()
	st = d.layout.Stats()
	t.Logf("after reopening with %v:\n%s", paths, st)
	checkConsistent(t, d.layout, d.db)
	checkPlacement(t, d.layout, d.db, 1<<20)
	if st.MovedFiles == 0 {
		t.Errorf("nothing moved after db_paths changed")
	}
	if names, _ := os.ReadDir(filepath.Join(root, "p1")); countTables(names) != 0 {
		t.Errorf("p1 still holds tables after draining")
	}
	b, err := os.ReadFile(filepath.Join(root, "p0", pathsFile))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), filepath.Join(root, "p1")) {
		t.Errorf("%s still lists the drained p1:\n%s", pathsFile, b)
	}
	verifyKeys(t, d.db, 0, n)
	d.write(n, n+2000, 2)
	d.settle()
	verifyKeys(t, d.db, 0, n+2000)
	d.close()
}

func countTables(entries []os.DirEntry) int {
	n := 0
	for _, e := range entries {
		if _, kind := parseName(e.Name()); kind != kindOther {
			n++
		}
	}
	return n
}

// checkPebbleParity checks LevelTargets against Pebble's own per-level max
// bytes, read back from its fill factors (size / max bytes).
func checkPebbleParity(t *testing.T, d *testDB) {
	t.Helper()
	m := d.db.Metrics()
	var sizes [NumLevels]uint64
	for i := range sizes {
		sizes[i] = uint64(m.Levels[i].TablesSize)
	}
	targets, base := LevelTargets(sizes, testShape())
	for level := base; level < NumLevels; level++ {
		ff := m.Levels[level].FillFactor
		if sizes[level] == 0 || ff == 0 {
			continue
		}
		pebbleMax := float64(sizes[level]) / ff
		if math.Abs(pebbleMax-float64(targets[level])) > 0.01*pebbleMax {
			t.Errorf("L%d: our target %d, Pebble's %.0f (base %d)", level, targets[level], pebbleMax, base)
		}
	}
}
