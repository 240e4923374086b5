package clustertest

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// TestWatchResumesOnMemberRestartedBehind: a watch that received events
// up to revision R on one member resumes (as clientv3 does after losing
// its connection: start R+1) on a member that was down during those
// writes and restarted behind them. As etcd, the member answers no client
// request until it has caught up with the cluster (server/ready.go): not a
// serializable read, not the watch, so it sends no progress notification
// below R (Kubernetes' watch cache takes a notification as its resource
// version) or claiming R before its store has it. Once the member catches
// up, notifications come, each at or above R and at or below the member's
// revision.
func TestWatchResumesOnMemberRestartedBehind(t *testing.T) {
	c := newPreparedCluster(t, 3, 10000, func(m *member) {
		// Periodic progress notifications every 50ms.
		b, err := os.ReadFile(m.cfgPath)
		if err != nil {
			t.Fatal(err)
		}
		s := strings.Replace(string(b), "[server]\n", "[server]\nwatch_progress_notify_interval_ms = 50\n", 1)
		if err := os.WriteFile(m.cfgPath, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	})
	lead := c.leader()
	others := c.others(lead)
	behind, peer := others[0], others[1]
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	// The watch on the leader delivers every write to w/ while the
	// member that will be behind is down.
	c.kill(behind)
	wcli := c.client(lead)
	wch := wcli.Watch(ctx, "w/", clientv3.WithPrefix())
	cli := c.client(lead)
	var delivered int64
	for i := range 20 {
		resp, err := cli.Put(ctx, fmt.Sprintf("w/%d", i), "v")
		if err != nil {
			t.Fatal(err)
		}
		delivered = resp.Header.Revision
	}
	for got := int64(0); got < delivered; {
		wr, ok := <-wch
		if !ok || wr.Err() != nil {
			t.Fatalf("watch on %s ended before revision %d: %v", lead.name, delivered, wr.Err())
		}
		for _, e := range wr.Events {
			got = e.Kv.ModRevision
		}
	}

	// Only the member that is behind runs: it restarts on its own data
	// and cannot catch up.
	c.kill(lead)
	c.kill(peer)
	c.start(behind)
	bcli := c.client(behind)
	memberRev := func() int64 {
		t.Helper()
		r, err := bcli.Get(ctx, "none", clientv3.WithSerializable())
		if err != nil {
			t.Fatal(err)
		}
		return r.Header.Revision
	}
	// Alone, it cannot catch up: it holds even a serializable read back.
	sctx, scancel := context.WithTimeout(ctx, 2*time.Second)
	r, err := bcli.Get(sctx, "none", clientv3.WithSerializable())
	scancel()
	if err == nil {
		t.Fatalf("%s, restarted alone behind revision %d, answered a read at revision %d", behind.name, delivered, r.Header.Revision)
	}
	stream, err := pb.NewWatchClient(bcli.ActiveConnection()).Watch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&pb.WatchRequest{RequestUnion: &pb.WatchRequest_CreateRequest{CreateRequest: &pb.WatchCreateRequest{
		Key: []byte("w/"), RangeEnd: []byte("w0"), StartRevision: delivered + 1, ProgressNotify: true}}}); err != nil {
		t.Fatal(err)
	}
	type reply struct {
		r   *pb.WatchResponse
		err error
	}
	replies := make(chan reply, 64)
	go func() {
		for {
			r, err := stream.Recv()
			replies <- reply{r, err}
			if err != nil {
				return
			}
		}
	}()
	// check fails a progress notification below the watch's delivered
	// revision or above the member's revision read after it arrived.
	check := func(r *pb.WatchResponse) bool {
		t.Helper()
		if r.Created || r.Canceled || len(r.Events) > 0 {
			if r.Canceled {
				t.Fatalf("resumed watch canceled: %s", r.CancelReason)
			}
			return false
		}
		if r.Header.Revision < delivered {
			t.Fatalf("progress notification at revision %d, below the %d the watch delivered", r.Header.Revision, delivered)
		}
		if rev := memberRev(); r.Header.Revision > rev {
			t.Fatalf("progress notification at revision %d from %s, whose store is at %d", r.Header.Revision, behind.name, rev)
		}
		return true
	}
	// A second of 50ms ticks (and a requested notification) while behind:
	// nothing comes.
	if err := stream.Send(&pb.WatchRequest{RequestUnion: &pb.WatchRequest_ProgressRequest{ProgressRequest: &pb.WatchProgressRequest{}}}); err != nil {
		t.Fatal(err)
	}
	select {
	case rp := <-replies:
		t.Fatalf("%s, restarted alone behind revision %d, answered the watch: %v %v", behind.name, delivered, rp.r, rp.err)
	case <-time.After(time.Second):
	}

	// The others return; the member catches up, and a write outside the
	// watched range moves the store past the watch's start.
	c.start(lead)
	c.start(peer)
	if _, err := c.client(behind).Put(ctx, "other", "x"); err != nil {
		t.Fatal(err)
	}
	for notified := 0; notified < 3; {
		select {
		case rp := <-replies:
			if rp.err != nil {
				t.Fatal(rp.err)
			}
			if check(rp.r) {
				notified++
			}
		case <-ctx.Done():
			t.Fatalf("no progress notification from %s after it caught up (store at %d, watch delivered %d)", behind.name, memberRev(), delivered)
		}
	}
}
