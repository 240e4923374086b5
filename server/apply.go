package server

import (
	"fmt"
	"io"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/protobuf/proto"

	"github.com/stratadb/strata/auth"
	"github.com/stratadb/strata/cluster"
	"github.com/stratadb/strata/mvcc"
)

// maxTxnOps is the most compares, or ops of one branch, a Txn may have
// (etcd's --max-txn-ops default).
const maxTxnOps = 128

// applier is the cluster.StateMachine of the server: it applies etcd's
// InternalRaftRequest commands (the encoding etcd itself puts in its raft
// log) to the mvcc store. Apply is deterministic: it reads only the
// command and the store, never a clock or the server's config, so every
// member that applies the same log reaches the same state.
type applier struct {
	store *mvcc.Store
	// auth holds the users, roles and permissions, applied from the log
	// like the rest; every KV and lease command is checked against it
	// with the user its proposer recorded.
	auth      *auth.Store
	leaseKeys auth.LeaseKeys
}

// applyResult is what Apply returns for every command it could apply or
// refuse: the etcd response, or the error the command itself caused (a
// failed check, a compacted revision). A storage failure is not a result:
// Apply returns it as its error, which stops the Node.
type applyResult struct {
	resp proto.Message
	err  error
}

var (
	_ cluster.StateMachine = (*applier)(nil)
	_ cluster.BatchApplier = (*applier)(nil)
)

// entryWriter is where the writes of the command at log position index
// go: the store's Entry (one engine commit per command), or, with batch
// set, an mvcc.Batch (one for a run of commands). A struct rather than an
// interface, so that a command by itself allocates no more than before.
type entryWriter struct {
	store *mvcc.Store
	batch *mvcc.Batch
	index uint64
}

// Txn is mvcc.Entry.Txn or mvcc.BatchEntry.Txn.
func (w entryWriter) Txn(req mvcc.TxnRequest) (mvcc.TxnResponse, error) {
	if w.batch != nil {
		return w.batch.Entry(w.index).Txn(req)
	}
	return w.store.Entry(w.index).Txn(req)
}

// Skip is mvcc.Entry.Skip or mvcc.BatchEntry.Skip.
func (w entryWriter) Skip() error {
	if w.batch != nil {
		return w.batch.Entry(w.index).Skip()
	}
	return w.store.Entry(w.index).Skip()
}

// Apply decodes and applies one command. Index 0 (the single member's
// Local node) records no log position.
func (a *applier) Apply(index uint64, cmd []byte) (any, error) {
	r, bad := decodeCommand(cmd)
	if bad != nil {
		return bad, nil
	}
	res, err := result(a.apply(entryWriter{store: a.store, index: index}, r))
	if index != 0 && err == nil {
		a.auth.Applied(index)
	}
	return res, err
}

// ApplyBatch applies a run of commands (cluster.BatchApplier) with one
// engine commit: puts, deletes and txns (and commands the store does not
// know, which only record their index) are staged in one mvcc.Batch,
// whose commit records the last index with all their writes. A
// compaction or a lease grant or revocation commits what is staged first
// and applies by itself, in its place in the order.
func (a *applier) ApplyBatch(cmds []cluster.Command) ([]any, error) {
	results := make([]any, len(cmds))
	var b *mvcc.Batch
	commit := func() error {
		if b == nil {
			return nil
		}
		err := b.Commit()
		b = nil
		return err
	}
	for i, c := range cmds {
		r, bad := decodeCommand(c.Data)
		if bad != nil {
			results[i] = bad
			continue
		}
		w := entryWriter{store: a.store, index: c.Index}
		if r.Compaction != nil || r.LeaseGrant != nil || r.LeaseRevoke != nil || auth.IsCommand(r) {
			if err := commit(); err != nil {
				return nil, err
			}
		} else {
			if b == nil {
				b = a.store.BeginBatch()
			}
			w.batch = b
		}
		res, err := result(a.apply(w, r))
		if err != nil {
			// The store cannot apply: release the batch (it commits
			// the entries staged before, a prefix of the log with its
			// index, unless the store failed) and stop.
			_ = commit()
			return nil, err
		}
		results[i] = res
	}
	if err := commit(); err != nil {
		return nil, err
	}
	if len(cmds) > 0 {
		a.auth.Applied(cmds[len(cmds)-1].Index)
	}
	return results, nil
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
		return nil, err
	}
	return &applyResult{resp: resp, err: err}, nil
}

// apply applies r, its writes going to w.
func (a *applier) apply(w entryWriter, r *pb.InternalRaftRequest) (proto.Message, error) {
	if auth.IsCommand(r) {
		resp, cmdErr, err := a.auth.Apply(w.index, r)
		if err != nil {
			return nil, err
		}
		return resp, cmdErr
	}
	if err := a.auth.CheckCommand(r, a.leaseKeys); err != nil {
		// Refused on every member alike: the entry is applied.
		if serr := w.Skip(); serr != nil {
			return nil, serr
		}
		return nil, err
	}
	switch {
	case r.Put != nil:
		return a.put(w, r.Put)
	case r.DeleteRange != nil:
		return a.deleteRange(w, r.DeleteRange)
	case r.Txn != nil:
		return a.txnOn(w, r.Txn)
	case r.Compaction != nil:
		return a.compact(w.index, r.Compaction)
	case r.LeaseGrant != nil:
		return a.leaseGrant(w.index, r.LeaseGrant)
	case r.LeaseRevoke != nil:
		return a.leaseRevoke(w.index, r.LeaseRevoke)
	}
	// Applied on every member alike, so the log position is kept (Skip
	// of index 0 records nothing).
	if err := w.Skip(); err != nil {
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

func (a *applier) put(w entryWriter, r *pb.PutRequest) (*pb.PutResponse, error) {
	op, err := putOp(r)
	if err != nil {
		return nil, err
	}
	res, err := w.Txn(mvcc.TxnRequest{Success: []mvcc.Op{op}})
	if err != nil {
		return nil, err
	}
	resp := &pb.PutResponse{Header: header(res.Rev)}
	if p := res.Responses[0].PrevKV; p != nil {
		resp.PrevKv = toPBKV(p)
	}
	return resp, nil
}

func (a *applier) deleteRange(w entryWriter, r *pb.DeleteRangeRequest) (*pb.DeleteRangeResponse, error) {
	res, err := w.Txn(mvcc.TxnRequest{Success: []mvcc.Op{deleteOp(r)}})
	if err != nil {
		return nil, err
	}
	return deleteResponse(res.Responses[0], res.Rev), nil
}

// txn applies a Txn at log position index (0: outside the log, as a
// read-only txn is served).
func (a *applier) txn(index uint64, r *pb.TxnRequest) (*pb.TxnResponse, error) {
	return a.txnOn(entryWriter{store: a.store, index: index}, r)
}

func (a *applier) txnOn(w entryWriter, r *pb.TxnRequest) (*pb.TxnResponse, error) {
	if err := checkTxnSize(r, maxTxnOps); err != nil {
		return nil, err
	}
	req, err := toTxnRequest(r)
	if err != nil {
		return nil, err
	}
	// A read-only txn with index 0 (served outside the log) is a read in
	// mvcc: it takes no write lock.
	res, err := w.Txn(req)
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

// checkTxnSize enforces maxTxnOps as etcd does before proposing: the
// compares and the ops of each branch count against limit, and a nested
// txn against what its parent left (limit less the parent's largest
// count), so a tree of txns cannot exceed the limit by nesting.
func checkTxnSize(r *pb.TxnRequest, limit int) error {
	opc := max(len(r.Compare), len(r.Success), len(r.Failure))
	if opc > limit {
		return errTooManyOps
	}
	for _, ops := range [][]*pb.RequestOp{r.Success, r.Failure} {
		for _, op := range ops {
			if t := op.GetRequestTxn(); t != nil {
				if err := checkTxnSize(t, limit-opc); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// errTooManyOps is etcd's ErrGRPCTooManyOps.
var errTooManyOps = fmt.Errorf("%w: too many operations in txn request (limit %d)", errInvalid, maxTxnOps)

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
	if got := a.store.AppliedIndex(); got != index {
		return fmt.Errorf("server: restored snapshot is at applied index %d, the leader said %d", got, index)
	}
	if err := a.auth.Reload(); err != nil {
		return err
	}
	a.auth.Applied(index)
	return nil
}

// SyncState makes every applied entry durable (cluster.StateSyncer): in a
// cluster the store's engine runs with sync = false, the raft log being
// the durable record, and the raft node calls this before it truncates
// the log.
func (a *applier) SyncState() error { return a.store.Flush() }
