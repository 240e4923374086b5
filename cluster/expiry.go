package cluster

import (
	"sync"
	"time"
)

// expiryGranule is how much later than asked a shared expiry may close.
// Request timeouts are seconds long, so 10 ms late is invisible, and at
// 30,000 reads a second one timer serves some 300 of them.
const expiryGranule = 10 * time.Millisecond

// expiries hands out channels that close once a duration has passed, one
// timer per granule shared by every waiter whose deadline falls in it.
// A linearizable read waits for its ReadIndex round at most the request
// timeout: with a timer and a context of its own per read
// (context.WithTimeout), the timer, its registration with the request's
// context and their teardown were 6% of a member's CPU under reads.
type expiries struct {
	granule time.Duration
	// start is the monotonic origin the granules count from, so a change
	// of the wall clock moves no deadline.
	start time.Time
	mu    sync.Mutex
	slots map[int64]chan struct{}
}

func newExpiries(granule time.Duration) *expiries {
	return &expiries{granule: granule, start: time.Now(), slots: map[int64]chan struct{}{}}
}

// after returns a channel closed no sooner than d from now and at most a
// granule later.
func (e *expiries) after(d time.Duration) <-chan struct{} {
	now := time.Since(e.start)
	slot := int64((now + d + e.granule - 1) / e.granule)
	e.mu.Lock()
	defer e.mu.Unlock()
	c, ok := e.slots[slot]
	if !ok {
		c = make(chan struct{})
		e.slots[slot] = c
		time.AfterFunc(time.Duration(slot)*e.granule-now, func() {
			e.mu.Lock()
			delete(e.slots, slot)
			e.mu.Unlock()
			close(c)
		})
	}
	return c
}
