package cluster

import (
	"context"
	"time"

	"go.etcd.io/raft/v3"
)

// A leader whose process is gone (a crash, an OOM kill, a SIGKILL) on a
// machine that still runs refuses connections to its peer port at once,
// or, restarted already, serves the stream as a new process (its
// incarnation, transport.go), which raft starts as a follower. raft alone
// would wait: a follower grants no pre-vote while it heard from a leader
// within the election timeout (CheckQuorum's lease), and the first
// follower to campaign does so after a randomized one to two timeouts,
// 1-2 s at etcd's defaults, with every write waiting.
//
// So a follower whose dial of its leader is refused, or finds it
// restarted, forgets that leader (raft's ForgetLeader): it then grants
// pre-votes at once. The other voters campaign in turn by ID, the first
// one tick later (by which time the rest have seen the leader gone too),
// the next two ticks after it if no leader has appeared, and so on: the
// first is elected in one round trip unless its log is behind another's
// (a pre-vote is granted only to a log at least as long), and then the
// next one is. Campaigning all at once would split the votes. It is safe
// as raft's ForgetLeader is: the campaign needs the votes of a majority,
// and a member that still hears from the leader grants none, so one
// member wrong about the leader disrupts nothing. A leader that is merely
// unreachable (a machine down, a partition that drops packets) refuses
// nothing, and the election timeout decides as before; a partition that
// rejects connections cuts a majority off the leader only if it is
// refused by a majority, and then an election is what is needed.

// goneLeader is a leader whose process the transport found gone, and why.
type goneLeader struct {
	id  uint64
	why string
}

// leaderGone is the transport's report that peer id's process is gone:
// a dial was refused, or its stream is served by a new process. Only the
// current leader matters.
func (n *raftNode) leaderGone(id uint64, why string) {
	if id != n.lead.Load() {
		return
	}
	select {
	case n.gonec <- goneLeader{id, why}:
	default:
	}
}

// forgetGoneLeader forgets g's leader if it is still this follower's
// leader, and returns when to campaign: 1 + 2r ticks from now for the
// voter of rank r by ID among the others (nil for a non-voter). Run by
// the Ready loop.
func (n *raftNode) forgetGoneLeader(g goneLeader) <-chan time.Time {
	id := g.id
	st := n.raft.Status()
	if st.RaftState != raft.StateFollower || st.Lead != id {
		return nil
	}
	if err := n.raft.ForgetLeader(context.Background()); err != nil {
		return nil
	}
	n.logf("leader %x is gone (%s): forgetting it to elect another at once", id, g.why)
	turn, ok := campaignTurn(st.Config.Voters.IDs(), n.id, id)
	if !ok {
		return nil
	}
	return time.After(time.Duration(turn) * n.cfg.TickInterval)
}

// campaignTurn is in how many ticks member self campaigns once leader gone
// is forgotten: 1 + 2r for the voter of rank r by ID among the voters
// other than gone; ok is false for a member that is not a voter.
func campaignTurn(voters map[uint64]struct{}, self, gone uint64) (ticks int, ok bool) {
	if _, ok := voters[self]; !ok {
		return 0, false
	}
	rank := 0
	for v := range voters {
		if v != gone && v < self {
			rank++
		}
	}
	return 1 + 2*rank, true
}

// campaignIfLeaderless starts an election if no leader has appeared since
// this member forgot a gone one.
func (n *raftNode) campaignIfLeaderless() {
	if n.lead.Load() != 0 {
		return
	}
	n.logf("campaigning: the gone leader is forgotten and no other has appeared")
	_ = n.raft.Campaign(context.Background())
}
