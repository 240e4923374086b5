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
// leader. Propose applies the command at once, on the caller's goroutine;
// the store's WAL with sync = true is the durable log, so no separate log
// is kept.
//
// Unlike the raft Node, Local calls StateMachine.Apply concurrently, from
// every proposer at once: ordering is the state machine's own (mvcc's
// write lock), and concurrent writers share WAL syncs in mvcc's group
// commit, which a single applying goroutine would turn into one sync per
// write. There is no log, so Apply gets index 0 ("no log position"): the
// store's own WAL orders and keeps the writes. Status counts proposals
// applied as the applied index.
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

	index   atomic.Uint64
	applied atomic.Uint64
	leader  chan struct{}
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
	idx := n.index.Add(1)
	res, err := n.sm.Apply(0, cmd)
	if err != nil {
		err = fmt.Errorf("cluster: state machine failed: %w", err)
		n.failed.CompareAndSwap(nil, &err)
		return nil, err
	}
	for {
		a := n.applied.Load()
		if a >= idx || n.applied.CompareAndSwap(a, idx) {
			break
		}
	}
	return res, nil
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
