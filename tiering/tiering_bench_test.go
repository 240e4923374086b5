//go:build unix

package tiering

import (
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// The benchmark database: 32 MB of 1 KB records loaded in random order,
// then 32 MB of random overwrites (the database stops growing). Levels
// are sized so this makes five levels: L0, L4 (Lbase), L5 and L6.
const benchRecords = 32000

func benchShape() LevelShape {
	s := LevelShape{LBaseMaxBytes: 2 << 20, LevelMultiplier: 10}
	for i := range s.TargetFileSizes {
		s.TargetFileSizes[i] = 1 << 20
	}
	return s
}

// benchPaths are the three paths: 4 and 8 MB hot paths for a ~32 MB
// database (about a third of it), the rest on the third.
var benchPaths = []Path{{"p0", 4 << 20}, {"p1", 8 << 20}, {"p2", 1 << 30}}

// benchResult is one run of writeOnce.
type benchResult struct {
	elapsed       time.Duration
	load, update  Stats // layout stats after each phase
	loadCreated   int64
	updateCreated int64
}

// writeOnce opens a fresh database under root (raw Pebble on vfs.Default
// when paths is nil), loads and overwrites the records, flushes and waits
// for compactions to finish; the mover runs in the background throughout.
func writeOnce(b *testing.B, root string, paths []Path) benchResult {
	return writeOnceOpts(b, root, paths, Options{})
}

func writeOnceOpts(b *testing.B, root string, paths []Path, o Options) benchResult {
	b.Helper()
	dbDir := filepath.Join(root, "p0")
	abs := []Path{{dbDir, 1 << 40}}
	if paths != nil {
		abs = make([]Path, len(paths))
		for i, p := range paths {
			abs[i] = Path{filepath.Join(root, p.Dir), p.TargetSize}
		}
	}
	o.Shape = benchShape()
	l, err := New(vfs.Default, dbDir, abs, o)
	if err != nil {
		b.Fatal(err)
	}
	opts := testPebbleOptions(l, "", nil)
	opts.MemTableSize = 2 << 20
	opts.L0CompactionThreshold = 4
	opts.LBaseMaxBytes = benchShape().LBaseMaxBytes
	opts.TargetFileSizes = benchShape().TargetFileSizes
	if paths == nil { // raw Pebble
		opts.FS = vfs.Default
		opts.EventListener = nil
	}
	start := time.Now()
	db, err := pebble.Open(dbDir, opts)
	if err != nil {
		b.Fatal(err)
	}
	if paths != nil {
		l.Attach(db)
	}
	d := &testDB{t: b, root: root, dbDir: dbDir, layout: l, db: db}
	var r benchResult
	d.write(0, benchRecords, 11)
	if err := db.Flush(); err != nil {
		b.Fatal(err)
	}
	waitIdle(b, db)
	r.load = l.Stats()
	d.write(0, benchRecords, 12)
	if err := db.Flush(); err != nil {
		b.Fatal(err)
	}
	waitIdle(b, db)
	r.elapsed = time.Since(start)
	r.update = l.Stats()
	l.Close()
	if err := db.Close(); err != nil {
		b.Fatal(err)
	}
	return r
}

// movedShares returns the mover's bytes as a percentage of the bytes
// Pebble wrote, in the load phase and in the update phase.
func (r benchResult) movedShares() (load, update float64) {
	load = 100 * r.load.MovedShare()
	if created := r.update.CreatedBytes - r.load.CreatedBytes; created > 0 {
		update = 100 * float64(r.update.MovedBytes-r.load.MovedBytes) / float64(created)
	}
	return load, update
}

// BenchmarkWrite loads and overwrites 32 MB in raw Pebble, through the
// layout with one path, and through the layout with three paths; compare
// with benchstat.
func BenchmarkWrite(b *testing.B) {
	for _, bc := range []struct {
		name  string
		paths []Path
		opts  Options
	}{
		{"paths=raw", nil, Options{}},
		{"paths=1", []Path{{"p0", 1 << 40}}, Options{}},
		{"paths=3", benchPaths, Options{}},
		{"paths=3/mover=off", benchPaths, Options{DisableMover: true}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(2 * benchRecords * valueSize)
			b.ReportAllocs()
			var r benchResult
			for b.Loop() {
				r = writeOnceOpts(b, b.TempDir(), bc.paths, bc.opts)
			}
			if bc.paths != nil {
				load, update := r.movedShares()
				b.ReportMetric(load, "moved-load-%")
				b.ReportMetric(update, "moved-update-%")
			}
		})
	}
}

// BenchmarkWriteRatio runs raw Pebble and three paths back to back in each
// iteration (alternating which goes first), so both see the same machine,
// and reports the median over iterations of the throughput of three paths
// relative to raw Pebble (goal >= 0.9), and the mover's bytes as a share of
// the bytes Pebble wrote (goal < 5%): over the whole run, in the load phase
// and in the overwrite phase.
func BenchmarkWriteRatio(b *testing.B) {
	var ratios []float64
	var movedLoad, createdLoad, movedAll, createdAll int64
	i := 0
	for b.Loop() {
		var r1, r3 benchResult
		if i%2 == 0 {
			r1 = writeOnce(b, b.TempDir(), nil)
			r3 = writeOnce(b, b.TempDir(), benchPaths)
		} else {
			r3 = writeOnce(b, b.TempDir(), benchPaths)
			r1 = writeOnce(b, b.TempDir(), nil)
		}
		i++
		ratios = append(ratios, float64(r1.elapsed)/float64(r3.elapsed))
		movedLoad += r3.load.MovedBytes
		createdLoad += r3.load.CreatedBytes
		movedAll += r3.update.MovedBytes
		createdAll += r3.update.CreatedBytes
	}
	sort.Float64s(ratios)
	b.ReportMetric(ratios[len(ratios)/2], "ratio-3/raw")
	b.ReportMetric(100*float64(movedAll)/float64(createdAll), "moved-%")
	b.ReportMetric(100*float64(movedLoad)/float64(createdLoad), "moved-load-%")
	b.ReportMetric(100*float64(movedAll-movedLoad)/float64(createdAll-createdLoad), "moved-update-%")
}
