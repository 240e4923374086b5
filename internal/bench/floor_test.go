package bench_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
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

// startFloor starts the floor program and a client on it.
func startFloor(t *testing.T, ctx context.Context) (*bench.Server, *clientv3.Client) {
	t.Helper()
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
	t.Cleanup(func() { c.Close() })
	return s, c
}

// TestFloorAnswers checks the floor's answers as etcd gives them: v3
// revisions, versions and previous values, v2 bodies, statuses and
// headers from the same keys, and Unimplemented for what it does not
// serve.
func TestFloorAnswers(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, c := startFloor(t, ctx)

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
	if _, err := c.Delete(ctx, "k"); status.Code(err) != codes.Unimplemented {
		t.Errorf("delete: %v, want Unimplemented", err)
	}
	if _, err := c.Get(ctx, "a", clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByKey, clientv3.SortDescend)); status.Code(err) != codes.Unimplemented {
		t.Errorf("sorted prefix get: %v, want Unimplemented", err)
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

// TestFloorKubeAnswers checks, through clientv3, the answers the floor
// gives to what Kubernetes' apiserver sends, as etcd gives them: create
// and update txns and their conflicts, leases, ranges with limit and
// count, compaction, and a prefix watch with previous values and progress
// requests.
func TestFloorKubeAnswers(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, c := startFloor(t, ctx)

	start, err := c.Get(ctx, "/p/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	wctx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	wch := c.Watch(wctx, "/p/", clientv3.WithPrefix(), clientv3.WithPrevKV(), clientv3.WithRev(start.Header.Revision+1))

	create := func(key, val string) *clientv3.TxnResponse {
		t.Helper()
		r, err := c.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
			Then(clientv3.OpPut(key, val)).Else(clientv3.OpGet(key)).Commit()
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	for _, k := range []string{"/p/c", "/p/a", "/p/e", "/p/b", "/p/d"} {
		if r := create(k, "v1"); !r.Succeeded {
			t.Fatalf("create %s failed", k)
		}
	}
	again := create("/p/a", "v2")
	if kvs := again.Responses[0].GetResponseRange().Kvs; again.Succeeded || len(kvs) != 1 || string(kvs[0].Value) != "v1" {
		t.Fatalf("second create of /p/a: succeeded %v, else branch %v", again.Succeeded, kvs)
	}
	created := kvOf(t, c, ctx, "/p/a").ModRevision
	update := func(rev int64) *clientv3.TxnResponse {
		t.Helper()
		r, err := c.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision("/p/a"), "=", rev)).
			Then(clientv3.OpPut("/p/a", "v2")).Else(clientv3.OpGet("/p/a")).Commit()
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	up := update(created)
	if want := start.Header.Revision + 6; !up.Succeeded || up.Header.Revision != want {
		t.Fatalf("update at mod_revision %d: succeeded %v at revision %d, want %d", created, up.Succeeded, up.Header.Revision, want)
	}
	if stale := update(created); stale.Succeeded {
		t.Fatal("an update on a stale mod_revision succeeded")
	}
	if kv := kvOf(t, c, ctx, "/p/a"); kv.Version != 2 || kv.CreateRevision != created || string(kv.Value) != "v2" {
		t.Errorf("/p/a after its update: %v", kv)
	}

	lease, err := c.Grant(ctx, 3600)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Put(ctx, "/e/1", "event", clientv3.WithLease(lease.ID)); err != nil {
		t.Fatal(err)
	}
	if kv := kvOf(t, c, ctx, "/e/1"); kv.Lease != int64(lease.ID) {
		t.Errorf("event's lease %x, want %x", kv.Lease, lease.ID)
	}
	if _, err := c.Put(ctx, "/e/2", "event", clientv3.WithLease(lease.ID+1)); !errors.Is(err, rpctypes.ErrLeaseNotFound) {
		t.Errorf("put on a lease never granted: %v, want %v", err, rpctypes.ErrLeaseNotFound)
	}

	page, err := c.Get(ctx, "/p/", clientv3.WithPrefix(), clientv3.WithLimit(2))
	if err != nil {
		t.Fatal(err)
	}
	if page.Count != 5 || !page.More || len(page.Kvs) != 2 || string(page.Kvs[0].Key) != "/p/a" || string(page.Kvs[1].Key) != "/p/b" {
		t.Errorf("first page of 2: count %d, more %v, kvs %v", page.Count, page.More, page.Kvs)
	}
	rest, err := c.Get(ctx, "/p/b\x00", clientv3.WithRange(clientv3.GetPrefixRangeEnd("/p/")), clientv3.WithRev(page.Header.Revision))
	if err != nil {
		t.Fatal(err)
	}
	if rest.Count != 3 || rest.More || len(rest.Kvs) != 3 || string(rest.Kvs[2].Key) != "/p/e" {
		t.Errorf("rest of the list: count %d, more %v, kvs %v", rest.Count, rest.More, rest.Kvs)
	}

	at := up.Header.Revision
	if _, err := c.Compact(ctx, at); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Get(ctx, "/p/", clientv3.WithPrefix(), clientv3.WithRev(at), clientv3.WithCountOnly()); err != nil {
		t.Errorf("read at the compacted revision: %v", err)
	}
	if _, err := c.Get(ctx, "/p/", clientv3.WithPrefix(), clientv3.WithRev(at-1)); !errors.Is(err, rpctypes.ErrCompacted) {
		t.Errorf("read below the compacted revision: %v, want %v", err, rpctypes.ErrCompacted)
	}

	// The watch: five creates and the update, in order, the update with
	// its previous value; then a progress notification at the revision
	// of the last write.
	last, err := c.Get(ctx, "/p/a", clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	var events []*clientv3.Event
	for len(events) < 6 {
		resp, ok := <-wch
		if !ok || resp.Err() != nil || resp.IsProgressNotify() {
			t.Fatalf("watch after %d events: open %v, err %v, progress %v", len(events), ok, resp.Err(), resp.IsProgressNotify())
		}
		events = append(events, resp.Events...)
	}
	for i, ev := range events {
		if ev.Kv.ModRevision != start.Header.Revision+1+int64(i) || (i < 5) != ev.IsCreate() {
			t.Errorf("event %d: %s at %d, create %v", i, ev.Kv.Key, ev.Kv.ModRevision, ev.IsCreate())
		}
	}
	if prev := events[5].PrevKv; prev == nil || string(prev.Value) != "v1" || prev.ModRevision != created {
		t.Errorf("the update's previous value: %v", prev)
	}
	if err := c.RequestProgress(wctx); err != nil {
		t.Fatal(err)
	}
	resp := <-wch
	if !resp.IsProgressNotify() || resp.Header.Revision != last.Header.Revision {
		t.Errorf("after a progress request: %+v, want a notification at %d", resp, last.Header.Revision)
	}

	old := c.Watch(ctx, "/p/", clientv3.WithPrefix(), clientv3.WithRev(start.Header.Revision+1))
	if resp := <-old; resp.Err() == nil || !strings.Contains(resp.Err().Error(), "no history") {
		t.Errorf("a watch from a past revision: %v, want a refusal naming the history", resp.Err())
	}
}

func kvOf(t *testing.T, c *clientv3.Client, ctx context.Context, key string) *mvccpb.KeyValue {
	t.Helper()
	r, err := c.Get(ctx, key)
	if err != nil || len(r.Kvs) != 1 {
		t.Fatalf("get %s: %v, %v", key, r, err)
	}
	return r.Kvs[0]
}

// TestFloorKube runs Kubernetes' traffic against the floor: KubeLoad.Run
// checks every acknowledged write reads back, arrives once and in order
// on the watch with its previous value, and is listed.
func TestFloorKube(t *testing.T) {
	res, err := bench.RunKube(context.Background(), bench.KubeOptions{
		Programs: floorPrograms(t), Servers: []bench.Kind{bench.KindFloor}, Passes: 1, Dir: t.TempDir(),
		Load: bench.KubeLoad{Pods: 500, Updates: 500, Clients: 8, Conns: 2, EventEvery: 10,
			CompactEvery: 50 * time.Millisecond, Seed: 3, Timeout: 2 * time.Minute},
	})
	if err != nil {
		t.Fatal(err)
	}
	if s := res.Samples[0]; s.Events != 1000 || s.ListKeys != 500 || s.CPUSeconds <= 0 {
		t.Errorf("floor: %d events, %d listed, %.2f CPU s", s.Events, s.ListKeys, s.CPUSeconds)
	}
	var out strings.Builder
	if err := res.Tables()[2].Render(&out, "csv"); err != nil {
		t.Fatal(err)
	}
	// The floor keeps nothing on disk and has nothing to snapshot or
	// restart: those cells are empty, not zeros.
	if rows := strings.Split(strings.TrimSpace(out.String()), "\n"); len(rows) != 2 || !strings.HasSuffix(rows[1], ",,,") {
		t.Errorf("after-load table:\n%s", out.String())
	}
}

// TestFloorWatchesByKey checks that the floor's watchers, found by key,
// get every event of their key or range and no other: two watchers of
// one key, with and without previous values, and a prefix watcher beside
// them.
func TestFloorWatchesByKey(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, c := startFloor(t, ctx)
	wctx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	withPrev := c.Watch(wctx, "/k/1", clientv3.WithPrevKV(), clientv3.WithCreatedNotify())
	without := c.Watch(wctx, "/k/1", clientv3.WithCreatedNotify())
	prefix := c.Watch(wctx, "/k/", clientv3.WithPrefix(), clientv3.WithCreatedNotify())
	for _, ch := range []clientv3.WatchChan{withPrev, without, prefix} {
		if r := <-ch; !r.Created {
			t.Fatalf("first watch response %+v, want its creation", r)
		}
	}
	for _, kv := range [][2]string{{"/k/1", "a"}, {"/k/2", "b"}, {"/j/1", "c"}, {"/k/1", "d"}, {"/k/10", "e"}, {"/k/1", "f"}} {
		if _, err := c.Put(ctx, kv[0], kv[1]); err != nil {
			t.Fatal(err)
		}
	}
	got := func(ch clientv3.WatchChan, n int, prev bool) string {
		t.Helper()
		var evs []string
		for len(evs) < n {
			r, ok := <-ch
			if !ok || r.Err() != nil {
				t.Fatalf("watch ended after %v: %v", evs, r.Err())
			}
			for _, ev := range r.Events {
				s := string(ev.Kv.Key) + "=" + string(ev.Kv.Value)
				if ev.PrevKv != nil {
					s += "<" + string(ev.PrevKv.Value)
				}
				if (ev.PrevKv != nil) != (prev && ev.Kv.Version > 1) {
					t.Errorf("event %s: previous value %v, want one: %v", s, ev.PrevKv, prev)
				}
				evs = append(evs, s)
			}
		}
		return strings.Join(evs, " ")
	}
	if g, w := got(withPrev, 3, true), "/k/1=a /k/1=d<a /k/1=f<d"; g != w {
		t.Errorf("key watcher with previous values: %s, want %s", g, w)
	}
	if g, w := got(without, 3, false), "/k/1=a /k/1=d /k/1=f"; g != w {
		t.Errorf("key watcher: %s, want %s", g, w)
	}
	if g, w := got(prefix, 5, false), "/k/1=a /k/2=b /k/1=d /k/10=e /k/1=f"; g != w {
		t.Errorf("prefix watcher: %s, want %s", g, w)
	}
}
