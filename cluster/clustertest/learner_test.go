package clustertest

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
)

// TestMemberLearnerPromoteUpdate drives learners and member updates through
// etcd's v3 Cluster API, as etcdctl member add --learner, member promote
// and member update do: a learner process joins and gets everything, is
// promoted once it has caught up (refused before, with etcd's error), and
// after a member update restarts on its new peer URL and keeps
// replicating.
func TestMemberLearnerPromoteUpdate(t *testing.T) {
	c := newProcCluster(t, 3, 10000)
	c.leader()
	cli := c.client(c.members[0])
	for i := range 20 {
		if _, err := cli.Put(context.Background(), "k"+string(rune('a'+i)), "v"); err != nil {
			t.Fatal(err)
		}
	}
	m4 := c.newMember("s4")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	added, err := cli.MemberAddAsLearner(ctx, []string{"http://" + m4.peerAddr})
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	if !added.Member.IsLearner {
		t.Fatalf("added member is not a learner: %+v", added.Member)
	}
	id := added.Member.ID
	ctx, cancel = context.WithTimeout(context.Background(), 10*time.Second)
	_, err = cli.MemberPromote(ctx, id)
	cancel()
	if !errors.Is(rpctypes.Error(err), rpctypes.ErrMemberLearnerNotReady) {
		t.Fatalf("promoting a learner that has not started: %v, want %v", err, rpctypes.ErrMemberLearnerNotReady)
	}
	c.members = append(c.members, m4)
	c.writeConfig(m4, true)
	c.start(m4)
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := c.client(c.members[1]).MemberPromote(ctx, id)
		cancel()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("learner not promoted within 30s: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	ctx, cancel = context.WithTimeout(context.Background(), 5*time.Second)
	resp, err := cli.MemberList(ctx)
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range resp.Members {
		if m.ID == id && m.IsLearner {
			t.Fatalf("s4 still a learner after promotion: %+v", m)
		}
	}
	ctx, cancel = context.WithTimeout(context.Background(), 5*time.Second)
	_, err = cli.MemberPromote(ctx, id)
	cancel()
	if !errors.Is(rpctypes.Error(err), rpctypes.ErrMemberNotLearner) {
		t.Fatalf("promoting a voting member: %v, want %v", err, rpctypes.ErrMemberNotLearner)
	}

	// Member update: s4 stops, moves to another peer address, restarts.
	c.kill(m4)
	m4.peerAddr = freeAddr(t)
	ctx, cancel = context.WithTimeout(context.Background(), 10*time.Second)
	_, err = cli.MemberUpdate(ctx, id, []string{"http://" + m4.peerAddr})
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	c.writeConfig(m4, true)
	c.start(m4)
	if _, err := c.client(m4).Put(context.Background(), "from-moved-s4", "1"); err != nil {
		t.Fatal(err)
	}
	if got := keysOn(t, c, c.members[0], "from-moved-s4", false); !got["from-moved-s4"] {
		t.Fatal("a write through the moved s4 is not on s1")
	}
}
