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
// 32 KB blocks with zstd at the bottom, its 32 MB memory budget): the
// records of a page lie at scattered revisions, so the list reads
// values across the whole store. Each value read decompresses the 32 KB
// block that holds it: zstd is half of the time (16 KB blocks measured no
// faster).
func BenchmarkRangePods(b *testing.B) {
	const pods, page = 8_000, 500
	cfg := config.ServeDefault()
	cfg.DBPath = filepath.Join(b.TempDir(), "db")
	cfg.Sync = false
	cfg.ApplyMemoryBudget()
	db, err := engine.Open(cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	s := openStore(b, db, Options{})
	defer s.Close()
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
	if err := db.CompactAll(); err != nil {
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
}
