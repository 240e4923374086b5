package cluster

import (
	"bytes"
	"context"
	"encoding/binary"
	"time"
)

// readNotifier is shared by every ReadBarrier caller that arrived before
// one ReadIndex round started: c is closed when the round ends, with err.
type readNotifier struct {
	c   chan struct{}
	err error
}

func newReadNotifier() *readNotifier { return &readNotifier{c: make(chan struct{})} }

// ReadBarrier implements Node with raft's ReadIndex, as etcd's
// linearizable reads: the leader confirms with a quorum that it still
// leads and names its commit index; this member (leader or follower) then
// waits until it has applied that index. Concurrent callers share one
// round.
func (n *raftNode) ReadBarrier(ctx context.Context) error {
	if err := n.stoppedErr(); err != nil {
		return err
	}
	// The wait ends with the caller's context (its cancellation, or its
	// deadline when that comes within the request timeout) or after the
	// request timeout, on a timer shared with the reads of the same
	// instant rather than one of its own.
	var expired <-chan struct{}
	if d, ok := ctx.Deadline(); !ok || time.Until(d) > n.cfg.RequestTimeout {
		expired = n.expiries.after(n.cfg.RequestTimeout)
	}
	n.readMu.Lock()
	nr := n.readNext
	n.readMu.Unlock()
	select {
	case n.readWake <- struct{}{}:
	default:
	}
	select {
	case <-nr.c:
		return nr.err
	case <-ctx.Done():
		return n.ctxErr(ctx)
	case <-expired:
		return n.endedErr(context.DeadlineExceeded)
	case <-n.stopc:
		return n.stoppedErr()
	}
}

// readLoop runs one ReadIndex round at a time for the callers waiting.
func (n *raftNode) readLoop() {
	defer n.wg.Done()
	for {
		select {
		case <-n.readWake:
		case <-n.stopc:
			return
		}
		n.readMu.Lock()
		nr := n.readNext
		n.readNext = newReadNotifier()
		n.readMu.Unlock()
		index, err := n.readIndex()
		if err == nil {
			err = n.waitApplied(index)
		}
		nr.err = err
		close(nr.c)
	}
}

// readIndex asks raft for a read index and waits for it, resending while
// no answer comes (the request or its answer may be lost with a leader).
func (n *raftNode) readIndex() (uint64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), n.cfg.RequestTimeout)
	defer cancel()
	rctx := make([]byte, 8)
	binary.BigEndian.PutUint64(rctx, n.reqID.Add(1))
	retry := n.cfg.TickInterval * time.Duration(max(n.cfg.ElectionTicks/2, 2))
	for {
		if !n.hasLeader() {
			if err := n.waitLeader(ctx); err != nil {
				return 0, err
			}
		}
		if err := n.raft.ReadIndex(ctx, rctx); err != nil {
			return 0, n.mapRaftErr(ctx, err)
		}
		timer := time.NewTimer(retry)
	wait:
		for {
			select {
			case rs := <-n.readStatec:
				if bytes.Equal(rs.RequestCtx, rctx) {
					timer.Stop()
					return rs.Index, nil
				}
				// An answer to an earlier round: ignore it.
			case <-timer.C:
				break wait
			case <-ctx.Done():
				timer.Stop()
				return 0, n.ctxErr(ctx)
			case <-n.stopc:
				timer.Stop()
				return 0, n.stoppedErr()
			}
		}
	}
}

// waitApplied returns once this member has applied index.
func (n *raftNode) waitApplied(index uint64) error {
	timeout := time.NewTimer(n.cfg.RequestTimeout)
	defer timeout.Stop()
	for {
		ch := n.appliedSignal()
		if n.applied.Load() >= index {
			return nil
		}
		select {
		case <-ch:
		case <-timeout.C:
			return ErrTimeout
		case <-n.stopc:
			return n.stoppedErr()
		}
	}
}
