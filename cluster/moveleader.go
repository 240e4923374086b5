package cluster

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Errors of MoveLeader, etcd's.
var (
	// ErrNotLeader: MoveLeader was asked of a member that does not lead.
	ErrNotLeader = errors.New("cluster: not leader")
	// ErrBadLeaderTransferee: the transferee is not a voting member.
	ErrBadLeaderTransferee = errors.New("cluster: bad leader transferee")
	// ErrLeaderTransferTimeout: the transferee did not take over in time.
	ErrLeaderTransferTimeout = errors.New("cluster: leader transfer timed out")
)

// moveLeaderPoll is how often MoveLeader looks whether the transferee
// leads yet.
const moveLeaderPoll = 10 * time.Millisecond

// MoveLeader implements Node.MoveLeader with raft's leadership transfer: the
// leader stops taking proposals, brings the transferee's log up to date
// and tells it to start an election at once (raft's MsgTimeoutNow), which
// it wins. Transferring to the leader itself succeeds at once.
func (n *raftNode) MoveLeader(ctx context.Context, transferee uint64) error {
	st := n.Status()
	if !st.IsLeader {
		return fmt.Errorf("%w: the leader is %x", ErrNotLeader, st.Leader)
	}
	n.membersMu.RLock()
	m, ok := n.members.get(transferee)
	n.membersMu.RUnlock()
	switch {
	case !ok:
		return fmt.Errorf("%w: %x is not a member", ErrBadLeaderTransferee, transferee)
	case m.IsLearner:
		return fmt.Errorf("%w: %x is a learner", ErrBadLeaderTransferee, transferee)
	case transferee == n.id:
		return nil
	}
	n.raft.TransferLeadership(ctx, n.id, transferee)
	t := time.NewTicker(moveLeaderPoll)
	defer t.Stop()
	for n.lead.Load() != transferee {
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: %x does not lead yet (%v)", ErrLeaderTransferTimeout, transferee, ctx.Err())
		case <-t.C:
		}
	}
	return nil
}
