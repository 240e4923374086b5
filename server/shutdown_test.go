package server

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"

	"github.com/stratadb/strata/cluster"
	"github.com/stratadb/strata/config"
	"github.com/stratadb/strata/engine"
	"github.com/stratadb/strata/mvcc"
)

// gatedNode holds every proposal until the test opens the gate.
type gatedNode struct {
	cluster.Node
	entered chan struct{}
	gate    chan struct{}
}

func (n *gatedNode) Propose(ctx context.Context, cmd []byte) (any, error) {
	n.entered <- struct{}{}
	<-n.gate
	return n.Node.Propose(ctx, cmd)
}

// TestShutdownFinishesInFlight closes the server while a put is being
// applied: Close waits for it, the client gets its acknowledgement, and
// the write is in the store when it is opened again.
func TestShutdownFinishesInFlight(t *testing.T) {
	cfg := testConfig(t)
	gn := &gatedNode{entered: make(chan struct{}, 1), gate: make(chan struct{})}
	s, err := Start(cfg, Options{NewNode: func(sm cluster.StateMachine, ids IDs) (cluster.Node, error) {
		n, err := cluster.NewLocal(sm, cluster.LocalConfig{ClusterID: ids.ClusterID, MemberID: ids.MemberID})
		gn.Node = n
		return gn, err
	}})
	if err != nil {
		t.Fatal(err)
	}
	c := newClient(t, s, nil)
	put := make(chan error, 1)
	go func() {
		_, err := c.Put(context.Background(), "inflight", "v")
		put <- err
	}()
	<-gn.entered
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	select {
	case err := <-closed:
		t.Fatalf("Close returned (%v) while a put was in flight", err)
	case <-time.After(200 * time.Millisecond):
	}
	close(gn.gate)
	if err := <-put; err != nil {
		t.Fatalf("the put in flight at shutdown failed: %v", err)
	}
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	if missing := missingKeys(t, cfg, []string{"inflight"}); len(missing) > 0 {
		t.Fatalf("acknowledged keys missing after shutdown: %v", missing)
	}
}

// TestShutdownUnderLoad closes the server while clients write as fast as
// they can: every write acknowledged is in the store afterwards.
func TestShutdownUnderLoad(t *testing.T) {
	cfg := testConfig(t)
	s := startServer(t, cfg)
	c := newClient(t, s, nil)
	var mu sync.Mutex
	var acked []string
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Go(func() {
			for i := 0; i < 10000; i++ {
				k := fmt.Sprintf("w%02d/%05d", w, i)
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				_, err := c.Put(ctx, k, k)
				cancel()
				if err != nil {
					return
				}
				mu.Lock()
				acked = append(acked, k)
				mu.Unlock()
			}
		})
	}
	for {
		mu.Lock()
		n := len(acked)
		mu.Unlock()
		if n >= 200 {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if missing := missingKeys(t, cfg, acked); len(missing) > 0 {
		t.Fatalf("%d of %d acknowledged keys missing after shutdown, e.g. %v", len(missing), len(acked), missing[:min(5, len(missing))])
	}
	t.Logf("%d writes acknowledged before shutdown, all present", len(acked))
}

// missingKeys opens the store of cfg and returns the keys it lacks.
func missingKeys(t *testing.T, cfg *config.Config, keys []string) []string {
	t.Helper()
	db, err := engine.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	st, err := mvcc.Open(db, mvcc.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var missing []string
	for _, k := range keys {
		r, err := st.Range([]byte(k), nil, mvcc.RangeOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(r.KVs) != 1 || string(r.KVs[0].Value) != k && k != "inflight" {
			missing = append(missing, k)
		}
	}
	return missing
}

// stuckNode never commits: a cluster that lost its quorum.
type stuckNode struct{ cluster.Node }

func (stuckNode) Propose(ctx context.Context, _ []byte) (any, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

// TestRequestTimeout: a write the apply path never commits answers etcd's
// ErrGRPCTimeout after the request timeout, also when the client set no
// deadline.
func TestRequestTimeout(t *testing.T) {
	old := requestTimeout
	requestTimeout = 300 * time.Millisecond
	t.Cleanup(func() { requestTimeout = old })
	s, err := Start(testConfig(t), Options{NewNode: func(sm cluster.StateMachine, ids IDs) (cluster.Node, error) {
		n, err := cluster.NewLocal(sm, cluster.LocalConfig{ClusterID: ids.ClusterID, MemberID: ids.MemberID})
		return stuckNode{n}, err
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	c := newClient(t, s, nil)
	// The client's own deadline is far later: the server's must answer.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.Put(ctx, "k", "v"); !errors.Is(err, rpctypes.ErrTimeout) {
		t.Errorf("put that never commits: %v, want %v", err, rpctypes.ErrTimeout)
	}
}
