package cluster

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
)

// RaftConfig configures one member of a raft cluster (StartRaft).
type RaftConfig struct {
	// Name is this member's name; it must be one of Members.
	Name string
	// Dir holds the member's raft state: the raft log store (Dir/log) and
	// received snapshots (Dir/snap). The state machine's data lives
	// elsewhere (the mvcc store).
	Dir string
	// ListenPeer is the host:port peer traffic is served on. Ignored when
	// PeerListener is set.
	ListenPeer string
	// PeerListener, if set, is used instead of listening on ListenPeer
	// (tests pass a listener on port 0).
	PeerListener net.Listener
	// Members are the members of the cluster: when the cluster is new, its
	// initial members, from which every member derives the same member IDs
	// and cluster ID; when Join is set, members to ask for the current list.
	Members []MemberConfig
	// Token distinguishes clusters started from the same member list (etcd's
	// initial-cluster-token). The default value is "strata".
	Token string
	// Join starts a member that was added at run time (AddMember, etcdctl
	// member add) with an empty Dir: it learns the cluster ID, its member ID
	// and the member list from the running members, then receives the log
	// or a snapshot from the leader. Ignored once Dir holds a raft log.
	Join bool

	// TickInterval is raft's clock. The default value is 100ms (etcd's
	// heartbeat interval).
	TickInterval time.Duration
	// ElectionTicks is the election timeout in ticks. The default value is
	// 10 (1 s with the default tick, etcd's).
	ElectionTicks int
	// HeartbeatTicks is the leader's heartbeat interval in ticks. The
	// default value is 1.
	HeartbeatTicks int
	// SnapshotEntries is how many entries are applied between snapshots;
	// each snapshot truncates the log. The default value is 10000.
	SnapshotEntries uint64
	// CatchUpEntries is how many entries before a snapshot are kept for
	// followers that are slightly behind, so that they catch up by log
	// rather than by snapshot. The default value is 5000.
	CatchUpEntries uint64
	// RequestTimeout bounds how long Propose, ReadBarrier and member
	// changes wait, whatever the caller's context. The default value is
	// 5s.
	RequestTimeout time.Duration

	// PeerServerTLS, if set, serves peer traffic over TLS; PeerClientTLS is
	// used to reach peers with https:// URLs.
	PeerServerTLS *tls.Config
	PeerClientTLS *tls.Config

	// Logger receives the member's log lines (elections, snapshots,
	// unreachable peers); nil means silent.
	Logger Logger
}

// MemberConfig is one [[cluster.members]] entry.
type MemberConfig struct {
	Name       string
	PeerURLs   []string
	ClientURLs []string
}

// Logger receives log lines.
type Logger interface {
	Infof(format string, args ...any)
}

const defaultToken = "strata"

func (c *RaftConfig) withDefaults() RaftConfig {
	out := *c
	if out.Token == "" {
		out.Token = defaultToken
	}
	if out.TickInterval <= 0 {
		out.TickInterval = 100 * time.Millisecond
	}
	if out.ElectionTicks <= 0 {
		out.ElectionTicks = 10
	}
	if out.HeartbeatTicks <= 0 {
		out.HeartbeatTicks = 1
	}
	if out.SnapshotEntries == 0 {
		out.SnapshotEntries = 10000
	}
	if out.CatchUpEntries == 0 {
		out.CatchUpEntries = 5000
	}
	if out.RequestTimeout <= 0 {
		out.RequestTimeout = 5 * time.Second
	}
	return out
}

// validate reports every problem of the config at once, each naming the
// setting.
func (c *RaftConfig) validate() error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf("cluster: "+format, args...)) }
	if c.Name == "" {
		add("name is empty: it must name this member, one of the members")
	}
	if c.Dir == "" {
		add("raft directory is empty")
	}
	if c.PeerListener == nil {
		if _, _, err := net.SplitHostPort(c.ListenPeer); err != nil {
			add("listen_peer = %q: must be host:port (%v)", c.ListenPeer, err)
		}
	}
	if len(c.Members) == 0 {
		add("members is empty: list every member (name, peer_url, client_url)")
	}
	names := map[string]bool{}
	urls := map[string]string{}
	found := false
	for i, m := range c.Members {
		if m.Name == "" {
			add("members[%d].name is empty", i)
		}
		if names[m.Name] {
			add("members[%d].name = %q: two members have this name", i, m.Name)
		}
		names[m.Name] = true
		if m.Name == c.Name {
			found = true
		}
		if len(m.PeerURLs) == 0 {
			add("members[%d].peer_url is empty (member %q)", i, m.Name)
		}
		for _, u := range m.PeerURLs {
			if err := checkPeerURL(u); err != nil {
				add("members[%d].peer_url = %q: %v", i, u, err)
			}
			if other, ok := urls[u]; ok {
				add("members[%d].peer_url = %q: also the peer URL of member %q", i, u, other)
			}
			urls[u] = m.Name
		}
		for _, u := range m.ClientURLs {
			if err := checkPeerURL(u); err != nil {
				add("members[%d].client_url = %q: %v", i, u, err)
			}
		}
	}
	if c.Name != "" && len(c.Members) > 0 && !found {
		add("name = %q: not one of the members (%s)", c.Name, memberNames(c.Members))
	}
	return errors.Join(errs...)
}

func memberNames(ms []MemberConfig) string {
	var names []string
	for _, m := range ms {
		names = append(names, m.Name)
	}
	slices.Sort(names)
	return fmt.Sprint(names)
}

// self returns this member's entry of Members.
func (c *RaftConfig) self() MemberConfig {
	for _, m := range c.Members {
		if m.Name == c.Name {
			return m
		}
	}
	return MemberConfig{}
}

// raftNode is the raft-backed Node. Three goroutines do the work:
//
//  1. run, the Ready loop: ticks raft, persists each Ready's entries, hard
//     state and snapshot in one fsynced batch before sending the messages
//     that depend on them (a leader sends its appends while it persists, as
//     etcd's does: the raft thesis §10.2.1), then hands committed entries to
//     the apply goroutine in order and calls Advance.
//  2. applyLoop: applies committed entries in log order to the state
//     machine and the member list, wakes proposers waiting on their IDs,
//     takes snapshots and truncates the log.
//  3. readLoop: serves ReadBarrier with raft's ReadIndex, one request for
//     every caller waiting at the time.
type raftNode struct {
	cfg       RaftConfig
	id        uint64
	clusterID uint64
	sm        StateMachine
	log       *logStore
	storage   *raft.MemoryStorage
	raft      raft.Node
	tr        *transport
	snapDir   string
	logger    Logger

	applyc chan *applyJob
	// snapMsgc carries MsgSnap messages to the apply goroutine.
	snapMsgc chan *pb.Message
	// Owned by the apply goroutine.
	confState *pb.ConfState
	snapIndex uint64
	smApplied uint64

	membersMu sync.RWMutex
	members   *memberSet

	applied     atomic.Uint64
	appliedMu   sync.Mutex
	appliedWake chan struct{} // closed and replaced when applied moves

	term, lead, commit atomic.Uint64
	leaderc            chan struct{}

	wait  *waitRegistry
	reqID atomic.Uint64

	readMu     sync.Mutex
	readNext   *readNotifier
	readWake   chan struct{}
	readStatec chan raft.ReadState

	recvMu sync.Mutex
	recv   map[uint64]receivedSnap

	confMu sync.Mutex // one member change at a time from this member

	stopc    chan struct{}
	stopOnce sync.Once
	done     chan struct{}
	errMu    sync.Mutex
	err      error
	wg       sync.WaitGroup
}

// receivedSnap is state machine data received with a raft snapshot.
type receivedSnap struct {
	path      string
	dataIndex uint64
}

// Errors of the raft Node beyond the contract's.
var (
	// ErrRemoved: this member was removed from the cluster.
	ErrRemoved = errors.New("cluster: member removed from the cluster")
)

// StartRaft starts this member of a raft cluster over sm and returns its
// Node. A fresh Dir bootstraps the member (a new cluster from Members, or,
// with Join, a member added at run time); a Dir with a raft log restarts
// it. A member whose config disagrees with its recorded cluster, or with
// a running peer, refuses to start with an error that says why.
func StartRaft(cfg RaftConfig, sm StateMachine) (_ Node, err error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	n := &raftNode{
		cfg:         cfg,
		sm:          sm,
		logger:      cfg.Logger,
		storage:     raft.NewMemoryStorage(),
		applyc:      make(chan *applyJob, 128),
		snapMsgc:    make(chan *pb.Message, 16),
		appliedWake: make(chan struct{}),
		leaderc:     make(chan struct{}, 1),
		wait:        newWaitRegistry(),
		readNext:    newReadNotifier(),
		readWake:    make(chan struct{}, 1),
		readStatec:  make(chan raft.ReadState, 64),
		recv:        map[uint64]receivedSnap{},
		stopc:       make(chan struct{}),
		done:        make(chan struct{}),
		snapDir:     filepath.Join(cfg.Dir, "snap"),
	}
	n.reqID.Store(uint64(time.Now().UnixNano()))
	if err := os.MkdirAll(n.snapDir, 0o755); err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	if err := removeStaleSnapshots(n.snapDir); err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	if n.log, err = openLogStore(filepath.Join(cfg.Dir, "log")); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = n.log.close()
		}
	}()
	n.tr = newTransport(n, cfg.PeerClientTLS)

	rc := &raft.Config{
		ElectionTick:    cfg.ElectionTicks,
		HeartbeatTick:   cfg.HeartbeatTicks,
		Storage:         n.storage,
		MaxSizePerMsg:   1 << 20,
		MaxInflightMsgs: 512,
		// Bound the proposals queued on a leader that cannot commit
		// (etcd's limit), so a minority leader fails fast.
		MaxUncommittedEntriesSize: 1 << 30,
		CheckQuorum:               true,
		PreVote:                   true,
		StepDownOnRemoval:         true,
		Logger:                    raftLogger{n},
	}
	var peers []raft.Peer
	meta, hasLog, err := n.log.meta()
	if err != nil {
		return nil, err
	}
	switch {
	case hasLog:
		if err := n.restart(meta); err != nil {
			return nil, err
		}
	case cfg.Join:
		if err := n.join(); err != nil {
			return nil, err
		}
	default:
		if peers, err = n.bootstrapNew(); err != nil {
			return nil, err
		}
	}
	rc.ID = n.id
	rc.Applied = n.snapIndex
	n.applied.Store(n.snapIndex)

	ln := cfg.PeerListener
	if ln == nil {
		if ln, err = net.Listen("tcp", cfg.ListenPeer); err != nil {
			return nil, fmt.Errorf("cluster: listen_peer = %q: %w", cfg.ListenPeer, err)
		}
	}
	if len(peers) > 0 {
		n.raft = raft.StartNode(rc, peers)
	} else {
		n.raft = raft.RestartNode(rc)
	}
	n.membersMu.RLock()
	n.tr.setPeers(n.members.Members)
	n.membersMu.RUnlock()
	n.tr.serve(ln, cfg.PeerServerTLS)
	n.logf("member %s (%x) of cluster %x started: applied %d, raft log from %d", cfg.Name, n.id, n.clusterID, n.snapIndex, n.snapIndex+1)

	n.wg.Add(3)
	go n.run()
	go n.applyLoop()
	go n.readLoop()
	n.wg.Add(1)
	go n.publishAttributes()
	return n, nil
}

// restart rebuilds raft's storage from the log store after checking that
// the config still describes this member of this cluster.
func (n *raftNode) restart(meta logMeta) error {
	l, err := n.log.load()
	if err != nil {
		return err
	}
	if err := n.checkRestart(meta, l.members); err != nil {
		return err
	}
	n.id, n.clusterID = meta.MemberID, meta.ClusterID
	snap := l.snapshot
	if err := n.storage.ApplySnapshot(snap); err != nil {
		return fmt.Errorf("cluster: raft log snapshot: %w", err)
	}
	if err := n.storage.SetHardState(l.hs); err != nil {
		return err
	}
	if err := n.storage.Append(l.entries); err != nil {
		return err
	}
	n.snapIndex = snap.GetMetadata().GetIndex()
	n.confState = pb.EnsureConfState(snap.GetMetadata().GetConfState())
	n.members = l.members
	if n.members.Applied < n.snapIndex {
		if n.members, err = unmarshalMemberSet(snap.GetData()); err != nil {
			return err
		}
		n.members.Applied = n.snapIndex
	}
	n.smApplied = n.sm.AppliedIndex()
	if n.smApplied < n.snapIndex {
		return fmt.Errorf("cluster: the state machine has applied up to index %d, but the raft log in %s starts after its snapshot at %d: entries %d..%d are gone; restore the data directory from a backup, or remove this member, wipe both directories and add it again",
			n.smApplied, n.cfg.Dir, n.snapIndex, n.smApplied+1, n.snapIndex)
	}
	n.term.Store(l.hs.GetTerm())
	n.commit.Store(l.hs.GetCommit())
	return nil
}

// bootstrapNew starts a member of a new cluster: member and cluster IDs
// from the config, the initial member list recorded, raft started with
// every initial member as a peer.
func (n *raftNode) bootstrapNew() ([]raft.Peer, error) {
	if a := n.sm.AppliedIndex(); a != 0 {
		return nil, fmt.Errorf("cluster: the state machine has already applied %d entries but the raft log in %s is empty: a new cluster starts from empty data directories", a, n.cfg.Dir)
	}
	members, clusterID := initialMembers(n.cfg)
	n.clusterID = clusterID
	for id, m := range members.Members {
		if m.Name == n.cfg.Name {
			n.id = id
		}
	}
	if err := n.checkPeersNew(members); err != nil {
		return nil, err
	}
	n.members = members
	n.confState = &pb.ConfState{}
	if err := n.log.bootstrap(logMeta{ClusterID: n.clusterID, MemberID: n.id, Name: n.cfg.Name, Token: n.cfg.Token}, members); err != nil {
		return nil, err
	}
	var peers []raft.Peer
	for _, m := range members.list() {
		ctx, err := json.Marshal(m)
		if err != nil {
			return nil, err
		}
		peers = append(peers, raft.Peer{ID: m.ID, Context: ctx})
	}
	return peers, nil
}

// initialMembers derives the member list and the cluster ID of a new
// cluster from the config.
func initialMembers(cfg RaftConfig) (*memberSet, uint64) {
	s := newMemberSet()
	var ids []uint64
	for _, mc := range cfg.Members {
		id := MemberID(cfg.Token, mc.PeerURLs, 0)
		s.Members[id] = &Member{ID: id, Name: mc.Name, PeerURLs: slices.Clone(mc.PeerURLs), ClientURLs: slices.Clone(mc.ClientURLs)}
		ids = append(ids, id)
	}
	return s, ClusterID(ids)
}

// publishAttributes replicates this member's name and client URLs when the
// member list does not have them yet (a member added at run time knows
// only its peer URLs) or has others, as etcd members publish theirs.
func (n *raftNode) publishAttributes() {
	defer n.wg.Done()
	self := n.cfg.self()
	for {
		n.membersMu.RLock()
		m := n.members.Members[n.id]
		current := m != nil && n.members.Started[n.id] && m.Name == n.cfg.Name && slices.Equal(m.ClientURLs, self.ClientURLs)
		n.membersMu.RUnlock()
		if current {
			return
		}
		if m != nil {
			attrs := Member{ID: n.id, Name: n.cfg.Name, ClientURLs: slices.Clone(self.ClientURLs)}
			b, _ := json.Marshal(attrs)
			ctx, cancel := context.WithTimeout(context.Background(), n.cfg.RequestTimeout)
			_, err := n.propose(ctx, kindAttributes, b)
			cancel()
			if err == nil {
				n.logf("published name %q and client URLs %v", n.cfg.Name, self.ClientURLs)
				continue
			}
		}
		select {
		case <-n.stopc:
			return
		case <-time.After(n.cfg.TickInterval * time.Duration(n.cfg.ElectionTicks)):
		}
	}
}

// Entry kinds: the first byte of a normal entry's data.
const (
	kindCommand    byte = 1 // proposer ID, request ID, state machine command
	kindAttributes byte = 2 // proposer ID, request ID, JSON Member (name, client URLs)
)

const proposalHeader = 1 + 8 + 8

func (n *raftNode) encodeProposal(kind byte, reqID uint64, body []byte) []byte {
	b := make([]byte, proposalHeader+len(body))
	b[0] = kind
	binary.BigEndian.PutUint64(b[1:], n.id)
	binary.BigEndian.PutUint64(b[9:], reqID)
	copy(b[proposalHeader:], body)
	return b
}

// Propose implements Node.
func (n *raftNode) Propose(ctx context.Context, cmd []byte) (any, error) {
	return n.propose(ctx, kindCommand, cmd)
}

func (n *raftNode) propose(ctx context.Context, kind byte, body []byte) (any, error) {
	if err := n.stoppedErr(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, n.cfg.RequestTimeout)
	defer cancel()
	if !n.hasLeader() {
		if err := n.waitLeader(ctx); err != nil {
			return nil, err
		}
	}
	id := n.reqID.Add(1)
	ch := n.wait.register(id)
	if err := n.raft.Propose(ctx, n.encodeProposal(kind, id, body)); err != nil {
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

// ctxErr is the error for a request whose context ended: the caller's own
// cancellation as is, a deadline as ErrTimeout (the outcome is unknown).
func (n *raftNode) ctxErr(ctx context.Context) error {
	if errors.Is(ctx.Err(), context.Canceled) {
		return ctx.Err()
	}
	if n.lead.Load() == 0 {
		return fmt.Errorf("%w (and no leader is known): %w", ErrTimeout, ctx.Err())
	}
	return fmt.Errorf("%w: %w", ErrTimeout, ctx.Err())
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

// AddMember implements Node: the new member is a voter once the change
// applies; start it with Join (join = true) and the same member list.
func (n *raftNode) AddMember(ctx context.Context, peerURLs []string) (Member, error) {
	if len(peerURLs) == 0 {
		return Member{}, fmt.Errorf("cluster: add member: no peer URLs given")
	}
	for _, u := range peerURLs {
		if err := checkPeerURL(u); err != nil {
			return Member{}, fmt.Errorf("cluster: add member: peer URL %q: %v", u, err)
		}
	}
	n.confMu.Lock()
	defer n.confMu.Unlock()
	// Check against the member list as of now, not as this member last
	// applied it (a change made through another member may be on its way).
	if err := n.ReadBarrier(ctx); err != nil {
		return Member{}, err
	}
	n.membersMu.RLock()
	for _, u := range peerURLs {
		if m := n.members.byPeerURL(u); m != nil {
			n.membersMu.RUnlock()
			return Member{}, fmt.Errorf("%w: %s is the peer URL of member %q (%x)", ErrPeerURLExists, u, m.Name, m.ID)
		}
	}
	n.membersMu.RUnlock()
	reqID := n.reqID.Add(1)
	m := Member{ID: MemberID(n.cfg.Token, peerURLs, reqID), PeerURLs: slices.Clone(peerURLs)}
	mctx, err := json.Marshal(m)
	if err != nil {
		return Member{}, err
	}
	cc := &pb.ConfChange{Id: new(reqID), Type: new(pb.ConfChangeAddNode), NodeId: new(m.ID), Context: mctx}
	if err := n.proposeConfChange(ctx, reqID, cc); err != nil {
		return Member{}, err
	}
	return m, nil
}

// RemoveMember implements Node.
func (n *raftNode) RemoveMember(ctx context.Context, id uint64) error {
	n.confMu.Lock()
	defer n.confMu.Unlock()
	if err := n.ReadBarrier(ctx); err != nil {
		return err
	}
	n.membersMu.RLock()
	_, ok := n.members.Members[id]
	n.membersMu.RUnlock()
	if !ok {
		return fmt.Errorf("%w: %x", ErrMemberNotFound, id)
	}
	reqID := n.reqID.Add(1)
	cc := &pb.ConfChange{Id: new(reqID), Type: new(pb.ConfChangeRemoveNode), NodeId: new(id)}
	return n.proposeConfChange(ctx, reqID, cc)
}

func (n *raftNode) proposeConfChange(ctx context.Context, reqID uint64, cc *pb.ConfChange) error {
	if err := n.stoppedErr(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, n.cfg.RequestTimeout)
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

// LeaderChanged implements Node.
func (n *raftNode) LeaderChanged() <-chan struct{} { return n.leaderc }

// Done is closed once the node has stopped, by Stop or by itself (Err
// says why: removed from the cluster, or the state machine failed).
func (n *raftNode) Done() <-chan struct{} { return n.done }

// Err returns why the node stopped by itself, or nil.
func (n *raftNode) Err() error {
	n.errMu.Lock()
	defer n.errMu.Unlock()
	return n.err
}

// fail stops the node because of err.
func (n *raftNode) fail(err error) {
	n.errMu.Lock()
	if n.err == nil {
		n.err = err
		n.logf("stopping: %v", err)
	}
	n.errMu.Unlock()
	go n.Stop()
}

// Stop implements Node.
func (n *raftNode) Stop() error {
	n.stopOnce.Do(func() {
		close(n.stopc)
		n.raft.Stop()
		n.tr.stop()
		n.wg.Wait()
		n.recvMu.Lock()
		for _, r := range n.recv {
			_ = os.Remove(r.path)
		}
		n.recvMu.Unlock()
		if err := n.log.close(); err != nil {
			n.logf("closing the raft log: %v", err)
		}
		close(n.done)
	})
	<-n.done
	return nil
}

func (n *raftNode) logf(format string, args ...any) {
	if n.logger != nil {
		n.logger.Infof("cluster: %s: "+format, append([]any{n.cfg.Name}, args...)...)
	}
}

// raftLogger passes raft's info, warning and error lines to the Logger.
type raftLogger struct{ n *raftNode }

func (l raftLogger) Debug(v ...any)                 {}
func (l raftLogger) Debugf(format string, v ...any) {}
func (l raftLogger) Info(v ...any)                  { l.n.logf("raft: %s", fmt.Sprint(v...)) }
func (l raftLogger) Infof(format string, v ...any)  { l.n.logf("raft: "+format, v...) }
func (l raftLogger) Warning(v ...any)               { l.n.logf("raft: warning: %s", fmt.Sprint(v...)) }
func (l raftLogger) Warningf(format string, v ...any) {
	l.n.logf("raft: warning: "+format, v...)
}
func (l raftLogger) Error(v ...any)                 { l.n.logf("raft: error: %s", fmt.Sprint(v...)) }
func (l raftLogger) Errorf(format string, v ...any) { l.n.logf("raft: error: "+format, v...) }

// Fatal and Panic are raft's broken invariants: they panic, as raft's own
// default logger does.
func (l raftLogger) Fatal(v ...any)                 { panic(fmt.Sprint(v...)) }
func (l raftLogger) Fatalf(format string, v ...any) { panic(fmt.Sprintf(format, v...)) }
func (l raftLogger) Panic(v ...any)                 { panic(fmt.Sprint(v...)) }
func (l raftLogger) Panicf(format string, v ...any) { panic(fmt.Sprintf(format, v...)) }
