package bench_test

import (
	"context"
	"math"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/stratadb/strata/internal/bench"
)

// TestQPSCluster runs the three-member rows end to end on one pass: a
// Strata raft cluster and an etcd 3.7 cluster, every row through the
// leader and through a follower, and checks that the table has every row
// with QPS and CPU for both, that the CPU of a run is every member's, and
// that the follower rows loaded another member than the leader rows.
func TestQPSCluster(t *testing.T) {
	var p bench.Programs
	if !selfAsStrata(t, &p) {
		t.Skip("this build has no `strata serve`")
	}
	ctx := context.Background()
	p.Etcd37 = os.Getenv("STRATA_ETCD37")
	if p.Etcd37 == "" {
		var err error
		if p.Etcd37, err = bench.BuildEtcd37(ctx, t.TempDir()); err != nil {
			t.Skipf("etcd 3.7 (./internal/bench/etcd37) cannot be built here: %v; or set STRATA_ETCD37 to a binary built from it", err)
		}
	}
	pin, why := bench.DefaultPinning()
	if why != "" {
		t.Logf("unpinned: %s", why)
	}
	// The kernel counts a process's CPU in ticks of 10 ms, and a follower
	// spends about 0.03 ms on each replicated write: 500 writes could read
	// as no CPU at all on a fast machine. 2000 give each member several
	// ticks, so "every member used CPU" tests the harness, not the clock.
	const requests = 2000
	var progress strings.Builder
	res, err := bench.RunQPS(ctx, bench.QPSOptions{
		Servers: []bench.Kind{bench.KindStrata, bench.KindEtcd37}, Members: 3, ValueSizes: []int{64}, Clients: []int{32},
		Passes: 1, Requests: requests, RunTimeout: time.Minute, Pin: pin, Programs: p, Dir: t.TempDir(), Progress: &progress,
	})
	if err != nil {
		t.Fatalf("%v\nprogress:\n%s", err, progress.String())
	}

	// Every run: the requests sent, and the CPU of all three members.
	loaded := map[string]string{} // kind, op and via -> the member loaded
	elections := false
	for _, s := range res.Samples {
		if s.Requests != requests || s.Result.Requests != requests || s.Result.Errors != 0 {
			t.Errorf("%v on %s: sent %d, %+v; want %d requests, no errors", s.Row, s.Name, s.Requests, s.Result, requests)
		}
		if len(s.MemberCPUSeconds) != 3 {
			t.Fatalf("%v on %s: CPU of %d members %v, want 3", s.Row, s.Name, len(s.MemberCPUSeconds), s.MemberCPUSeconds)
		}
		var sum float64
		for _, c := range s.MemberCPUSeconds {
			sum += c
		}
		if math.Abs(sum-s.CPUSeconds) > 1e-9 || s.CPUSeconds <= 0 {
			t.Errorf("%v on %s: CPU %v s, the members' %v", s.Row, s.Name, s.CPUSeconds, s.MemberCPUSeconds)
		}
		// Every member applies every write.
		if s.Row.Op == bench.OpWrite && slices.Min(s.MemberCPUSeconds) <= 0 {
			t.Errorf("%v on %s: a member used no CPU on %d replicated writes: %v", s.Row, s.Name, requests, s.MemberCPUSeconds)
		}
		loaded[string(s.Kind)+" "+s.Row.Op+" "+s.Row.Via] = s.Member
		elections = elections || s.LeaderChanged
	}
	for _, k := range []bench.Kind{bench.KindStrata, bench.KindEtcd37} {
		for _, op := range []string{bench.OpWrite, bench.OpRead, bench.OpReadSerializable} {
			l, f := loaded[string(k)+" "+op+" leader"], loaded[string(k)+" "+op+" follower"]
			if l == "" || f == "" || (l == f && !elections) {
				t.Errorf("%s %s: the leader row loaded member %q, the follower row %q", k, op, l, f)
			}
		}
	}

	tab := res.Table()
	col := map[string]int{}
	for i, c := range tab.Columns {
		col[c.Name] = i
	}
	var got []string
	for _, r := range tab.Rows {
		got = append(got, r[col["Op"]].(string)+" via "+r[col["Via"]].(string))
		for _, name := range []string{"Strata QPS", "Peer QPS", "Strata CPU", "Peer CPU"} {
			if v, ok := r[col[name]].(float64); !ok || v <= 0 {
				t.Errorf("%s via %s: %s = %v, want > 0", r[col["Op"]], r[col["Via"]], name, r[col[name]])
			}
		}
		if m := r[col["Members"]]; m != 3 {
			t.Errorf("members %v, want 3", m)
		}
	}
	want := []string{"write via leader", "write via follower", "read via leader", "read via follower", "read-serializable via leader", "read-serializable via follower"}
	if !slices.Equal(got, want) {
		t.Errorf("rows %q, want %q", got, want)
	}
	var out strings.Builder
	if err := tab.Render(&out, "markdown"); err != nil {
		t.Fatal(err)
	}
	if err := res.RunsTable().Render(&out, "markdown"); err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", out.String())
}

// TestStartClusterTarget starts a three-member Strata cluster and checks,
// with each member's own status, that Target's leader is the leader and
// its follower is not.
func TestStartClusterTarget(t *testing.T) {
	var p bench.Programs
	if !selfAsStrata(t, &p) {
		t.Skip("this build has no `strata serve`")
	}
	ctx := context.Background()
	c, err := bench.StartCluster(ctx, bench.KindStrata, 3, p, t.TempDir(), bench.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Error(err)
		}
	})
	if len(c.Members) != 3 || !strings.HasSuffix(c.Name, ", 3 members") {
		t.Fatalf("%q: %d members", c.Name, len(c.Members))
	}
	for _, via := range []string{bench.ViaLeader, bench.ViaFollower} {
		s, _, err := c.Target(ctx, via)
		if err != nil {
			t.Fatal(err)
		}
		cli, err := clientv3.New(clientv3.Config{Endpoints: []string{s.Endpoint}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
		if err != nil {
			t.Fatal(err)
		}
		st, err := cli.Status(ctx, s.Endpoint)
		cli.Close()
		if err != nil {
			t.Fatal(err)
		}
		if isLeader := st.Leader == st.Header.MemberId; isLeader != (via == bench.ViaLeader) {
			t.Errorf("via %s: member %s, which says it is the leader: %v", via, s.Member, isLeader)
		}
	}
	if _, _, err := c.Target(ctx, "learner"); err == nil || !strings.Contains(err.Error(), `via "learner"`) {
		t.Errorf("via learner: %v", err)
	}
}
