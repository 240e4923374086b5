package server

import (
	"context"
	"errors"
	"fmt"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/protobuf/proto"

	"github.com/stratadb/strata/auth"
	"github.com/stratadb/strata/mvcc"
)

// kvServer is etcd's KV service: reads from the store after a read
// barrier (linearizable) or directly (serializable), writes through the
// apply path. As etcd's v3rpc kvServer holds a RaftKV and a header, it
// holds only what it uses: kv, auth, and hdr.
type kvServer struct {
	pb.UnimplementedKVServer
	kv   raftKV
	auth *auth.Store
	hdr  memberHeader
	// maxTxnOps is server.max_txn_ops.
	maxTxnOps int
}

// raftKV is the KV service's way to the data (etcd's etcdserver.RaftKV);
// *Server implements it.
type raftKV interface {
	// proposer: writes through the apply path, and the read barrier.
	proposer
	// rangeKV serves a Range, rangeStream a streamed one, readTxn a Txn
	// without writes: reads of the local store.
	rangeKV(ctx context.Context, r *pb.RangeRequest) (*pb.RangeResponse, error)
	// rangeGated is rangeKV through the big-Range gate; holdRange keeps
	// a big Range's token (release) until gRPC has sent resp.
	rangeGated(ctx context.Context, r *pb.RangeRequest) (*pb.RangeResponse, func(), error)
	holdRange(ctx context.Context, resp *pb.RangeResponse, release func())
	rangeStream(ctx context.Context, r *pb.RangeRequest, send func(*pb.RangeResponse) error) error
	readTxn(r *pb.TxnRequest) (*pb.TxnResponse, error)
	// checkValue enforces server.max_value_bytes.
	checkValue(v []byte) error
	// overRequest returns the error of a request over
	// server.max_request_bytes if r is one, else err.
	overRequest(r *pb.InternalRaftRequest, err error) error
	// checkSpace refuses a write of cost bytes that does not fit the
	// quota or the free-space floor (spaceGuard.check).
	checkSpace(cost int64) error
	// leaseKeys returns the keys of a lease, for the auth checks.
	leaseKeys(id int64) [][]byte
	// waitCompaction waits for the local store's compaction deletions,
	// which the apply path leaves running (mvcc.Entry.Compact).
	waitCompaction() error
}

var _ raftKV = (*Server)(nil)

func (k *kvServer) Range(ctx context.Context, r *pb.RangeRequest) (*pb.RangeResponse, error) {
	var resp *pb.RangeResponse
	var release func()
	err := k.auth.Serve(ctx, func(ai *auth.Info) error { return k.auth.CheckRange(ai, r.Key, r.RangeEnd) },
		func() (err error) { resp, release, err = k.kv.rangeGated(ctx, r); return err })
	if err != nil {
		if release != nil {
			release()
		}
		return nil, toGRPC(err)
	}
	k.hdr.fill(resp.Header)
	k.kv.holdRange(ctx, resp, release)
	return resp, nil
}

// rangeKV serves a Range: the v3 API and the v2 GET share it.
func (s *Server) rangeKV(ctx context.Context, r *pb.RangeRequest) (*pb.RangeResponse, error) {
	resp, release, err := s.rangeGated(ctx, r)
	if release != nil {
		release()
	}
	return resp, err
}

// rangeGated is rangeKV through the server's rangeGate: a big Range's
// release, not nil, gives its token back.
func (s *Server) rangeGated(ctx context.Context, r *pb.RangeRequest) (resp *pb.RangeResponse, release func(), err error) {
	key, end, opts, err := rangeOptions(r)
	if err != nil {
		return nil, nil, err
	}
	if !r.Serializable {
		if err := s.readBarrier(ctx); err != nil {
			return nil, nil, err
		}
	}
	release, err = s.ranges.read(ctx, opts, func(o mvcc.RangeOptions) (err error) {
		resp, err = s.readRange(r, key, end, o)
		return err
	})
	return resp, release, err
}

// readRange reads a Range from the local store, with r's options
// converted by rangeOptions.
func (s *Server) readRange(r *pb.RangeRequest, key, end []byte, opts mvcc.RangeOptions) (*pb.RangeResponse, error) {
	res, err := s.store.Range(key, end, opts)
	if errors.Is(err, mvcc.ErrInvalidRange) {
		// etcd answers a range whose end sorts before its key with no keys.
		return &pb.RangeResponse{Header: header(s.store.Rev())}, nil
	}
	if err != nil {
		return nil, err
	}
	return rangeResponse(r, res), nil
}

func (k *kvServer) Put(ctx context.Context, r *pb.PutRequest) (*pb.PutResponse, error) {
	// etcd's quotaKVServer checks before anything else.
	if err := k.kv.checkSpace(putCost(r)); err != nil {
		return nil, toGRPC(err)
	}
	if err := checkPut(r); err != nil {
		return nil, toGRPC(err)
	}
	req := &pb.InternalRaftRequest{Put: r}
	if err := k.kv.checkValue(r.Value); err != nil {
		return nil, toGRPC(k.kv.overRequest(req, err))
	}
	resp, err := k.kv.propose(ctx, req)
	if err != nil {
		return nil, toGRPC(err)
	}
	out := resp.(*pb.PutResponse)
	k.hdr.fill(out.Header)
	return out, nil
}

func (k *kvServer) DeleteRange(ctx context.Context, r *pb.DeleteRangeRequest) (*pb.DeleteRangeResponse, error) {
	if err := checkDelete(r); err != nil {
		return nil, toGRPC(err)
	}
	resp, err := k.kv.propose(ctx, &pb.InternalRaftRequest{DeleteRange: r})
	if err != nil {
		return nil, toGRPC(err)
	}
	out := resp.(*pb.DeleteRangeResponse)
	k.hdr.fill(out.Header)
	return out, nil
}

func (k *kvServer) Txn(ctx context.Context, r *pb.TxnRequest) (*pb.TxnResponse, error) {
	if err := k.kv.checkSpace(txnCost(r)); err != nil {
		return nil, toGRPC(err)
	}
	if err := checkTxn(r, k.maxTxnOps); err != nil {
		return nil, toGRPC(err)
	}
	if err := eachPut(r, func(p *pb.PutRequest) error { return k.kv.checkValue(p.Value) }); err != nil {
		return nil, toGRPC(k.kv.overRequest(&pb.InternalRaftRequest{Txn: r}, err))
	}
	var out *pb.TxnResponse
	if readOnly(r) {
		// As etcd: a txn without writes is a read, served here after a
		// read barrier instead of through the log.
		if err := k.kv.readBarrier(ctx); err != nil {
			return nil, toGRPC(err)
		}
		err := k.auth.Serve(ctx, func(ai *auth.Info) error { return k.auth.CheckTxn(ai, k.kv.leaseKeys, r) },
			func() (err error) { out, err = k.kv.readTxn(r); return err })
		if err != nil {
			return nil, toGRPC(err)
		}
	} else {
		resp, err := k.kv.propose(ctx, &pb.InternalRaftRequest{Txn: r})
		if err != nil {
			return nil, toGRPC(err)
		}
		out = resp.(*pb.TxnResponse)
	}
	k.hdr.fill(out.Header)
	return out, nil
}

// eachPut calls fn for every put of a txn, nested txns included, and
// returns its first error.
func eachPut(r *pb.TxnRequest, fn func(*pb.PutRequest) error) error {
	for _, ops := range [][]*pb.RequestOp{r.GetSuccess(), r.GetFailure()} {
		for _, op := range ops {
			var err error
			switch v := op.Request.(type) {
			case *pb.RequestOp_RequestPut:
				err = fn(v.RequestPut)
			case *pb.RequestOp_RequestTxn:
				err = eachPut(v.RequestTxn, fn)
			}
			if err != nil {
				return err
			}
		}
	}
	return nil
}

// readOnly reports whether neither branch of a txn writes.
func readOnly(r *pb.TxnRequest) bool {
	for _, ops := range [][]*pb.RequestOp{r.GetSuccess(), r.GetFailure()} {
		for _, op := range ops {
			switch v := op.Request.(type) {
			case *pb.RequestOp_RequestRange:
			case *pb.RequestOp_RequestTxn:
				if !readOnly(v.RequestTxn) {
					return false
				}
			default:
				return false
			}
		}
	}
	return true
}

func (k *kvServer) Compact(ctx context.Context, r *pb.CompactionRequest) (*pb.CompactionResponse, error) {
	if err := k.auth.RequireAdmin(ctx); err != nil {
		return nil, toGRPC(err)
	}
	resp, err := k.kv.propose(ctx, &pb.InternalRaftRequest{Compaction: r})
	if err != nil {
		return nil, toGRPC(err)
	}
	// As in etcd, the compaction is applied once scheduled; a physical
	// one returns when its revisions are deleted from the local store.
	if r.Physical {
		if err := k.kv.waitCompaction(); err != nil {
			return nil, toGRPC(err)
		}
	}
	out := resp.(*pb.CompactionResponse)
	k.hdr.fill(out.Header)
	return out, nil
}

func (s *Server) waitCompaction() error { return s.store.WaitCompaction() }

// readTxn serves a Txn without writes from the local store, outside the
// log.
func (s *Server) readTxn(r *pb.TxnRequest) (*pb.TxnResponse, error) { return runTxn(r, s.store.Txn) }

// checkValue enforces server.max_value_bytes.
func (s *Server) checkValue(v []byte) error { return s.checkValueSize(len(v)) }

// checkRequestSize refuses a proposal of n bytes over
// server.max_request_bytes, as etcd's processInternalRaftRequestOnce
// does: the bound of every log entry, whatever the request.
func (s *Server) checkRequestSize(n int) error {
	if int64(n) > s.cfg.Server.MaxRequestBytes {
		return fmt.Errorf("%w: %d bytes, server.max_request_bytes = %d", errRequestTooLarge, n, s.cfg.Server.MaxRequestBytes)
	}
	return nil
}

// overRequest returns the error of a proposal of r over
// server.max_request_bytes if r is one, else err: a value over
// max_value_bytes in a request over max_request_bytes is etcd's "request
// is too large" (etcd has no value limit of its own; propose measures
// the requests that pass).
func (s *Server) overRequest(r *pb.InternalRaftRequest, err error) error {
	if serr := s.checkRequestSize(proto.Size(r)); serr != nil {
		return serr
	}
	return err
}

// checkValueSize is checkValue for a value of n bytes.
func (s *Server) checkValueSize(n int) error {
	if int64(n) > s.cfg.Server.MaxValueBytes {
		return errorfValueTooLarge(n, s.cfg.Server.MaxValueBytes)
	}
	return nil
}
