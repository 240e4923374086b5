//go:build linux

package directio

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// benchKeys is the benchmarks' data: 32 MiB of 1 KiB values (about 16 MiB
// of tables after compression).
const benchKeys = 32 << 10

var benchModes = []struct {
	name string
	opts Options
}{
	{"direct", Options{Reads: true, Writes: true}},
	{"buffered", Options{}},
}

// benchCaches: a block cache larger than the data (the setting direct reads
// are for), and one much smaller (reads go to the file every time).
var benchCaches = []struct {
	name string
	size int64
}{
	{"256MiB", 256 << 20},
	{"4MiB", 4 << 20},
}

// openBenchDB loads the benchmark data into a new DB under dir, reopens it
// with a fresh block cache of cacheSize and opts, so every mode starts from
// the same files, and warms the block cache with one full scan (a large
// cache then holds every block). The buffered mode's files are also in the
// page cache (just written and scanned), as on a running system.
func openBenchDB(b *testing.B, dir string, opts Options, cacheSize int64) (*pebble.DB, *FS) {
	b.Helper()
	db := openTestDB(b, dir, NewFS(vfs.Default, opts), 8<<20, nil)
	loadTestDB(b, db, benchKeys)
	if err := db.Close(); err != nil {
		b.Fatal(err)
	}
	fs := NewFS(vfs.Default, opts)
	db = openTestDB(b, dir, fs, cacheSize, nil)
	it, err := db.NewIter(nil)
	if err != nil {
		b.Fatal(err)
	}
	for valid := it.First(); valid; valid = it.Next() {
	}
	if err := it.Close(); err != nil {
		b.Fatal(err)
	}
	return db, fs
}

// BenchmarkPointRead measures random Gets.
func BenchmarkPointRead(b *testing.B) {
	base := directDir(b)
	for _, c := range benchCaches {
		for _, m := range benchModes {
			b.Run(fmt.Sprintf("cache=%s/mode=%s", c.name, m.name), func(b *testing.B) {
				dir := filepath.Join(base, fmt.Sprintf("point-%s-%s", c.name, m.name))
				defer os.RemoveAll(dir)
				db, fs := openBenchDB(b, dir, m.opts, c.size)
				defer db.Close()
				rng := rand.New(rand.NewPCG(1, 2))
				b.ReportAllocs()
				b.SetBytes(valueSize)
				defer reportDirectReads(b, fs)()
				for b.Loop() {
					v, closer, err := db.Get(testKey(rng.IntN(benchKeys)))
					if err != nil || len(v) != valueSize {
						b.Fatalf("Get: %v", err)
					}
					_ = closer.Close()
				}
			})
		}
	}
}

// BenchmarkScan measures full scans of the data.
func BenchmarkScan(b *testing.B) {
	base := directDir(b)
	for _, c := range benchCaches {
		for _, m := range benchModes {
			b.Run(fmt.Sprintf("cache=%s/mode=%s", c.name, m.name), func(b *testing.B) {
				dir := filepath.Join(base, fmt.Sprintf("scan-%s-%s", c.name, m.name))
				defer os.RemoveAll(dir)
				db, fs := openBenchDB(b, dir, m.opts, c.size)
				defer db.Close()
				b.ReportAllocs()
				b.SetBytes(benchKeys * valueSize)
				defer reportDirectReads(b, fs)()
				for b.Loop() {
					it, err := db.NewIter(nil)
					if err != nil {
						b.Fatal(err)
					}
					n := 0
					for valid := it.First(); valid; valid = it.Next() {
						n++
					}
					if err := it.Close(); err != nil || n != benchKeys {
						b.Fatalf("scan: %d keys, %v", n, err)
					}
				}
			})
		}
	}
}

// BenchmarkCompaction measures one compaction of the data from overlapping
// L0 tables (flushes of 1 MiB memtables of shuffled keys, automatic
// compactions off) into the bottom level, with and without direct writes.
// Reads stay buffered in both modes, so only the writes differ; loading and
// flushing are not timed. The bytes per operation are the values compacted.
func BenchmarkCompaction(b *testing.B) {
	base := directDir(b)
	for _, m := range []struct {
		name string
		opts Options
	}{
		{"direct", Options{Writes: true}},
		{"buffered", Options{}},
	} {
		b.Run("mode="+m.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(benchKeys * valueSize)
			var written int64
			i := 0
			for b.Loop() {
				b.StopTimer()
				dir := filepath.Join(base, fmt.Sprintf("compaction-%s-%d", m.name, i))
				i++
				fs := NewFS(vfs.Default, m.opts)
				db := openTestDB(b, dir, fs, 8<<20, nil, func(o *pebble.Options) {
					o.DisableAutomaticCompactions = true
					o.L0StopWritesThreshold = 1 << 10
				})
				writeTestDB(b, db, benchKeys)
				before := fs.Stats().DirectWriteBytes
				b.StartTimer()

				compactTestDB(b, db, benchKeys)

				b.StopTimer()
				written += fs.Stats().DirectWriteBytes - before
				if err := db.Close(); err != nil {
					b.Fatal(err)
				}
				_ = os.RemoveAll(dir)
				b.StartTimer()
			}
			b.ReportMetric(float64(written)/float64(b.N)/(1<<20), "directMiB/op")
		})
	}
}

// reportDirectReads reports the O_DIRECT reads per operation of the timed
// loop; call the function it returns after the loop (defer).
func reportDirectReads(b *testing.B, fs *FS) func() {
	before := fs.Stats()
	return func() {
		st := fs.Stats()
		if b.N > 0 {
			b.ReportMetric(float64(st.DirectReads-before.DirectReads)/float64(b.N), "directreads/op")
		}
	}
}
