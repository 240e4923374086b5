package server

import (
	"errors"
	"fmt"
	"io"
	"sync"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/protobuf/proto"

	"github.com/stratadb/strata/auth"
	"github.com/stratadb/strata/cluster"
	"github.com/stratadb/strata/engine"
	"github.com/stratadb/strata/mvcc"
)

// applier is the cluster.StateMachine of the server: it applies etcd's
// InternalRaftRequest commands (the encoding etcd itself puts in its raft
// log) to the mvcc store, in batches (applyBatch). Apply is
// deterministic: it reads only the command and the store, never a clock
// or the server's config, so every member that applies the same log
// reaches the same state.
type applier struct {
	store *mvcc.Store
	// auth holds the users, roles and permissions, applied from the log
	// like the rest; every KV and lease command is checked against it
	// with the user its proposer recorded.
	auth      *auth.Store
	leaseKeys auth.LeaseKeys
	// alarms are the members' alarms, applied from the log like the
	// rest; a NOSPACE alarm caps the writes (capped).
	alarms *alarmStore
	// written, if set, is told after each batch committed: the space
	// guard samples the disk as the log is applied (spaceGuard.kick).
	// Set before the Node starts.
	written func()
	// proposed are the requests this member's proposers wait on.
	proposed proposedRequests
}

// proposedRequests are the requests of the proposals in flight on this
// member, by the first byte of their encoded command. Stage takes a
// request from here instead of decoding its command again when it gets
// the very bytes the proposer encoded: on a single member (Local hands
// the proposer's slice to Stage) and on the raft member that proposed
// the command (the Node hands back its caller's slice while the caller
// waits); the request is then what decoding would give. The other
// members get the entry's copy, which never matches, and decode it. The
// request is not changed while its proposer waits, and leaves the table
// before the proposer returns.
type proposedRequests struct {
	mu sync.Mutex
	m  map[*byte]*pb.InternalRaftRequest
}

// add records r, encoded as cmd, until its proposer calls remove.
func (p *proposedRequests) add(cmd []byte, r *pb.InternalRaftRequest) {
	if len(cmd) == 0 {
		return
	}
	p.mu.Lock()
	if p.m == nil {
		p.m = map[*byte]*pb.InternalRaftRequest{}
	}
	p.m[&cmd[0]] = r
	p.mu.Unlock()
}

// remove forgets the request encoded as cmd.
func (p *proposedRequests) remove(cmd []byte) {
	if len(cmd) == 0 {
		return
	}
	p.mu.Lock()
	delete(p.m, &cmd[0])
	p.mu.Unlock()
}

// get returns the request encoded as cmd (the same slice), nil if none.
func (p *proposedRequests) get(cmd []byte) *pb.InternalRaftRequest {
	if len(cmd) == 0 {
		return nil
	}
	p.mu.Lock()
	r := p.m[&cmd[0]]
	p.mu.Unlock()
	return r
}

// applyResult is what Stage returns for every command it could apply or
// refuse: the etcd response, or the error the command itself caused (a
// failed check, a compacted revision). A storage failure is not a result:
// Stage returns it as its error, which stops the Node, but for damaged
// data (stateDamaged), which a member of a cluster repairs from the
// leader's state.
type applyResult struct {
	resp proto.Message
	err  error
}

var (
	_ cluster.StateMachine    = (*applier)(nil)
	_ cluster.RestorePreparer = (*applier)(nil)
)

// NewBatch begins a batch of commands (cluster.StateMachine).
func (a *applier) NewBatch() cluster.Batch { return &applyBatch{a: a} }

// applyBatch is the server's cluster.Batch: puts, deletes and txns (and
// commands the store does not know, which only record their index) are
// staged in one mvcc.Batch, whose commit records the last index with all
// their writes. A command that appliesAlone commits what is staged first
// and applies by itself, in its place in the order.
type applyBatch struct {
	a *applier
	// b holds the staged writes: nil before the first and after a
	// command applied alone.
	b *mvcc.Batch
	// last is the last log index staged, 0 if none.
	last uint64
}

// appliesAlone is the rule for what may share a batch: a compaction, a
// lease grant or revocation, an alarm and an auth command each apply by themselves,
// after the commands before them committed. The store applies
// compactions and lease changes outside any batch (they change what
// every later write and read of the batch would see: the compacted
// revision, the lease set), and alarm and auth commands write the aux
// key space by themselves, recording their index.
func appliesAlone(r *pb.InternalRaftRequest) bool {
	return r.Compaction != nil || r.LeaseGrant != nil || r.LeaseRevoke != nil || r.Alarm != nil || auth.IsCommand(r)
}

// Stage applies one command (cluster.Batch).
func (ab *applyBatch) Stage(index uint64, cmd []byte) (any, error) {
	r := ab.a.proposed.get(cmd)
	if r == nil {
		var bad *applyResult
		if r, bad = decodeCommand(cmd); bad != nil {
			return bad, nil
		}
	}
	if index != 0 {
		ab.last = index
	}
	if !appliesAlone(r) {
		if ab.b == nil {
			ab.b = ab.a.store.BeginBatch()
		}
		return result(ab.a.apply(ab.b, index, r))
	}
	if err := ab.commitStaged(); err != nil {
		return nil, err
	}
	alone := ab.a.store.BeginBatch()
	res, err := result(ab.a.apply(alone, index, r))
	if cerr := alone.Commit(); cerr != nil {
		return nil, stateDamaged(cerr)
	}
	return res, err
}

// commitStaged commits the staged writes, if any.
func (ab *applyBatch) commitStaged() error {
	if ab.b == nil {
		return nil
	}
	err := ab.b.Commit()
	ab.b = nil
	return stateDamaged(err)
}

// stateDamaged marks an error of the store that met a damaged block
// (engine.ErrCorruption) as cluster.ErrStateDamaged: a member of a
// cluster then replaces its store with the leader's state instead of
// stopping (the command would meet the damage again after a restart,
// replayed from the log).
func stateDamaged(err error) error {
	if err != nil && errors.Is(err, engine.ErrCorruption) && !errors.Is(err, cluster.ErrStateDamaged) {
		return fmt.Errorf("%w: %w", cluster.ErrStateDamaged, err)
	}
	return err
}

// Commit commits what is staged (cluster.Batch). After a store failure it
// still releases the staged batch, and returns the failure.
func (ab *applyBatch) Commit() error {
	if err := ab.commitStaged(); err != nil {
		return err
	}
	if ab.last != 0 {
		ab.a.auth.Applied(ab.last)
	}
	if ab.a.written != nil {
		ab.a.written()
	}
	return nil
}

// decodeCommand decodes a command, or returns the result of one that does
// not decode.
func decodeCommand(cmd []byte) (*pb.InternalRaftRequest, *applyResult) {
	var r pb.InternalRaftRequest
	if err := proto.Unmarshal(cmd, &r); err != nil {
		return nil, &applyResult{err: invalid("command does not decode: %v", err)}
	}
	return &r, nil
}

// result sorts apply's outcome: a response or the command's own error is
// the result, any other error the store's.
func result(resp proto.Message, err error) (any, error) {
	if err != nil && stopsNode(err) {
		return nil, stateDamaged(err)
	}
	return &applyResult{resp: resp, err: err}, nil
}

// apply applies r at log position index: its writes are staged in b,
// except a compaction's and a lease's, which the store applies by
// themselves (see appliesAlone).
func (a *applier) apply(b *mvcc.Batch, index uint64, r *pb.InternalRaftRequest) (proto.Message, error) {
	if auth.IsCommand(r) {
		resp, cmdErr, err := a.auth.Apply(index, r)
		if err != nil {
			return nil, err
		}
		return resp, cmdErr
	}
	if r.Alarm != nil {
		return a.alarms.apply(index, r.Alarm)
	}
	if a.alarms.corrupt.Load() && corruptRefused(r) {
		// etcd's corrupt applier, outermost: refused on every member
		// alike while a CORRUPT alarm is raised.
		if err := b.Skip(index); err != nil {
			return nil, err
		}
		return nil, errCorrupt
	}
	if a.alarms.noSpace.Load() && capped(r) {
		// etcd's capped applier, before its auth applier: refused on
		// every member alike while a NOSPACE alarm is raised.
		if err := b.Skip(index); err != nil {
			return nil, err
		}
		return nil, errNoSpace
	}
	if err := a.auth.CheckCommand(r, a.leaseKeys); err != nil {
		// Refused on every member alike: the entry is applied.
		if serr := b.Skip(index); serr != nil {
			return nil, serr
		}
		return nil, err
	}
	switch {
	case r.Put != nil:
		return a.put(b, index, r.Put)
	case r.DeleteRange != nil:
		return a.deleteRange(b, index, r.DeleteRange)
	case r.Txn != nil:
		return runTxn(r.Txn, func(req mvcc.TxnRequest) (mvcc.TxnResponse, error) { return b.Txn(index, req) })
	case r.Compaction != nil:
		return a.compact(index, r.Compaction)
	case r.LeaseGrant != nil:
		return a.leaseGrant(index, r.LeaseGrant)
	case r.LeaseRevoke != nil:
		return a.leaseRevoke(index, r.LeaseRevoke)
	}
	// Applied on every member alike, so the log position is kept.
	if err := b.Skip(index); err != nil {
		return nil, err
	}
	return nil, unsupported("command %v", r)
}

func (a *applier) leaseGrant(index uint64, r *pb.LeaseGrantRequest) (*pb.LeaseGrantResponse, error) {
	if err := a.store.Entry(index).GrantLease(r.ID, r.TTL); err != nil {
		return nil, err
	}
	return &pb.LeaseGrantResponse{Header: header(a.store.Rev()), ID: r.ID, TTL: r.TTL}, nil
}

func (a *applier) leaseRevoke(index uint64, r *pb.LeaseRevokeRequest) (*pb.LeaseRevokeResponse, error) {
	rev, err := a.store.Entry(index).RevokeLease(r.ID)
	if err != nil {
		return nil, err
	}
	return &pb.LeaseRevokeResponse{Header: header(rev)}, nil
}

func (a *applier) put(b *mvcc.Batch, index uint64, r *pb.PutRequest) (*pb.PutResponse, error) {
	op, err := putOp(r)
	if err != nil {
		return nil, err
	}
	res, err := b.Txn(index, mvcc.TxnRequest{Success: []mvcc.Op{op}})
	if err != nil {
		return nil, err
	}
	resp := &pb.PutResponse{Header: header(res.Rev)}
	if p := res.Responses[0].PrevKV; p != nil {
		resp.PrevKv = toPBKV(p)
	}
	return resp, nil
}

func (a *applier) deleteRange(b *mvcc.Batch, index uint64, r *pb.DeleteRangeRequest) (*pb.DeleteRangeResponse, error) {
	res, err := b.Txn(index, mvcc.TxnRequest{Success: []mvcc.Op{deleteOp(r)}})
	if err != nil {
		return nil, err
	}
	return deleteResponse(res.Responses[0], res.Rev), nil
}

// runTxn checks and converts r, runs it with do (staged in a batch, or
// a read-only txn served by the store outside the log) and converts the
// response.
//
// The txn's size was checked against server.max_txn_ops before it was
// proposed (checkTxn), as etcd checks it: not here, where a member's
// limit must not decide what the log's entries do.
func runTxn(r *pb.TxnRequest, do func(mvcc.TxnRequest) (mvcc.TxnResponse, error)) (*pb.TxnResponse, error) {
	req, err := toTxnRequest(r)
	if err != nil {
		return nil, err
	}
	res, err := do(req)
	if err != nil {
		return nil, err
	}
	return toTxnResponse(r, res), nil
}

func (a *applier) compact(index uint64, r *pb.CompactionRequest) (*pb.CompactionResponse, error) {
	if err := a.store.Entry(index).Compact(r.Revision); err != nil {
		return nil, err
	}
	return &pb.CompactionResponse{Header: header(a.store.Rev())}, nil
}

// errTooManyOps is etcd's ErrGRPCTooManyOps.
var errTooManyOps = fmt.Errorf("%w: too many operations in txn request (over server.max_txn_ops)", errInvalid)

func putOp(r *pb.PutRequest) (mvcc.Op, error) {
	op := mvcc.PutOp(r.Key, r.Value)
	op.Lease = r.Lease
	op.PrevKV = r.PrevKv
	op.IgnoreValue = r.IgnoreValue
	op.IgnoreLease = r.IgnoreLease
	return op, nil
}

func deleteOp(r *pb.DeleteRangeRequest) mvcc.Op {
	op := mvcc.DeleteOp(r.Key, r.RangeEnd)
	op.PrevKV = r.PrevKv
	return op
}

func deleteResponse(or mvcc.OpResponse, rev int64) *pb.DeleteRangeResponse {
	resp := &pb.DeleteRangeResponse{Header: header(rev), Deleted: or.Deleted}
	for i := range or.PrevKVs {
		resp.PrevKvs = append(resp.PrevKvs, toPBKV(&or.PrevKVs[i]))
	}
	return resp
}

// AppliedIndex is the store's applied log index.
func (a *applier) AppliedIndex() uint64 { return a.store.AppliedIndex() }

// Snapshot writes the whole store for a cluster member that fell behind
// the log, or a new one; it runs beside Apply (mvcc reads an engine
// snapshot).
func (a *applier) Snapshot(w io.Writer) (uint64, error) { return a.store.WriteSnapshot(w) }

// Restore replaces the store's contents with a snapshot taken at index.
func (a *applier) Restore(r io.Reader, index uint64) error {
	if err := a.store.RestoreSnapshot(r); err != nil {
		return err
	}
	return a.restored(index)
}

// PrepareRestore writes a snapshot arriving from the leader into the
// store's tables as it arrives (cluster.RestorePreparer).
func (a *applier) PrepareRestore(r io.Reader) (cluster.PreparedRestore, error) {
	p, err := a.store.PrepareRestore(r)
	if err != nil {
		return nil, err
	}
	return &preparedRestore{a: a, p: p}, nil
}

// preparedRestore is a snapshot the store prepared.
type preparedRestore struct {
	a *applier
	p *mvcc.PreparedRestore
}

func (pr *preparedRestore) Commit(index uint64) error {
	if err := pr.p.Commit(); err != nil {
		return err
	}
	return pr.a.restored(index)
}

func (pr *preparedRestore) Discard() { pr.p.Discard() }

// restored checks a restored snapshot's index and reloads what the server
// keeps of the store beside it.
func (a *applier) restored(index uint64) error {
	if got := a.store.AppliedIndex(); got != index {
		return fmt.Errorf("server: restored snapshot is at applied index %d, the leader said %d", got, index)
	}
	if err := a.auth.Reload(); err != nil {
		return err
	}
	if err := a.alarms.reload(); err != nil {
		return err
	}
	a.auth.Applied(index)
	return nil
}

// Sync makes every applied entry durable (cluster.StateMachine): in a
// cluster the store's engine runs with sync = false, the raft log being
// the durable record, and the raft node calls this before it truncates
// the log.
func (a *applier) Sync() error { return a.store.Flush() }
