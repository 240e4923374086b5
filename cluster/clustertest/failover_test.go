package clustertest

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// writers runs n goroutines putting distinct keys (key = value) through
// cli until stop is closed, each at most writerMaxPuts puts and for at most
// writerMaxTime, and returns the keys whose puts were acknowledged. A put
// that fails has an unknown outcome and is not counted.
type writers struct {
	mu    sync.Mutex
	acked []string
	fails atomic.Int64
	wg    sync.WaitGroup
	stop  chan struct{}
	once  sync.Once
	// done is closed once every goroutine has stopped.
	done chan struct{}
}

// The bounds of each writer goroutine.
const (
	writerMaxPuts = 20000
	writerMaxTime = 2 * time.Minute
)

func startWriters(cli *clientv3.Client, n int, prefix string) *writers {
	w := &writers{stop: make(chan struct{}), done: make(chan struct{})}
	deadline := time.Now().Add(writerMaxTime)
	for g := range n {
		w.wg.Go(func() {
			for i := 0; i < writerMaxPuts && time.Now().Before(deadline); i++ {
				select {
				case <-w.stop:
					return
				default:
				}
				k := fmt.Sprintf("%s%02d/%06d", prefix, g, i)
				ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
				_, err := cli.Put(ctx, k, k)
				cancel()
				if err != nil {
					w.fails.Add(1)
					time.Sleep(20 * time.Millisecond)
					continue
				}
				w.mu.Lock()
				w.acked = append(w.acked, k)
				w.mu.Unlock()
			}
		})
	}
	go func() {
		w.wg.Wait()
		close(w.done)
	}()
	return w
}

func (w *writers) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.acked)
}

// waitFor waits until at least n puts were acknowledged; the writers must
// not have stopped before.
func (w *writers) waitFor(t *testing.T, n int, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for w.count() < n {
		select {
		case <-w.done:
			t.Fatalf("the writers stopped at %d acknowledged puts (%d failed), want %d", w.count(), w.fails.Load(), n)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("only %d of %d writes acknowledged within %v (%d failed)", w.count(), n, within, w.fails.Load())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// finish stops the writers and returns the acknowledged puts.
func (w *writers) finish() []string {
	w.once.Do(func() { close(w.stop) })
	<-w.done
	return w.acked
}

// keysOn returns the keys under prefix that member m has, read with a
// linearizable Range (ReadIndex, then m's own store) or, with serializable,
// from m's store as it is.
func keysOn(t *testing.T, c *procCluster, m *member, prefix string, serializable bool) map[string]bool {
	t.Helper()
	cli := c.client(m)
	defer cli.Close()
	opts := []clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithKeysOnly()}
	if serializable {
		opts = append(opts, clientv3.WithSerializable())
	}
	var resp *clientv3.GetResponse
	var err error
	for range 20 { // the member may still be electing or catching up
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		resp, err = cli.Get(ctx, prefix, opts...)
		cancel()
		if err == nil {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("range %q on %s: %v", prefix, m.name, err)
	}
	got := make(map[string]bool, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		got[string(kv.Key)] = true
	}
	return got
}

// checkAcked fails unless member m has every key in acked.
func checkAcked(t *testing.T, c *procCluster, m *member, prefix string, acked []string) {
	t.Helper()
	got := keysOn(t, c, m, prefix, false)
	missing := 0
	for _, k := range acked {
		if !got[k] {
			if missing < 5 {
				t.Errorf("%s lacks acknowledged key %s", m.name, k)
			}
			missing++
		}
	}
	if missing > 0 {
		t.Fatalf("%s lacks %d of %d acknowledged writes", m.name, missing, len(acked))
	}
}

// checkSameStores fails unless every member's store hashes alike
// (HashKV, what `etcdctl endpoint hashkv --cluster` compares) at the
// revision the leader has now: each member gets there by log or by
// snapshot, and any divergence in what it applied shows.
func checkSameStores(t *testing.T, c *procCluster, ms ...*member) {
	t.Helper()
	lead := c.client(c.leader())
	defer lead.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := lead.Get(ctx, "any")
	if err != nil {
		t.Fatal(err)
	}
	rev := resp.Header.Revision
	hashes := map[string]uint32{}
	for _, m := range ms {
		cli := c.client(m)
		for {
			hk, err := cli.HashKV(ctx, cli.Endpoints()[0], rev)
			if err == nil {
				hashes[m.name] = hk.Hash
				break
			}
			if ctx.Err() != nil {
				t.Fatalf("HashKV at %d on %s: %v", rev, m.name, err)
			}
			time.Sleep(100 * time.Millisecond) // still applying up to rev
		}
		cli.Close()
	}
	for _, m := range ms[1:] {
		if hashes[m.name] != hashes[ms[0].name] {
			t.Fatalf("stores differ at revision %d: %v", rev, hashes)
		}
	}
	t.Logf("every store hashes %08x at revision %d", hashes[ms[0].name], rev)
}

// TestKillLeaderWhileWriting: clients write through every member; the
// leader is killed with SIGKILL; the others elect a leader within a few
// election timeouts and go on; every acknowledged write is on both
// survivors and, after its restart, on the old leader.
func TestKillLeaderWhileWriting(t *testing.T) {
	c := newProcCluster(t, 3, 10000)
	lead := c.leader()
	w := startWriters(c.client(c.members...), 8, "w")
	w.waitFor(t, 300, 30*time.Second)
	before := w.count()
	killed := time.Now()
	c.kill(lead)
	newLead := c.leader()
	elected := time.Since(killed)
	w.waitFor(t, before+300, 30*time.Second)
	acked := w.finish()
	t.Logf("leader %s killed after %d acknowledged writes; %s leads %v later; %d writes acknowledged, %d failed (unknown outcome)",
		lead.name, before, newLead.name, elected.Round(time.Millisecond), len(acked), w.fails.Load())
	if newLead == lead {
		t.Fatal("the killed member is still the leader")
	}
	for _, m := range c.others(lead) {
		checkAcked(t, c, m, "w", acked)
	}
	c.start(lead)
	checkAcked(t, c, lead, "w", acked)
	checkSameStores(t, c, c.members...)
}

// TestGoneLeaderReplacedAtOnce: with an election timeout of 5 s, a leader
// SIGKILLed while writes go on is replaced well within it, whether it
// stays down (its peer port refuses the followers' dials) or is started
// again at once (its stream is served by a new process). Either way the
// followers forget it and campaign in turn by ID
// (cluster/deadleader.go); waiting out the timeout, no follower could
// campaign within 5 s of the leader's last heartbeat.
func TestGoneLeaderReplacedAtOnce(t *testing.T) {
	for _, tc := range []struct {
		name    string
		restart bool
	}{{"down", false}, {"restarted", true}} {
		t.Run(tc.name, func(t *testing.T) {
			c := newPreparedCluster(t, 3, 10000, slowElection(t))
			lead := c.leader()
			w := startWriters(c.client(c.others(lead)...), 4, "w")
			w.waitFor(t, 100, 30*time.Second)
			before := w.count()
			killed := time.Now()
			c.kill(lead)
			if tc.restart {
				c.start(lead)
			}
			newLead := c.leader()
			elected := time.Since(killed)
			w.waitFor(t, before+100, 30*time.Second)
			acked := w.finish()
			t.Logf("%s elected %v after %s was killed (election timeout %d ms)", newLead.name, elected.Round(time.Millisecond), lead.name, slowElectionMS)
			if newLead == lead {
				t.Fatal("the killed member leads again")
			}
			if elected >= slowElectionMS*time.Millisecond*4/5 {
				t.Fatalf("a new leader %v after the kill: the followers waited for the election timeout (%d ms) instead of finding the leader gone", elected, slowElectionMS)
			}
			for _, m := range c.others(lead) {
				checkAcked(t, c, m, "w", acked)
			}
			for _, m := range c.others(lead) {
				for _, why := range []string{"refuses connections", "it restarted"} {
					if m.logHas(why) {
						t.Logf("%s: the leader is gone: %s", m.name, why)
					}
				}
			}
		})
	}
}

// slowElectionMS is TestGoneLeaderReplacedAtOnce's election timeout.
const slowElectionMS = 5000

// slowElection returns a prepare function for newPreparedCluster that
// sets a member's election timeout to slowElectionMS.
func slowElection(t *testing.T) func(*member) {
	return func(m *member) {
		b, err := os.ReadFile(m.cfgPath)
		if err != nil {
			t.Fatal(err)
		}
		slow := strings.Replace(string(b), "heartbeat_interval_ms = 50\nelection_timeout_ms = 500\n",
			"heartbeat_interval_ms = 100\nelection_timeout_ms = "+strconv.Itoa(slowElectionMS)+"\n", 1)
		if slow == string(b) {
			t.Fatalf("%s: no election timeout to raise in its config", m.name)
		}
		if err := os.WriteFile(m.cfgPath, []byte(slow), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestFollowerCatchesUpBySnapshot: a follower is killed, the others take
// many more writes than the log keeps (snapshot_entries 200), and the
// restarted follower catches up from a snapshot streamed by the leader.
func TestFollowerCatchesUpBySnapshot(t *testing.T) {
	c := newProcCluster(t, 3, 200)
	lead := c.leader()
	f := c.others(lead)[0]
	c.kill(f)
	w := startWriters(c.client(lead), 16, "s")
	w.waitFor(t, 1500, 60*time.Second)
	acked := w.finish()
	c.start(f)
	checkAcked(t, c, f, "s", acked)
	if !f.logHas("restored snapshot") {
		t.Fatalf("%s caught up without restoring a snapshot", f.name)
	}
	checkSameStores(t, c, c.members...)
	// And it follows by log afterwards.
	cli := c.client(f)
	if _, err := cli.Put(context.Background(), "after", "1"); err != nil {
		t.Fatal(err)
	}
	if got := keysOn(t, c, lead, "after", false); !got["after"] {
		t.Fatal("a write through the caught-up member is not on the leader")
	}
}

// TestMemberAddAndEndpointStatus: a member added at run time (MemberAdd,
// then started with join = true) receives everything written before, by
// snapshot; every member lists the same four members; etcdctl endpoint
// status shows each member's ID, the leader, the term and the index.
func TestMemberAddAndEndpointStatus(t *testing.T) {
	c := newProcCluster(t, 3, 200)
	c.leader()
	w := startWriters(c.client(c.members...), 8, "a")
	w.waitFor(t, 600, 60*time.Second)
	acked := w.finish()

	m4 := c.newMember("s4")
	cli := c.client(c.members[0])
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	added, err := cli.MemberAdd(ctx, []string{"http://" + m4.peerAddr})
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	c.members = append(c.members, m4)
	c.writeConfig(m4, true)
	c.start(m4)
	checkAcked(t, c, m4, "a", acked)
	if !m4.logHas("restored snapshot") {
		t.Errorf("s4 caught up without a snapshot (the log kept everything?)")
	}
	// Writes through the new member reach the others.
	if _, err := c.client(m4).Put(context.Background(), "from-s4", "1"); err != nil {
		t.Fatal(err)
	}
	if got := keysOn(t, c, c.members[0], "from-s4", false); !got["from-s4"] {
		t.Fatal("a write through s4 is not on s1")
	}
	// Every member lists the same members, s4 by name once it published.
	deadline := time.Now().Add(10 * time.Second)
	for {
		lists := map[string]bool{}
		for _, m := range c.members {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			resp, err := c.client(m).MemberList(ctx)
			cancel()
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, mm := range resp.Members {
				names = append(names, fmt.Sprintf("%x=%s", mm.ID, mm.Name))
			}
			lists[strings.Join(names, ",")] = true
			if len(resp.Members) != 4 {
				lists["short"] = true
			}
		}
		if len(lists) == 1 && !lists["short"] {
			for l := range lists {
				if !strings.Contains(l, fmt.Sprintf("%x=s4", added.Member.ID)) {
					t.Fatalf("member list %s lacks s4 as added (%x)", l, added.Member.ID)
				}
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("member lists disagree: %v", lists)
		}
		time.Sleep(100 * time.Millisecond)
	}

	checkEndpointStatus(t, c)

	// Removed again, s4 stops by itself and its process ends, saying why.
	ctx, cancel = context.WithTimeout(context.Background(), 10*time.Second)
	_, err = cli.MemberRemove(ctx, added.Member.ID)
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	m4.mu.Lock()
	exited := m4.exited
	m4.mu.Unlock()
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		t.Fatal("s4 still runs 10s after its removal")
	}
	if !m4.logHas("cluster member stopped: cluster: member removed from the cluster") {
		t.Fatalf("s4's log does not say it was removed:\n%s", tail(m4.logPath, 10))
	}
	c.kill(m4) // forget the process
	c.members = c.members[:3]
	if _, err := cli.Put(context.Background(), "after-remove", "1"); err != nil {
		t.Fatal(err)
	}
}

// checkEndpointStatus runs etcdctl endpoint status against every member.
func checkEndpointStatus(t *testing.T, c *procCluster) {
	if _, err := exec.LookPath("etcdctl"); err != nil {
		t.Log("etcdctl not installed: endpoint status not checked")
		return
	}
	out, err := exec.Command("etcdctl", "--endpoints="+c.endpoints(), "endpoint", "status", "-w", "json").CombinedOutput()
	if err != nil {
		t.Fatalf("etcdctl endpoint status: %v\n%s", err, out)
	}
	var st []struct {
		Endpoint string
		Status   struct {
			Header struct {
				ClusterID uint64 `json:"cluster_id"`
				MemberID  uint64 `json:"member_id"`
				RaftTerm  uint64 `json:"raft_term"`
			} `json:"header"`
			Leader    uint64 `json:"leader"`
			RaftIndex uint64 `json:"raftIndex"`
			RaftTerm  uint64 `json:"raftTerm"`
		}
	}
	if err := json.Unmarshal(out, &st); err != nil {
		t.Fatalf("etcdctl endpoint status -w json: %v\n%s", err, out)
	}
	if len(st) != len(c.members) {
		t.Fatalf("etcdctl shows %d endpoints, want %d:\n%s", len(st), len(c.members), out)
	}
	ids := map[uint64]bool{}
	for _, s := range st {
		h := s.Status.Header
		if h.MemberID == 0 || ids[h.MemberID] || h.ClusterID != st[0].Status.Header.ClusterID ||
			s.Status.Leader == 0 || s.Status.Leader != st[0].Status.Leader || s.Status.RaftTerm < 2 || s.Status.RaftIndex < 600 {
			t.Fatalf("etcdctl endpoint status of %s: %+v\n%s", s.Endpoint, s.Status, out)
		}
		ids[h.MemberID] = true
	}
	if !ids[st[0].Status.Leader] {
		t.Fatalf("the leader %x is none of the members:\n%s", st[0].Status.Leader, out)
	}
	t.Logf("etcdctl endpoint status: %d members, leader %x, term %d, index %d", len(st), st[0].Status.Leader, st[0].Status.RaftTerm, st[0].Status.RaftIndex)
}

// TestKillAllWhileWriting: every member is killed with SIGKILL at once
// under writes, then all restart: every acknowledged write is there (the
// raft log, not the members' memory, holds what was committed). The
// stores run without a WAL, so what they had not flushed is gone and the
// log replays it; a snapshot every 50 entries truncates the log often,
// which loses writes unless the store is flushed before each truncation.
func TestKillAllWhileWriting(t *testing.T) {
	c := newProcCluster(t, 3, 50)
	c.leader()
	w := startWriters(c.client(c.members...), 8, "k")
	w.waitFor(t, 500, 30*time.Second)
	var wg sync.WaitGroup
	for _, m := range c.members {
		wg.Go(func() { c.kill(m) })
	}
	wg.Wait()
	acked := w.finish()
	for _, m := range c.members {
		wg.Go(func() {
			if err := c.tryStart(m); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	c.leader()
	for _, m := range c.members {
		checkAcked(t, c, m, "k", acked)
	}
	t.Logf("%d acknowledged writes before the whole cluster was killed, all present after restart", len(acked))
}
