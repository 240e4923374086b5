package cluster

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

// TestRaftStrictReconfigCheck: a member add that would leave the cluster
// without a quorum of started members is refused, as is a remove that
// would, as etcd's --strict-reconfig-check does; without the check the
// third add below commits and leaves a cluster of six that three running
// members cannot lead.
func TestRaftStrictReconfigCheck(t *testing.T) {
	// Generous deadlines, the members' own request timeout included
	// (a conf change waits at most that long): with members added but
	// not started, every commit needs all three running members, which a
	// loaded machine makes slow; the refusals themselves are immediate.
	const within = 30 * time.Second
	c := newTestCluster(t, 3, func(cfg *RaftConfig) { cfg.RequestTimeout = within })
	c.leader()
	c.waitStarted()
	add := func() (Member, error) {
		ctx, cancel := context.WithTimeout(context.Background(), within)
		defer cancel()
		return c.nodes[0].AddMember(ctx, []string{"http://" + freeAddr(t)}, false)
	}
	// 3 started of 4, then of 5: a quorum of started members remains.
	for range 2 {
		if _, err := add(); err != nil {
			t.Fatal(err)
		}
	}
	// 3 started of 6 is no quorum (4).
	if _, err := add(); !errors.Is(err, ErrNotEnoughStartedMembers) {
		t.Fatalf("third add of a member that is not started: %v, want ErrNotEnoughStartedMembers", err)
	}
	if got := len(c.nodes[0].Members()); got != 5 {
		t.Fatalf("%d members after the refused add, want 5", got)
	}
	// Removing a started member would leave 2 started of 4.
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	err := c.nodes[0].RemoveMember(ctx, c.nodes[2].Status().MemberID)
	if !errors.Is(err, ErrNotEnoughStartedMembers) {
		t.Fatalf("removing a started member: %v, want ErrNotEnoughStartedMembers", err)
	}
	// The cluster still commits with its three started members.
	if _, err := c.nodes[1].Propose(ctx, []byte("put k v")); err != nil {
		t.Fatal(err)
	}
}

// TestRaftLearner: a learner added at run time receives the log but does
// not vote (two voters down leave the cluster without a quorum although
// the learner runs); it is promoted only once it has caught up, then
// counts; a second learner, a learner that cannot be asked, and promoting
// a voter are refused. UpdateMember moves a member to another peer URL.
func TestRaftLearner(t *testing.T) {
	c := newTestCluster(t, 3, func(cfg *RaftConfig) { cfg.RequestTimeout = 2 * time.Second })
	c.leader()
	for i := range 30 {
		if _, err := c.put(i%3, fmt.Sprintf("k%d", i), "v"); err != nil {
			t.Fatal(err)
		}
	}
	c.waitStarted() // the strict reconfiguration check counts started members
	ctx := context.Background()
	url := "http://" + freeAddr(t)
	m, err := c.nodes[0].AddMember(ctx, []string{url}, true)
	if err != nil || !m.IsLearner {
		t.Fatalf("add learner: %+v, %v", m, err)
	}
	if _, err := c.nodes[1].AddMember(ctx, []string{"http://" + freeAddr(t)}, true); !errors.Is(err, ErrTooManyLearners) {
		t.Fatalf("second learner: %v, want ErrTooManyLearners", err)
	}
	if err := c.nodes[1].PromoteMember(ctx, m.ID); !errors.Is(err, ErrLearnerNotReady) {
		t.Fatalf("promoting a learner that has not started: %v, want ErrLearnerNotReady", err)
	}
	n4 := c.join("s4", url)
	c.converge()
	if got := c.sms[3].len(); got != 30 {
		t.Fatalf("learner has %d keys, want 30", got)
	}
	lead := c.leader()
	if st := c.nodes[lead].(*raftNode).raft.Status(); !hasKey(st.Config.Learners, m.ID) {
		t.Fatalf("raft configuration %v has no learner %x", st.Config, m.ID)
	}

	// The learner does not count for the quorum: with it and one voter
	// down, the other two voters still commit.
	other := (lead + 1) % 3
	c.stop(3)
	c.stop(other)
	c.leader()
	if _, err := c.put(lead, "learner-down", "v"); err != nil {
		t.Fatalf("write with the learner and one voter down: %v", err)
	}
	restartInitial(c, other)
	n4, err = StartRaft(c.config(3, true), c.sms[3])
	if err != nil {
		t.Fatal(err)
	}
	c.nodes[3] = n4
	c.leader()

	if err := c.nodes[0].PromoteMember(ctx, c.nodes[1].Status().MemberID); !errors.Is(err, ErrMemberNotLearner) {
		t.Fatalf("promoting a voter: %v, want ErrMemberNotLearner", err)
	}
	if err := c.nodes[2].PromoteMember(ctx, m.ID); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "every member lists s4 as a voter", func() bool {
		for _, n := range c.nodes {
			for _, mm := range n.Members() {
				if mm.ID == m.ID && mm.IsLearner {
					return false
				}
			}
		}
		return true
	})
	// Now s4 counts: with it and one voter down, two of four are no
	// quorum.
	c.stop(3)
	c.stop(other)
	if _, err := c.put(lead, "promoted-down", "v"); !errors.Is(err, ErrNoLeader) && !errors.Is(err, ErrTimeout) {
		t.Fatalf("write with the promoted member and one voter down: %v, want ErrNoLeader or ErrTimeout", err)
	}
	restartInitial(c, other)

	// UpdateMember: s4 (down) moves to another peer URL.
	up := c.leader()
	moved := "http://" + freeAddr(t)
	if err := c.nodes[up].UpdateMember(ctx, m.ID, []string{moved}); err != nil {
		t.Fatal(err)
	}
	if err := c.nodes[up].UpdateMember(ctx, m.ID, c.members[up].PeerURLs); !errors.Is(err, ErrPeerURLExists) {
		t.Fatalf("update to another member's peer URL: %v, want ErrPeerURLExists", err)
	}
	c.members[3].PeerURLs = []string{moved}
	n4, err = StartRaft(c.config(3, true), c.sms[3]) // its file keeps join = true
	if err != nil {
		t.Fatal(err)
	}
	c.nodes[3] = n4
	c.leader()
	if _, err := c.put(3, "moved", "v"); err != nil {
		t.Fatal(err)
	}
	for _, mm := range c.nodes[up].Members() {
		if mm.ID == m.ID && (mm.PeerURLs[0] != moved || mm.Name != "s4" || mm.IsLearner) {
			t.Fatalf("after update: %+v", mm)
		}
	}
}

// restartInitial restarts initial member i with the member list the
// cluster was created with (the first three).
func restartInitial(c *testCluster, i int) {
	c.t.Helper()
	cfg := c.config(i, false)
	cfg.Members = c.members[:3]
	n, err := StartRaft(cfg, c.sms[i])
	if err != nil {
		c.t.Fatal(err)
	}
	c.nodes[i] = n
}

func hasKey[V any](m map[uint64]V, k uint64) bool {
	_, ok := m[k]
	return ok
}
