package cluster

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestRaftStrictReconfigCheck: a member add that would leave the cluster
// without a quorum of started members is refused, as is a remove that
// would, as etcd's --strict-reconfig-check does; without the check the
// third add below commits and leaves a cluster of six that three running
// members cannot lead.
func TestRaftStrictReconfigCheck(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	c.leader()
	waitFor(t, "every member published its name (started)", func() bool {
		n := c.nodes[0].(*raftNode)
		n.membersMu.RLock()
		defer n.membersMu.RUnlock()
		return len(n.members.Started) == 3
	})
	add := func() (Member, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return c.nodes[0].AddMember(ctx, []string{"http://" + freeAddr(t)})
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
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	err := c.nodes[0].RemoveMember(ctx, c.nodes[2].Status().MemberID)
	cancel()
	if !errors.Is(err, ErrNotEnoughStartedMembers) {
		t.Fatalf("removing a started member: %v, want ErrNotEnoughStartedMembers", err)
	}
	// The cluster still commits with its three started members.
	if _, err := c.put(1, "k", "v"); err != nil {
		t.Fatal(err)
	}
}
