package cluster

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"
)

// TestRaftBatchedApply: members stage runs of committed commands in one
// state machine batch. Every proposer gets the result
// of its own command (writers on the leader and on a follower, each
// putting its own key in sequence, see the value they replaced); a
// restarted member skips what its state machine already has (the toy
// state machine fails on an index applied twice); a member that was down
// catches up from the log in batches of many commands; all converge.
func TestRaftBatchedApply(t *testing.T) {
	c := newTestCluster(t, 3, func(cfg *RaftConfig) {
		// The member that was down catches up from the log, not from a
		// snapshot.
		cfg.SnapshotEntries = 100000
		cfg.CatchUpEntries = 100000
	})
	c.leader()
	// The same members, now handed batches (each keeps its state).
	sms := c.sms
	for i := range c.nodes {
		c.stop(i)
		sms[i].mu.Lock()
		sms[i].sizes = nil
		sms[i].mu.Unlock()
	}
	start := func(i int) {
		n, err := StartRaft(c.config(i, false), sms[i])
		if err != nil {
			t.Error(err)
			return
		}
		c.nodes[i] = n
	}
	var wg sync.WaitGroup
	for i := range c.nodes {
		wg.Go(func() { start(i) })
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	lead := c.leader()
	follower := (lead + 1) % 3

	// writers puts keys w<g> in sequence on members, checking each result.
	writers := func(round, n int, on ...int) {
		var wg sync.WaitGroup
		for g := range 16 {
			wg.Go(func() {
				m := on[g%len(on)]
				key := fmt.Sprintf("w%d", g)
				for i := range n {
					v := fmt.Sprintf("r%d-%d", round, i)
					prev, err := c.put(m, key, v)
					if err != nil {
						t.Errorf("put %s=%s on member %d: %v", key, v, m, err)
						return
					}
					want := ""
					switch {
					case i > 0:
						want = fmt.Sprintf("r%d-%d", round, i-1)
					case round > 0:
						want = fmt.Sprintf("r%d-%d", round-1, n-1)
					}
					if prev != want {
						t.Errorf("put %s=%s on member %d replaced %q, want %q", key, v, m, prev, want)
						return
					}
				}
			})
		}
		wg.Wait()
		if t.Failed() {
			t.FailNow()
		}
	}
	writers(0, 10, lead, follower)
	c.converge()

	down := (lead + 2) % 3
	c.stop(down)
	writers(1, 10, lead, follower)
	start(down)
	if t.Failed() {
		t.FailNow()
	}
	c.converge()
	size, batches := sms[down].largest()
	t.Logf("member %d caught up; its largest batch held %d commands (%d batches)", down, size, batches)
	if size < 2 {
		t.Fatalf("member %d caught up on 160 commands, one at a time: no batch held more than %d", down, size)
	}
	for i, n := range c.nodes {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := n.ReadBarrier(ctx)
		cancel()
		if err != nil {
			t.Fatalf("read barrier on member %d: %v", i, err)
		}
		for g := range 16 {
			if got := sms[i].get(fmt.Sprintf("w%d", g)); got != "r1-9" {
				t.Fatalf("member %d: w%d = %q, want r1-9", i, g, got)
			}
		}
	}
}
