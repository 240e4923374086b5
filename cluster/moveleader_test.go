package cluster

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestRaftMoveLeader hands the leadership to a follower, as `etcdctl
// move-leader` does: the follower leads, every member agrees, and writes
// go on through it. A member that does not lead, and a transferee that is
// not a member, are refused with etcd's errors.
func TestRaftMoveLeader(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	c.waitStarted()
	lead := c.leader()
	to := (lead + 1) % 3
	target := c.nodes[to].Status().MemberID
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.nodes[to].MoveLeader(ctx, target); !errors.Is(err, ErrNotLeader) {
		t.Errorf("MoveLeader asked of a follower: %v, want ErrNotLeader", err)
	}
	if err := c.nodes[lead].MoveLeader(ctx, 12345); !errors.Is(err, ErrBadLeaderTransferee) {
		t.Errorf("MoveLeader to a stranger: %v, want ErrBadLeaderTransferee", err)
	}
	changes := c.nodes[to].Status().LeaderChanges
	if err := c.nodes[lead].MoveLeader(ctx, target); err != nil {
		t.Fatal(err)
	}
	if got := c.nodes[to].Status().LeaderChanges; got <= changes {
		t.Errorf("leader changes seen by the new leader: %d before the move, %d after", changes, got)
	}
	if now := c.leader(); now != to {
		t.Fatalf("member %d leads after the move to member %d", now, to)
	}
	if _, err := c.put(to, "after-move", "1"); err != nil {
		t.Fatal(err)
	}
	c.converge()
}
