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

// StateMachine is what a Node drives: the one apply contract of both
// Nodes. The server implements it over the mvcc store.
//
// Commands are applied in batches: the Node begins a Batch, stages
// commands into it in order, and commits it; one batch is one engine
// commit. The raft Node stages each run of committed commands it applies
// at once, in log order, on one goroutine; Local, the single member,
// stages the proposals that arrive while the batch before commits (its
// group commit). Either way each staged command sees the ones before it,
// and the same commands on the same state give the same results and the
// same new state on every member (no clocks, no randomness, no local
// config). Which commands cannot share a batch is the state machine's
// business: its Stage commits what is staged before such a command.
type StateMachine interface {
	// NewBatch begins a batch. Only one is staged at a time; a Node may
	// begin the next once Commit released the state (Local does, while
	// the previous batch syncs).
	NewBatch() Batch
	// AppliedIndex is the index of the last command applied and made
	// durable with the state. A restarted member replays the log after it.
	AppliedIndex() uint64
	// Sync makes every command applied so far durable. With a raft Node
	// the raft log is the durable record (fsynced on a majority before a
	// command is applied), so the state may be written without syncing;
	// the Node calls Sync before it truncates the log or records a
	// snapshot. A state durable at every Commit returns nil.
	Sync() error
	// Snapshot writes the whole state, as of AppliedIndex, to w: what a
	// member that fell behind the log, or a new member, is sent. It may
	// run beside a batch (it streams to a member that fell behind), so it
	// reads one consistent state and returns the index of that state.
	Snapshot(w io.Writer) (index uint64, err error)
	// Restore replaces the whole state with a snapshot written by
	// Snapshot, taken at index.
	Restore(r io.Reader, index uint64) error
}

// RestorePreparer is a StateMachine that can take a snapshot in while it
// arrives: a raft member then writes the leader's stream straight into
// the state machine's storage, beside its work, instead of spooling it to
// a file and restoring from that once raft took the snapshot, and Commit
// only puts it in place. The stream is read once, not written and read
// again.
type RestorePreparer interface {
	// PrepareRestore reads a snapshot written by Snapshot from r without
	// changing the state: an error (a damaged stream, a failed write)
	// leaves nothing behind.
	PrepareRestore(r io.Reader) (PreparedRestore, error)
}

// PreparedRestore is a snapshot a RestorePreparer read. Exactly one of
// Commit and Discard is called.
type PreparedRestore interface {
	// Commit replaces the whole state with the snapshot, taken at index,
	// as Restore does.
	Commit(index uint64) error
	// Discard drops the snapshot.
	Discard()
}

// Batch stages commands and applies them in one commit.
type Batch interface {
	// Stage applies cmd at log position index (0 for Local's commands,
	// which have none: the store's own WAL is their log) after the
	// commands staged before, and returns its result, which Propose hands
	// back to the member that proposed it once Commit returned. An error
	// that the command itself causes (a compare that fails, a compacted
	// revision) belongs in the result; Stage returns a non-nil error only
	// when the state machine can no longer apply anything (storage
	// failed), which stops the Node. Call Commit after it too.
	Stage(index uint64, cmd []byte) (result any, err error)
	// Commit applies what is staged in one commit and returns once it is
	// durable (as the state machine's storage is configured) and visible
	// to readers. The state machine's AppliedIndex never names a command
	// of the batch whose state a restart could lose. An error stops the
	// Node: no result of the batch is to be handed out.
	Commit() error
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
	// It waits at most the member's request timeout, or until ctx ends.
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
	// MoveLeader makes transferee the leader: etcd's
	// Maintenance.MoveLeader (`etcdctl move-leader`), which operators run
	// before they take the leader's machine down, so the cluster changes
	// leader at a moment of their choosing instead of waiting out an
	// election timeout with writes stalled. It must be asked of the
	// leader, and returns once transferee leads or ctx ends.
	MoveLeader(ctx context.Context, transferee uint64) error
	// RepairFromLeader replaces this member's state machine with the
	// leader's state and goes on applying the log after it: how a member
	// whose tables are damaged repairs itself (see repair.go). It returns
	// once the state is in place; an error leaves the state machine as it
	// was. Local, a single member, has no peer and fails with ErrNoPeer.
	RepairFromLeader(ctx context.Context) (Repair, error)
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

// Stopper is implemented by a Node that can stop by itself (a raft member
// removed from its cluster, or one whose state machine failed): Done is
// closed once it stopped, and Err says why (nil after Stop).
type Stopper interface {
	Done() <-chan struct{}
	Err() error
}
