package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Cluster is the servers of one kind that a QPS pass measures as one: a
// server alone, or the members of a replicated cluster (Strata's raft
// cluster, or etcd's), whose CPU times are summed: a replicated write
// costs CPU on every member, not only on the one that answers.
type Cluster struct {
	// Kind is which server the members are.
	Kind Kind
	// Name is the server and its version, with the number of members
	// when there is more than one: "etcd 3.7.3, 3 members".
	Name string
	// Members are the servers, in the order of their names (s1, s2, ...).
	Members []*Server

	// addrs are the members' names and addresses, in the order of
	// Members; so, the options they were started with.
	addrs []memberAddrs
	so    StartOptions
}

// Via names the member of a cluster a row's requests go to.
const (
	// ViaLeader sends them to the member every member names leader.
	ViaLeader = "leader"
	// ViaFollower sends them to the first member, by name, that is not
	// the leader: writes are forwarded to the leader, linearizable reads
	// ask it for its commit index, serializable reads are answered from
	// the follower's own store.
	ViaFollower = "follower"
)

// leaderTimeout bounds how long Leader waits for the members to agree.
const leaderTimeout = 20 * time.Second

// StartCluster starts n servers of kind (n = 1: a server alone, as
// StartServer starts it; n > 1: members s1..sN of a new cluster, every
// one pinned as so.Pin says) on free loopback ports, each with a data
// directory of its own under parent, and returns once every member
// answers /health, which on a cluster member means it knows a leader.
func StartCluster(ctx context.Context, kind Kind, n int, p Programs, parent string, so StartOptions) (*Cluster, error) {
	if n < 1 {
		return nil, fmt.Errorf("%w: members %d: must be >= 1", ErrOptions, n)
	}
	if n == 1 {
		s, err := StartServer(ctx, kind, p, parent, so)
		if err != nil {
			return nil, err
		}
		return &Cluster{Kind: kind, Name: s.Name, Members: []*Server{s}}, nil
	}
	ports, err := freePorts(2 * n)
	if err != nil {
		return nil, err
	}
	members := make([]memberAddrs, n)
	for i := range members {
		members[i] = memberAddrs{
			name:   fmt.Sprintf("s%d", i+1),
			client: fmt.Sprintf("127.0.0.1:%d", ports[2*i]),
			peer:   fmt.Sprintf("127.0.0.1:%d", ports[2*i+1]),
		}
	}
	// A member is healthy once it knows a leader, which needs a majority
	// running: the members start together.
	c := &Cluster{Kind: kind, Members: make([]*Server, n), addrs: members, so: so}
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range members {
		mo := so
		mo.members, mo.self = members, i
		wg.Go(func() { c.Members[i], errs[i] = StartServer(ctx, kind, p, parent, mo) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		c.stopStarted()
		return nil, err
	}
	c.Name = fmt.Sprintf("%s, %d members", c.Members[0].Name, n)
	return c, nil
}

// stopStarted stops the members that did start, after another did not.
func (c *Cluster) stopStarted() {
	for _, s := range c.Members {
		if s != nil {
			_ = s.Stop()
		}
	}
}

// Stop stops every member (Server.Stop), reporting every error.
func (c *Cluster) Stop() error {
	var errs []error
	for _, s := range c.Members {
		errs = append(errs, s.Stop())
	}
	return errors.Join(errs...)
}

// MemberCPU is the CPU time in seconds each member has used so far, in
// the order of Members.
func (c *Cluster) MemberCPU() ([]float64, error) {
	out := make([]float64, len(c.Members))
	for i, s := range c.Members {
		cpu, err := s.CPU()
		if err != nil {
			return nil, fmt.Errorf("bench: CPU time of %s %s: %w", c.Kind, s.Member, err)
		}
		out[i] = cpu
	}
	return out, nil
}

// Leader returns the index in Members of the member every member names
// leader, waiting up to 20 s for them to agree (during an election they
// do not); a server alone is its own leader.
func (c *Cluster) Leader(ctx context.Context) (int, error) {
	if len(c.Members) == 1 {
		return 0, nil
	}
	ctx, cancel := context.WithTimeout(ctx, leaderTimeout)
	defer cancel()
	var last error
	for {
		i, err := c.agreedLeader(ctx)
		if err == nil {
			return i, nil
		}
		last = err
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("bench: the members of %s named no common leader within %s (last: %w)", c.Name, leaderTimeout, last)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// agreedLeader asks every member for its status once.
func (c *Cluster) agreedLeader(ctx context.Context) (int, error) {
	var leader uint64
	ids := map[uint64]int{}
	for i, s := range c.Members {
		cli, err := clientv3.New(clientv3.Config{Endpoints: []string{s.Endpoint}, DialTimeout: time.Second, Logger: nopLogger})
		if err != nil {
			return 0, err
		}
		sctx, cancel := context.WithTimeout(ctx, time.Second)
		st, err := cli.Status(sctx, s.Endpoint)
		cancel()
		cli.Close()
		switch {
		case err != nil:
			return 0, fmt.Errorf("status of %s: %w", s.Member, err)
		case st.Leader == 0:
			return 0, fmt.Errorf("%s knows no leader", s.Member)
		case leader != 0 && st.Leader != leader:
			return 0, fmt.Errorf("%s names leader %x, another member %x", s.Member, st.Leader, leader)
		}
		leader = st.Leader
		ids[st.Header.MemberId] = i
	}
	i, ok := ids[leader]
	if !ok {
		return 0, fmt.Errorf("the leader %x is none of the members", leader)
	}
	return i, nil
}

// Target returns the member a row's requests go to (via ViaLeader or
// ViaFollower; "" is the server alone or the leader) and the index of the
// leader when it was chosen.
func (c *Cluster) Target(ctx context.Context, via string) (s *Server, leader int, err error) {
	leader, err = c.Leader(ctx)
	if err != nil {
		return nil, 0, err
	}
	switch via {
	case "", ViaLeader:
		return c.Members[leader], leader, nil
	case ViaFollower:
		for i, s := range c.Members {
			if i != leader {
				return s, leader, nil
			}
		}
		return nil, 0, fmt.Errorf("%w: via follower: %s has no follower", ErrOptions, c.Name)
	}
	return nil, 0, fmt.Errorf("%w: via %q: allowed are leader and follower", ErrOptions, via)
}

// AddMember adds a member to the running cluster as an operator does:
// MemberAdd (etcdctl member add) through the leader, then the new
// member's process, started with every member listed and joining (Strata's
// join = true, etcd's --initial-cluster-state existing), on the CPUs and
// with the settings of the others. It returns once the process is started,
// without waiting for it to serve: the caller times its catch-up from
// Server.Started and, once it serves, reads its name with its first
// /health (Server.waitReady). The new member is the last of Members and
// stops with the cluster.
func (c *Cluster) AddMember(ctx context.Context, p Programs, parent string) (*Server, error) {
	if len(c.addrs) == 0 {
		return nil, fmt.Errorf("%w: %s is a server alone: members are added to clusters", ErrOptions, c.Name)
	}
	leader, err := c.Leader(ctx)
	if err != nil {
		return nil, err
	}
	ports, err := freePorts(2)
	if err != nil {
		return nil, err
	}
	me := memberAddrs{
		name:   fmt.Sprintf("s%d", len(c.addrs)+1),
		client: fmt.Sprintf("127.0.0.1:%d", ports[0]),
		peer:   fmt.Sprintf("127.0.0.1:%d", ports[1]),
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{c.Members[leader].Endpoint}, DialTimeout: 5 * time.Second, Logger: nopLogger})
	if err != nil {
		return nil, err
	}
	defer cli.Close()
	if err := memberAdd(ctx, cli, "http://"+me.peer); err != nil {
		return nil, fmt.Errorf("bench: adding member %s (peer http://%s) to %s: %w", me.name, me.peer, c.Name, err)
	}
	so := c.so
	so.members, so.self, so.join = append(slices.Clone(c.addrs), me), len(c.addrs), true
	s, err := launchServer(c.Kind, p, parent, so)
	if err != nil {
		return nil, err
	}
	c.Members, c.addrs = append(c.Members, s), so.members
	return s, nil
}

// memberAdd adds a voting member with peerURL, retrying for up to 20 s
// while the leader refuses as etcd's does in a cluster that has not been
// healthy for 5 s ("unhealthy cluster": a member it has not been connected
// to all along), as an operator would retry.
func memberAdd(ctx context.Context, cli *clientv3.Client, peerURL string) error {
	ctx, cancel := context.WithTimeout(ctx, leaderTimeout)
	defer cancel()
	for {
		_, err := cli.MemberAdd(ctx, []string{peerURL})
		if !errors.Is(err, rpctypes.ErrUnhealthy) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Endpoints are the members' client addresses, in the order of Members.
func (c *Cluster) Endpoints() []string {
	out := make([]string, len(c.Members))
	for i, s := range c.Members {
		out[i] = s.Endpoint
	}
	return out
}

// CPU is the CPU time in seconds the members have used so far, summed.
func (c *Cluster) CPU() (float64, error) {
	cpus, err := c.MemberCPU()
	var sum float64
	for _, x := range cpus {
		sum += x
	}
	return sum, err
}

// diskBytes is the bytes under the members' data directories, summed.
func (c *Cluster) diskBytes() int64 {
	var n int64
	for _, s := range c.Members {
		n += dirBytes(s.dir)
	}
	return n
}

// rssBytes is the members' resident sets, summed; a member whose process
// is gone (killed, not yet restarted) counts 0.
func (c *Cluster) rssBytes() int64 {
	var n int64
	for _, s := range c.Members {
		if rss, _, err := s.RSS(); err == nil {
			n += rss
		}
	}
	return n
}

// leaderChangesMetric is the counter of leader changes a member has seen,
// under etcd's name, which Strata exports too.
const leaderChangesMetric = "etcd_server_leader_changes_seen_total"

// LeaderChanges reads each member's leaderChangesMetric off its /metrics,
// in the order of Members. A member counts the first leader it sees as a
// change, and counts from 0 again when restarted.
func (c *Cluster) LeaderChanges(ctx context.Context) ([]int, error) {
	client := &http.Client{Timeout: 5 * time.Second}
	out := make([]int, len(c.Members))
	for i, s := range c.Members {
		n, err := metricValue(ctx, client, s.URL+"/metrics", leaderChangesMetric)
		if err != nil {
			return nil, fmt.Errorf("bench: leader changes of %s %s: %w", c.Kind, s.Member, err)
		}
		out[i] = int(n)
	}
	return out, nil
}

// metricValue reads the value of the unlabelled metric name in the
// Prometheus text at url.
func metricValue(ctx context.Context, client *http.Client, url, name string) (float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			return strconv.ParseFloat(strings.TrimSpace(v), 64)
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("GET %s: no metric %s", url, name)
}

// leaderChangesOver is the leader changes between two readings of
// LeaderChanges: the most any member saw, each member seeing every change
// it was up for (a member restarted in between counts what it saw since).
func leaderChangesOver(before, after []int) int {
	most := 0
	for i := range after {
		d := after[i]
		if i < len(before) && after[i] >= before[i] {
			d = after[i] - before[i]
		}
		most = max(most, d)
	}
	return most
}

// KillLeader ends the member every member names leader with SIGKILL, as a
// crash would, and starts it again at once on its data, as a supervisor
// would, returning once it answers /health (which needs it to know a
// leader again). It returns the member's index in Members.
func (c *Cluster) KillLeader(ctx context.Context) (int, error) {
	i, err := c.Leader(ctx)
	if err != nil {
		return 0, err
	}
	s := c.Members[i]
	s.kill()
	if err := s.relaunch(); err != nil {
		return i, err
	}
	return i, s.waitReady(ctx)
}
