package cluster

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"strconv"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"
)

// A member whose state machine is damaged (its engine met a block whose
// checksum does not match) repairs itself from the leader's state, without
// a membership change:
//
//  1. Raft's safety rests on the raft log and HardState only, in their
//     own directory, which damage to the state machine's tables does not
//     touch; and the state machine is deterministic. So the member may
//     replace its state machine with the leader's state as of some index
//     L and go on applying its own log after L: the result is what it
//     would have been without the damage.
//  2. RepairFromLeader asks the leader (after moving the leadership away
//     if this member leads) for its state: GET /raft/state?applied=A on
//     the leader's peer URL, A this member's applied index. The leader
//     waits until it has applied A itself, so L, its state machine's
//     applied index, is at least this member's state machine's, and
//     streams StateMachine.Snapshot in the framing of a raft snapshot's
//     data (writeStateData). The member reads it as it reads a raft
//     snapshot's data (receiveSnapshotData): straight into a prepared
//     restore when the state machine is a RestorePreparer; a damaged or
//     cut stream leaves nothing behind.
//  3. The replacement is a job of the apply goroutine (applyRepair), so it
//     never races an apply: Commit(L), then the commands this member
//     applied after L while the state was on its way are applied again
//     from its own raft log, and the state is synced. Entries up to L that
//     raft delivers later are skipped by the rule that already serves a
//     restored snapshot newer than the log (smApplied). The applied index
//     and the member list (the raft directory's) do not change.
//
// Raft runs on meanwhile: the member acknowledges appends and votes while
// the state arrives. A member whose raft log no longer holds the entries
// after L (the leader's state older than what it applied, the log
// compacted past it) refuses that state and asks again.
//
// A member whose apply of a command meets the damage (the state machine
// wraps the error with ErrStateDamaged: a txn or a put with prev_kv that
// reads a damaged value) would meet it again after a restart, the command
// being replayed from the log; so the apply goroutine does not stop the
// node but repairs it in place (repairApply): the leader's state at this
// member's applied index or later, then the rest of the failed job.
//
// A member whose state machine does not even open (its start meets the
// damage) repairs itself before it starts: FetchLeaderState asks its
// peers, from its raft log, for the leader's state at its commit index or
// later, and the caller puts it in place; StartRaft then goes on from it
// as after any restart.

// pathState is the peer endpoint a member fetches the leader's state
// from to repair its own.
const pathState = "/raft/state"

// ErrStateDamaged marks a state machine error (from Batch.Stage or
// Batch.Commit) that says the state machine's own data is damaged (a
// block whose checksum does not match), not that the command or the
// store's use of it failed: the apply goroutine then replaces the state
// machine with the leader's state (repairApply) instead of stopping the
// node. A state machine wraps its damage errors with it.
var ErrStateDamaged = errors.New("cluster: state machine data damaged")

// ErrNoPeer: RepairFromLeader of a single member, which has no other
// copy of its state to repair from.
var ErrNoPeer = errors.New("cluster: a single member has no peer to repair its state from")

// Repair describes a state machine replaced with the leader's by
// RepairFromLeader.
type Repair struct {
	// Leader is the member the state came from.
	Leader uint64
	// Index is the state's applied index (L).
	Index uint64
	// Bytes is the state machine data received.
	Bytes int64
	// Took is the time from the request to the state in place.
	Took time.Duration
	// Replayed counts the commands applied again after Index from this
	// member's raft log (applied here while the state was on its way).
	Replayed int
}

// repairJob is the apply goroutine's part of a repair: data to put in
// place, and what came of it.
type repairJob struct {
	data receivedSnap
	// err is why the state was not put in place (the member goes on as
	// before); replayed counts the commands applied again.
	err      error
	replayed int
}

// RepairFromLeader implements Node: it replaces this member's state
// machine with the leader's state and returns once it is in place (see
// the top of repair.go). A member that leads moves the leadership to the
// most up-to-date voting member first. It fails with ErrNoLeader while
// there is no leader; an error leaves the state machine as it was.
func (n *raftNode) RepairFromLeader(ctx context.Context) (Repair, error) {
	start := time.Now()
	applied := n.applied.Load()
	n.logf("repair: fetching the leader's state (this member applied %d, its state machine %d)", applied, n.sm.AppliedIndex())
	data, lead, size, err := n.fetchLeaderState(ctx, applied)
	if err != nil {
		return Repair{}, err
	}
	job := &applyJob{repair: &repairJob{data: data}, done: make(chan struct{})}
	if err := n.runJob(job); err != nil {
		return Repair{}, err
	}
	if job.repair.err != nil {
		return Repair{}, job.repair.err
	}
	r := Repair{Leader: lead, Index: data.dataIndex, Bytes: size, Took: time.Since(start), Replayed: job.repair.replayed}
	n.logf("repair: state machine replaced with leader %x's state at index %d (%d bytes in %v, %d commands applied again after it)",
		lead, r.Index, r.Bytes, r.Took.Round(time.Millisecond), r.Replayed)
	return r, nil
}

// repairTransferee picks the voting member other than this one that has
// the most of this leader's log.
func (n *raftNode) repairTransferee() (uint64, error) {
	st := n.raft.Status()
	n.membersMu.RLock()
	defer n.membersMu.RUnlock()
	var best, match uint64
	for id, pr := range st.Progress {
		m, ok := n.members.get(id)
		if id == n.id || !ok || m.IsLearner {
			continue
		}
		if best == 0 || pr.Match > match {
			best, match = id, pr.Match
		}
	}
	if best == 0 {
		return 0, fmt.Errorf("cluster: repair: this member leads and no other voting member can take over: %w", ErrNoPeer)
	}
	return best, nil
}

// fetchState asks the peer at u for its state at applied index applied or
// later and reads it as a snapshot's data (see receiveSnapshotData).
func (n *raftNode) fetchState(ctx context.Context, u string, applied uint64) (receivedSnap, int64, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { // a fetch in flight ends with the node
		select {
		case <-n.stopc:
			cancel()
		case <-ctx.Done():
		}
	}()
	body, err := getState(ctx, n.tr.client, u, applied, n.clusterID, n.id)
	if err != nil {
		return receivedSnap{}, 0, err
	}
	defer body.Close()
	return n.receiveSnapshotData(bufio.NewReaderSize(body, 256<<10))
}

// getState asks the peer at u, as member from of cluster clusterID, for
// its state at applied index applied or later (GET /raft/state) and
// returns the response's body, which the caller reads and closes.
func getState(ctx context.Context, client *http.Client, u string, applied, clusterID, from uint64) (io.ReadCloser, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u+pathState+"?applied="+strconv.FormatUint(applied, 10), nil)
	if err != nil {
		return nil, err
	}
	setPeerHeaders(req, clusterID, from)
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		resp.Body.Close()
		return nil, fmt.Errorf("%s: %s", resp.Status, bytes.TrimSpace(msg))
	}
	return resp.Body, nil
}

// applyRepair puts the leader's state in place of the state machine's, on
// the apply goroutine: see the top of repair.go. A state it cannot use
// sets r.err and changes nothing; the error it returns (the state machine
// failed) stops the node.
func (n *raftNode) applyRepair(r *repairJob) error {
	defer r.data.drop() // after a Commit, Discard does nothing
	index, had := r.data.dataIndex, n.smApplied
	if index < n.snapIndex && had >= n.snapIndex {
		// A restart between the Commit and the Sync below would find the
		// state machine behind the log's snapshot, and refuse to start.
		// (Asked again, the leader waits for this member's applied index,
		// so its state is at least at had.)
		r.err = fmt.Errorf("cluster: repair: the leader's state is at index %d, before this member's raft snapshot at %d (asking again brings a newer state)", index, n.snapIndex)
		return nil
	}
	var replay []*pb.Entry
	if index < had {
		ents, err := n.log.wal.Entries(index+1, had+1, math.MaxUint64)
		if err != nil {
			r.err = fmt.Errorf("cluster: repair: the leader's state is at index %d, this member's state machine at %d, and its raft log cannot give entries %d-%d to apply again (asking again brings a newer state): %w",
				index, had, index+1, had, err)
			return nil
		}
		for _, e := range ents {
			if e.GetType() == pb.EntryNormal && isCommand(e.GetData()) {
				replay = append(replay, e)
			}
		}
	}
	if err := n.takeState(r.data); err != nil {
		return err
	}
	if err := n.applyCommands(replay); err != nil {
		return err
	}
	if err := n.sm.Sync(); err != nil {
		return fmt.Errorf("cluster: repair: state machine sync: %w", err)
	}
	r.replayed = len(replay)
	return nil
}

// handleState serves GET /raft/state?applied=A to a member that repairs
// its state: once this member, the leader, has applied index A, its
// state machine's data as writeStateData writes it.
func (t *transport) handleState(w http.ResponseWriter, r *http.Request) {
	from, ok := t.checkSender(w, r, http.MethodGet)
	if !ok {
		return
	}
	n := t.n
	n.membersMu.RLock()
	_, member := n.members.get(from)
	n.membersMu.RUnlock()
	if !member {
		http.Error(w, fmt.Sprintf("member %x is not a member known to %x", from, n.id), http.StatusNotFound)
		return
	}
	q := r.URL.Query().Get("applied")
	applied, err := strconv.ParseUint(q, 10, 64)
	if err != nil {
		http.Error(w, fmt.Sprintf("applied = %q: must be the asking member's applied index, an unsigned integer", q), http.StatusBadRequest)
		return
	}
	if lead := n.lead.Load(); lead != n.id {
		http.Error(w, fmt.Sprintf("member %x does not lead (the leader is %x): ask the leader for its state", n.id, lead), http.StatusServiceUnavailable)
		return
	}
	if err := n.waitApplied(applied); err != nil {
		http.Error(w, fmt.Sprintf("member %x has not applied index %d (it applied %d): %v", n.id, applied, n.applied.Load(), err), http.StatusServiceUnavailable)
		return
	}
	n.logf("repair: sending this member's state to %x, which asked for it at applied index %d or later", from, applied)
	start := time.Now()
	w.Header().Set("Content-Type", "application/octet-stream")
	w.WriteHeader(http.StatusOK)
	cw := &countingWriter{w: w}
	index, err := n.writeStateData(bufio.NewWriterSize(cw, 256<<10))
	if err != nil {
		// The stream stops before its index: the asking member refuses it.
		n.logf("repair: sending this member's state to %x failed after %d bytes: %v", from, cw.n, err)
		return
	}
	n.logf("repair: state at index %d sent to %x: %d bytes in %v", index, from, cw.n, time.Since(start).Round(time.Millisecond))
}

// countingWriter counts the bytes written through it.
type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// RepairFromLeader fails with ErrNoPeer: a single member holds the only
// copy of its state, so damage to it is repaired from a backup (etcd's
// snapshot restore), not from a peer.
func (n *Local) RepairFromLeader(context.Context) (Repair, error) {
	return Repair{}, ErrNoPeer
}

// FetchLeaderState is the repair of a member that does not start because
// its state machine does not open (a damaged table its start reads): from
// the raft log in cfg.Dir it learns its identity, its peers and its commit
// index C, asks each peer in turn for its state at applied index C or
// later (GET /raft/state: followers refuse, the leader answers) and hands
// the state machine's data to restore, which must replace the state
// machine with it (or change nothing when it fails). StartRaft then goes
// on from the new state as after any restart. The raft log is not
// changed.
func FetchLeaderState(ctx context.Context, cfg RaftConfig, restore func(r io.Reader) error) (Repair, error) {
	start := time.Now()
	cfg = cfg.withDefaults()
	if _, err := os.Stat(cfg.Dir); err != nil {
		return Repair{}, fmt.Errorf("cluster: repair: no raft log to repair against: %w", err)
	}
	ls, err := openLogStore(cfg.Dir, cfg.logFS)
	if err != nil {
		return Repair{}, err
	}
	meta, hasLog, err := ls.meta()
	var l *loaded
	if err == nil && hasLog {
		l, err = ls.load()
	}
	if cerr := ls.close(); err == nil {
		err = cerr
	}
	if err != nil {
		return Repair{}, err
	}
	if !hasLog {
		return Repair{}, fmt.Errorf("cluster: repair: the raft log in %s is empty: a new member has no state to repair", cfg.Dir)
	}
	applied := max(l.hs.GetCommit(), l.snapshot.GetMetadata().GetIndex())
	client := &http.Client{Transport: &http.Transport{
		DialContext:           (&net.Dialer{Timeout: time.Second}).DialContext,
		TLSClientConfig:       cfg.PeerClientTLS,
		ResponseHeaderTimeout: 10 * time.Second,
	}}
	defer client.CloseIdleConnections()
	var errs []error
	for _, m := range l.members.list() {
		if m.ID == meta.MemberID || m.IsLearner {
			continue
		}
		for _, u := range m.PeerURLs {
			size, index, err := fetchStateFrom(ctx, client, meta, u, applied, restore)
			if err != nil {
				errs = append(errs, fmt.Errorf("%x at %s: %w", m.ID, u, err))
				if ctx.Err() != nil {
					return Repair{}, fmt.Errorf("cluster: repair: %w", errors.Join(errs...))
				}
				continue
			}
			return Repair{Leader: m.ID, Index: index, Bytes: size, Took: time.Since(start)}, nil
		}
	}
	return Repair{}, fmt.Errorf("cluster: repair: no peer gave its state at applied index %d or later: %w", applied, errors.Join(errs...))
}

// fetchStateFrom asks the peer at u for its state as the member meta
// names, and hands the data to restore.
func fetchStateFrom(ctx context.Context, client *http.Client, meta logMeta, u string, applied uint64, restore func(io.Reader) error) (size int64, index uint64, err error) {
	body, err := getState(ctx, client, u, applied, meta.ClusterID, meta.MemberID)
	if err != nil {
		return 0, 0, err
	}
	defer body.Close()
	br := bufio.NewReaderSize(body, 256<<10)
	cr := &chunkReader{br: br}
	if err := restore(cr); err != nil {
		return 0, 0, err
	}
	// restore took the state machine's snapshot, which ends itself and
	// was checked: it is in place. The index after it only names it; the
	// state machine's own applied index says the same (0 if it is
	// missing).
	if extra, err := io.Copy(io.Discard, cr); err != nil || extra > 0 {
		return cr.n, 0, nil
	}
	index, _ = readSnapshotTrailer(br)
	return cr.n, index, nil
}

// damagedRun is the error of a run of commands, the first at index from,
// whose apply met damaged state machine data (ErrStateDamaged): every
// entry of its job before from is applied.
type damagedRun struct {
	from uint64
	err  error
}

func (d *damagedRun) Error() string { return d.err.Error() }
func (d *damagedRun) Unwrap() error { return d.err }

// damaged returns err as a damagedRun from index from if it is
// ErrStateDamaged, else err.
func damaged(from uint64, err error) error {
	if errors.Is(err, ErrStateDamaged) {
		return &damagedRun{from: from, err: err}
	}
	return err
}

// Tries and waits of repairApply: repairApplyRetry first, doubling up to
// repairApplyRetryMax, repairApplyAttempts tries in all.
const (
	repairApplyAttempts = 10
	repairApplyRetry    = 250 * time.Millisecond
	repairApplyRetryMax = 4 * time.Second
)

// repairMoveLeader bounds a move of the leadership away from a member
// before it asks for the leader's state.
const repairMoveLeader = 5 * time.Second

// repairApply is the repair of a member whose apply of a command met
// damaged state machine data (d, ErrStateDamaged; the command would meet
// it again after a restart, as it is replayed from the log). On the apply
// goroutine, instead of stopping the node:
//
//  1. it asks the leader (moving the leadership away first if this
//     member leads) for its state at index from-1 or later, from-1 the
//     last entry of the job applied here: the damaged run was not
//     committed, so that is all the leader must have applied;
//  2. it puts the state in place (Commit(L), L at least this state
//     machine's index, the last command before from) and syncs it;
//  3. it applies the job's entries from from on, as any job after a
//     restored state: commands up to L are the state's (their proposers
//     here learn that their result is not known, see applyEntries),
//     the rest are applied.
//
// Raft runs on meanwhile, as during RepairFromLeader. It gives up after
// repairApplyAttempts tries and returns d's error, which stops the node
// as before; an error of the state machine taking the state also stops
// it.
func (n *raftNode) repairApply(ents []*pb.Entry, d *damagedRun) error {
	applied := d.from - 1
	n.logf("repair: applying entry %d met damaged state machine data (%v); replacing the state machine with the leader's state at index %d or later", d.from, d.err, applied)
	start := time.Now()
	wait := repairApplyRetry
	var errs []error
	for attempt := 1; attempt <= repairApplyAttempts; attempt++ {
		if attempt > 1 {
			n.logf("repair: attempt %d of %d failed (trying again in %v): %v", attempt-1, repairApplyAttempts, wait, errs[len(errs)-1])
			select {
			case <-n.stopc:
				return ErrStopped
			case <-time.After(wait):
			}
			wait = min(2*wait, repairApplyRetryMax)
		}
		data, lead, size, err := n.fetchLeaderState(context.Background(), applied)
		if err != nil {
			errs = append(errs, err)
			if errors.Is(err, ErrNoPeer) || errors.Is(err, ErrStopped) {
				break
			}
			continue
		}
		// The leader applied from-1, so its state has every command up
		// to it: its index (its last command's) is at least this state
		// machine's, which is the last command before from.
		index := data.dataIndex
		if index < n.smApplied {
			data.drop()
			errs = append(errs, fmt.Errorf("cluster: repair: leader %x sent its state at index %d, before this member's state machine at %d", lead, index, n.smApplied))
			continue
		}
		err = n.takeState(data)
		data.drop() // after a Commit, Discard does nothing
		if err != nil {
			return err
		}
		if err := n.sm.Sync(); err != nil {
			return fmt.Errorf("cluster: repair: state machine sync: %w", err)
		}
		n.logf("repair: state machine replaced with leader %x's state at index %d (%d bytes in %v) after its apply met damaged data; applying on from entry %d",
			lead, index, size, time.Since(start).Round(time.Millisecond), d.from)
		n.setApplied(applied)
		var rest []*pb.Entry
		for _, e := range ents {
			if e.GetIndex() >= d.from {
				rest = append(rest, e)
			}
		}
		return n.applyEntries(rest)
	}
	return fmt.Errorf("%w; repairing it from the leader's state failed: %w", d.err, errors.Join(errs...))
}

// fetchLeaderState fetches the leader's state at index applied or later,
// moving the leadership away first if this member leads (to the voting
// member with the most of its log). It fails with ErrNoLeader while there
// is no leader.
func (n *raftNode) fetchLeaderState(ctx context.Context, applied uint64) (receivedSnap, uint64, int64, error) {
	lead := n.lead.Load()
	if lead == 0 {
		return receivedSnap{}, 0, 0, ErrNoLeader
	}
	if lead == n.id {
		to, err := n.repairTransferee()
		if err != nil {
			return receivedSnap{}, 0, 0, err
		}
		n.logf("repair: this member leads; moving the leadership to %x before fetching its state", to)
		mctx, mcancel := context.WithTimeout(ctx, repairMoveLeader)
		err = n.MoveLeader(mctx, to)
		mcancel()
		if err != nil {
			return receivedSnap{}, 0, 0, fmt.Errorf("cluster: repair: move the leadership to %x: %w", to, err)
		}
		if lead = n.lead.Load(); lead == 0 || lead == n.id {
			return receivedSnap{}, 0, 0, ErrNoLeader
		}
	}
	n.membersMu.RLock()
	m, ok := n.members.get(lead)
	n.membersMu.RUnlock()
	if !ok || len(m.PeerURLs) == 0 {
		return receivedSnap{}, 0, 0, fmt.Errorf("cluster: repair: the leader %x is not in the member list", lead)
	}
	n.logf("repair: fetching the state of leader %x at index %d or later", lead, applied)
	var errs []error
	for _, u := range m.PeerURLs {
		data, size, err := n.fetchState(ctx, u, applied)
		if err == nil {
			return data, lead, size, nil
		}
		errs = append(errs, fmt.Errorf("%s: %w", u, err))
		if ctx.Err() != nil {
			break
		}
	}
	return receivedSnap{}, 0, 0, fmt.Errorf("cluster: repair: fetch the state of leader %x: %w", lead, errors.Join(errs...))
}

// takeState puts data, the leader's state, in place of the state
// machine's, on the apply goroutine; the caller drops data and syncs the
// state machine. Its error (the state machine failed) stops the node.
func (n *raftNode) takeState(data receivedSnap) error {
	if err := n.install(data); err != nil {
		return fmt.Errorf("cluster: repair: state machine cannot take the leader's state at index %d: %w", data.dataIndex, err)
	}
	n.smApplied = data.dataIndex
	return nil
}
