package cluster

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestExpiries: a shared expiry never closes before its duration, and
// the reads of one granule share one channel (one timer).
func TestExpiries(t *testing.T) {
	e := newExpiries(time.Hour)
	if a, b := e.after(time.Minute), e.after(time.Minute+time.Second); a != b {
		t.Error("two expiries in the same granule got two channels")
	}
	e = newExpiries(time.Millisecond)
	for _, d := range []time.Duration{0, 5 * time.Millisecond, 30 * time.Millisecond} {
		start := time.Now()
		select {
		case <-e.after(d):
		case <-time.After(10 * time.Second):
			t.Fatalf("expiry of %v not closed after 10 s", d)
		}
		if el := time.Since(start); el < d {
			t.Errorf("expiry of %v closed after %v", d, el)
		}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.slots) != 0 {
		t.Errorf("%d granules kept after their timers fired", len(e.slots))
	}
}

// TestReadBarrierTimeout: a linearizable read whose ReadIndex round never
// ends (here no round runs at all) fails with ErrTimeout after the
// request timeout, whether or not its context has a deadline; a context
// that ends sooner ends it sooner, with its own error.
func TestReadBarrierTimeout(t *testing.T) {
	n := &raftNode{
		cfg:      RaftConfig{RequestTimeout: 50 * time.Millisecond},
		readNext: newReadNotifier(),
		readWake: make(chan struct{}, 1),
		expiries: newExpiries(expiryGranule),
		stopc:    make(chan struct{}),
	}
	hour, cancelHour := context.WithTimeout(context.Background(), time.Hour)
	defer cancelHour()
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	for name, c := range map[string]struct {
		ctx  context.Context
		want error
	}{
		"no deadline":       {context.Background(), ErrTimeout},
		"a deadline in 1 h": {hour, ErrTimeout},
		"canceled":          {canceled, context.Canceled},
	} {
		start := time.Now()
		done := make(chan error, 1)
		go func() { done <- n.ReadBarrier(c.ctx) }()
		select {
		case err := <-done:
			if !errors.Is(err, c.want) {
				t.Errorf("%s: %v, want %v", name, err, c.want)
			}
			if el := time.Since(start); c.want == ErrTimeout && el < n.cfg.RequestTimeout {
				t.Errorf("%s: timed out after %v, before the request timeout %v", name, el, n.cfg.RequestTimeout)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: ReadBarrier still waiting after 10 s (request timeout %v)", name, n.cfg.RequestTimeout)
		}
	}
}
