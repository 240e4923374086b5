package cluster

import (
	"context"
	"errors"
	"io"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// gateSM blocks every Apply until release is closed, counting how many
// are inside at once.
type gateSM struct {
	inside, peak atomic.Int64
	entered      chan struct{}
	release      chan struct{}
	fail         error
}

func (s *gateSM) Apply(index uint64, cmd []byte) (any, error) {
	n := s.inside.Add(1)
	defer s.inside.Add(-1)
	for {
		p := s.peak.Load()
		if n <= p || s.peak.CompareAndSwap(p, n) {
			break
		}
	}
	s.entered <- struct{}{}
	<-s.release
	if s.fail != nil {
		return nil, s.fail
	}
	return string(cmd), nil
}
func (s *gateSM) AppliedIndex() uint64               { return 0 }
func (s *gateSM) Snapshot(io.Writer) (uint64, error) { return 0, nil }
func (s *gateSM) Restore(io.Reader, uint64) error    { return nil }

func newGate() *gateSM {
	return &gateSM{entered: make(chan struct{}, 64), release: make(chan struct{})}
}

func newTestLocal(t *testing.T, sm StateMachine) *Local {
	t.Helper()
	n, err := NewLocal(sm, LocalConfig{ClusterID: 1, MemberID: 2, Name: "m"})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestLocalAppliesConcurrently proves proposals reach the state machine
// together (so mvcc can share one WAL sync among them), and Stop waits
// for them.
func TestLocalAppliesConcurrently(t *testing.T) {
	sm := newGate()
	n := newTestLocal(t, sm)
	const writers = 8
	var wg sync.WaitGroup
	results := make(chan any, writers)
	for range writers {
		wg.Go(func() {
			r, err := n.Propose(context.Background(), []byte("x"))
			if err != nil {
				t.Error(err)
			}
			results <- r
		})
	}
	for i := range writers {
		select {
		case <-sm.entered:
		case <-time.After(10 * time.Second):
			t.Fatalf("only %d of %d proposals reached Apply together: Local serializes them", i, writers)
		}
	}
	stopped := make(chan error, 1)
	go func() { stopped <- n.Stop() }()
	select {
	case <-stopped:
		t.Fatal("Stop returned while proposals were being applied")
	case <-time.After(50 * time.Millisecond):
	}
	close(sm.release)
	wg.Wait()
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
	if got := sm.peak.Load(); got != writers {
		t.Errorf("peak concurrent Apply = %d, want %d", got, writers)
	}
	for range writers {
		if r := <-results; r != "x" {
			t.Errorf("result %v, want x", r)
		}
	}
	if _, err := n.Propose(context.Background(), []byte("y")); !errors.Is(err, ErrStopped) {
		t.Errorf("Propose after Stop = %v, want ErrStopped", err)
	}
	if st := n.Status(); !st.IsLeader || st.Leader != 2 || st.AppliedIndex != writers {
		t.Errorf("status %+v", st)
	}
}

func TestLocalStateMachineFailureStopsProposals(t *testing.T) {
	sm := newGate()
	sm.fail = errors.New("disk gone")
	close(sm.release)
	n := newTestLocal(t, sm)
	if _, err := n.Propose(context.Background(), []byte("a")); !errors.Is(err, sm.fail) {
		t.Fatalf("Propose = %v, want the state machine's error", err)
	}
	sm.fail = nil
	if _, err := n.Propose(context.Background(), []byte("b")); err == nil {
		t.Fatal("Propose after a failed Apply succeeded")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := n.Propose(ctx, nil); !errors.Is(err, context.Canceled) {
		t.Errorf("Propose with a done context = %v", err)
	}
	if _, err := n.AddMember(context.Background(), nil, false); !errors.Is(err, ErrSingleMember) {
		t.Errorf("AddMember = %v", err)
	}
	select {
	case <-n.LeaderChanged():
	default:
		t.Error("LeaderChanged holds no signal at start")
	}
}
