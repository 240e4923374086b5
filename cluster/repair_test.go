package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// gatedSM is a kvSM whose Snapshot, once armed, takes its state, reports
// that on taken and waits for release before writing it (or, with fail
// set, writes half of it and fails), so a test can act while a state is on
// its way.
type gatedSM struct {
	*kvSM
	armed   atomic.Bool
	fail    bool
	taken   chan uint64
	release chan struct{}
	// prepared counts the restores prepared, committed and discarded.
	prepared, commits, discards atomic.Int64
}

func newGatedSM(sm *kvSM) *gatedSM {
	return &gatedSM{kvSM: sm, taken: make(chan uint64, 1), release: make(chan struct{})}
}

func (g *gatedSM) Snapshot(w io.Writer) (uint64, error) {
	if !g.armed.CompareAndSwap(true, false) {
		return g.kvSM.Snapshot(w)
	}
	var buf strings.Builder
	index, err := g.kvSM.Snapshot(&buf)
	if err != nil {
		return 0, err
	}
	g.taken <- index
	<-g.release
	if g.fail {
		if _, err := io.WriteString(w, buf.String()[:buf.Len()/2]); err != nil {
			return 0, err
		}
		return 0, errors.New("gatedSM: snapshot failed half way")
	}
	_, err = io.WriteString(w, buf.String())
	return index, err
}

func (g *gatedSM) PrepareRestore(r io.Reader) (PreparedRestore, error) {
	p, err := (&preparingKVSM{kvSM: g.kvSM}).PrepareRestore(r)
	if err != nil {
		return nil, err
	}
	g.prepared.Add(1)
	return &countedRestore{PreparedRestore: p, g: g}, nil
}

type countedRestore struct {
	PreparedRestore
	g         *gatedSM
	committed bool
}

func (c *countedRestore) Commit(index uint64) error {
	c.committed = true
	c.g.commits.Add(1)
	return c.PreparedRestore.Commit(index)
}

func (c *countedRestore) Discard() {
	if !c.committed {
		c.g.discards.Add(1)
	}
	c.PreparedRestore.Discard()
}

// newGatedCluster is a testCluster of three whose members run gatedSMs.
func newGatedCluster(t *testing.T) (*testCluster, []*gatedSM) {
	c := newTestCluster(t, 3, nil)
	gs := make([]*gatedSM, 3)
	for i := range 3 {
		c.stop(i)
	}
	for i := range 3 {
		gs[i] = newGatedSM(c.sms[i])
		n, err := StartRaft(c.config(i, false), gs[i])
		if err != nil {
			t.Fatal(err)
		}
		c.nodes[i] = n
	}
	return c, gs
}

// damage changes a member's state behind the log's back, as damaged
// tables would.
func damage(sm *kvSM) {
	sm.mu.Lock()
	defer sm.mu.Unlock()
	for k := range sm.data {
		sm.data[k] = "damaged"
	}
	sm.data["only-here"] = "damaged"
}

// TestRepairFromLeader: a member whose state differs from the others'
// (damage) takes the leader's state with RepairFromLeader, without a
// membership change, and follows the log on from it: a follower, then
// the leader, which moves the leadership away first.
func TestRepairFromLeader(t *testing.T) {
	c, gs := newGatedCluster(t)
	lead := c.leader()
	for i := range 50 {
		if _, err := c.put(lead, fmt.Sprintf("k%d", i), strconv.Itoa(i)); err != nil {
			t.Fatal(err)
		}
	}
	c.converge()
	for _, victim := range []int{(lead + 1) % 3, lead} {
		members := len(c.nodes[victim].Members())
		damage(c.sms[victim])
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		r, err := c.nodes[victim].RepairFromLeader(ctx)
		cancel()
		if err != nil {
			t.Fatalf("repair of member %d: %v", victim, err)
		}
		if r.Leader == c.nodes[victim].Status().MemberID || r.Bytes == 0 {
			t.Fatalf("repair of member %d: %+v: want the state of another member", victim, r)
		}
		if got := c.sms[victim].get("only-here"); got != "" {
			t.Fatalf("member %d kept a key only its damaged state had: %q", victim, got)
		}
		if got := gs[victim].commits.Load(); got == 0 {
			t.Fatalf("member %d: the state did not go through a prepared restore", victim)
		}
		if got := len(c.nodes[victim].Members()); got != members {
			t.Fatalf("member %d has %d members after its repair, want %d", victim, got, members)
		}
		if _, err := c.put(victim, "after", strconv.Itoa(victim)); err != nil {
			t.Fatal(err)
		}
		c.converge()
		t.Logf("member %d (leader %v) repaired from %x at index %d: %d bytes in %v", victim, victim == lead, r.Leader, r.Index, r.Bytes, r.Took)
	}
}

// TestRepairReplaysCommandsAppliedMeanwhile: commands the member applies
// while the leader's state, taken before them, is on its way are applied
// again on top of it from the member's raft log; without that they would
// be lost on the member alone.
func TestRepairReplaysCommandsAppliedMeanwhile(t *testing.T) {
	c, gs := newGatedCluster(t)
	lead := c.leader()
	f := (lead + 1) % 3
	for i := range 10 {
		if _, err := c.put(lead, fmt.Sprintf("k%d", i), "1"); err != nil {
			t.Fatal(err)
		}
	}
	c.converge()
	damage(c.sms[f])
	gs[lead].armed.Store(true)
	type result struct {
		r   Repair
		err error
	}
	done := make(chan result, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		r, err := c.nodes[f].RepairFromLeader(ctx)
		done <- result{r, err}
	}()
	taken := <-gs[lead].taken
	const meanwhile = 5
	for i := range meanwhile {
		if _, err := c.put(lead, fmt.Sprintf("meanwhile%d", i), "2"); err != nil {
			t.Fatal(err)
		}
	}
	last := c.sms[lead].AppliedIndex()
	waitFor(t, "the follower applies the commands put meanwhile", func() bool { return c.sms[f].AppliedIndex() >= last })
	close(gs[lead].release)
	res := <-done
	if res.err != nil {
		t.Fatal(res.err)
	}
	if res.r.Index != taken || res.r.Replayed != meanwhile {
		t.Fatalf("repair %+v: want the state at %d and %d commands applied again", res.r, taken, meanwhile)
	}
	for i := range meanwhile {
		if got := c.sms[f].get(fmt.Sprintf("meanwhile%d", i)); got != "2" {
			t.Fatalf("after the repair the follower has meanwhile%d = %q, want 2", i, got)
		}
	}
	c.converge()
}

// TestRepairDamagedStream: a leader whose state fails half way leaves the
// member as it was: RepairFromLeader fails, the member's state is
// unchanged and nothing was prepared or committed.
func TestRepairDamagedStream(t *testing.T) {
	c, gs := newGatedCluster(t)
	lead := c.leader()
	f := (lead + 1) % 3
	if _, err := c.put(lead, "k", "v"); err != nil {
		t.Fatal(err)
	}
	c.converge()
	damage(c.sms[f])
	gs[lead].fail = true
	gs[lead].armed.Store(true)
	close(gs[lead].release)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := c.nodes[f].RepairFromLeader(ctx)
	if err == nil || !strings.Contains(err.Error(), "fetch the state of leader") {
		t.Fatalf("repair from a leader whose state failed half way: %v, want an error about the stream", err)
	}
	t.Logf("repair: %v", err)
	if got := c.sms[f].get("only-here"); got != "damaged" {
		t.Fatalf("the member's state changed after a failed repair: only-here = %q", got)
	}
	if gs[f].commits.Load() != 0 {
		t.Fatalf("a failed repair committed a restore")
	}
	// And a repair after that works.
	r, err := c.nodes[f].RepairFromLeader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.sms[f].get("k"); got != "v" {
		t.Fatalf("after repair %+v: k = %q", r, got)
	}
}

// TestRepairStateEndpoint: GET /raft/state answers members only, on the
// leader only, and names a bad applied index.
func TestRepairStateEndpoint(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	lead := c.leader()
	f := (lead + 1) % 3
	n := c.nodes[lead].(*raftNode)
	getFrom := func(i int, from uint64, applied string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, c.members[i].PeerURLs[0]+pathState+"?applied="+applied, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set(headerClusterID, strconv.FormatUint(n.clusterID, 16))
		req.Header.Set(headerFrom, strconv.FormatUint(from, 16))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return resp.StatusCode, string(b)
	}
	get := func(i int, applied string) (int, string) {
		t.Helper()
		return getFrom(i, c.nodes[f].Status().MemberID, applied)
	}
	if code, body := getFrom(lead, 0x1234, "0"); code != http.StatusNotFound || !strings.Contains(body, "1234 is not a member") {
		t.Errorf("asked by a stranger: %d %q", code, body)
	}
	if code, body := get(lead, "x1"); code != http.StatusBadRequest || !strings.Contains(body, `applied = "x1"`) {
		t.Errorf("applied=x1: %d %q", code, body)
	}
	if code, body := get(f, "0"); code != http.StatusServiceUnavailable || !strings.Contains(body, "does not lead") {
		t.Errorf("asking a follower: %d %q", code, body)
	}
	if code, _ := get(lead, "0"); code != http.StatusOK {
		t.Errorf("asking the leader: %d", code)
	}
}

// TestLocalRepairFromLeader: a single member has no peer to repair from.
func TestLocalRepairFromLeader(t *testing.T) {
	n, err := NewLocal(newKVSM(), LocalConfig{ClusterID: 1, MemberID: 1, Name: "one"})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Stop()
	if _, err := n.RepairFromLeader(context.Background()); !errors.Is(err, ErrNoPeer) {
		t.Fatalf("RepairFromLeader of a single member: %v, want %v", err, ErrNoPeer)
	}
}

// TestFetchLeaderState: a stopped member whose state does not open takes
// the leader's state from its raft log's peers (followers refuse, the
// leader answers at the member's commit index or later), restarts on it
// and follows the log; a directory without a raft log has nothing to
// repair against.
func TestFetchLeaderState(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	lead := c.leader()
	f := (lead + 1) % 3
	for i := range 20 {
		if _, err := c.put(lead, fmt.Sprintf("k%d", i), "1"); err != nil {
			t.Fatal(err)
		}
	}
	c.converge()
	c.stop(f)
	if _, err := c.put(lead, "while-down", "2"); err != nil {
		t.Fatal(err)
	}
	damage(c.sms[f])
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	fresh := map[string]string{}
	r, err := FetchLeaderState(ctx, c.config(f, false), func(rd io.Reader) error {
		return json.NewDecoder(rd).Decode(&fresh)
	})
	if err != nil {
		t.Fatal(err)
	}
	if r.Leader != c.nodes[lead].Status().MemberID || r.Index == 0 || fresh["while-down"] != "2" {
		t.Fatalf("fetched %+v with while-down = %q: want the leader's state after the put", r, fresh["while-down"])
	}
	sm := c.sms[f]
	sm.mu.Lock()
	sm.data, sm.applied = fresh, r.Index
	sm.mu.Unlock()
	c.restart(f)
	if _, err := c.put(f, "after", "3"); err != nil {
		t.Fatal(err)
	}
	c.converge()

	cfg := c.config(f, false)
	cfg.Dir = t.TempDir() + "/none"
	if _, err := FetchLeaderState(ctx, cfg, func(io.Reader) error { return nil }); err == nil || !strings.Contains(err.Error(), "no raft log") {
		t.Fatalf("FetchLeaderState without a raft log: %v", err)
	}
}
