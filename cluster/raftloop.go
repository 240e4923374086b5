package cluster

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"runtime"
	"time"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// applyJob is one unit of work for the apply goroutine, in log order:
// committed entries, the state machine data of a received snapshot, or
// the leader's state fetched to repair this member's.
type applyJob struct {
	entries []*pb.Entry
	restore *pb.Snapshot
	// repair is the leader's state this member fetched to replace its
	// own (repair.go).
	repair *repairJob
	// resps are raft's messages to deliver once the entries are applied
	// (MsgStorageApply's responses).
	resps []*pb.Message
	// done, if set, is closed once the job is applied.
	done chan struct{}
	err  error
}

// maxAppendBatch bounds the MsgStorageAppend messages the append goroutine
// writes in one fsynced batch.
const maxAppendBatch = 256

// run is the Ready loop. raft runs with AsyncStorageWrites: a Ready's
// local work arrives as messages, MsgStorageAppend for the append
// goroutine (appendLoop) and MsgStorageApply for the apply goroutine
// (applyLoop), and the loop never waits for a disk: it sends the network
// messages at once and goes on to the next Ready while the appends are
// fsynced. raft itself holds back every message that depends on the local
// log (a follower's append acknowledgement, a vote) as a response of the
// MsgStorageAppend, delivered only once the write is durable.
func (n *raftNode) run() {
	defer n.wg.Done()
	ticker := time.NewTicker(n.cfg.TickInterval)
	defer ticker.Stop()
	var campaign <-chan time.Time
	for {
		select {
		case <-ticker.C:
			n.raft.Tick()
		case g := <-n.gonec:
			if c := n.forgetGoneLeader(g); c != nil {
				campaign = c
			}
		case <-campaign:
			campaign = nil
			n.campaignIfLeaderless()
		case rd := <-n.raft.Ready():
			if rd.SoftState != nil {
				n.setLeader(rd.Lead)
			}
			if err := n.handleReady(rd); err != nil {
				n.fail(err)
				return
			}
		case <-n.stopc:
			return
		}
	}
}

func (n *raftNode) setLeader(lead uint64) {
	if old := n.lead.Swap(lead); old != lead {
		if lead != 0 {
			n.leaderChanges.Add(1)
			n.logf("leader is %x", lead)
		}
		select {
		case n.leaderc <- struct{}{}:
		default:
		}
	}
}

// handleReady dispatches one Ready: read states to the readers, appends to
// the append goroutine, committed entries to the apply goroutine, the rest
// to the peers.
func (n *raftNode) handleReady(rd raft.Ready) error {
	for _, rs := range rd.ReadStates {
		select {
		case n.readStatec <- rs:
		default: // nobody waits for it any more; the reader retries
		}
	}
	var appends, applies, msgs []*pb.Message
	for _, m := range rd.Messages {
		switch m.GetTo() {
		case raft.LocalAppendThread:
			appends = append(appends, m)
		case raft.LocalApplyThread:
			applies = append(applies, m)
		default:
			msgs = append(msgs, m)
		}
	}
	for _, m := range applies {
		job := &applyJob{entries: m.GetEntries(), resps: m.GetResponses()}
		if hasConfChange(job.entries) {
			// A member must not vote or count votes with a stale
			// membership: the change applies before this Ready's messages
			// go out.
			job.done = make(chan struct{})
			if err := n.runJob(job); err != nil {
				return err
			}
			continue
		}
		select {
		case n.applyc <- job:
		case <-n.stopc:
			return nil
		}
	}
	n.deliver(msgs)
	for _, m := range appends {
		select {
		case n.appendc <- m:
		case <-n.stopc:
			return nil
		}
	}
	return nil
}

// deliver steps the messages addressed to this member into raft (the
// responses of local storage work) and sends the others to their peers.
func (n *raftNode) deliver(msgs []*pb.Message) {
	var remote []*pb.Message
	for _, m := range msgs {
		if m.GetTo() != n.id {
			remote = append(remote, m)
			continue
		}
		if err := n.raft.Step(context.Background(), m); err != nil && !errors.Is(err, raft.ErrStopped) {
			n.logf("stepping %v: %v", m.GetType(), err)
		}
	}
	n.tr.send(n.divertSnapshots(remote))
}

// appendLoop is the append goroutine: it writes MsgStorageAppend messages
// to the raft log in order, every message queued meanwhile in the same
// fsynced batch (group commit), updates raft's MemoryStorage, and only
// then delivers the messages' responses.
func (n *raftNode) appendLoop() {
	defer n.wg.Done()
	var next *pb.Message
	for {
		m := next
		next = nil
		if m == nil {
			select {
			case m = <-n.appendc:
			case <-n.stopc:
				return
			}
		}
		batch := []*pb.Message{m}
		// Let the goroutines ready to run go first: on a busy member they
		// hand raft more entries, which then join this batch's fsync.
		// With nothing else to run, this returns at once.
		runtime.Gosched()
		// A snapshot is written alone: the state machine restores it first.
	fill:
		for raft.IsEmptySnap(m.GetSnapshot()) && len(batch) < maxAppendBatch {
			select {
			case m2 := <-n.appendc:
				if !raft.IsEmptySnap(m2.GetSnapshot()) {
					next = m2
					break fill
				}
				batch = append(batch, m2)
			default:
				break fill
			}
		}
		if err := n.persist(batch); err != nil {
			if !errors.Is(err, ErrStopped) { // Stop, not a failure
				n.fail(err)
			}
			return
		}
	}
}

// persist makes a batch of MsgStorageAppend durable and delivers their
// responses.
func (n *raftNode) persist(batch []*pb.Message) error {
	snap := batch[0].GetSnapshot()
	hasSnap := !raft.IsEmptySnap(snap)
	if hasSnap {
		// The state machine takes the snapshot's data first: if we crash
		// before the raft log records the snapshot, the restarted member
		// has a state machine ahead of its log, which skips what it has.
		if err := n.runJob(&applyJob{restore: snap, done: make(chan struct{})}); err != nil {
			return err
		}
	}
	hs, err := n.log.wal.Save(batch)
	if err != nil {
		return err
	}
	if hs != nil {
		n.term.Store(hs.GetTerm())
		n.commit.Store(hs.GetCommit())
	}
	for _, m := range batch {
		n.deliver(m.GetResponses())
	}
	return nil
}

// divertSnapshots hands MsgSnap messages to the apply goroutine, which
// sends them with its current state (mergeSnapshot), and returns the rest.
func (n *raftNode) divertSnapshots(msgs []*pb.Message) []*pb.Message {
	out := msgs[:0:0]
	for _, m := range msgs {
		if m.GetType() != pb.MsgSnap {
			out = append(out, m)
			continue
		}
		select {
		case n.snapMsgc <- m:
		default:
			n.raft.ReportSnapshot(m.GetTo(), raft.SnapshotFailure)
		}
	}
	return out
}

// mergeSnapshot rewrites a MsgSnap to describe this member's applied
// state, as etcd's leader does: raft names the snapshot in its storage,
// which may predate a member added since (a joining member must find
// itself in the snapshot's configuration); the member list and
// configuration as of the applied index do not, and the state machine's
// data streamed with it is at least as new.
func (n *raftNode) mergeSnapshot(m *pb.Message) {
	applied := n.applied.Load()
	term, err := n.log.wal.Term(applied)
	if err != nil {
		n.logf("snapshot for %x: term of applied index %d: %v", m.GetTo(), applied, err)
		n.raft.ReportSnapshot(m.GetTo(), raft.SnapshotFailure)
		return
	}
	n.membersMu.RLock()
	// The data streamed with the message is at least at smApplied.
	data := n.members.marshalSnapshot(min(n.smApplied, applied))
	n.membersMu.RUnlock()
	m.Snapshot = &pb.Snapshot{
		Data: data,
		Metadata: &pb.SnapshotMetadata{
			Index:     new(applied),
			Term:      new(term),
			ConfState: proto.Clone(n.confState).(*pb.ConfState),
		},
	}
	n.tr.send([]*pb.Message{m})
}

// runJob queues job and waits until it is applied.
func (n *raftNode) runJob(job *applyJob) error {
	select {
	case n.applyc <- job:
	case <-n.stopc:
		return ErrStopped
	}
	select {
	case <-job.done:
		return job.err
	case <-n.stopc:
		return ErrStopped
	}
}

func hasConfChange(ents []*pb.Entry) bool {
	for _, e := range ents {
		if e.GetType() != pb.EntryNormal {
			return true
		}
	}
	return false
}

// applyLoop applies jobs in order.
func (n *raftNode) applyLoop() {
	defer n.wg.Done()
	// idle fires once the apply has waited idleSnapshotAfter for a job;
	// it is set again by the next job.
	idle := time.NewTimer(idleSnapshotAfter)
	defer idle.Stop()
	for {
		var job *applyJob
		select {
		case job = <-n.applyc:
		case m := <-n.snapMsgc:
			n.mergeSnapshot(m)
			continue
		case <-idle.C:
			// Not needed for safety, only to keep the log short: a
			// failure (a full disk refusing the store's flush) leaves
			// the member up, and the snapshot waits for the next pause.
			if err := n.snapshotIfIdle(); err != nil {
				n.logf("snapshot after a pause in writes: %v; tried again after the next pause", err)
			}
			continue
		case <-n.stopc:
			return
		}
		idle.Reset(idleSnapshotAfter)
		var err error
		switch {
		case job.restore != nil:
			err = n.restoreSnapshot(job.restore)
		case job.repair != nil:
			err = n.applyRepair(job.repair)
		default:
			err = n.applyEntries(job.entries)
			var d *damagedRun
			if errors.As(err, &d) {
				err = n.repairApply(job.entries, d)
			}
		}
		if err == nil {
			err = n.maybeSnapshot()
		}
		job.err = err
		if job.done != nil {
			close(job.done)
		}
		if err != nil {
			n.fail(err)
			return
		}
		n.deliver(job.resps)
	}
}

// setApplied publishes the applied index and wakes its waiters.
func (n *raftNode) setApplied(index uint64) {
	n.applied.Store(index)
	n.appliedMu.Lock()
	close(n.appliedWake)
	n.appliedWake = make(chan struct{})
	n.appliedMu.Unlock()
}

// appliedSignal returns a channel closed when applied next moves.
func (n *raftNode) appliedSignal() <-chan struct{} {
	n.appliedMu.Lock()
	defer n.appliedMu.Unlock()
	return n.appliedWake
}

// applyEntries applies committed entries in log order. Each run of
// consecutive commands is staged in one state machine batch (committed
// before any other entry, so conf changes and member attributes keep
// their place in the order).
func (n *raftNode) applyEntries(ents []*pb.Entry) error {
	last := n.applied.Load()
	var run []*pb.Entry
	for _, e := range ents {
		idx := e.GetIndex()
		if idx <= last {
			continue // covered by a snapshot restored since
		}
		if idx != last+1 {
			return fmt.Errorf("cluster: committed entry %d follows applied entry %d: a gap", idx, last)
		}
		last = idx
		if e.GetType() == pb.EntryNormal && isCommand(e.GetData()) {
			if idx > n.smApplied { // else the state machine has it (restart, or data newer than its snapshot)
				run = append(run, e)
			} else if proposer, reqID, _ := proposal(e.GetData()); proposer == n.id {
				// Its effect came with a state taken from the leader
				// (repair, snapshot): its result is not known here.
				n.wait.trigger(reqID, applyResult{err: fmt.Errorf("%w: entry %d took effect with the leader's state this member took in place of its own; its result is not known here", ErrTimeout, idx)})
			}
			continue
		}
		if err := n.applyCommands(run); err != nil {
			return err
		}
		run = run[:0]
		var err error
		switch e.GetType() {
		case pb.EntryNormal:
			err = n.applyNormal(idx, e.GetData())
		case pb.EntryConfChange:
			err = n.applyConfChange(idx, e.GetData())
		default:
			err = fmt.Errorf("cluster: entry %d: unsupported entry type %v", idx, e.GetType())
		}
		if err != nil {
			return err
		}
	}
	if err := n.applyCommands(run); err != nil {
		return err
	}
	n.setApplied(last)
	return nil
}

// isCommand reports whether a normal entry's data is a state machine
// command.
func isCommand(data []byte) bool {
	return len(data) >= proposalHeader && (data[0] == kindCommand || data[0] == kindCommandS2)
}

// proposal splits a proposal's data (at least proposalHeader bytes) into
// its proposer, request ID and body.
func proposal(data []byte) (proposer, reqID uint64, body []byte) {
	return binary.BigEndian.Uint64(data[1:]), binary.BigEndian.Uint64(data[9:]), data[proposalHeader:]
}

// applyCommands applies a run of command entries in one state machine
// batch and hands each result to its proposer, in log order.
func (n *raftNode) applyCommands(ents []*pb.Entry) error {
	if len(ents) == 0 {
		return nil
	}
	first, last := ents[0].GetIndex(), ents[len(ents)-1].GetIndex()
	bodies := make([][]byte, len(ents))
	for i, e := range ents {
		if proposer, reqID, _ := proposal(e.GetData()); proposer == n.id {
			if bodies[i] = n.wait.command(reqID, e.GetData()); bodies[i] != nil {
				continue
			}
		}
		var err error
		if bodies[i], err = command(e.GetData()); err != nil {
			return fmt.Errorf("cluster: entry %d: %w", e.GetIndex(), err)
		}
	}
	b := n.sm.NewBatch()
	results := make([]any, len(ents))
	for i, e := range ents {
		res, err := b.Stage(e.GetIndex(), bodies[i])
		if err != nil {
			_ = b.Commit() // releases the batch; the store failed
			return damaged(first, fmt.Errorf("cluster: state machine cannot apply entry %d: %w", e.GetIndex(), err))
		}
		results[i] = res
	}
	if err := b.Commit(); err != nil {
		return damaged(first, fmt.Errorf("cluster: state machine cannot apply entries %d-%d: %w", first, last, err))
	}
	n.smApplied = last
	for i, e := range ents {
		if proposer, reqID, _ := proposal(e.GetData()); proposer == n.id {
			n.wait.trigger(reqID, applyResult{result: results[i]})
		}
	}
	return nil
}

func (n *raftNode) applyNormal(idx uint64, data []byte) error {
	if len(data) == 0 {
		return nil // a new leader's empty entry
	}
	if len(data) < proposalHeader {
		return fmt.Errorf("cluster: entry %d: %d bytes is too short for a proposal", idx, len(data))
	}
	proposer, reqID, body := proposal(data)
	// Commands went to applyCommands.
	switch data[0] {
	case kindAttributes:
		var attrs Member
		if err := json.Unmarshal(body, &attrs); err != nil {
			return fmt.Errorf("cluster: entry %d: member attributes: %w", idx, err)
		}
		if err := n.updateMembers(idx, func(s *memberSet) {
			if m := s.Members[attrs.ID]; m != nil {
				m.Name, m.ClientURLs = attrs.Name, attrs.ClientURLs
				s.Started[attrs.ID] = true
			}
		}); err != nil {
			return err
		}
		if proposer == n.id {
			n.wait.trigger(reqID, applyResult{})
		}
	default:
		return fmt.Errorf("cluster: entry %d: unknown kind %d", idx, data[0])
	}
	return nil
}

// updateMembers applies change to the member list at idx, unless the list
// already has it, and saves the list.
func (n *raftNode) updateMembers(idx uint64, change func(*memberSet)) error {
	n.membersMu.Lock()
	if idx <= n.members.Applied {
		n.membersMu.Unlock()
		return nil
	}
	next := n.members.clone()
	change(next)
	next.Applied = idx
	n.members = next
	n.membersMu.Unlock()
	if err := n.log.saveMembers(next); err != nil {
		return err
	}
	n.tr.setPeers(next.Members)
	return nil
}

func (n *raftNode) applyConfChange(idx uint64, data []byte) error {
	cc := &pb.ConfChange{}
	if err := proto.Unmarshal(data, cc); err != nil {
		return fmt.Errorf("cluster: entry %d: conf change: %w", idx, err)
	}
	// Raft's own configuration is rebuilt from the snapshot plus every
	// change after it, so every change is applied to raft, even one the
	// member list already has.
	n.confState = n.raft.ApplyConfChange(cc)
	id := cc.GetNodeId()
	var err error
	switch cc.GetType() {
	case pb.ConfChangeAddNode, pb.ConfChangeAddLearnerNode, pb.ConfChangeUpdateNode:
		var m Member
		if len(cc.GetContext()) > 0 {
			if err := json.Unmarshal(cc.GetContext(), &m); err != nil {
				return fmt.Errorf("cluster: entry %d: member: %w", idx, err)
			}
		}
		m.ID = id
		switch cc.GetType() {
		case pb.ConfChangeAddLearnerNode:
			m.IsLearner = true
		case pb.ConfChangeAddNode:
			m.IsLearner = false // added as a voter, or a learner promoted
		}
		err = n.updateMembers(idx, func(s *memberSet) {
			old := s.Members[id]
			if old != nil && m.Name == "" {
				m.Name, m.ClientURLs = old.Name, old.ClientURLs
			}
			if old != nil && cc.GetType() == pb.ConfChangeUpdateNode {
				m.IsLearner = old.IsLearner
			}
			s.Members[id] = &m
		})
		if err == nil {
			n.logf("member %x (%v, learner %v) %v at index %d", id, m.PeerURLs, m.IsLearner, cc.GetType(), idx)
		}
	case pb.ConfChangeRemoveNode:
		err = n.updateMembers(idx, func(s *memberSet) {
			delete(s.Members, id)
			delete(s.Started, id)
			s.Removed[id] = true
		})
		if err == nil {
			n.logf("member %x removed at index %d", id, idx)
		}
	}
	if err != nil {
		return err
	}
	n.wait.trigger(cc.GetId(), applyResult{})
	if cc.GetType() == pb.ConfChangeRemoveNode && id == n.id {
		n.setApplied(idx)
		n.fail(ErrRemoved)
	}
	return nil
}

// restoreSnapshot replaces the state machine and the member list with a
// snapshot received from the leader.
func (n *raftNode) restoreSnapshot(snap *pb.Snapshot) error {
	index := snap.GetMetadata().GetIndex()
	n.recvMu.Lock()
	rs, ok := n.recv[index]
	for i, r := range n.recv {
		if i <= index {
			if i != index {
				r.drop()
			}
			delete(n.recv, i)
		}
	}
	n.recvMu.Unlock()
	if !ok {
		return fmt.Errorf("cluster: raft snapshot at index %d arrived without its state machine data", index)
	}
	defer rs.drop() // after a Commit, Discard does nothing
	if rs.dataIndex > n.smApplied {
		if err := n.install(rs); err != nil {
			return fmt.Errorf("cluster: state machine cannot restore the snapshot at index %d: %w", rs.dataIndex, err)
		}
		// The raft log records the snapshot next: the data must be durable.
		if err := n.sm.Sync(); err != nil {
			return fmt.Errorf("cluster: state machine sync after restore: %w", err)
		}
		n.smApplied = rs.dataIndex
	}
	members, err := unmarshalMemberSet(snap.GetData())
	if err != nil {
		return err
	}
	members.Applied = index
	n.membersMu.Lock()
	n.members = members
	n.membersMu.Unlock()
	if err := n.log.saveMembers(members); err != nil {
		return err
	}
	n.tr.setPeers(members.Members)
	n.confState = proto.Clone(pb.EnsureConfState(snap.GetMetadata().GetConfState())).(*pb.ConfState)
	n.snapIndex = index
	n.setApplied(index)
	n.logf("restored snapshot at index %d (state machine at %d)", index, n.smApplied)
	return nil
}

// install puts the state machine data of rs in place of the state
// machine's: the restore it prepared while it arrived, or the file it was
// spooled to.
func (n *raftNode) install(rs receivedSnap) error {
	if rs.prepared != nil {
		return rs.prepared.Commit(rs.dataIndex)
	}
	return n.restoreFile(rs.path, rs.dataIndex)
}

// restoreFile restores the state machine from snapshot data spooled to path.
func (n *raftNode) restoreFile(path string, dataIndex uint64) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("cluster: snapshot data: %w", err)
	}
	defer f.Close()
	return n.sm.Restore(f, dataIndex)
}

// maybeSnapshot takes a snapshot at the applied index every
// SnapshotEntries entries or snapshotBytes of them, and truncates the log
// behind it, keeping CatchUpEntries entries and catchUpBytes at most. The
// state machine's data is not copied: a snapshot is the member list and
// raft's configuration at the index; the data is streamed from the state
// machine when a follower needs it.
func (n *raftNode) maybeSnapshot() error {
	applied := n.applied.Load()
	if applied-n.snapIndex < n.cfg.SnapshotEntries && (applied == n.snapIndex || n.log.wal.BytesAfter(n.snapIndex) < snapshotBytes) {
		return nil
	}
	return n.snapshot(applied)
}

// snapshotIfIdle takes a snapshot at the applied index of a member whose
// writes paused, once idleSnapshotBytes of entries came since the last
// one: the log then drops them (keeping those for followers a little
// behind), and a restart has nothing to apply again. A trickle of writes
// still waits for snapshotBytes, so that each flush of the store is worth
// its tables.
func (n *raftNode) snapshotIfIdle() error {
	applied := n.applied.Load()
	if applied == n.snapIndex || n.log.wal.BytesAfter(n.snapIndex) < idleSnapshotBytes {
		return nil
	}
	return n.snapshot(applied)
}

// snapshot takes a snapshot at applied, which the state machine has
// applied, and truncates the log behind it.
func (n *raftNode) snapshot(applied uint64) error {
	// Entries are dropped from the log below: what the state machine
	// applied must be durable first.
	if err := n.sm.Sync(); err != nil {
		return fmt.Errorf("cluster: state machine sync before snapshot: %w", err)
	}
	n.membersMu.RLock()
	// The state machine's applied index goes with the snapshot: a restart
	// needs the commands up to it, which may be below applied (the last
	// entries not commands), or above (a restored snapshot's data newer
	// than its index, where the commands up to applied suffice).
	data := n.members.marshalSnapshot(min(n.smApplied, applied))
	n.membersMu.RUnlock()
	_, err := n.log.wal.CreateSnapshot(applied, n.confState, data)
	if errors.Is(err, raft.ErrSnapOutOfDate) {
		n.snapIndex = applied
		return nil
	}
	if err != nil {
		return fmt.Errorf("cluster: snapshot at %d: %w", applied, err)
	}
	n.snapIndex = applied
	if compact := n.log.wal.CatchUpStart(applied, n.cfg.CatchUpEntries, catchUpBytes); compact > 0 {
		if err := n.log.wal.Compact(compact); err != nil && !errors.Is(err, raft.ErrCompacted) {
			return fmt.Errorf("cluster: compact the raft log at %d: %w", compact, err)
		}
	}
	return nil
}
