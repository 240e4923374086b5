// Package cluster is the apply path under Strata's client APIs: every write
// the server accepts is handed to a Node, which orders it, makes it durable
// and applies it to the state machine (the mvcc store, adapted by the
// server) on every member in the same order.
//
// A single member is a cluster of one behind the same interface (Local):
// it applies proposals directly, and the engine's WAL with sync = true is
// the durable log. With a [cluster] section, the Node runs
// go.etcd.io/raft/v3: proposals go through the raft log, are fsynced on a
// majority, and are applied in log order on each member; reads that must be
// linearizable wait on raft's ReadIndex. This is etcd's shape: the v3 API
// above etcdserver (raft + apply) above storage/mvcc. The server never
// forks on "clustered or not".
package cluster

import (
	"context"
	"errors"
	"io"
)

// StateMachine is what a Node drives. The server implements it over the
// mvcc store. Apply is called in log order, one entry at a time on one
// goroutine, with the same commands on every member, so it must be
// deterministic: the same command on the same state gives the same result
// and the same new state (no clocks, no randomness, no local config).
// Local, the single member, is the exception: it calls Apply from every
// proposer at once so that writers share WAL syncs (see Local), with index
// 0 (no log position): a StateMachine must also be safe for concurrent
// Apply, and record no applied index for index 0.
type StateMachine interface {
	// Apply applies one command at log position index and returns its
	// result, which Propose hands back to the member that proposed it.
	// An error that the command itself causes (a compare that fails, a
	// compacted revision) belongs in the result, not in a panic; Apply
	// returns a non-nil error only when the state machine can no longer
	// apply anything (storage failed), which stops the Node.
	Apply(index uint64, cmd []byte) (result any, err error)
	// AppliedIndex is the index of the last command applied and made
	// durable with the state. A restarted member replays the log after it.
	AppliedIndex() uint64
	// Snapshot writes the whole state, as of AppliedIndex, to w: what a
	// member that fell behind the log, or a new member, is sent.
	Snapshot(w io.Writer) (index uint64, err error)
	// Restore replaces the whole state with a snapshot written by
	// Snapshot, taken at index.
	Restore(r io.Reader, index uint64) error
}

// BatchApplier is implemented by a StateMachine that applies several
// commands together more cheaply than one at a time (the server's, over
// the mvcc store, with one engine commit for all). A raft Node hands it
// each run of consecutive commands of the committed entries it applies at
// once, in log order, instead of calling Apply for each. Its contract is
// Apply's, command by command: results[i] is cmds[i]'s result (an error
// the command causes belongs there), the commands are applied in order,
// each seeing the ones before it, and a non-nil error (storage failed)
// stops the Node. The state machine's AppliedIndex must never name a
// command of the batch whose state a restart could lose: recording all of
// the batch with its last index atomically does it.
type BatchApplier interface {
	ApplyBatch(cmds []Command) (results []any, err error)
}

// Command is a state machine command at its log position.
type Command struct {
	Index uint64
	Data  []byte
}

// Node orders, replicates and applies the writes of one member.
type Node interface {
	// Propose submits cmd and returns the result of applying it on this
	// member, once it is committed and applied here. A context that ends
	// before that returns its error, and the command's outcome is then
	// unknown: it may still commit (callers report a timeout, never a
	// failure). Without a leader it fails with ErrNoLeader.
	Propose(ctx context.Context, cmd []byte) (result any, err error)
	// ReadBarrier returns once this member has applied every write
	// committed before the call: a read served after it is linearizable.
	ReadBarrier(ctx context.Context) error
	// Status reports this member's view of the cluster.
	Status() Status
	// Members lists the members; AddMember, RemoveMember, PromoteMember
	// and UpdateMember change them through the log (one change at a time).
	// A learner (AddMember with learner) receives the log but does not
	// vote until PromoteMember makes it a voting member, as in etcd.
	Members() []Member
	AddMember(ctx context.Context, peerURLs []string, learner bool) (Member, error)
	RemoveMember(ctx context.Context, id uint64) error
	PromoteMember(ctx context.Context, id uint64) error
	UpdateMember(ctx context.Context, id uint64, peerURLs []string) error
	// LeaderChanged is signalled (non-blocking, capacity 1) whenever this
	// member gains or loses leadership; the server expires leases only
	// while IsLeader, as etcd's lessor does.
	LeaderChanged() <-chan struct{}
	// Stop stops the node; in-flight Proposes return ErrStopped.
	Stop() error
}

// Status is one member's view, as etcdctl endpoint status shows it.
type Status struct {
	ClusterID    uint64
	MemberID     uint64
	Leader       uint64 // 0: no leader known
	Term         uint64
	CommitIndex  uint64
	AppliedIndex uint64
	IsLeader     bool
	// LeaderChanges counts the times this member saw a new leader since
	// it started (etcd's etcd_server_leader_changes_seen_total).
	LeaderChanges uint64
}

// Member is one member of the cluster.
type Member struct {
	ID         uint64
	Name       string
	PeerURLs   []string
	ClientURLs []string
	IsLearner  bool
}

// Errors a Node returns; the server maps them onto etcd's rpctypes errors.
var (
	ErrNoLeader = errors.New("cluster: no leader")
	ErrStopped  = errors.New("cluster: node stopped")
	ErrTimeout  = errors.New("cluster: request timed out")
	// ErrMemberNotFound: RemoveMember of an ID that is not a member
	// (etcd's rpctypes.ErrGRPCMemberNotFound).
	ErrMemberNotFound = errors.New("cluster: member not found")
	// ErrPeerURLExists: AddMember of a peer URL a member already has
	// (etcd's rpctypes.ErrGRPCPeerURLExist).
	ErrPeerURLExists = errors.New("cluster: peer URL exists")
	// ErrNotEnoughStartedMembers: a member add or remove that would leave
	// the cluster without a quorum of started members (etcd's strict
	// reconfiguration check, rpctypes.ErrGRPCMemberNotEnoughStarted).
	ErrNotEnoughStartedMembers = errors.New("cluster: re-configuration failed due to not enough started members")
	// ErrMemberNotLearner: PromoteMember of a voting member
	// (rpctypes.ErrGRPCMemberNotLearner).
	ErrMemberNotLearner = errors.New("cluster: can only promote a learner member")
	// ErrLearnerNotReady: PromoteMember of a learner that has not caught
	// up with the log (rpctypes.ErrGRPCLearnerNotReady).
	ErrLearnerNotReady = errors.New("cluster: can only promote a learner member which is in sync with leader")
	// ErrTooManyLearners: AddMember of a learner while the cluster has one
	// (etcd's limit, rpctypes.ErrGRPCTooManyLearners).
	ErrTooManyLearners = errors.New("cluster: too many learner members in cluster")
)

// StateSyncer is implemented by a StateMachine whose Apply does not make
// each command durable by itself: with a raft Node the raft log is the
// durable record (fsynced on a majority before a command is applied), so
// the state machine's own store may run with sync = false, and a restart
// replays the log after the state machine's durable AppliedIndex. Before
// the raft Node truncates its log it calls SyncState, which must make
// everything applied so far durable. A StateMachine without it is taken
// to be durable at every Apply.
//
// Also part of the contract with a raft Node: Snapshot may run on another
// goroutine while Apply goes on (it streams to a member that fell behind),
// so it must read one consistent state (an engine snapshot) and return the
// index of that state.
type StateSyncer interface {
	SyncState() error
}

// Stopper is implemented by a Node that can stop by itself (a raft member
// removed from its cluster, or one whose state machine failed): Done is
// closed once it stopped, and Err says why (nil after Stop).
type Stopper interface {
	Done() <-chan struct{}
	Err() error
}
