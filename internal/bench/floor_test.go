package bench_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/stratadb/strata/internal/bench"
)

// floorPrograms makes this test binary the transport floor.
func floorPrograms(t *testing.T) bench.Programs {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return bench.Programs{Floor: self, FloorEnv: []string{asFloor + "=1"}}
}

// TestFloorQPS runs a pass of the QPS table on the transport floor alone:
// v3 reads (each checked by the load for the value the row wrote) and
// writes, and the v2 rows when wrk is installed. Every request must
// succeed and the floor's CPU time must be counted.
func TestFloorQPS(t *testing.T) {
	apis := []string{bench.APIV3}
	wrk, err := exec.LookPath("wrk")
	if err != nil {
		t.Log("wrk is not on PATH: v3 rows only (apt-get install wrk)")
	} else {
		apis = append(apis, bench.APIV2)
	}
	var progress strings.Builder
	res, err := bench.RunQPS(context.Background(), bench.QPSOptions{
		Servers: []bench.Kind{bench.KindFloor}, APIs: apis, ValueSizes: []int{64}, Clients: []int{8},
		// 2000 requests: the server's CPU time is read from /proc in
		// clock ticks of 10 ms, and 300 writes to the floor's map took
		// less than one tick now and then (0.000 CPU s).
		Passes: 1, Requests: 2000, Duration: time.Second, RunTimeout: time.Minute,
		Wrk: wrk, Programs: floorPrograms(t), Dir: t.TempDir(), Progress: &progress,
	})
	if err != nil {
		t.Fatalf("%v\nprogress:\n%s", err, progress.String())
	}
	if want := 2 * len(apis); len(res.Samples) != want {
		t.Fatalf("%d runs, want %d:\n%s", len(res.Samples), want, progress.String())
	}
	for _, s := range res.Samples {
		if s.Kind != bench.KindFloor || !strings.HasPrefix(s.Name, "transport floor") {
			t.Errorf("%v: ran on %s (%s)", s.Row, s.Kind, s.Name)
		}
		if s.Result.Requests < 1 || s.Result.Errors != 0 || s.CPUSeconds <= 0 {
			t.Errorf("%v: %d requests, %d errors, %.3f CPU s; want requests, no errors and the floor's CPU time", s.Row, s.Result.Requests, s.Result.Errors, s.CPUSeconds)
		}
	}
	ft := res.FloorTable()
	if ft == nil || len(ft.Rows) != len(res.Samples) {
		t.Fatalf("floor table %v", ft)
	}
	var out strings.Builder
	if err := ft.Render(&out, "table"); err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", out.String())
}

// TestFloorAnswers checks the floor's answers as etcd gives them: v3
// revisions, versions and previous values, v2 bodies, statuses and
// headers from the same keys, and Unimplemented for what it does not
// serve.
func TestFloorAnswers(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := bench.StartServer(ctx, bench.KindFloor, floorPrograms(t), t.TempDir(), bench.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Stop(); err != nil {
			t.Error(err)
		}
	})
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{s.Endpoint}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	p1, err := c.Put(ctx, "k", "one")
	if err != nil {
		t.Fatal(err)
	}
	p2, err := c.Put(ctx, "k", "two", clientv3.WithPrevKV())
	if err != nil {
		t.Fatal(err)
	}
	r1 := p1.Header.Revision
	if p2.Header.Revision != r1+1 || p2.PrevKv == nil || string(p2.PrevKv.Value) != "one" || p2.PrevKv.ModRevision != r1 {
		t.Errorf("second put: revision %d after %d, prev %v", p2.Header.Revision, r1, p2.PrevKv)
	}
	g, err := c.Get(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	if g.Header.Revision != r1+1 || len(g.Kvs) != 1 || g.Count != 1 {
		t.Fatalf("get: revision %d (want %d), %d kvs, count %d", g.Header.Revision, r1+1, len(g.Kvs), g.Count)
	}
	if kv := g.Kvs[0]; string(kv.Value) != "two" || kv.ModRevision != r1+1 || kv.CreateRevision != r1 || kv.Version != 2 {
		t.Errorf("get: %v, want two at mod %d, create %d, version 2", kv, r1+1, r1)
	}
	if g, err := c.Get(ctx, "absent"); err != nil || len(g.Kvs) != 0 || g.Count != 0 || g.Header.Revision != r1+1 {
		t.Errorf("get of an absent key: %v, %v", g, err)
	}
	if _, err := c.Txn(ctx).Then(clientv3.OpPut("k", "three")).Commit(); status.Code(err) != codes.Unimplemented {
		t.Errorf("txn: %v, want Unimplemented", err)
	}
	if _, err := c.Get(ctx, "a", clientv3.WithPrefix()); status.Code(err) != codes.Unimplemented {
		t.Errorf("prefix get: %v, want Unimplemented", err)
	}

	// v2: a create (201), a set over it (200, prevNode), a GET; v2 key
	// /x is v3 key "/x".
	type node struct {
		Key           string  `json:"key"`
		Value         *string `json:"value"`
		ModifiedIndex int64   `json:"modifiedIndex"`
		CreatedIndex  int64   `json:"createdIndex"`
	}
	type event struct {
		Action   string `json:"action"`
		Node     *node  `json:"node"`
		PrevNode *node  `json:"prevNode"`
	}
	v2 := func(method, value string, wantCode int) (event, http.Header) {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, method, s.URL+"/v2/keys/x", strings.NewReader(url.Values{"value": {value}}.Encode()))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var ev event
		if err := json.NewDecoder(resp.Body).Decode(&ev); err != nil || resp.StatusCode != wantCode {
			t.Fatalf("%s /v2/keys/x: %s, %v; want %d", method, resp.Status, err, wantCode)
		}
		return ev, resp.Header
	}
	v2(http.MethodGet, "", http.StatusNotFound)
	ev, _ := v2(http.MethodPut, "a", http.StatusCreated)
	if ev.Action != "set" || ev.Node.Key != "/x" || *ev.Node.Value != "a" || ev.Node.ModifiedIndex != r1+2 || ev.Node.CreatedIndex != r1+2 || ev.PrevNode != nil {
		t.Errorf("v2 create: %+v", ev)
	}
	ev, _ = v2(http.MethodPut, "b", http.StatusOK)
	if ev.Node.ModifiedIndex != r1+3 || ev.Node.CreatedIndex != r1+2 || ev.PrevNode == nil || *ev.PrevNode.Value != "a" {
		t.Errorf("v2 set: %+v", ev)
	}
	ev, h := v2(http.MethodGet, "", http.StatusOK)
	if ev.Action != "get" || *ev.Node.Value != "b" || ev.Node.ModifiedIndex != r1+3 {
		t.Errorf("v2 get: %+v", ev)
	}
	if got, want := h.Get("X-Etcd-Index"), strconv.FormatInt(r1+3, 10); got != want || h.Get("X-Etcd-Cluster-Id") == "" {
		t.Errorf("v2 get: X-Etcd-Index %q, want %s; headers %v", got, want, h)
	}
	if g, err := c.Get(ctx, "/x"); err != nil || len(g.Kvs) != 1 || string(g.Kvs[0].Value) != "b" {
		t.Errorf("v3 get of v2's /x: %v, %v", g, err)
	}
}
