package cluster

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stratadb/strata/internal/testport"
)

// kvSM is a deterministic toy state machine: "put k v" sets k and returns
// the previous value; "cas k old new" sets k to new if it is old and
// returns "ok" or "fail". Kept in memory across a member's restart (the
// durable state of a real state machine).
type kvSM struct {
	mu       sync.Mutex
	applied  uint64
	data     map[string]string
	restores int
	// sizes are the sizes of the batches committed.
	sizes []int
	// syncErr, if set, is what Sync returns (a full disk refusing a
	// flush).
	syncErr error
	// onStage, if set, sees every command staged, before it applies.
	onStage func(cmd []byte)
}

// kvBatch applies each command as it is staged and records its size.
type kvBatch struct {
	s *kvSM
	n int
}

func (s *kvSM) NewBatch() Batch { return &kvBatch{s: s} }

func (b *kvBatch) Stage(index uint64, cmd []byte) (any, error) {
	b.n++
	if b.s.onStage != nil {
		b.s.onStage(cmd)
	}
	return b.s.Apply(index, cmd)
}

func (b *kvBatch) Commit() error {
	b.s.mu.Lock()
	defer b.s.mu.Unlock()
	b.s.sizes = append(b.s.sizes, b.n)
	return nil
}

func (s *kvSM) Sync() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.syncErr
}

// largest returns the size of the largest batch, and the number of
// batches.
func (s *kvSM) largest() (size, batches int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, n := range s.sizes {
		size = max(size, n)
	}
	return size, len(s.sizes)
}

func newKVSM() *kvSM { return &kvSM{data: map[string]string{}} }

func (s *kvSM) Apply(index uint64, cmd []byte) (any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if index <= s.applied {
		return nil, fmt.Errorf("kvSM: apply %d after %d", index, s.applied)
	}
	s.applied = index
	f := strings.Fields(string(cmd))
	switch {
	case len(f) == 3 && f[0] == "put":
		prev := s.data[f[1]]
		s.data[f[1]] = f[2]
		return prev, nil
	case len(f) == 4 && f[0] == "cas":
		if s.data[f[1]] != f[2] {
			return "fail", nil
		}
		s.data[f[1]] = f[3]
		return "ok", nil
	}
	return "bad command", nil
}

func (s *kvSM) AppliedIndex() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.applied
}

func (s *kvSM) Snapshot(w io.Writer) (uint64, error) {
	s.mu.Lock()
	b, err := json.Marshal(s.data)
	index := s.applied
	s.mu.Unlock()
	if err != nil {
		return 0, err
	}
	_, err = w.Write(b)
	return index, err
}

func (s *kvSM) Restore(r io.Reader, index uint64) error {
	data := map[string]string{}
	if err := json.NewDecoder(bufio.NewReader(r)).Decode(&data); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.data, s.applied = data, index
	s.restores++
	return nil
}

func (s *kvSM) get(k string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.data[k]
}

func (s *kvSM) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.data)
}

// testLogger prints through t.Logf while the test runs.
type testLogger struct {
	mu   sync.Mutex
	t    testing.TB
	done bool
}

func (l *testLogger) Infof(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.done {
		l.t.Logf(format, args...)
	}
}

// testCluster is n in-process members on loopback ports.
type testCluster struct {
	t       testing.TB
	dir     string
	members []MemberConfig
	nodes   []Node
	sms     []*kvSM
	tune    func(*RaftConfig)
	log     *testLogger
}

func freeAddr(t testing.TB) string {
	t.Helper()
	ln, err := testport.Listen()
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

func newTestCluster(t testing.TB, size int, tune func(*RaftConfig)) *testCluster {
	return newTestClusterScheme(t, size, tune, "http")
}

// newTestClusterScheme is newTestCluster with peer URLs of scheme (https
// for peer TLS, which tune sets up).
func newTestClusterScheme(t testing.TB, size int, tune func(*RaftConfig), scheme string) *testCluster {
	c := &testCluster{t: t, dir: t.TempDir(), tune: tune, log: &testLogger{t: t, done: !testing.Verbose()}}
	t.Cleanup(func() {
		for _, n := range c.nodes {
			if n != nil {
				n.Stop()
			}
		}
		c.log.mu.Lock()
		c.log.done = true
		c.log.mu.Unlock()
	})
	for i := range size {
		c.members = append(c.members, MemberConfig{Name: fmt.Sprintf("s%d", i+1), PeerURLs: []string{scheme + "://" + freeAddr(t)}, ClientURLs: []string{fmt.Sprintf("http://127.0.0.1:%d", 12379+i)}})
	}
	c.nodes = make([]Node, size)
	c.sms = make([]*kvSM, size)
	var wg sync.WaitGroup
	errs := make([]error, size)
	for i := range size {
		c.sms[i] = newKVSM()
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.nodes[i], errs[i] = StartRaft(c.config(i, false), c.sms[i])
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	return c
}

func (c *testCluster) config(i int, join bool) RaftConfig {
	cfg := RaftConfig{
		Name:            c.members[i].Name,
		Dir:             filepath.Join(c.dir, c.members[i].Name),
		ListenPeer:      c.members[i].PeerURLs[0][strings.Index(c.members[i].PeerURLs[0], "://")+3:],
		Members:         c.members,
		Join:            join,
		TickInterval:    20 * time.Millisecond,
		ElectionTicks:   10,
		SnapshotEntries: 1000,
		CatchUpEntries:  100,
		RequestTimeout:  5 * time.Second,
		Logger:          c.log,
	}
	if c.tune != nil {
		c.tune(&cfg)
	}
	return cfg
}

func (c *testCluster) stop(i int) {
	c.t.Helper()
	if err := c.nodes[i].Stop(); err != nil {
		c.t.Fatal(err)
	}
	c.nodes[i] = nil
}

func (c *testCluster) restart(i int) {
	c.t.Helper()
	n, err := StartRaft(c.config(i, false), c.sms[i])
	if err != nil {
		c.t.Fatal(err)
	}
	c.nodes[i] = n
}

// leader waits until the running members agree on a leader and returns
// its position.
func (c *testCluster) leader() int {
	c.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		lead, agree := uint64(0), true
		for _, n := range c.nodes {
			if n == nil {
				continue
			}
			s := n.Status()
			if lead == 0 {
				lead = s.Leader
			}
			if s.Leader == 0 || s.Leader != lead {
				agree = false
			}
		}
		if agree && lead != 0 {
			for i, n := range c.nodes {
				if n != nil && n.Status().MemberID == lead {
					return i
				}
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	c.t.Fatal("no leader agreed within 10s")
	return -1
}

func (c *testCluster) put(i int, k, v string) (any, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return c.nodes[i].Propose(ctx, []byte("put "+k+" "+v))
}

// converge waits until every running member has applied the same index
// and holds the same data.
func (c *testCluster) converge() {
	c.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		want := uint64(0)
		same := true
		for _, n := range c.nodes {
			if n == nil {
				continue
			}
			if want == 0 {
				want = n.Status().CommitIndex
			}
			if n.Status().AppliedIndex < want {
				same = false
			}
		}
		if same {
			var first map[string]string
			for i, n := range c.nodes {
				if n == nil {
					continue
				}
				c.sms[i].mu.Lock()
				d := make(map[string]string, len(c.sms[i].data))
				for k, v := range c.sms[i].data {
					d[k] = v
				}
				c.sms[i].mu.Unlock()
				if first == nil {
					first = d
				} else if !equalMaps(first, d) {
					same = false
				}
			}
			if same {
				return
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	for i, n := range c.nodes {
		if n != nil {
			c.t.Logf("member %d: %+v, sm applied %d, %d keys", i, n.Status(), c.sms[i].AppliedIndex(), c.sms[i].len())
		}
	}
	c.t.Fatal("members did not converge within 15s")
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if bv, ok := b[k]; !ok || bv != v {
			return false
		}
	}
	return true
}

// TestRaftReplication: writes proposed on any member (followers forward to
// the leader) return their own result, every member applies the same
// commands in the same order, and a ReadBarrier on a follower sees a write
// acknowledged by another member.
func TestRaftReplication(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	lead := c.leader()
	for i := range 60 {
		m := i % 3
		prev, err := c.put(m, fmt.Sprintf("k%d", i%7), fmt.Sprintf("v%d", i))
		if err != nil {
			t.Fatalf("put %d on member %d: %v", i, m, err)
		}
		want := ""
		if i >= 7 {
			want = fmt.Sprintf("v%d", i-7)
		}
		if prev != want {
			t.Fatalf("put %d on member %d returned previous value %q, want %q", i, m, prev, want)
		}
		// Linearizable read on another member right after the ack.
		r := (m + 1) % 3
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err = c.nodes[r].ReadBarrier(ctx)
		cancel()
		if err != nil {
			t.Fatalf("read barrier on member %d: %v", r, err)
		}
		if got := c.sms[r].get(fmt.Sprintf("k%d", i%7)); got != fmt.Sprintf("v%d", i) {
			t.Fatalf("after ReadBarrier member %d reads %q, want v%d", r, got, i)
		}
	}
	c.converge()
	st := c.nodes[lead].Status()
	if !st.IsLeader || st.Term == 0 || st.ClusterID == 0 || st.CommitIndex < 60 {
		t.Fatalf("leader status %+v", st)
	}
	for i, n := range c.nodes {
		// By ID, as etcd's member list.
		ms := n.Members()
		sorted := slices.IsSortedFunc(ms, func(a, b Member) int { return cmp.Compare(a.ID, b.ID) })
		names := map[string]bool{}
		for _, m := range ms {
			names[m.Name] = len(m.ClientURLs) == 1
		}
		if len(ms) != 3 || !sorted || !names["s1"] || !names["s2"] || !names["s3"] {
			t.Fatalf("member %d lists %+v", i, ms)
		}
	}
}

// TestRaftLeaderLoss: the leader stops, the others elect a new one and
// keep accepting writes; the old leader restarts and catches up.
func TestRaftLeaderLoss(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	lead := c.leader()
	for i := range 20 {
		if _, err := c.put(i%3, fmt.Sprintf("a%d", i), "x"); err != nil {
			t.Fatal(err)
		}
	}
	oldTerm := c.nodes[lead].Status().Term
	start := time.Now()
	c.stop(lead)
	newLead := c.leader()
	t.Logf("new leader after %v", time.Since(start))
	if newLead == lead || c.nodes[newLead].Status().Term <= oldTerm {
		t.Fatalf("leader %d term %d after losing leader %d term %d", newLead, c.nodes[newLead].Status().Term, lead, oldTerm)
	}
	for i := range 20 {
		m := (lead + 1 + i%2) % 3
		if _, err := c.put(m, fmt.Sprintf("b%d", i), "y"); err != nil {
			t.Fatal(err)
		}
	}
	c.restart(lead)
	c.converge()
	if got := c.sms[lead].len(); got != 40 {
		t.Fatalf("old leader has %d keys after restart, want 40", got)
	}
}

// TestRaftSnapshotCatchUp: a follower that was down while the log was
// truncated past its position catches up from a snapshot streamed by the
// leader, then by log: spooled to a file and restored from it, or, for a
// state machine that prepares restores, written into it as it arrives and
// committed once raft took the snapshot.
func TestRaftSnapshotCatchUp(t *testing.T) {
	t.Run("spooled", func(t *testing.T) { testRaftSnapshotCatchUp(t, false) })
	t.Run("prepared", func(t *testing.T) { testRaftSnapshotCatchUp(t, true) })
}

// preparingKVSM is a kvSM that prepares its restores.
type preparingKVSM struct {
	*kvSM
	commits atomic.Int64
}

func (p *preparingKVSM) PrepareRestore(r io.Reader) (PreparedRestore, error) {
	data := map[string]string{}
	if err := json.NewDecoder(bufio.NewReader(r)).Decode(&data); err != nil {
		return nil, err
	}
	return &preparedKV{p: p, data: data}, nil
}

type preparedKV struct {
	p    *preparingKVSM
	data map[string]string
}

func (k *preparedKV) Commit(index uint64) error {
	s := k.p.kvSM
	s.mu.Lock()
	defer s.mu.Unlock()
	s.data, s.applied = k.data, index
	s.restores++
	k.p.commits.Add(1)
	return nil
}

func (k *preparedKV) Discard() {}

func testRaftSnapshotCatchUp(t *testing.T, prepared bool) {
	c := newTestCluster(t, 3, func(cfg *RaftConfig) {
		cfg.SnapshotEntries = 40
		cfg.CatchUpEntries = 10
	})
	lead := c.leader()
	f := (lead + 1) % 3
	for i := range 10 {
		if _, err := c.put(lead, fmt.Sprintf("k%d", i), "1"); err != nil {
			t.Fatal(err)
		}
	}
	c.converge()
	c.stop(f)
	for i := range 300 {
		if _, err := c.put(lead, fmt.Sprintf("k%d", i), "2"); err != nil {
			t.Fatal(err)
		}
	}
	var logs snapshotLogs
	c.tune = func(cfg *RaftConfig) {
		cfg.SnapshotEntries, cfg.CatchUpEntries = 40, 10
		cfg.Logger = &logs
	}
	var prep *preparingKVSM
	if prepared {
		prep = &preparingKVSM{kvSM: c.sms[f]}
		n, err := StartRaft(c.config(f, false), prep)
		if err != nil {
			t.Fatal(err)
		}
		c.nodes[f] = n
	} else {
		c.restart(f)
	}
	c.converge()
	if c.sms[f].restores == 0 {
		t.Fatalf("the restarted follower caught up without a snapshot")
	}
	if prepared && prep.commits.Load() == 0 {
		t.Fatalf("the follower's state machine prepares restores, but none was committed")
	}
	if !logs.sizeLogged() {
		t.Errorf("the follower's log does not say how many bytes of snapshot it received")
	}
	if got := c.sms[f].get("k299"); got != "2" {
		t.Fatalf("follower has k299 = %q", got)
	}
	// And it keeps following by log afterwards.
	if _, err := c.put(f, "after", "3"); err != nil {
		t.Fatal(err)
	}
	c.converge()
}

// snapshotLogs keeps whether a member logged a snapshot received with its
// size.
type snapshotLogs struct {
	mu   sync.Mutex
	seen bool
}

func (l *snapshotLogs) Infof(format string, args ...any) {
	line := fmt.Sprintf(format, args...)
	if m := regexp.MustCompile(`: received snapshot at index \d+ \(data at \d+, (\d+) bytes\)`).FindStringSubmatch(line); m != nil && m[1] != "0" {
		l.mu.Lock()
		l.seen = true
		l.mu.Unlock()
	}
}

func (l *snapshotLogs) sizeLogged() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.seen
}

// TestRaftAddRemoveMember: a member added at run time joins with an empty
// directory, receives everything, publishes its name, and every member's
// list agrees; a removed member stops and the others go on.
func TestRaftAddRemoveMember(t *testing.T) {
	c := newTestCluster(t, 3, func(cfg *RaftConfig) {
		cfg.SnapshotEntries = 50
		cfg.CatchUpEntries = 10
	})
	c.leader()
	for i := range 120 {
		if _, err := c.put(i%3, fmt.Sprintf("k%d", i), "v"); err != nil {
			t.Fatal(err)
		}
	}
	c.waitStarted() // the strict reconfiguration check counts started members
	url := "http://" + freeAddr(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	m, err := c.nodes[1].AddMember(ctx, []string{url}, false)
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel = context.WithTimeout(context.Background(), 5*time.Second)
	_, err = c.nodes[0].AddMember(ctx, []string{url}, false)
	cancel()
	if !errors.Is(err, ErrPeerURLExists) {
		t.Fatalf("adding the same peer URL again: %v, want ErrPeerURLExists", err)
	}
	n4 := c.join("s4", url)
	if n4.Status().MemberID != m.ID {
		t.Fatalf("joined as %x, added as %x", n4.Status().MemberID, m.ID)
	}
	// A joining member proposes through the leader once it has heard from
	// it and caught up by snapshot: a proposal whose entry the leader's
	// snapshot already covers is never applied one by one on s4, so its
	// proposer would wait in vain (as in etcd, whose leader also sends its
	// applied state). Under load that can take longer than one request
	// timeout.
	want := c.nodes[0].Status().CommitIndex
	waitFor(t, "s4 knows the leader and has caught up", func() bool {
		st := n4.Status()
		return st.Leader != 0 && st.AppliedIndex >= want
	})
	if _, err := c.put(3, "from-s4", "v"); err != nil {
		t.Fatal(err)
	}
	c.converge()
	if c.sms[3].len() != 121 {
		t.Fatalf("new member has %d keys", c.sms[3].len())
	}
	waitFor(t, "every member lists s4 by name", func() bool {
		for _, n := range c.nodes {
			ms := n.Members()
			i := slices.IndexFunc(ms, func(x Member) bool { return x.ID == m.ID })
			if len(ms) != 4 || i < 0 || ms[i].Name != "s4" {
				return false
			}
		}
		return true
	})

	// Remove s2: it stops by itself; the other three keep a quorum.
	id2 := c.nodes[1].Status().MemberID
	ctx, cancel = context.WithTimeout(context.Background(), 5*time.Second)
	err = c.nodes[0].RemoveMember(ctx, id2)
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	st := c.nodes[1].(Stopper)
	select {
	case <-st.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("removed member did not stop")
	}
	if !errors.Is(st.Err(), ErrRemoved) {
		t.Fatalf("removed member stopped with %v", st.Err())
	}
	c.nodes[1] = nil
	ctx, cancel = context.WithTimeout(context.Background(), 5*time.Second)
	err = c.nodes[0].RemoveMember(ctx, id2)
	cancel()
	if !errors.Is(err, ErrMemberNotFound) {
		t.Fatalf("removing again: %v, want ErrMemberNotFound", err)
	}
	c.leader() // proposals forwarded to the removed leader would be lost
	if _, err := c.put(2, "after-remove", "v"); err != nil {
		c.dump()
		t.Fatal(err)
	}
	c.converge()
	for _, i := range []int{0, 2, 3} {
		if ms := c.nodes[i].Members(); len(ms) != 3 {
			t.Fatalf("member %d lists %d members", i, len(ms))
		}
	}
	// The removed member may not come back with its old directory; it is
	// told to wipe its data too, not only its raft log.
	cfg := c.config(1, false)
	cfg.DataDir = filepath.Join(c.dir, "s2-data")
	_, err = StartRaft(cfg, c.sms[1])
	if !errors.Is(err, ErrRemoved) {
		t.Fatalf("restarting a removed member: %v, want ErrRemoved", err)
	}
	if want := "wipe both " + cfg.Dir + " (raft) and " + cfg.DataDir + " (db_path)"; !strings.Contains(err.Error(), want) {
		t.Errorf("restarting a removed member: %q, want it to say %q", err, want)
	}
}

// TestRaftNoQuorum: a member without a quorum refuses writes and
// linearizable reads with ErrNoLeader or ErrTimeout, never a success.
func TestRaftNoQuorum(t *testing.T) {
	c := newTestCluster(t, 3, func(cfg *RaftConfig) { cfg.RequestTimeout = 2 * time.Second })
	lead := c.leader()
	if _, err := c.put(lead, "k", "v"); err != nil {
		t.Fatal(err)
	}
	c.stop((lead + 1) % 3)
	c.stop((lead + 2) % 3)
	for i := range 3 {
		_, err := c.put(lead, "k", fmt.Sprintf("lost%d", i))
		if !errors.Is(err, ErrNoLeader) && !errors.Is(err, ErrTimeout) {
			t.Fatalf("write on a minority: %v, want ErrNoLeader or ErrTimeout", err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		err = c.nodes[lead].ReadBarrier(ctx)
		cancel()
		if !errors.Is(err, ErrNoLeader) && !errors.Is(err, ErrTimeout) {
			t.Fatalf("read barrier on a minority: %v, want ErrNoLeader or ErrTimeout", err)
		}
	}
	if got := c.nodes[lead].Status().Leader; got != 0 {
		t.Fatalf("the minority member still names leader %x (CheckQuorum should step it down)", got)
	}
}

// TestRaftRefusesOtherCluster: a member whose config describes another
// cluster than the one its raft log recorded, or than its running peers,
// refuses to start and says why.
func TestRaftRefusesOtherCluster(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	c.leader()
	if _, err := c.put(0, "k", "v"); err != nil {
		t.Fatal(err)
	}
	// s3 must have published its name (be known as started) before it
	// stops, or a fresh directory for it is not a lost one.
	c.waitStarted()
	c.stop(2)
	// Restart s3 with a member list that has another s2.
	cfg := c.config(2, false)
	cfg.Members = append([]MemberConfig(nil), cfg.Members...)
	cfg.Members[1] = MemberConfig{Name: "s2", PeerURLs: []string{"http://" + freeAddr(t)}}
	_, err := StartRaft(cfg, c.sms[2])
	if err == nil || !strings.Contains(err.Error(), "members disagree with the cluster recorded") {
		t.Fatalf("restart with other members: %v", err)
	}
	// A fresh member whose config has another token: the running peers
	// belong to another cluster.
	cfg = c.config(2, false)
	cfg.Dir = t.TempDir()
	cfg.Token = "other"
	_, err = StartRaft(cfg, newKVSM())
	if err == nil || !strings.Contains(err.Error(), "belongs to cluster") {
		t.Fatalf("fresh member of another cluster: %v", err)
	}
	// A fresh directory for a member the cluster knows as started.
	cfg = c.config(2, false)
	cfg.Dir = t.TempDir()
	_, err = StartRaft(cfg, newKVSM())
	if err == nil || !strings.Contains(err.Error(), "lost its data") {
		t.Fatalf("fresh directory for a started member: %v", err)
	}
	// The right config still starts.
	c.restart(2)
	c.converge()
}

// join starts a member added at run time (name at peer URL url) with
// join = true and adds it to the cluster's members.
func (c *testCluster) join(name, url string) Node {
	c.t.Helper()
	c.members = append(c.members, MemberConfig{Name: name, PeerURLs: []string{url}, ClientURLs: []string{"http://127.0.0.1:12382"}})
	c.sms = append(c.sms, newKVSM())
	i := len(c.members) - 1
	n, err := StartRaft(c.config(i, true), c.sms[i])
	if err != nil {
		c.t.Fatal(err)
	}
	c.nodes = append(c.nodes, n)
	return n
}

// waitStarted waits until every running member knows every running
// member as started (it has published its name through the log).
func (c *testCluster) waitStarted() {
	c.t.Helper()
	waitFor(c.t, "every running member known as started", func() bool {
		var ids []uint64
		for _, n := range c.nodes {
			if n != nil {
				ids = append(ids, n.Status().MemberID)
			}
		}
		for _, n := range c.nodes {
			if n == nil {
				continue
			}
			rn := n.(*raftNode)
			rn.membersMu.RLock()
			started := rn.members.Started
			all := true
			for _, id := range ids {
				all = all && started[id]
			}
			rn.membersMu.RUnlock()
			if !all {
				return false
			}
		}
		return true
	})
}

// dump logs every running member's raft status.
func (c *testCluster) dump() {
	for i, n := range c.nodes {
		if n != nil {
			st := n.(*raftNode).raft.Status()
			c.t.Logf("member %d: %+v applied %d; %s", i, n.Status(), n.(*raftNode).applied.Load(), st.String())
		}
	}
}

func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestLargeCommandsCompressed: a command from compressFrom bytes on is
// compressed in its entry (it crosses the peer connections and the raft
// logs at a third of its size for Kubernetes-like JSON), and every
// member's state machine gets it back whole, through a restart too (the
// entries are then read back from the raft log's files). A small one is
// left as it is.
func TestLargeCommandsCompressed(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	lead := c.leader()
	big := strings.Repeat(`{"kind":"Pod","metadata":{"name":"web-0","labels":{"app":"web"}}},`, 300)
	if _, err := c.put((lead+1)%3, "big", big); err != nil {
		t.Fatal(err)
	}
	if _, err := c.put(lead, "small", "v"); err != nil {
		t.Fatal(err)
	}
	c.converge()
	for i := range c.nodes {
		if got := c.sms[i].get("big"); got != big {
			t.Fatalf("member %d holds %d bytes for the big command's value, want %d", i, len(got), len(big))
		}
	}
	w := c.nodes[lead].(*raftNode).log.wal
	first, _ := w.FirstIndex()
	last, _ := w.LastIndex()
	ents, err := w.Entries(first, last+1, math.MaxUint64)
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[byte]int{}
	for _, e := range ents {
		if d := e.GetData(); isCommand(d) {
			kinds[d[0]]++
			if d[0] == kindCommandS2 && len(d) > len(big)/4 {
				t.Fatalf("the compressed entry is %d bytes for a command of %d", len(d), len(big))
			}
		}
	}
	if kinds[kindCommandS2] != 1 || kinds[kindCommand] != 1 {
		t.Fatalf("command entries by kind: %v, want one compressed and one plain", kinds)
	}
	c.stop(lead)
	c.sms[lead] = newKVSM()
	c.restart(lead)
	c.converge()
	if got := c.sms[lead].get("big"); got != big {
		t.Fatalf("after a restart, the member holds %d bytes for the big value, want %d", len(got), len(big))
	}
}

// TestProposerAppliesItsOwnCommand: the member that proposed a command
// hands its state machine the very slice its caller proposed, neither
// decompressed nor copied (the server then finds the request it already
// decoded); the other members apply what the entry decodes to.
func TestProposerAppliesItsOwnCommand(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	lead := c.leader()
	var mu sync.Mutex
	staged := map[int][]byte{}
	for i, sm := range c.sms {
		sm.onStage = func(cmd []byte) {
			if strings.HasPrefix(string(cmd), "put own-") {
				mu.Lock()
				staged[i] = cmd
				mu.Unlock()
			}
		}
	}
	for n, value := range []string{strings.Repeat("x", 4096), "small"} { // compressed, plain
		for _, proposer := range []int{lead, (lead + 1) % 3} {
			cmd := []byte(fmt.Sprintf("put own-%d-%d %s", n, proposer, value))
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_, err := c.nodes[proposer].Propose(ctx, cmd)
			cancel()
			if err != nil {
				t.Fatal(err)
			}
			c.converge()
			mu.Lock()
			for i := range c.nodes {
				got := staged[i]
				if string(got) != string(cmd) {
					t.Fatalf("member %d staged %.20q, want %.20q", i, got, cmd)
				}
				if same := &got[0] == &cmd[0]; same != (i == proposer) {
					t.Errorf("%d-byte command proposed by member %d: member %d staged the proposer's own slice: %v", len(cmd), proposer, i, same)
				}
			}
			mu.Unlock()
		}
	}
}

// TestWaitCommandMatchesData: a waiting proposal's command is handed to
// the apply only for the very entry data proposed under its ID, so that
// an entry from an earlier life of the member under the same ID is never
// applied as another command.
func TestWaitCommandMatchesData(t *testing.T) {
	w := newWaitRegistry()
	cmd := []byte("put k v")
	w.registerCommand(7, []byte("entry"), cmd)
	if got := w.command(7, []byte("entry")); &got[0] != &cmd[0] {
		t.Fatalf("command(7, the data proposed) = %q, want the proposer's slice", got)
	}
	if got := w.command(7, []byte("other")); got != nil {
		t.Fatalf("command(7, other data) = %q, want nil", got)
	}
	if got := w.command(8, []byte("entry")); got != nil {
		t.Fatalf("command(an ID nobody waits on) = %q, want nil", got)
	}
	w.trigger(7, applyResult{})
	if got := w.command(7, []byte("entry")); got != nil {
		t.Fatalf("command after trigger = %q, want nil", got)
	}
}

// TestRaftLoggerDropsUnstableMissing: raft's routine "missing from
// unstable log" line under AsyncStorageWrites is not logged; its other
// info lines are.
func TestRaftLoggerDropsUnstableMissing(t *testing.T) {
	var got []string
	n := &raftNode{cfg: RaftConfig{Name: "s1"}, logger: loggerFunc(func(format string, args ...any) { got = append(got, fmt.Sprintf(format, args...)) })}
	l := raftLogger{n}
	l.Infof("entry at index %d missing from unstable log; ignoring", 7)
	l.Infof("%x became leader at term %d", 1, 2)
	if len(got) != 1 || !strings.Contains(got[0], "became leader") {
		t.Fatalf("logged %q, want only the leader line", got)
	}
}

type loggerFunc func(format string, args ...any)

func (f loggerFunc) Infof(format string, args ...any) { f(format, args...) }
