package server

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stratadb/strata/cluster"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

func TestLease(t *testing.T) {
	s := startServer(t, testConfig(t))
	c := newClient(t, s, nil)
	ctx := testCtx(t)

	g, err := c.Grant(ctx, 60)
	if err != nil || g.ID == 0 || g.TTL != 60 {
		t.Fatalf("grant: %+v, %v", g, err)
	}
	if _, err := c.Put(ctx, "held", "v", clientv3.WithLease(g.ID)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Put(ctx, "nolease", "v", clientv3.WithLease(12345)); !errors.Is(err, rpctypes.ErrLeaseNotFound) {
		t.Errorf("put with an unknown lease: %v, want %v", err, rpctypes.ErrLeaseNotFound)
	}
	ttl, err := c.TimeToLive(ctx, g.ID, clientv3.WithAttachedKeys())
	if err != nil || ttl.GrantedTTL != 60 || ttl.TTL <= 0 || ttl.TTL > 60 || len(ttl.Keys) != 1 || string(ttl.Keys[0]) != "held" {
		t.Errorf("time to live: %+v, %v", ttl, err)
	}
	ka, err := c.KeepAliveOnce(ctx, g.ID)
	if err != nil || ka.TTL != 60 {
		t.Errorf("keep alive: %+v, %v", ka, err)
	}
	ls, err := c.Leases(ctx)
	if err != nil || len(ls.Leases) != 1 || ls.Leases[0].ID != g.ID {
		t.Errorf("leases: %+v, %v", ls, err)
	}
	if _, err := c.Revoke(ctx, g.ID); err != nil {
		t.Fatal(err)
	}
	if r, err := c.Get(ctx, "held"); err != nil || r.Count != 0 {
		t.Errorf("key of a revoked lease: %+v, %v", r, err)
	}
	ttl, err = c.TimeToLive(ctx, g.ID)
	if err != nil || ttl.TTL != -1 {
		t.Errorf("time to live of a revoked lease: %+v, %v", ttl, err)
	}
	if _, err := c.Revoke(ctx, g.ID); !errors.Is(err, rpctypes.ErrLeaseNotFound) {
		t.Errorf("revoke twice: %v, want %v", err, rpctypes.ErrLeaseNotFound)
	}
	if _, err := c.KeepAliveOnce(ctx, g.ID); !errors.Is(err, rpctypes.ErrLeaseNotFound) {
		t.Errorf("keep alive of a revoked lease: %v, want %v", err, rpctypes.ErrLeaseNotFound)
	}
}

// TestLeaseExpires grants the shortest lease etcd gives (Grant(1) is 2 s),
// keeps a second one alive, and sees only the first one's key deleted.
func TestLeaseExpires(t *testing.T) {
	if testing.Short() {
		t.Skip("waits seconds for a lease to expire; runs without -short")
	}
	s := startServer(t, testConfig(t))
	c := newClient(t, s, nil)
	ctx := testCtx(t)
	short, err := c.Grant(ctx, 1)
	if err != nil || short.TTL != minLeaseTTL {
		t.Fatalf("grant 1: %+v, %v (want TTL %d)", short, err, minLeaseTTL)
	}
	kept, err := c.Grant(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Put(ctx, "short", "v", clientv3.WithLease(short.ID)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Put(ctx, "kept", "v", clientv3.WithLease(kept.ID)); err != nil {
		t.Fatal(err)
	}
	kc, err := c.KeepAlive(ctx, kept.ID)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for range kc { // clientv3 renews at a third of the TTL
		}
	}()
	wc := c.Watch(ctx, "short")
	waitDeleted(t, c, "short", time.Now().Add(20*time.Second))
	if evs := collect(t, wc, 1); evs[0].Type != clientv3.EventTypeDelete {
		t.Errorf("expiry event: %s", describe(evs))
	}
	if r, err := c.Get(ctx, "kept"); err != nil || r.Count != 1 {
		t.Errorf("key of a lease kept alive: %+v, %v", r, err)
	}
	if ttl, err := c.TimeToLive(ctx, short.ID); err != nil || ttl.TTL != -1 {
		t.Errorf("expired lease: %+v, %v", ttl, err)
	}
}

// followerNode reports another member as leader until lead is set.
type followerNode struct {
	cluster.Node
	lead    atomic.Bool
	changed chan struct{}
}

func (n *followerNode) Status() cluster.Status {
	st := n.Node.Status()
	if !n.lead.Load() {
		st.IsLeader, st.Leader = false, st.MemberID+1
	}
	return st
}

func (n *followerNode) LeaderChanged() <-chan struct{} { return n.changed }

// TestLeaseExpiresOnlyOnLeader: a member that does not lead never expires
// a lease (the leader does, through the log); once it becomes leader it
// gives the lease a full TTL and then expires it.
func TestLeaseExpiresOnlyOnLeader(t *testing.T) {
	if testing.Short() {
		t.Skip("waits seconds for a lease to expire; runs without -short")
	}
	fn := &followerNode{changed: make(chan struct{}, 1)}
	s, err := Start(testConfig(t), Options{NewNode: func(sm cluster.StateMachine, ids IDs) (cluster.Node, error) {
		n, err := cluster.NewLocal(sm, cluster.LocalConfig{ClusterID: ids.ClusterID, MemberID: ids.MemberID})
		fn.Node = n
		return fn, err
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	c := newClient(t, s, nil)
	ctx := testCtx(t)
	g, err := c.Grant(ctx, minLeaseTTL)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Put(ctx, "k", "v", clientv3.WithLease(g.ID)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Duration(minLeaseTTL)*time.Second + 3*leaseCheckInterval)
	if r, err := c.Get(ctx, "k"); err != nil || r.Count != 1 {
		t.Fatalf("a member that does not lead expired a lease: %+v, %v", r, err)
	}
	became := time.Now()
	fn.lead.Store(true)
	fn.changed <- struct{}{}
	for {
		r, err := c.Get(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		if r.Count == 0 {
			break
		}
		if time.Since(became) > 20*time.Second {
			t.Fatal("the new leader did not expire the lease in 20 s")
		}
		time.Sleep(100 * time.Millisecond)
	}
	if d := time.Since(became); d < time.Duration(minLeaseTTL)*time.Second {
		t.Errorf("expired %v after becoming leader, before a full TTL of %ds", d, minLeaseTTL)
	}
}

// TestLeaseGrantedByLogExpires: a lease the leader learns of only as it
// applies it (as when a follower proposed the grant) gets its clock from
// the apply, after the leader has listed the leases it had, and expires.
func TestLeaseGrantedByLogExpires(t *testing.T) {
	if testing.Short() {
		t.Skip("waits seconds for a lease to expire; runs without -short")
	}
	s := startServer(t, testConfig(t))
	c := newClient(t, s, nil)
	ctx := testCtx(t)
	// The lessor's first checks list the leases there are (none).
	deadline := time.Now().Add(20 * time.Second)
	for {
		s.lease.mu.Lock()
		listed := s.lease.listed
		s.lease.mu.Unlock()
		if listed {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the lessor never listed the leases")
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Granted through the store, not the LeaseGrant handler.
	const id = 4242
	if err := s.store.GrantLease(id, minLeaseTTL); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Put(ctx, "k", "v", clientv3.WithLease(id)); err != nil {
		t.Fatal(err)
	}
	waitDeleted(t, c, "k", deadline)
}

// waitDeleted waits until key is gone (its lease expired), failing at
// deadline.
func waitDeleted(t *testing.T, c *clientv3.Client, key string, deadline time.Time) {
	t.Helper()
	for {
		r, err := c.Get(testCtx(t), key)
		if err != nil {
			t.Fatal(err)
		}
		if r.Count == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the key %q of an expired lease is still there at the deadline", key)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
