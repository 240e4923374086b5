package server

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// withRequestTimeout returns ctx bounded by etcd's request timeout, for a
// write, a probe or a leader move (a client's read barrier is bounded by
// the Node itself: awaitReadable), and its cancel function.
//
// The bound is lazy: context.WithTimeout starts a timer and registers with
// its parent on every request, which was 5% of the CPU of a v3 read,
// while the single member's Node (cluster.Local) never waits: it only
// checks Err. So the returned context answers Err and Deadline from the
// clock, and only a Node that waits on Done (raft) gets a real deadline
// context, created at that moment.
func withRequestTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	c := &lazyDeadline{parent: ctx, deadline: time.Now().Add(requestTimeout)}
	return c, c.cancel
}

// lazyDeadline is a context with a deadline whose timer starts only when
// Done is called.
type lazyDeadline struct {
	parent   context.Context
	deadline time.Time
	// once starts real (Done) or forbids starting it (cancel).
	once     sync.Once
	real     atomic.Pointer[realDeadline]
	canceled atomic.Bool
}

type realDeadline struct {
	ctx    context.Context
	cancel context.CancelFunc
}

// closedDone is Done's channel for a context canceled before anyone
// waited on it.
var closedDone = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

func (c *lazyDeadline) Deadline() (time.Time, bool) {
	if d, ok := c.parent.Deadline(); ok && d.Before(c.deadline) {
		return d, true
	}
	return c.deadline, true
}

func (c *lazyDeadline) Done() <-chan struct{} {
	c.once.Do(func() {
		ctx, cancel := context.WithDeadline(c.parent, c.deadline)
		c.real.Store(&realDeadline{ctx: ctx, cancel: cancel})
	})
	if r := c.real.Load(); r != nil {
		return r.ctx.Done()
	}
	return closedDone
}

func (c *lazyDeadline) Err() error {
	if r := c.real.Load(); r != nil {
		return r.ctx.Err()
	}
	if c.canceled.Load() {
		return context.Canceled
	}
	if err := c.parent.Err(); err != nil {
		return err
	}
	if !time.Now().Before(c.deadline) {
		return context.DeadlineExceeded
	}
	return nil
}

func (c *lazyDeadline) Value(key any) any { return c.parent.Value(key) }

func (c *lazyDeadline) cancel() {
	c.canceled.Store(true)
	c.once.Do(func() {})
	if r := c.real.Load(); r != nil {
		r.cancel()
	}
}
