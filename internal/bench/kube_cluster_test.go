package bench_test

import (
	"bytes"
	"context"
	"math"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stratadb/strata/internal/bench"
	"github.com/stratadb/strata/internal/report"
)

// clusterPrograms returns this test binary as strata and etcd 3.7 (from
// STRATA_ETCD37, or built now), skipping the test where either cannot be
// had, as TestQPSCluster does.
func clusterPrograms(t *testing.T) bench.Programs {
	t.Helper()
	var p bench.Programs
	if !selfAsStrata(t, &p) {
		t.Skip("this build has no `strata serve`")
	}
	p.Etcd37 = os.Getenv("STRATA_ETCD37")
	if p.Etcd37 == "" {
		var err error
		if p.Etcd37, err = bench.BuildEtcd37(context.Background(), t.TempDir()); err != nil {
			t.Skipf("etcd 3.7 (./internal/bench/etcd37) cannot be built here: %v; or set STRATA_ETCD37 to a binary built from it", err)
		}
	}
	return p
}

// TestRunKubeMembers runs `strata bench kube --members 3` at a tiny size
// on a Strata raft cluster and an etcd 3.7 cluster: the load checks
// itself (every write acknowledged and read back, every watch event once,
// the list complete); here, that every member has its share of the CPU,
// RSS and disk and the sums are theirs, that the list went through a
// follower, and that the tables and the plot show both clusters.
func TestRunKubeMembers(t *testing.T) {
	p := clusterPrograms(t)
	pin, why := bench.DefaultPinning()
	if why != "" {
		t.Logf("unpinned: %s", why)
	}
	var progress strings.Builder
	res, err := bench.RunKube(context.Background(), bench.KubeOptions{
		Programs: p, Servers: []bench.Kind{bench.KindStrata, bench.KindEtcd37}, Passes: 1, Members: 3,
		Dir: t.TempDir(), Pin: pin, Progress: &progress,
		Load: bench.KubeLoad{Pods: 200, Updates: 200, Clients: 8, Conns: 2, EventEvery: 10,
			CompactEvery: 200 * time.Millisecond, Seed: 5, Timeout: 2 * time.Minute},
	})
	if err != nil {
		t.Fatalf("%v\nprogress:\n%s", err, progress.String())
	}
	if len(res.Samples) != 2 {
		t.Fatalf("%d samples, want Strata's and etcd's", len(res.Samples))
	}
	for _, s := range res.Samples {
		if len(s.Members) != 3 || !strings.HasSuffix(s.Name, ", 3 members") {
			t.Fatalf("%s: %d members, want 3", s.Name, len(s.Members))
		}
		var cpu float64
		var rss, disk int64
		leaders := 0
		for _, m := range s.Members {
			// Every member applies every write.
			if m.CPUSeconds <= 0 || m.RSSBytes <= 0 || m.DiskBytes <= 0 {
				t.Errorf("%s member %s: CPU %.3f s, RSS %d, disk %d: want each > 0", s.Name, m.Name, m.CPUSeconds, m.RSSBytes, m.DiskBytes)
			}
			cpu += m.CPUSeconds
			rss += m.RSSBytes
			disk += m.DiskBytes
			if m.Leader {
				leaders++
				if m.Name == s.ListVia && s.LeaderChanges == 0 {
					t.Errorf("%s: the list went through %s, the leader", s.Name, m.Name)
				}
			}
		}
		if math.Abs(cpu-s.CPUSeconds) > 1e-9 || rss != s.RSSBytes || disk != s.DiskBytes {
			t.Errorf("%s: CPU %.3f s, RSS %d, disk %d; the members' sums %.3f, %d, %d", s.Name, s.CPUSeconds, s.RSSBytes, s.DiskBytes, cpu, rss, disk)
		}
		if leaders != 1 || s.ListVia == "" {
			t.Errorf("%s: %d leaders, list via %q", s.Name, leaders, s.ListVia)
		}
		if s.ListKeys != 200 || s.RestartSeconds <= 0 || s.SnapshotBytes <= 0 {
			t.Errorf("%s: listed %d pods, restart %.2f s, snapshot %d bytes", s.Name, s.ListKeys, s.RestartSeconds, s.SnapshotBytes)
		}
	}
	var tables bytes.Buffer
	if err := res.WriteTables(&tables, report.FormatMarkdown); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Leader changes", "List via", "Longest gap (s)", "Role", "s1", "s2", "s3", "leader", "follower"} {
		if !strings.Contains(tables.String(), want) {
			t.Errorf("the tables have no %q:\n%s", want, tables.String())
		}
	}
	var svg bytes.Buffer
	if err := res.Plot(&svg); err != nil {
		t.Fatal(err)
	}
	texts, _ := svgTexts(t, svg.Bytes())
	for _, s := range res.Samples {
		if !slices.Contains(texts, s.Name+", pass 1") {
			t.Errorf("the SVG has no line %q; texts: %q", s.Name+", pass 1", texts)
		}
	}
	t.Logf("\n%s", tables.String())
}

// TestRunKubeKillLeader kills the leader of each 3-member cluster a
// second into the load and starts it again: the load retries its writes
// and still checks every one (read back, watched once, listed), the
// cluster names another leader, and the table says when puts resumed.
func TestRunKubeKillLeader(t *testing.T) {
	p := clusterPrograms(t)
	servers := []bench.Kind{bench.KindStrata, bench.KindEtcd37}
	if testing.Short() {
		servers = servers[:1]
	}
	var progress strings.Builder
	res, err := bench.RunKube(context.Background(), bench.KubeOptions{
		Programs: p, Servers: servers, Passes: 1, Members: 3, KillLeaderAt: time.Second,
		Dir: t.TempDir(), Progress: &progress,
		Load: bench.KubeLoad{Pods: 1000, Updates: 1000, Clients: 8, Conns: 2, EventEvery: 10,
			CompactEvery: 500 * time.Millisecond, Seed: 9, Timeout: 2 * time.Minute},
	})
	if err != nil {
		t.Fatalf("%v\nprogress:\n%s", err, progress.String())
	}
	for _, s := range res.Samples {
		if s.Killed == "" {
			t.Errorf("%s: no member killed: the load ended within %s (%.0f creates/s)", s.Name, time.Second, s.CreatesPerSec)
			continue
		}
		if s.DisruptedAt < time.Second || s.GapAfterDisrupt <= 0 || s.LongestGap < s.GapAfterDisrupt || s.LeaderChanges < 1 {
			t.Errorf("%s: %s killed at %s, longest gap after it %s, longest gap %s, %d leader changes: want the kill after 1 s, writes after it, another leader",
				s.Name, s.Killed, s.DisruptedAt, s.GapAfterDisrupt, s.LongestGap, s.LeaderChanges)
		}
		t.Logf("%s: %s killed at %.2f s, longest gap after it %.2f s, longest gap %.2f s, %d retries, %d leader changes",
			s.Name, s.Killed, s.DisruptedAt.Seconds(), s.GapAfterDisrupt.Seconds(), s.LongestGap.Seconds(), s.Retries, s.LeaderChanges)
	}
	var tables bytes.Buffer
	if err := res.WriteTables(&tables, report.FormatTable); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(tables.String(), "Longest gap after kill (s)") || !strings.Contains(tables.String(), "killed") {
		t.Errorf("the tables do not show the kill:\n%s", tables.String())
	}
	var svg bytes.Buffer
	if err := res.Plot(&svg); err != nil {
		t.Fatal(err)
	}
	if texts, _ := svgTexts(t, svg.Bytes()); !slices.Contains(texts, "leader killed") {
		t.Errorf("the SVG does not mark the kill; texts: %q", texts)
	}
}
