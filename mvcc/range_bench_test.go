package mvcc

import (
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/stratadb/strata/config"
	"github.com/stratadb/strata/engine"
	"github.com/stratadb/strata/internal/workload"
)

// BenchmarkRangePods lists 8,000 Kubernetes pods of about 14 KB, created
// and then updated in random order as in `strata bench kube`, in pages of
// 500 with continuation, on the server's engine settings (4 MB tables,
// 4 KB blocks with zstd at the bottom, its 32 MB memory budget): the
// records of a page lie at scattered revisions, so the list reads
// values across the whole store. Values compressed against a dictionary
// (the default) are decompressed alone; stored as given (RawValues), each
// value read decompresses the block that holds it. stored-B/pod is
// the engine's disk use per pod version written.
func BenchmarkRangePods(b *testing.B) {
	for _, raw := range []bool{false, true} {
		b.Run(map[bool]string{false: "dictionary", true: "raw"}[raw], func(b *testing.B) {
			benchmarkRangePods(b, Options{RawValues: raw})
		})
	}
}

func benchmarkRangePods(b *testing.B, opts Options) {
	const pods, page = 8_000, 500
	db, s, bytes := loadPods(b, pods, opts)
	if err := db.CompactAll(); err != nil {
		b.Fatal(err)
	}
	m, err := db.Metrics()
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(bytes)
	b.ReportAllocs()
	for b.Loop() {
		key, end := []byte("/registry/pods/"), []byte("/registry/pods0")
		var rev int64
		n := 0
		for {
			res, err := s.Range(key, end, RangeOptions{Limit: page, Rev: rev})
			if err != nil {
				b.Fatal(err)
			}
			rev = res.Rev
			n += len(res.KVs)
			if len(res.KVs) == 0 || int64(len(res.KVs)) == res.Count {
				break
			}
			key = append(res.KVs[len(res.KVs)-1].Key, 0)
		}
		if n != pods {
			b.Fatalf("listed %d pods, want %d", n, pods)
		}
	}
	b.ReportMetric(float64(m.DiskUsageBytes)/(2*pods), "stored-B/pod")
}

// BenchmarkPutPods puts Kubernetes pods of about 14 KB, each created then
// updated, on the server's engine settings, values compressed against a
// dictionary (the default) or stored as given: the CPU of a put and the
// engine's disk use per pod version written, after a flush.
func BenchmarkPutPods(b *testing.B) {
	for _, raw := range []bool{false, true} {
		b.Run(map[bool]string{false: "dictionary", true: "raw"}[raw], func(b *testing.B) {
			const pods = 4_000
			var bytes int64
			for b.Loop() {
				db, s, n := loadPods(b, pods, Options{RawValues: raw})
				bytes = n
				m, err := db.Metrics()
				if err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(float64(m.DiskUsageBytes)/(2*pods), "stored-B/pod")
				s.Close()
				db.Close()
			}
			b.SetBytes(2 * bytes)
		})
	}
}

// loadPods opens a store on the server's engine settings (no sync) and
// puts pods created then updated in random order, flushed; it returns
// the bytes of one generation.
func loadPods(b *testing.B, pods int, opts Options) (*engine.DB, *Store, int64) {
	b.Helper()
	cfg := config.ServeDefault()
	cfg.DBPath = filepath.Join(b.TempDir(), "db")
	cfg.Sync = false
	cfg.ApplyMemoryBudget()
	db, err := engine.Open(cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	s := openStore(b, db, opts)
	b.Cleanup(func() { s.Close() })
	p := workload.NewPods(1)
	r := rand.New(rand.NewPCG(1, 2))
	var bytes int64
	for gen := range 2 {
		for _, i := range r.Perm(pods) {
			v := p.Pod(i, gen)
			if _, err := s.Put([]byte(p.Key(i)), v); err != nil {
				b.Fatal(err)
			}
			if gen == 1 {
				bytes += int64(len(v))
			}
		}
	}
	if err := db.Flush(); err != nil {
		b.Fatal(err)
	}
	return db, s, bytes
}
