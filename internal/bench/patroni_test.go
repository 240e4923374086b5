package bench_test

import (
	"bytes"
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stratadb/strata/internal/bench"
	"github.com/stratadb/strata/internal/report"
)

// TestPatroniSmoke runs the Patroni load for a few seconds against strata
// etcd and etcd 3.4 side by side, both started with
// --auto-compaction-mode=periodic --auto-compaction-retention=1s: each
// takes the leader keys, hands one over after a crash without a
// violation, and has compacted its history (a revision read 3 s before
// the end answers ErrCompacted). Skipped without the etcd binary.
func TestPatroniSmoke(t *testing.T) {
	etcd, err := exec.LookPath("etcd")
	if err != nil {
		t.Skip("etcd is not on PATH: the Patroni smoke test runs etcd 3.4 beside Strata (apt-get install etcd-server)")
	}
	p := bench.Programs{Etcd: etcd}
	if !selfAsStrata(t, &p) {
		t.Skip("this build has no strata command")
	}
	o := bench.PatroniOptions{
		Programs: p, Servers: []bench.Kind{bench.KindStrata, bench.KindEtcd34}, Dir: t.TempDir(),
		Retention: time.Second, SampleEvery: 250 * time.Millisecond,
		Load: bench.PatroniLoad{Clusters: 2, Members: 3, Loop: 100 * time.Millisecond, TTL: 2, FailoverEvery: 1500 * time.Millisecond, Duration: 7 * time.Second, Seed: 1},
	}
	res, err := bench.RunPatroni(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range res.Servers {
		t.Logf("%s: %+v, old revision %d: %s, %d samples", s.Name, s.PatroniCounts, s.OldRevision, s.OldRead, len(s.Samples))
		if s.Writes == 0 || s.WatchEvents == 0 || s.KeepAlives == 0 {
			t.Errorf("%s: the load did nothing: %+v", s.Name, s.PatroniCounts)
		}
		if s.Violations != 0 {
			t.Errorf("%s: %d leader keys put over a live holder's: %s", s.Name, s.Violations, s.LastError)
		}
		if s.Crashes == 0 || s.Takeovers <= int64(o.Load.Clusters) {
			t.Errorf("%s: %d crashes and %d takeovers for %d clusters: no leader key was handed over after a crash", s.Name, s.Crashes, s.Takeovers, o.Load.Clusters)
		}
		if s.OldRevision == 0 || s.OldRead != "ErrCompacted" {
			t.Errorf("%s: a Range at revision %d (read 3 s before the end) answered %q, want ErrCompacted: the history was not compacted", s.Name, s.OldRevision, s.OldRead)
		}
		last := s.Samples[len(s.Samples)-1]
		if last.CompactRevision <= 1 || last.DirBytes == 0 {
			t.Errorf("%s: last sample %+v: nothing compacted or no data directory", s.Name, last)
		}
	}
	for _, f := range []report.Format{report.FormatTable, report.FormatMarkdown, report.FormatJSON, report.FormatCSV} {
		var b bytes.Buffer
		if err := res.WriteTables(&b, f); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if !strings.Contains(b.String(), "etcd 3.4") || !strings.Contains(b.String(), "ErrCompacted") {
			t.Errorf("%s tables lack a server or the compaction check:\n%s", f, b.String())
		}
	}
	var svg, csv bytes.Buffer
	if err := res.Plot(&svg); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(svg.String(), "Data directory (MB)") {
		t.Error("the plot lacks its disk panel")
	}
	if err := res.WriteTimeline(&csv); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(csv.String(), "\n"); n < 10 {
		t.Errorf("time line has %d lines", n)
	}
}
