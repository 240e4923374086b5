package cluster

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"time"

	"github.com/klauspost/compress/s2"
	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
)

// Entry kinds: the first byte of a normal entry's data.
const (
	kindCommand    byte = 1 // proposer ID, request ID, state machine command
	kindAttributes byte = 2 // proposer ID, request ID, JSON Member (name, client URLs)
	// kindCommandS2 is kindCommand with the command compressed (S2).
	kindCommandS2 byte = 3
)

const proposalHeader = 1 + 8 + 8

// compressFrom is the command size from which a proposal is compressed.
// An entry's bytes cross the peer connections to every follower, are
// written and fsynced in every member's raft log and held in its cache:
// a Kubernetes object of 14 KB of JSON compresses about 3x with S2, for
// some 20 us of one CPU at the proposer and a few at each member's apply.
// A small command gains too little to pay for it.
const compressFrom = 1 << 10

func (n *raftNode) encodeProposal(kind byte, reqID uint64, body []byte) []byte {
	if kind == kindCommand && len(body) >= compressFrom {
		b := make([]byte, proposalHeader+s2.MaxEncodedLen(len(body)))
		if c := s2.Encode(b[proposalHeader:], body); len(c) < len(body)-len(body)/8 {
			b = b[:proposalHeader+len(c)]
			n.putProposalHeader(b, kindCommandS2, reqID)
			return b
		}
	}
	b := make([]byte, proposalHeader+len(body))
	n.putProposalHeader(b, kind, reqID)
	copy(b[proposalHeader:], body)
	return b
}

func (n *raftNode) putProposalHeader(b []byte, kind byte, reqID uint64) {
	b[0] = kind
	binary.BigEndian.PutUint64(b[1:], n.id)
	binary.BigEndian.PutUint64(b[9:], reqID)
}

// command returns the state machine command of a command entry's data
// (isCommand), decompressed.
func command(data []byte) ([]byte, error) {
	_, _, body := proposal(data)
	if data[0] != kindCommandS2 {
		return body, nil
	}
	cmd, err := s2.Decode(nil, body)
	if err != nil {
		return nil, fmt.Errorf("a compressed command: %w", err)
	}
	return cmd, nil
}

// Propose implements Node.
func (n *raftNode) Propose(ctx context.Context, cmd []byte) (any, error) {
	return n.propose(ctx, kindCommand, cmd)
}

func (n *raftNode) propose(ctx context.Context, kind byte, body []byte) (any, error) {
	if err := n.stoppedErr(); err != nil {
		return nil, err
	}
	ctx, cancel := n.bound(ctx)
	defer cancel()
	if !n.hasLeader() {
		if err := n.waitLeader(ctx); err != nil {
			return nil, err
		}
	}
	id := n.reqID.Add(1)
	data := n.encodeProposal(kind, id, body)
	ch := n.wait.registerCommand(id, data, body)
	if err := n.submit(ctx, data); err != nil {
		n.wait.cancel(id)
		return nil, n.mapRaftErr(ctx, err)
	}
	select {
	case r := <-ch:
		return r.result, r.err
	case <-ctx.Done():
		n.wait.cancel(id)
		return nil, n.ctxErr(ctx)
	case <-n.stopc:
		n.wait.cancel(id)
		return nil, n.stoppedErr()
	}
}

// pendingProposal is one proposal on its way into raft.
type pendingProposal struct {
	ctx  context.Context
	data []byte
	errc chan error // buffered: the batcher never waits for the caller
}

// maxProposalBatch bounds the proposals stepped into raft as one message.
const maxProposalBatch = 512

// submit hands data to the proposal batcher and waits until raft took it.
func (n *raftNode) submit(ctx context.Context, data []byte) error {
	p := &pendingProposal{ctx: ctx, data: data, errc: make(chan error, 1)}
	select {
	case n.propc <- p:
	case <-ctx.Done():
		return ctx.Err()
	case <-n.stopc:
		return raft.ErrStopped
	}
	select {
	case err := <-p.errc:
		return err
	case <-ctx.Done():
		return ctx.Err()
	case <-n.stopc:
		return raft.ErrStopped
	}
}

// proposeLoop is the proposal batcher: the proposals that arrive while
// raft takes one are stepped into it together, as one MsgProp with many
// entries, so the leader sends one append per follower for all of them
// (and a follower forwards them in one message) instead of one each. A
// lone proposal goes through raft's Propose, which reports a dropped
// proposal at once; in a batch, a dropped proposal ends in its caller's
// timeout (raft's Step does not report drops), as a proposal the leader
// drops after forwarding does.
func (n *raftNode) proposeLoop() {
	defer n.wg.Done()
	for {
		var first *pendingProposal
		select {
		case first = <-n.propc:
		case <-n.stopc:
			return
		}
		batch := []*pendingProposal{first}
		// As the append goroutine does: the callers ready to run
		// propose first and join this batch.
		runtime.Gosched()
	gather:
		for len(batch) < maxProposalBatch {
			select {
			case p := <-n.propc:
				batch = append(batch, p)
			default:
				break gather
			}
		}
		var err error
		if len(batch) == 1 {
			err = n.raft.Propose(first.ctx, first.data)
		} else {
			ents := make([]*pb.Entry, len(batch))
			for i, p := range batch {
				ents[i] = &pb.Entry{Data: p.data}
			}
			ctx, cancel := context.WithTimeout(context.Background(), n.cfg.RequestTimeout)
			err = n.raft.Step(ctx, &pb.Message{Type: pb.MsgProp.Enum(), Entries: ents})
			cancel()
		}
		for _, p := range batch {
			p.errc <- err
		}
	}
}

// hasLeader reports whether a leader is known that is still a member: a
// proposal forwarded to a leader that removed itself would be lost.
func (n *raftNode) hasLeader() bool {
	lead := n.lead.Load()
	return lead != 0 && !n.isRemoved(lead)
}

// waitLeader waits up to an election timeout for a leader to be known.
func (n *raftNode) waitLeader(ctx context.Context) error {
	t := time.NewTimer(n.cfg.TickInterval * time.Duration(2*n.cfg.ElectionTicks))
	defer t.Stop()
	tick := time.NewTicker(n.cfg.TickInterval / 4)
	defer tick.Stop()
	for !n.hasLeader() {
		select {
		case <-tick.C:
		case <-t.C:
			return ErrNoLeader
		case <-ctx.Done():
			return n.ctxErr(ctx)
		case <-n.stopc:
			return n.stoppedErr()
		}
	}
	return nil
}

// mapRaftErr turns raft's errors into the contract's.
func (n *raftNode) mapRaftErr(ctx context.Context, err error) error {
	switch {
	case errors.Is(err, raft.ErrProposalDropped):
		if n.lead.Load() == 0 {
			return ErrNoLeader
		}
		return fmt.Errorf("%w: the proposal was dropped (leader changing)", ErrNoLeader)
	case errors.Is(err, raft.ErrStopped):
		return n.stoppedErr()
	case ctx.Err() != nil:
		return n.ctxErr(ctx)
	}
	return err
}

// bound returns ctx bounded by the request timeout. A ctx whose deadline
// comes as soon is used as it is: the server's contexts carry etcd's
// request timeout already, and a context.WithTimeout over one of them
// cost a timer and a goroutine per request (its parent is not one of the
// context package's own): 5% of the CPU of a linearizable read, when
// reads were bounded here too (ReadBarrier now shares expiries).
func (n *raftNode) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	if d, ok := ctx.Deadline(); ok && time.Until(d) <= n.cfg.RequestTimeout {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, n.cfg.RequestTimeout)
}

// ctxErr is the error for a request whose context ended: the caller's own
// cancellation as is, a deadline as ErrTimeout (the outcome is unknown).
func (n *raftNode) ctxErr(ctx context.Context) error { return n.endedErr(ctx.Err()) }

// endedErr is ctxErr for a wait that ended with err, a context's error.
func (n *raftNode) endedErr(err error) error {
	if errors.Is(err, context.Canceled) {
		return err
	}
	if n.lead.Load() == 0 {
		return fmt.Errorf("%w (and no leader is known): %w", ErrTimeout, err)
	}
	return fmt.Errorf("%w: %w", ErrTimeout, err)
}

// stoppedErr is nil while the node runs, else ErrStopped (with the
// reason, if it stopped by itself).
func (n *raftNode) stoppedErr() error {
	select {
	case <-n.stopc:
	default:
		return nil
	}
	n.errMu.Lock()
	defer n.errMu.Unlock()
	if n.err != nil {
		return fmt.Errorf("%w: %w", ErrStopped, n.err)
	}
	return ErrStopped
}

// Status implements Node.
func (n *raftNode) Status() Status {
	lead := n.lead.Load()
	return Status{
		ClusterID:    n.clusterID,
		MemberID:     n.id,
		Leader:       lead,
		Term:         n.term.Load(),
		CommitIndex:  n.commit.Load(),
		AppliedIndex: n.applied.Load(),
		IsLeader:     lead == n.id,

		LeaderChanges: n.leaderChanges.Load(),
	}
}

// Members implements Node.
func (n *raftNode) Members() []Member {
	n.membersMu.RLock()
	defer n.membersMu.RUnlock()
	return n.members.list()
}

func (n *raftNode) isRemoved(id uint64) bool {
	n.membersMu.RLock()
	defer n.membersMu.RUnlock()
	return n.members.Removed[id]
}

// AddMember implements Node: the new member is a voter (or, with learner,
// a learner) once the change applies; start it with Join (join = true) and
// the same member list.
func (n *raftNode) AddMember(ctx context.Context, peerURLs []string, learner bool) (Member, error) {
	if err := checkPeerURLs("add member", peerURLs); err != nil {
		return Member{}, err
	}
	n.confMu.Lock()
	defer n.confMu.Unlock()
	// Check against the member list as of now, not as this member last
	// applied it (a change made through another member may be on its way).
	if err := n.ReadBarrier(ctx); err != nil {
		return Member{}, err
	}
	n.membersMu.RLock()
	err := n.members.checkPeerURLsFree(0, peerURLs)
	started, voters, ready := n.members.readyToAdd()
	learners := n.members.learners()
	n.membersMu.RUnlock()
	if err != nil {
		return Member{}, err
	}
	if learner && learners >= maxLearners {
		return Member{}, fmt.Errorf("%w: %d learner (at most %d): promote or remove it first", ErrTooManyLearners, learners, maxLearners)
	}
	if !learner && !ready {
		return Member{}, fmt.Errorf("%w: %d of the %d voting members would have started, a quorum needs %d; start the members added before first", ErrNotEnoughStartedMembers, started, voters, voters/2+1)
	}
	reqID := n.reqID.Add(1)
	m := Member{ID: MemberID(n.cfg.Token, peerURLs, reqID), PeerURLs: slices.Clone(peerURLs), IsLearner: learner}
	mctx, err := json.Marshal(m)
	if err != nil {
		return Member{}, err
	}
	typ := pb.ConfChangeAddNode
	if learner {
		typ = pb.ConfChangeAddLearnerNode
	}
	cc := &pb.ConfChange{Id: new(reqID), Type: new(typ), NodeId: new(m.ID), Context: mctx}
	if err := n.proposeConfChange(ctx, reqID, cc); err != nil {
		return Member{}, err
	}
	return m, nil
}

// maxLearners is how many learners a cluster may have at once (etcd's
// --max-learners default).
const maxLearners = 1

// learnerReadyPercent is how far a learner must have applied, as a share
// of this member's applied index, to be promoted (etcd's readyPercent).
const learnerReadyPercent = 90

func checkPeerURLs(what string, peerURLs []string) error {
	if len(peerURLs) == 0 {
		return fmt.Errorf("cluster: %s: no peer URLs given", what)
	}
	for _, u := range peerURLs {
		if err := checkPeerURL(u); err != nil {
			return fmt.Errorf("cluster: %s: peer URL %q: %v", what, u, err)
		}
	}
	return nil
}

// PromoteMember implements Node: a learner that has caught up (applied
// at least 90% of what this member has, asked over its peer URL) becomes
// a voting member, if the voting members then keep a quorum of started
// members.
func (n *raftNode) PromoteMember(ctx context.Context, id uint64) error {
	n.confMu.Lock()
	defer n.confMu.Unlock()
	if err := n.ReadBarrier(ctx); err != nil {
		return err
	}
	n.membersMu.RLock()
	m, ok := n.members.get(id)
	started, voters, ready := n.members.readyToPromote()
	n.membersMu.RUnlock()
	switch {
	case !ok:
		return fmt.Errorf("%w: %x", ErrMemberNotFound, id)
	case !m.IsLearner:
		return fmt.Errorf("%w: %x is a voting member", ErrMemberNotLearner, id)
	case !ready:
		return fmt.Errorf("%w: %d of the %d voting members would have started, a quorum needs %d", ErrNotEnoughStartedMembers, started, voters, voters/2+1)
	}
	if err := n.learnerReady(m); err != nil {
		return err
	}
	m.IsLearner = false
	mctx, err := json.Marshal(m)
	if err != nil {
		return err
	}
	reqID := n.reqID.Add(1)
	cc := &pb.ConfChange{Id: new(reqID), Type: new(pb.ConfChangeAddNode), NodeId: new(id), Context: mctx}
	return n.proposeConfChange(ctx, reqID, cc)
}

// learnerReady asks the learner over its peer URLs how far it has applied.
func (n *raftNode) learnerReady(m Member) error {
	want := n.applied.Load() * learnerReadyPercent / 100
	var last error
	for _, u := range m.PeerURLs {
		v, err := n.fetchView(u, n.cfg.RequestTimeout/2)
		if err != nil {
			last = err
			continue
		}
		if v.MemberID != strconv.FormatUint(m.ID, 16) {
			last = fmt.Errorf("%s answers as member %s", u, v.MemberID)
			continue
		}
		if v.Applied < want {
			return fmt.Errorf("%w: learner %x has applied %d entries, %d%% of this member's %d is needed", ErrLearnerNotReady, m.ID, v.Applied, learnerReadyPercent, n.applied.Load())
		}
		return nil
	}
	return fmt.Errorf("%w: learner %x cannot be asked how far it has applied: %v", ErrLearnerNotReady, m.ID, last)
}

// UpdateMember implements Node: the member's peer URLs are replaced (its
// name, client URLs and role stay), as etcdctl member update does.
func (n *raftNode) UpdateMember(ctx context.Context, id uint64, peerURLs []string) error {
	if err := checkPeerURLs("update member", peerURLs); err != nil {
		return err
	}
	n.confMu.Lock()
	defer n.confMu.Unlock()
	if err := n.ReadBarrier(ctx); err != nil {
		return err
	}
	n.membersMu.RLock()
	m, ok := n.members.get(id)
	err := n.members.checkPeerURLsFree(id, peerURLs)
	n.membersMu.RUnlock()
	if !ok {
		return fmt.Errorf("%w: %x", ErrMemberNotFound, id)
	}
	if err != nil {
		return err
	}
	m.PeerURLs = slices.Clone(peerURLs)
	mctx, err := json.Marshal(m)
	if err != nil {
		return err
	}
	reqID := n.reqID.Add(1)
	cc := &pb.ConfChange{Id: new(reqID), Type: new(pb.ConfChangeUpdateNode), NodeId: new(id), Context: mctx}
	return n.proposeConfChange(ctx, reqID, cc)
}

// RemoveMember implements Node.
func (n *raftNode) RemoveMember(ctx context.Context, id uint64) error {
	n.confMu.Lock()
	defer n.confMu.Unlock()
	if err := n.ReadBarrier(ctx); err != nil {
		return err
	}
	n.membersMu.RLock()
	rm, ok := n.members.Members[id]
	started, voters, ready := n.members.readyToRemove(id)
	n.membersMu.RUnlock()
	if !ok {
		return fmt.Errorf("%w: %x", ErrMemberNotFound, id)
	}
	if !ready && !rm.IsLearner {
		return fmt.Errorf("%w: %d of the %d voting members left would have started, a quorum needs %d", ErrNotEnoughStartedMembers, started, voters, voters/2+1)
	}
	reqID := n.reqID.Add(1)
	cc := &pb.ConfChange{Id: new(reqID), Type: new(pb.ConfChangeRemoveNode), NodeId: new(id)}
	return n.proposeConfChange(ctx, reqID, cc)
}

func (n *raftNode) proposeConfChange(ctx context.Context, reqID uint64, cc *pb.ConfChange) error {
	if err := n.stoppedErr(); err != nil {
		return err
	}
	ctx, cancel := n.bound(ctx)
	defer cancel()
	if !n.hasLeader() {
		if err := n.waitLeader(ctx); err != nil {
			return err
		}
	}
	ch := n.wait.register(reqID)
	if err := n.raft.ProposeConfChange(ctx, cc); err != nil {
		n.wait.cancel(reqID)
		return n.mapRaftErr(ctx, err)
	}
	select {
	case r := <-ch:
		return r.err
	case <-ctx.Done():
		n.wait.cancel(reqID)
		return n.ctxErr(ctx)
	case <-n.stopc:
		n.wait.cancel(reqID)
		if errors.Is(n.stoppedErr(), ErrRemoved) && cc.GetNodeId() == n.id {
			return nil // this member removed itself
		}
		return n.stoppedErr()
	}
}
