package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"testing"
	"time"
)

// gateSM holds the first Stage until release is closed (as the store
// holds a writer while the batch before commits), and records the size
// of every batch committed.
type gateSM struct {
	entered chan struct{}
	release chan struct{}
	fail    error

	mu    sync.Mutex
	sizes []int
}

type gateBatch struct {
	s *gateSM
	n int
}

func (s *gateSM) NewBatch() Batch { return &gateBatch{s: s} }

func (b *gateBatch) Stage(index uint64, cmd []byte) (any, error) {
	if index != 0 {
		return nil, fmt.Errorf("Local staged index %d, want 0 (no log)", index)
	}
	b.s.entered <- struct{}{}
	<-b.s.release
	if b.s.fail != nil {
		return nil, b.s.fail
	}
	b.n++
	return string(cmd), nil
}

func (b *gateBatch) Commit() error {
	b.s.mu.Lock()
	defer b.s.mu.Unlock()
	b.s.sizes = append(b.s.sizes, b.n)
	return nil
}

func (s *gateSM) AppliedIndex() uint64               { return 0 }
func (s *gateSM) Sync() error                        { return nil }
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

// TestLocalGroupsProposals proves Local's group commit: the proposals
// that arrive while a batch is being staged go together into the next
// batch (one engine commit and one WAL sync for all), every proposer gets
// its own result, and Stop waits for the proposals in flight.
func TestLocalGroupsProposals(t *testing.T) {
	sm := newGate()
	n := newTestLocal(t, sm)
	const writers = 8
	var wg sync.WaitGroup
	results := make(chan any, writers)
	propose := func(cmd string) {
		wg.Go(func() {
			r, err := n.Propose(context.Background(), []byte(cmd))
			if err != nil {
				t.Error(err)
			}
			results <- r
		})
	}
	propose("w0")
	select {
	case <-sm.entered: // the first batch is staging w0
	case <-time.After(10 * time.Second):
		t.Fatal("the first proposal never reached Stage")
	}
	for i := 1; i < writers; i++ {
		propose(fmt.Sprintf("w%d", i))
	}
	// Wait until the others queued behind the batch being staged.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		n.queueMu.Lock()
		queued := len(n.queue)
		n.queueMu.Unlock()
		if queued == writers-1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d proposals queued", queued, writers-1)
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
	// The two batches commit concurrently (only staging is one at a
	// time), so their sizes are recorded in either order.
	sizes := slices.Sorted(slices.Values(sm.sizes))
	if want := []int{1, writers - 1}; !slices.Equal(sizes, want) {
		t.Errorf("batch sizes %v, want %v: the proposals queued behind the first batch share the next", sm.sizes, want)
	}
	got := map[any]bool{}
	for range writers {
		got[<-results] = true
	}
	for i := range writers {
		if w := fmt.Sprintf("w%d", i); !got[w] {
			t.Errorf("no proposer got result %s: %v", w, got)
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
	go func() {
		for range sm.entered {
		}
	}()
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
