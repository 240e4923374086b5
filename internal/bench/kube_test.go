package bench_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/stratadb/strata/internal/bench"
)

// TestKubeLoad drives strata serve, a process of its own, with the
// Kubernetes-shaped load at about 300 MB of pod writes (30 MB with
// -short): every acknowledged write reads back, the history is readable
// at the last compacted revision and not below it, the watch on the pods'
// prefix delivers every write once and in order, and a paginated list
// returns every pod (KubeLoad.Run checks all of it).
func TestKubeLoad(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	p := bench.Programs{Strata: self, StrataEnv: []string{asStrata + "=1"}}
	pods := 10_000
	if testing.Short() {
		pods = 1_000
	}
	ctx := context.Background()
	s, err := bench.StartServer(ctx, bench.KindStrata, p, t.TempDir(), bench.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := s.Stop(); err != nil {
			t.Error(err)
		}
	}()
	res, err := bench.KubeLoad{
		Endpoint: s.Endpoint, Pods: pods, Updates: pods, Clients: 16, Conns: 2,
		EventEvery: 10, CompactEvery: 2 * time.Second, Seed: 7, Timeout: 10 * time.Minute,
	}.Run(ctx)
	if err != nil {
		t.Fatalf("%v\nserver log:\n%s", err, s.LogTail())
	}
	if res.Compactions == 0 {
		t.Errorf("no compaction ran during the load (%.0f creates/s, %.0f updates/s)", res.CreatesPerSec, res.UpdatesPerSec)
	}
	t.Logf("%d pods, %d updates: %.0f creates/s, %.0f updates/s, put p99 %s, %d stalled s, %d compactions, list %.2f s",
		pods, pods, res.CreatesPerSec, res.UpdatesPerSec, res.PutP99, res.StalledSeconds, res.Compactions, res.ListSeconds)
}
