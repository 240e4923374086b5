package server

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stratadb/strata/cluster"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"
)

// nextEvents reads one response of a watch channel, failing after 10 s.
func nextResponse(t *testing.T, wc clientv3.WatchChan) clientv3.WatchResponse {
	t.Helper()
	select {
	case r, ok := <-wc:
		if !ok {
			t.Fatal("watch channel closed")
		}
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("no watch response in 10 s")
	}
	return clientv3.WatchResponse{}
}

// collect reads events until it has n of them.
func collect(t *testing.T, wc clientv3.WatchChan, n int) []*clientv3.Event {
	t.Helper()
	var evs []*clientv3.Event
	for len(evs) < n {
		r := nextResponse(t, wc)
		if err := r.Err(); err != nil {
			t.Fatalf("watch: %v", err)
		}
		evs = append(evs, r.Events...)
	}
	return evs
}

// putValues puts n keys prefix0000, prefix0001, ... with values of size
// bytes, one revision each.
func putValues(t *testing.T, c *clientv3.Client, prefix string, n, size int) {
	t.Helper()
	ctx := testCtx(t)
	for i := range n {
		if _, err := c.Put(ctx, fmt.Sprintf("%s%04d", prefix, i), strings.Repeat("v", size)); err != nil {
			t.Fatal(err)
		}
	}
}

// rawWatch opens a watch stream with etcd's generated client, to see the
// responses as the server sends them, and sends reqs on it.
func rawWatch(t *testing.T, c *clientv3.Client, reqs ...*pb.WatchRequest) pb.Watch_WatchClient {
	t.Helper()
	stream, err := pb.NewWatchClient(c.ActiveConnection()).Watch(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, req := range reqs {
		if err := stream.Send(req); err != nil {
			t.Fatal(err)
		}
	}
	return stream
}

func describe(evs []*clientv3.Event) string {
	s := ""
	for _, e := range evs {
		s += fmt.Sprintf("%s %s=%s@%d ", e.Type, e.Kv.Key, e.Kv.Value, e.Kv.ModRevision)
	}
	return s
}

func TestWatch(t *testing.T) {
	s := startServer(t, testConfig(t))
	c := newClient(t, s, nil)
	ctx := testCtx(t)
	mustPut := func(k, v string) {
		if _, err := c.Put(ctx, k, v); err != nil {
			t.Fatal(err)
		}
	}
	mustPut("p/a", "1")                             // rev 2
	mustPut("q", "x")                               // rev 3
	mustPut("p/b", "2")                             // rev 4
	if _, err := c.Delete(ctx, "p/a"); err != nil { // rev 5
		t.Fatal(err)
	}

	// From a past revision, over a prefix, with prev_kv.
	wc := c.Watch(clientv3.WithRequireLeader(ctx), "p/", clientv3.WithPrefix(), clientv3.WithRev(2), clientv3.WithPrevKV())
	evs := collect(t, wc, 3)
	if got, want := describe(evs), "PUT p/a=1@2 PUT p/b=2@4 DELETE p/a=@5 "; got != want {
		t.Errorf("watch from 2: %s, want %s", got, want)
	}
	if evs[2].PrevKv == nil || string(evs[2].PrevKv.Value) != "1" {
		t.Errorf("delete event without prev_kv: %+v", evs[2])
	}
	mustPut("p/c", "3") // rev 6: live
	if evs := collect(t, wc, 1); describe(evs) != "PUT p/c=3@6 " {
		t.Errorf("live event: %s", describe(evs))
	}

	// Cancel: the channel closes.
	wc2 := c.Watch(ctx, "q")
	mustPut("q", "y") // rev 7
	if evs := collect(t, wc2, 1); evs[0].Type != mvccpb.PUT || string(evs[0].Kv.Value) != "y" {
		t.Errorf("watch q: %s", describe(evs))
	}
	if err := c.Watcher.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case _, ok := <-wc2:
		if ok {
			// a final canceled response may arrive first
			if _, ok := <-wc2; ok {
				t.Error("watch channel still open after close")
			}
		}
	case <-time.After(10 * time.Second):
		t.Error("watch channel not closed after close")
	}
}

// TestWatchResumesAfterCompaction watches from a compacted revision, gets
// etcd's compaction error with the compact revision, and resumes from it.
func TestWatchResumesAfterCompaction(t *testing.T) {
	s := startServer(t, testConfig(t))
	c := newClient(t, s, nil)
	ctx := testCtx(t)
	for i := range 5 { // revisions 2..6
		if _, err := c.Put(ctx, "k", fmt.Sprint(i)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Compact(ctx, 4); err != nil {
		t.Fatal(err)
	}
	wc := c.Watch(ctx, "k", clientv3.WithRev(2))
	r := nextResponse(t, wc)
	if !errors.Is(r.Err(), rpctypes.ErrCompacted) || r.CompactRevision != 4 || !r.Canceled {
		t.Fatalf("watch below the compaction: err %v, compact revision %d, canceled %v", r.Err(), r.CompactRevision, r.Canceled)
	}
	if _, ok := <-wc; ok {
		t.Error("channel open after the compaction error")
	}
	wc = c.Watch(ctx, "k", clientv3.WithRev(r.CompactRevision))
	if got, want := describe(collect(t, wc, 3)), "PUT k=2@4 PUT k=3@5 PUT k=4@6 "; got != want {
		t.Errorf("resumed watch: %s, want %s", got, want)
	}
}

// leaderlessNode is a member that knows no leader.
type leaderlessNode struct{ cluster.Node }

func (n leaderlessNode) Status() cluster.Status {
	st := n.Node.Status()
	st.IsLeader, st.Leader = false, 0
	return st
}

// TestNoLeader: without a leader, a watch that requires one is refused
// with etcd's ErrNoLeader, and /health answers 503.
func TestNoLeader(t *testing.T) {
	s, err := Start(testConfig(t), Options{NewNode: func(sm cluster.StateMachine, ids IDs) (cluster.Node, error) {
		n, err := cluster.NewLocal(sm, cluster.LocalConfig{ClusterID: ids.ClusterID, MemberID: ids.MemberID})
		return leaderlessNode{n}, err
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	c := newClient(t, s, nil)
	wc := c.Watch(clientv3.WithRequireLeader(testCtx(t)), "k")
	if r := nextResponse(t, wc); !errors.Is(r.Err(), rpctypes.ErrNoLeader) {
		t.Errorf("watch requiring a leader: %v, want %v", r.Err(), rpctypes.ErrNoLeader)
	}
	resp, err := http.Get("http://" + s.Addr().String() + "/health")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), `"health":"false","reason":"RAFT NO LEADER"`) {
		t.Errorf("/health without a leader: %d %s", resp.StatusCode, body)
	}
}

// TestWatchProgressNotify checks etcd's periodic progress notifications
// through clientv3: a watcher created WithProgressNotify that sees no
// event gets empty responses (IsProgressNotify) whose revision follows
// the writes to other keys, so a client can resume from there; a watcher
// without it gets none.
func TestWatchProgressNotify(t *testing.T) {
	cfg := testConfig(t)
	cfg.Server.WatchProgressNotifyIntervalMS = 50
	s := startServer(t, cfg)
	c := newClient(t, s, nil)
	ctx := testCtx(t)
	wc := c.Watch(ctx, "a", clientv3.WithProgressNotify())
	plain := c.Watch(ctx, "b")
	resp, err := c.Put(ctx, "other", "x")
	if err != nil {
		t.Fatal(err)
	}
	for {
		r := nextResponse(t, wc)
		if err := r.Err(); err != nil {
			t.Fatal(err)
		}
		if !r.IsProgressNotify() {
			t.Fatalf("watch of a: an unexpected response %+v", r)
		}
		if r.Header.Revision == resp.Header.Revision {
			break
		}
		if r.Header.Revision > resp.Header.Revision {
			t.Fatalf("progress at %d, past the store's %d", r.Header.Revision, resp.Header.Revision)
		}
	}
	// An event resets the interval; the next notification covers it.
	put, err := c.Put(ctx, "a", "1")
	if err != nil {
		t.Fatal(err)
	}
	if evs := collect(t, wc, 1); evs[0].Kv.ModRevision != put.Header.Revision {
		t.Fatalf("event %s, want a=1@%d", describe(evs), put.Header.Revision)
	}
	if r := nextResponse(t, wc); !r.IsProgressNotify() || r.Header.Revision != put.Header.Revision {
		t.Fatalf("after the event: %+v, want a progress notification at %d", r, put.Header.Revision)
	}
	select {
	case r := <-plain:
		t.Fatalf("a watcher without progress_notify got %+v", r)
	case <-time.After(200 * time.Millisecond):
	}
}

// TestWatchFragment checks etcd's fragmented watch responses: with
// fragment set, a batch of events larger than server.max_request_bytes
// arrives as several responses of whole events under the limit, all but
// the last marked Fragment, and clientv3 (WithFragment) joins them into
// the one response it was.
func TestWatchFragment(t *testing.T) {
	cfg := testConfig(t)
	cfg.Server.MaxRequestBytes = 1024
	s := startServer(t, cfg)
	c := newClient(t, s, nil)
	ctx := testCtx(t)
	const n = 10
	putValues(t, c, "k/", n, 300)
	// The raw stream shows the fragments.
	stream := rawWatch(t, c, &pb.WatchRequest{RequestUnion: &pb.WatchRequest_CreateRequest{CreateRequest: &pb.WatchCreateRequest{
		Key: []byte("k/"), RangeEnd: []byte("k0"), StartRevision: 1, Fragment: true}}})
	var parts []*pb.WatchResponse
	events := 0
	for events < n {
		r, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if r.Created {
			continue
		}
		parts = append(parts, r)
		events += len(r.Events)
		if len(r.Events) > 1 && proto.Size(r) >= 1024 {
			t.Errorf("a fragment of %d events is %d bytes, over max_request_bytes", len(r.Events), proto.Size(r))
		}
	}
	if len(parts) < 2 {
		t.Fatalf("%d events of 300 B came in %d response(s), want fragments", n, len(parts))
	}
	for i, r := range parts {
		if r.Fragment != (i < len(parts)-1) {
			t.Errorf("response %d of %d: Fragment = %v", i+1, len(parts), r.Fragment)
		}
	}
	// clientv3 joins them.
	wc := c.Watch(ctx, "k/", clientv3.WithPrefix(), clientv3.WithRev(1), clientv3.WithFragment())
	if r := nextResponse(t, wc); len(r.Events) != n {
		t.Errorf("clientv3 WithFragment: one response of %d events, want %d", len(r.Events), n)
	}
}

// TestWatchProgressRequest checks a progress request (etcd's
// RequestProgress, which Kubernetes' consistent reads from its watch
// cache rely on): the answer, watch ID -1 at revision R, comes only after
// every event up to R of the stream's watchers, here a watcher from
// revision 1 still sending 1,500 events of history when it is asked.
func TestWatchProgressRequest(t *testing.T) {
	s := startServer(t, testConfig(t))
	c := newClient(t, s, nil)
	const n = 1500
	putValues(t, c, "h/", n, 200)
	stream := rawWatch(t, c,
		&pb.WatchRequest{RequestUnion: &pb.WatchRequest_CreateRequest{CreateRequest: &pb.WatchCreateRequest{
			Key: []byte("h/"), RangeEnd: []byte("h0"), StartRevision: 1}}},
		&pb.WatchRequest{RequestUnion: &pb.WatchRequest_ProgressRequest{ProgressRequest: &pb.WatchProgressRequest{}}})
	var last int64 // the highest event revision received
	events := 0
	for {
		r, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if r.WatchId == -1 {
			if r.Header.Revision != last {
				t.Fatalf("progress at revision %d after %d events up to revision %d", r.Header.Revision, events, last)
			}
			if events != n {
				t.Fatalf("progress after %d of %d events", events, n)
			}
			return
		}
		for _, e := range r.Events {
			last = e.Kv.ModRevision
			events++
		}
	}
}

// TestWatchProgressFutureStart: a watch from a revision the store has not
// reached gets no progress notification below that revision, requested or
// periodic, as in etcd (which sends none until the store reaches the
// start): Kubernetes' watch cache takes a notification as its resource
// version, and a client resuming there after a member restarted behind it
// already holds the events below.
func TestWatchProgressFutureStart(t *testing.T) {
	cfg := testConfig(t)
	cfg.Server.WatchProgressNotifyIntervalMS = 20
	s := startServer(t, cfg)
	c := newClient(t, s, nil)
	resp, err := c.Put(testCtx(t), "other", "x")
	if err != nil {
		t.Fatal(err)
	}
	start := resp.Header.Revision + 10
	stream := rawWatch(t, c,
		&pb.WatchRequest{RequestUnion: &pb.WatchRequest_CreateRequest{CreateRequest: &pb.WatchCreateRequest{
			Key: []byte("f/"), RangeEnd: []byte("f0"), StartRevision: start, ProgressNotify: true}}},
		&pb.WatchRequest{RequestUnion: &pb.WatchRequest_ProgressRequest{ProgressRequest: &pb.WatchProgressRequest{}}})
	// Writes outside the range bring the store to the watch's start.
	go func() {
		for range 10 {
			if _, err := c.Put(testCtx(t), "other", "x"); err != nil {
				t.Error(err)
				return
			}
			time.Sleep(30 * time.Millisecond) // room for periodic notifications between writes
		}
	}()
	for progress := 0; progress < 2; {
		r, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if r.Created || len(r.Events) > 0 {
			continue
		}
		if r.Header.Revision < start {
			t.Fatalf("progress notification (watch %d) at revision %d, below the watch's start %d", r.WatchId, r.Header.Revision, start)
		}
		progress++
	}
}

// TestWatchStreamEventsStandAlone checks that a stream's responses carry
// only their own events: watchers of one stream, with and without
// previous values and filters, see each event's own type and previous
// value after the stream sent other watchers' deletes and previous
// values (the stream reuses one set of messages for its responses).
func TestWatchStreamEventsStandAlone(t *testing.T) {
	s := startServer(t, testConfig(t))
	c := newClient(t, s, nil)
	ctx := testCtx(t)
	wctx := clientv3.WithRequireLeader(ctx) // one context: one gRPC stream for all three
	withPrev := c.Watch(wctx, "r/", clientv3.WithPrefix(), clientv3.WithPrevKV(), clientv3.WithCreatedNotify())
	plain := c.Watch(wctx, "r/", clientv3.WithPrefix(), clientv3.WithCreatedNotify())
	putsOnly := c.Watch(wctx, "r/k", clientv3.WithFilterDelete(), clientv3.WithCreatedNotify())
	for _, wc := range []clientv3.WatchChan{withPrev, plain, putsOnly} {
		if r := nextResponse(t, wc); !r.Created {
			t.Fatalf("first response %+v, want its creation", r)
		}
	}
	for _, op := range []clientv3.Op{clientv3.OpPut("r/k", "1"), clientv3.OpPut("r/k", "2"), clientv3.OpDelete("r/k"), clientv3.OpPut("r/k", "3")} {
		if _, err := c.Do(ctx, op); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Txn(ctx).Then(clientv3.OpPut("r/j", "a"), clientv3.OpPut("r/k", "4")).Commit(); err != nil {
		t.Fatal(err)
	}
	show := func(evs []*clientv3.Event) string {
		var b strings.Builder
		for _, e := range evs {
			fmt.Fprintf(&b, "%s %s=%s", e.Type, e.Kv.Key, e.Kv.Value)
			if e.PrevKv != nil {
				fmt.Fprintf(&b, "<%s", e.PrevKv.Value)
			}
			b.WriteString("; ")
		}
		return b.String()
	}
	for _, c := range []struct {
		name string
		wc   clientv3.WatchChan
		n    int
		want string
	}{
		{"with previous values", withPrev, 6, "PUT r/k=1; PUT r/k=2<1; DELETE r/k=<2; PUT r/k=3; PUT r/j=a; PUT r/k=4<3; "},
		{"without", plain, 6, "PUT r/k=1; PUT r/k=2; DELETE r/k=; PUT r/k=3; PUT r/j=a; PUT r/k=4; "},
		{"puts only", putsOnly, 4, "PUT r/k=1; PUT r/k=2; PUT r/k=3; PUT r/k=4; "},
	} {
		if got := show(collect(t, c.wc, c.n)); got != c.want {
			t.Errorf("watcher %s: %s, want %s", c.name, got, c.want)
		}
	}
}
