package cluster

import (
	"context"
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

	"github.com/stratadb/strata/cluster/raftwal"
	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
)

// raftNode is the raft-backed Node. raft runs with AsyncStorageWrites, and
// five goroutines do the work:
//
//  1. run, the Ready loop: ticks raft and dispatches each Ready without
//     waiting for a disk: network messages to the peers at once (a leader
//     sends its appends while it persists its own copy: the raft thesis
//     §10.2.1), MsgStorageAppend to the append goroutine, MsgStorageApply
//     to the apply goroutine.
//  2. appendLoop: writes the appends queued meanwhile to the raft log in
//     one fsynced batch, then delivers their responses (a follower's
//     acknowledgement, a vote, the leader's own acknowledgement), which
//     raft holds back until the write is durable.
//  3. applyLoop: applies committed entries in log order to the state
//     machine and the member list, wakes proposers waiting on their IDs,
//     takes snapshots and truncates the log.
//  4. readLoop: serves ReadBarrier with raft's ReadIndex, one request for
//     every caller waiting at the time.
//  5. proposeLoop: steps the proposals that arrived meanwhile into raft as
//     one message.
type raftNode struct {
	cfg       RaftConfig
	id        uint64
	clusterID uint64
	sm        StateMachine
	log       *logStore
	raft      raft.Node
	tr        *transport
	snapDir   string
	logger    Logger

	applyc chan *applyJob
	// appendc carries MsgStorageAppend messages to the append goroutine.
	appendc chan *pb.Message
	// propc carries proposals to the proposal batcher.
	propc chan *pendingProposal
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
	// leaderChanges counts the new leaders seen (Status.LeaderChanges).
	leaderChanges atomic.Uint64
	leaderc       chan struct{}
	// gonec carries the leader when the transport finds its process gone
	// (deadleader.go).
	gonec chan goneLeader

	wait  *waitRegistry
	reqID atomic.Uint64

	readMu   sync.Mutex
	readNext *readNotifier
	readWake chan struct{}
	// expiries bound the ReadBarrier waits (see expiries).
	expiries   *expiries
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

// receivedSnap is state machine data received with a raft snapshot:
// spooled to the file at path, or prepared by a RestorePreparer.
type receivedSnap struct {
	path      string
	prepared  PreparedRestore
	dataIndex uint64
}

// drop removes the data of a snapshot not restored.
func (r receivedSnap) drop() {
	if r.prepared != nil {
		r.prepared.Discard()
	}
	if r.path != "" {
		_ = os.Remove(r.path)
	}
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
		applyc:      make(chan *applyJob, 128),
		appendc:     make(chan *pb.Message, 1024),
		propc:       make(chan *pendingProposal, 4096),
		snapMsgc:    make(chan *pb.Message, 16),
		appliedWake: make(chan struct{}),
		leaderc:     make(chan struct{}, 1),
		gonec:       make(chan goneLeader, 1),
		wait:        newWaitRegistry(),
		readNext:    newReadNotifier(),
		readWake:    make(chan struct{}, 1),
		expiries:    newExpiries(expiryGranule),
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
	if n.log, err = openLogStore(cfg.Dir, cfg.logFS); err != nil {
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
		Storage:         snapshotCommitted{n.log.wal},
		MaxSizePerMsg:   1 << 20,
		MaxInflightMsgs: 512,
		// Bound the proposals queued on a leader that cannot commit
		// (etcd's limit), so a minority leader fails fast.
		MaxUncommittedEntriesSize: 1 << 30,
		CheckQuorum:               true,
		PreVote:                   true,
		StepDownOnRemoval:         true,
		AsyncStorageWrites:        true,
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

	n.wg.Add(5)
	go n.run()
	go n.proposeLoop()
	go n.appendLoop()
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
	// The state machine needs every command up to the snapshot: up to the
	// state machine's applied index the snapshot records, which is below
	// the snapshot's own index when the entries just before it are not
	// commands. A snapshot that does not record it needs its index.
	need, recorded, err := snapshotStateApplied(snap.GetData())
	if err != nil {
		return err
	}
	if !recorded {
		need = n.snapIndex
	}
	if n.smApplied < need {
		return fmt.Errorf("cluster: the state machine has applied up to index %d, but the raft log in %s starts after its snapshot at %d, which needs the commands up to index %d: entries %d..%d are gone; restore the data directory from a backup, or remove this member, wipe both directories and add it again",
			n.smApplied, n.cfg.Dir, n.snapIndex, need, n.smApplied+1, need)
	}
	n.term.Store(l.hs.GetTerm())
	n.commit.Store(max(l.hs.GetCommit(), n.snapIndex))
	return nil
}

// snapshotCommitted is the raft log as raft's Storage, with a hard state
// whose commit index is at least the snapshot's. With AsyncStorageWrites
// the apply goroutine applies committed entries, and may take a snapshot
// at the last of them, before the append goroutine has written the hard
// state that records them committed: a member stopped in between has a
// snapshot past its recorded commit index, which raft refuses at restart
// ("state.commit is out of range"). Every entry up to the snapshot was
// applied, so committed: the commit index is raised to it.
type snapshotCommitted struct{ *raftwal.Log }

// InitialState implements raft.Storage.
func (s snapshotCommitted) InitialState() (*pb.HardState, *pb.ConfState, error) {
	hs, cs, err := s.Log.InitialState()
	if err != nil {
		return hs, cs, err
	}
	snap, err := s.Log.Snapshot()
	if err != nil {
		return nil, nil, err
	}
	if index := snap.GetMetadata().GetIndex(); hs.GetCommit() < index {
		hs.Commit = new(index)
	}
	return hs, cs, nil
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
		for i, r := range n.recv {
			r.drop()
			delete(n.recv, i)
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

// unstableMissing is the info line raft writes, with AsyncStorageWrites,
// when the append goroutine reports entries durable that an earlier
// report already covered (a Ready that appends nothing still names the
// entries in flight): routine, several times a second under load, so it
// is dropped as a debug line would be.
const unstableMissing = "entry at index %d missing from unstable log; ignoring"

func (l raftLogger) Debug(v ...any)                 {}
func (l raftLogger) Debugf(format string, v ...any) {}
func (l raftLogger) Info(v ...any)                  { l.n.logf("raft: %s", fmt.Sprint(v...)) }
func (l raftLogger) Infof(format string, v ...any) {
	if format == unstableMissing {
		return
	}
	l.n.logf("raft: "+format, v...)
}
func (l raftLogger) Warning(v ...any) { l.n.logf("raft: warning: %s", fmt.Sprint(v...)) }
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
