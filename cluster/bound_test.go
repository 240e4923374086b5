package cluster

import (
	"context"
	"testing"
	"time"
)

// TestBound: a request's context is bounded by the request timeout; one
// whose deadline comes sooner is used as it is (no timer of its own).
func TestBound(t *testing.T) {
	n := &raftNode{cfg: RaftConfig{RequestTimeout: time.Minute}}

	soon, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if got, _ := n.bound(soon); got != soon {
		t.Errorf("a context with a deadline in 1 s, under the 1 m timeout, was wrapped")
	}
	hour, cancelHour := context.WithTimeout(context.Background(), time.Hour)
	defer cancelHour()
	for name, ctx := range map[string]context.Context{"no deadline": context.Background(), "a deadline in 1 h": hour} {
		got, cancel := n.bound(ctx)
		d, ok := got.Deadline()
		cancel()
		if !ok || time.Until(d) > time.Minute {
			t.Errorf("%s: bounded context's deadline %v (set %v), want within the 1 m request timeout", name, time.Until(d).Round(time.Second), ok)
		}
	}
}
