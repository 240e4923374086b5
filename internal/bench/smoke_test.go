package bench_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/stratadb/strata/internal/admin"
	"github.com/stratadb/strata/internal/bench"
	"github.com/stratadb/strata/internal/bench/floorserver"
)

// asStrata makes this test binary run as the strata command, so the smoke
// test starts `strata serve` as a process of its own without a build step.
const asStrata = "STRATA_BENCH_TEST_AS_STRATA"

// asFloor makes this test binary run as the transport floor.
const asFloor = "STRATA_BENCH_TEST_AS_FLOOR"

func TestMain(m *testing.M) {
	if os.Getenv(asFloor) == "1" {
		if err := floorserver.Main(os.Args[1:], os.Stderr); err != nil {
			fmt.Fprintln(os.Stderr, "floor:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	if os.Getenv(asStrata) == "1" {
		root := admin.NewRootCommand()
		root.SetArgs(os.Args[1:])
		if err := root.Execute(); err != nil {
			fmt.Fprintln(os.Stderr, "strata:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// smokeServers returns the programs and the servers the smoke test runs:
// etcd 3.4 always, Strata when this build has `strata serve`, and wrk. It
// skips the test when wrk or etcd is missing.
func smokeServers(t *testing.T) (bench.Programs, []bench.Kind, string) {
	t.Helper()
	wrk, err := exec.LookPath("wrk")
	if err != nil {
		t.Skip("wrk is not on PATH: the benchmark smoke test needs it (apt-get install wrk)")
	}
	etcd, err := exec.LookPath("etcd")
	if err != nil {
		t.Skip("etcd is not on PATH: the benchmark smoke test needs etcd 3.4 (apt-get install etcd-server)")
	}
	p := bench.Programs{Etcd: etcd}
	kinds := []bench.Kind{bench.KindEtcd34}
	if selfAsStrata(t, &p) {
		kinds = append(kinds, bench.KindStrata)
	} else {
		t.Log("this build has no `strata serve`: smoke test on etcd alone")
	}
	return p, kinds, wrk
}

// selfAsStrata makes this test binary p's strata program, if this build
// has `strata serve`, and says whether it has.
func selfAsStrata(t *testing.T, p *bench.Programs) bool {
	t.Helper()
	if c, _, err := admin.NewRootCommand().Find([]string{"serve"}); err != nil || c.Name() != "serve" {
		return false
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	p.Strata, p.StrataEnv = self, []string{asStrata + "=1"}
	return true
}

// v2Index is the modifiedIndex of /v2/keys/foo.
func v2Index(t *testing.T, s *bench.Server) int64 {
	t.Helper()
	resp, err := http.Get(s.URL + "/v2/keys/foo")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var ev struct {
		Node struct {
			ModifiedIndex int64 `json:"modifiedIndex"`
		} `json:"node"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&ev); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /v2/keys/foo on %s: %s, %v", s.Name, resp.Status, err)
	}
	return ev.Node.ModifiedIndex
}

// settledV2Index is v2Index once the writes wrk left in flight when it
// stopped have been applied: the same in five reads 20 ms apart, within
// 10 s.
func settledV2Index(t *testing.T, s *bench.Server) int64 {
	t.Helper()
	last, same := v2Index(t, s), 0
	for deadline := time.Now().Add(10 * time.Second); same < 5; {
		if time.Now().After(deadline) {
			t.Fatalf("%s: the v2 index still moves 10 s after the load stopped", s.Name)
		}
		time.Sleep(20 * time.Millisecond)
		cur := v2Index(t, s)
		if cur == last {
			same++
		} else {
			last, same = cur, 0
		}
	}
	return last
}

// v3Rev is the store revision.
func v3Rev(t *testing.T, s *bench.Server) int64 {
	t.Helper()
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{s.Endpoint}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	r, err := c.Get(ctx, "foo")
	if err != nil {
		t.Fatal(err)
	}
	return r.Header.Revision
}

// TestSmokeCounts loads each server with a few hundred requests and checks
// that what the harness counts is what the server applied: every write
// wrk or the v3 generator counts as done moved the v2 index or the v3
// revision by one.
func TestSmokeCounts(t *testing.T) {
	p, kinds, wrk := smokeServers(t)
	ctx := context.Background()
	for _, k := range kinds {
		s, err := bench.StartServer(ctx, k, p, t.TempDir(), bench.StartOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := s.Stop(); err != nil {
				t.Error(err)
			}
		})

		// v2: wrk runs for a time; the requests in flight when it stops
		// are written but not counted, at most one per connection.
		const clients = 8
		w := bench.WrkRun{Wrk: wrk, URL: s.URL + "/v2/keys/foo", Value: strings.Repeat("a", 64), Clients: clients, Duration: time.Second, Dir: t.TempDir()}
		req, err := http.NewRequest(http.MethodPut, s.URL+"/v2/keys/foo?value=first", nil)
		if err != nil {
			t.Fatal(err)
		}
		if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusCreated {
			t.Fatalf("%s: creating /v2/keys/foo: %v, %v", s.Name, resp, err)
		} else {
			resp.Body.Close()
		}
		before := settledV2Index(t, s)
		r, err := w.Run(ctx)
		if err != nil {
			t.Fatalf("%s: %v", s.Name, err)
		}
		after := settledV2Index(t, s)
		if r.Requests < 1 || r.Errors != 0 || r.QPS <= 0 || r.P90 <= 0 || r.P99 < r.P90 || r.LoadCPUSeconds <= 0 {
			t.Errorf("%s v2 write: %+v, want requests, no errors, latencies and wrk's CPU time", s.Name, r)
		}
		if moved := after - before; moved < int64(r.Requests) || moved > int64(r.Requests+clients) {
			t.Errorf("%s v2 write: modifiedIndex moved by %d for %d writes counted on %d connections", s.Name, moved, r.Requests, clients)
		}
		rd := bench.WrkRun{Wrk: wrk, URL: s.URL + "/v2/keys/foo", Clients: 4, Duration: time.Second}
		if r, err := rd.Run(ctx); err != nil || r.Requests < 1 || r.Errors != 0 {
			t.Errorf("%s v2 read: %+v, %v; want requests and no errors", s.Name, r, err)
		}
		if got := v2Index(t, s); got != after {
			t.Errorf("%s: reads moved the v2 index from %d to %d", s.Name, after, got)
		}

		// v3: 300 puts on 8 clients sharing 2 connections.
		rev0 := v3Rev(t, s)
		l := bench.V3Load{Endpoint: s.Endpoint, Clients: 8, Conns: 2, Total: 300, Timeout: time.Minute,
			Op: func(ctx context.Context, kv clientv3.KV, _, i int) error {
				_, err := kv.Put(ctx, "foo", fmt.Sprint(i))
				return err
			}}
		r, err = l.Run(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if got := v3Rev(t, s) - rev0; got != 300 || r.Requests != 300 || r.Errors != 0 || r.QPS <= 0 || r.P90 <= 0 {
			t.Errorf("%s v3 put: %+v, revision moved by %d; want 300 requests and revisions", s.Name, r, got)
		}
		cpu, err := s.CPU()
		if err != nil || cpu <= 0 {
			t.Errorf("%s: CPU %v, %v", s.Name, cpu, err)
		}
	}
}

// TestSmokeTables runs both tables end to end on one pass of a few rows.
func TestSmokeTables(t *testing.T) {
	p, kinds, wrk := smokeServers(t)
	pin, why := bench.DefaultPinning()
	if why != "" {
		t.Logf("unpinned: %s", why)
	}
	var progress strings.Builder
	q, err := bench.RunQPS(context.Background(), bench.QPSOptions{
		Servers: kinds, V3Peer: bench.KindEtcd34, ValueSizes: []int{64}, Clients: []int{1, 8},
		Passes: 1, Requests: 200, SingleRequests: 50, Duration: time.Second, RunTimeout: time.Minute,
		Wrk: wrk, Pin: pin, Programs: p, Dir: t.TempDir(), Progress: &progress,
	})
	if err != nil {
		t.Fatalf("%v\nprogress:\n%s", err, progress.String())
	}
	if want := 2 * 2 * 2 * len(kinds); len(q.Samples) != want {
		t.Errorf("%d runs, want %d", len(q.Samples), want)
	}
	for _, s := range q.Samples {
		want := 200
		if s.Row.Clients == 1 {
			want = 50
		}
		if s.Row.API == bench.APIV2 {
			want = s.Result.Requests // wrk runs for a time
		}
		if s.Requests != want || s.Result.Requests != want || want < 1 || s.Result.Errors != 0 {
			t.Errorf("%v on %s: sent %d, %+v; want %d requests", s.Row, s.Name, s.Requests, s.Result, want)
		}
	}
	if !strings.Contains(progress.String(), pin.String()) {
		t.Errorf("progress does not say how the run was pinned (%q):\n%s", pin, progress.String())
	}
	var out strings.Builder
	if err := q.Table().Render(&out, "table"); err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", out.String())

	m, err := bench.RunMemory(context.Background(), bench.MemoryOptions{
		Servers: kinds, Keys: []int{500}, Versions: []int{2}, ValueSizes: []int{256}, Clients: 8,
		Settle: 100 * time.Millisecond, Programs: p, Dir: t.TempDir(), Progress: &progress,
	})
	if err != nil {
		t.Fatalf("%v\nprogress:\n%s", err, progress.String())
	}
	for _, s := range m.Samples {
		if s.RSSBytes < 1<<20 || s.AnonBytes <= 0 || s.AnonBytes > s.RSSBytes || s.LoadSeconds <= 0 {
			t.Errorf("%s: RSS %d B (anon %d B) after %v s", s.Name, s.RSSBytes, s.AnonBytes, s.LoadSeconds)
		}
	}
	out.Reset()
	if err := m.Table().Render(&out, "table"); err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", out.String())
}
