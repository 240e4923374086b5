package clustertest

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestMoveLeader: `etcdctl move-leader` (or clientv3's MoveLeader, without
// etcdctl) hands the leadership to a follower, every member then names
// it, and writes go on; asked of a follower, it is refused with etcd's
// "not leader".
func TestMoveLeader(t *testing.T) {
	c := newProcCluster(t, 3, 10000)
	lead := c.leader()
	to := c.others(lead)[0]
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := c.client(to).Status(ctx, to.clientAddr)
	if err != nil {
		t.Fatal(err)
	}
	target := st.Header.MemberId
	if _, err := c.client(to).MoveLeader(ctx, target); err == nil || !strings.Contains(err.Error(), "not leader") {
		t.Errorf("move-leader asked of a follower: %v, want etcd's not leader", err)
	}
	if _, err := exec.LookPath("etcdctl"); err == nil {
		cmd := exec.Command("etcdctl", "--endpoints="+c.endpoints(), "move-leader", fmt.Sprintf("%x", target))
		cmd.Env = append(cmd.Environ(), "ETCDCTL_API=3")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("etcdctl move-leader: %v\n%s", err, out)
		}
		t.Logf("etcdctl: %s", strings.TrimSpace(string(out)))
	} else if _, err := c.client(lead).MoveLeader(ctx, target); err != nil {
		t.Fatal(err)
	}
	if now := c.leader(); now != to {
		t.Fatalf("%s leads after the move to %s", now.name, to.name)
	}
	if _, err := c.client(c.members...).Put(ctx, "after-move", "1"); err != nil {
		t.Fatal(err)
	}
}

// endpoints lists every member's client address for etcdctl's
// --endpoints.
func (c *procCluster) endpoints() string {
	var eps []string
	for _, m := range c.members {
		eps = append(eps, m.clientAddr)
	}
	return strings.Join(eps, ",")
}
