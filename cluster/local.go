package cluster

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
)

// ErrSingleMember is returned by a Local node's AddMember and RemoveMember:
// membership changes need a [cluster] section (the raft Node).
var ErrSingleMember = errors.New("cluster: a single member without [cluster] cannot change membership")

// LocalConfig names the one member of a Local node.
type LocalConfig struct {
	// ClusterID and MemberID are reported in Status and Members (etcd's
	// response headers); both must be non-zero.
	ClusterID, MemberID uint64
	// Name is the member's name.
	Name string
	// ClientURLs are the URLs clients reach this member at.
	ClientURLs []string
}

// Local is the Node of a single member: a cluster of one, always its own
// leader. It applies through the same contract as the raft Node
// (StateMachine batches), with no log: the store's WAL with sync = true
// is the durable log, so commands have no log position (index 0) and
// Status counts proposals applied as the applied index.
//
// Its batches are its group commit. A proposal joins a queue; the
// proposer that then takes the queue stages every command in it into one
// batch and commits it, and the others wait for their results. Staging
// is one proposer at a time (stageMu), committing is not: the next
// proposer stages the queue that grew meanwhile while the batch before
// waits for its WAL sync, so writers share syncs as they would with
// concurrent commits, and share engine commits too.
type Local struct {
	sm  StateMachine
	cfg LocalConfig

	// mu is held shared by every Propose while it applies and exclusively
	// by Stop, so Stop waits for the proposals in flight.
	mu      sync.RWMutex
	stopped bool
	// failed holds the first StateMachine error; then every Propose
	// fails with it.
	failed atomic.Pointer[error]

	// Lock order: stageMu, then queueMu.
	//
	// stageMu is held by the proposer staging a batch, from taking the
	// queue to the last Stage (not during Commit).
	stageMu sync.Mutex
	// queueMu guards queue, the proposals not yet staged, in arrival
	// order, and spare, the slice of a batch handed out, which the queue
	// grows into next instead of a new one.
	queueMu sync.Mutex
	queue   []*localProposal
	spare   []*localProposal

	applied atomic.Uint64
	leader  chan struct{}
}

// localProposal is one command on its way through a Local batch.
type localProposal struct {
	cmd    []byte
	result any
	err    error
	// done is released once the batch that staged it committed (or
	// failed: err is set): one wait, with no channel to allocate.
	done sync.WaitGroup
}

// NewLocal returns the single-member Node over sm. It is the leader from
// the start: LeaderChanged holds one signal.
func NewLocal(sm StateMachine, cfg LocalConfig) (*Local, error) {
	if sm == nil {
		return nil, errors.New("cluster: NewLocal: state machine is nil")
	}
	if cfg.ClusterID == 0 || cfg.MemberID == 0 {
		return nil, fmt.Errorf("cluster: NewLocal: cluster id %d and member id %d must be non-zero", cfg.ClusterID, cfg.MemberID)
	}
	n := &Local{sm: sm, cfg: cfg, leader: make(chan struct{}, 1)}
	n.leader <- struct{}{}
	return n, nil
}

// Propose applies cmd and returns its result. A context already done
// returns its error without applying; once applying has begun it
// finishes, so the outcome is always known. After a StateMachine error the
// node refuses every proposal with it.
func (n *Local) Propose(ctx context.Context, cmd []byte) (any, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	n.mu.RLock()
	defer n.mu.RUnlock()
	if n.stopped {
		return nil, ErrStopped
	}
	if p := n.failed.Load(); p != nil {
		return nil, *p
	}
	p := &localProposal{cmd: cmd}
	p.done.Add(1)
	n.queueMu.Lock()
	n.queue = append(n.queue, p)
	n.queueMu.Unlock()
	if b, staged := n.stage(); len(staged) > 0 {
		n.commit(b, staged)
	}
	// Staged by this proposer or by another.
	p.done.Wait()
	return p.result, p.err
}

// stage takes the queue and stages it in a new batch, one proposer at a
// time. It returns nothing if another proposer took the queue already.
// After a StateMachine error the proposals not staged get it.
func (n *Local) stage() (Batch, []*localProposal) {
	n.stageMu.Lock()
	defer n.stageMu.Unlock()
	n.queueMu.Lock()
	ps := n.queue
	n.queue, n.spare = n.spare, nil
	n.queueMu.Unlock()
	if len(ps) == 0 {
		return nil, nil
	}
	b := n.sm.NewBatch()
	var err error
	for _, p := range ps {
		if err == nil {
			p.result, err = b.Stage(0, p.cmd)
		}
		p.err = err
	}
	return b, ps
}

// commit commits a staged batch and hands out its results.
func (n *Local) commit(b Batch, ps []*localProposal) {
	err := b.Commit()
	if err == nil {
		err = ps[len(ps)-1].err // a Stage failed
	}
	if err != nil {
		err = fmt.Errorf("cluster: state machine failed: %w", err)
		n.failed.CompareAndSwap(nil, &err)
	} else {
		n.applied.Add(uint64(len(ps)))
	}
	for _, p := range ps {
		if err != nil {
			p.result, p.err = nil, err
		}
		p.done.Done()
	}
	clear(ps)
	n.queueMu.Lock()
	if cap(ps) > cap(n.spare) {
		n.spare = ps[:0]
	}
	n.queueMu.Unlock()
}

// ReadBarrier returns at once: every Propose that returned has been
// applied here, the only member.
func (n *Local) ReadBarrier(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	n.mu.RLock()
	defer n.mu.RUnlock()
	if n.stopped {
		return ErrStopped
	}
	return nil
}

// Status reports the member as its own leader, in term 1.
func (n *Local) Status() Status {
	a := n.applied.Load()
	return Status{
		ClusterID:    n.cfg.ClusterID,
		MemberID:     n.cfg.MemberID,
		Leader:       n.cfg.MemberID,
		Term:         1,
		CommitIndex:  a,
		AppliedIndex: a,
		IsLeader:     true,

		LeaderChanges: 1, // itself, at start
	}
}

// Members returns the one member.
func (n *Local) Members() []Member {
	return []Member{{ID: n.cfg.MemberID, Name: n.cfg.Name, ClientURLs: append([]string(nil), n.cfg.ClientURLs...)}}
}

// AddMember fails with ErrSingleMember.
func (n *Local) AddMember(context.Context, []string, bool) (Member, error) {
	return Member{}, ErrSingleMember
}

// PromoteMember fails with ErrSingleMember.
func (n *Local) PromoteMember(context.Context, uint64) error { return ErrSingleMember }

// UpdateMember fails with ErrSingleMember.
func (n *Local) UpdateMember(context.Context, uint64, []string) error { return ErrSingleMember }

// RemoveMember fails with ErrSingleMember.
func (n *Local) RemoveMember(context.Context, uint64) error { return ErrSingleMember }

// LeaderChanged delivers one signal, at start: the member leads until it
// stops.
func (n *Local) LeaderChanged() <-chan struct{} { return n.leader }

// MoveLeader accepts a move to the member itself, which leads already,
// as etcd's single member does, and refuses any other transferee.
func (n *Local) MoveLeader(_ context.Context, transferee uint64) error {
	if transferee != n.cfg.MemberID {
		return fmt.Errorf("%w: %x is not a member", ErrBadLeaderTransferee, transferee)
	}
	return nil
}

// Stop waits for the proposals in flight, then refuses new ones with
// ErrStopped. It does not close the state machine.
func (n *Local) Stop() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.stopped {
		return ErrStopped
	}
	n.stopped = true
	return nil
}

var _ Node = (*Local)(nil)
