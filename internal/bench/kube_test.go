package bench_test

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/xml"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stratadb/strata/internal/bench"
	"github.com/stratadb/strata/internal/report"
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
		Endpoints: []string{s.Endpoint}, Pods: pods, Updates: pods, Clients: 16, Conns: 2,
		// The first compaction comes at the second tick; 50 ms ticks put
		// it far inside even a fast machine's load of 2,000 fsynced writes.
		EventEvery: 10, CompactEvery: 50 * time.Millisecond, Seed: 7, Timeout: 10 * time.Minute,
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

// TestRunKubeAfterAndPlot runs a small load through RunKube, as `strata
// bench kube` does: after the load the server's snapshot is saved and the
// server restarted on its data (measureAfter checks every pod is still
// there), and the time line is drawn as an SVG naming the server's pass
// and its panels, with a line per panel.
func TestRunKubeAfterAndPlot(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	res, err := bench.RunKube(context.Background(), bench.KubeOptions{
		Programs: bench.Programs{Strata: self, StrataEnv: []string{asStrata + "=1"}},
		Servers:  []bench.Kind{bench.KindStrata}, Passes: 1, Dir: t.TempDir(), Settle: time.Second,
		Load: bench.KubeLoad{Pods: 300, Updates: 300, Clients: 8, Conns: 2, EventEvery: 10,
			CompactEvery: 500 * time.Millisecond, Seed: 3, Timeout: 5 * time.Minute},
	})
	if err != nil {
		t.Fatal(err)
	}
	s := res.Samples[0]
	// Strata's snapshot holds the values as stored: compressed against a
	// dictionary, about 8x; 1 KB a pod at least.
	if s.SnapshotBytes < 300*1_000 || s.SnapshotSeconds <= 0 || s.RestartSeconds <= 0 || s.ListCPUSeconds <= 0 {
		t.Errorf("snapshot %d bytes in %.3f s, restart %.3f s, list CPU %.3f s: want a snapshot holding 300 pods of 1 KB or more compressed and times > 0",
			s.SnapshotBytes, s.SnapshotSeconds, s.RestartSeconds, s.ListCPUSeconds)
	}
	if s.SettledDiskBytes < 300*1_000 {
		t.Errorf("disk after settling %d bytes: want the 300 pods' (1 KB or more each, compressed)", s.SettledDiskBytes)
	}
	for _, kind := range []string{"create", "update", "event", "list page"} {
		if s.P99ByKind[kind] <= 0 {
			t.Errorf("p99 of %q requests: %v; want every kind timed (%v)", kind, s.P99ByKind[kind], s.P99ByKind)
		}
	}
	var tables bytes.Buffer
	if err := res.WriteTables(&tables, report.FormatMarkdown); err != nil {
		t.Fatal(err)
	}
	for _, col := range []string{"Put p99 (ms)", "update p99 (ms)", "list page p99 (ms)", "Snapshot (MB)", "Restart (s)", "List CPU (s)"} {
		if !strings.Contains(tables.String(), col) {
			t.Errorf("the tables have no column %q:\n%s", col, tables.String())
		}
	}
	var svg bytes.Buffer
	if err := res.Plot(&svg); err != nil {
		t.Fatal(err)
	}
	texts, paths := svgTexts(t, svg.Bytes())
	want := []string{s.Name + ", pass 1", "Pod writes per second", "Put p99 in each second (ms)", "Seconds from the start of the load"}
	compacted := false
	for _, sec := range s.Seconds {
		compacted = compacted || sec.CompactRequested
	}
	if compacted {
		want = append(want, "compaction requested")
	}
	for _, w := range want {
		if !slices.Contains(texts, w) {
			t.Errorf("the SVG has no text %q; texts: %q", w, texts)
		}
	}
	if paths < 4 {
		t.Errorf("the SVG has %d paths, want the two lines, axes and grid", paths)
	}
	var timeline bytes.Buffer
	if err := res.WriteTimeline(&timeline); err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(&timeline).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1+len(s.Seconds) {
		t.Fatalf("the time line has %d rows, want a header and one per second (%d)", len(rows), len(s.Seconds))
	}
	puts := 0
	for _, row := range rows[1:] {
		n, err := strconv.Atoi(row[4])
		if err != nil {
			t.Fatalf("time line row %q: puts: %v", row, err)
		}
		puts += n
	}
	if puts != 600 {
		t.Errorf("the time line's puts add up to %d, want the 300 creates and 300 updates", puts)
	}
}

// svgTexts parses an SVG document and returns its texts and the number of
// its paths.
func svgTexts(t *testing.T, doc []byte) (texts []string, paths int) {
	t.Helper()
	dec := xml.NewDecoder(bytes.NewReader(doc))
	inText := false
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return texts, paths
		}
		if err != nil {
			t.Fatalf("the SVG does not parse: %v", err)
		}
		switch el := tok.(type) {
		case xml.StartElement:
			inText = el.Name.Local == "text"
			if el.Name.Local == "path" {
				paths++
			}
		case xml.EndElement:
			inText = false
		case xml.CharData:
			if inText {
				texts = append(texts, string(el))
			}
		}
	}
}
