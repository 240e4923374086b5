package server

import (
	"bytes"
	"cmp"
	"fmt"
	"slices"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"

	"github.com/stratadb/strata/mvcc"
)

// header returns a response header with the store revision; the gRPC
// layer fills the cluster and member IDs and the term.
func header(rev int64) *pb.ResponseHeader { return &pb.ResponseHeader{Revision: rev} }

func toPBKV(kv *mvcc.KeyValue) *mvccpb.KeyValue {
	pkv := &mvccpb.KeyValue{}
	setPBKV(pkv, kv)
	return pkv
}

// setPBKV sets dst's fields to kv's.
func setPBKV(dst *mvccpb.KeyValue, kv *mvcc.KeyValue) {
	dst.Key, dst.CreateRevision, dst.ModRevision = kv.Key, kv.CreateRevision, kv.ModRevision
	dst.Version, dst.Value, dst.Lease = kv.Version, kv.Value, kv.Lease
}

// errInvalidSort is etcd's ErrGRPCInvalidSortOption.
var errInvalidSort = fmt.Errorf("%w: invalid sort option", errInvalid)

// needsAll reports whether a range must read every key before answering:
// a sort other than etcd's key order, or a revision filter, both applied
// after the read, as etcd does.
func needsAll(r *pb.RangeRequest) bool {
	return sortOrder(r) != pb.RangeRequest_NONE ||
		r.MinModRevision != 0 || r.MaxModRevision != 0 || r.MinCreateRevision != 0 || r.MaxCreateRevision != 0
}

// sortOrder is the effective order: etcd sorts ascending when a target
// other than the key is given without an order, and key-ascending is the
// store's own order (no sort).
func sortOrder(r *pb.RangeRequest) pb.RangeRequest_SortOrder {
	o := r.SortOrder
	if o == pb.RangeRequest_NONE && r.SortTarget != pb.RangeRequest_KEY {
		o = pb.RangeRequest_ASCEND
	}
	if o == pb.RangeRequest_ASCEND && r.SortTarget == pb.RangeRequest_KEY {
		o = pb.RangeRequest_NONE
	}
	return o
}

// rangeOptions converts a RangeRequest into the store's options. With a
// limit and no sort or filter it reads one key more than the limit, so
// rangeResponse can tell whether there are more (etcd's "more").
func rangeOptions(r *pb.RangeRequest) (key, end []byte, opts mvcc.RangeOptions, err error) {
	if _, ok := pb.RangeRequest_SortOrder_name[int32(r.SortOrder)]; !ok {
		return nil, nil, opts, errInvalidSort
	}
	if _, ok := pb.RangeRequest_SortTarget_name[int32(r.SortTarget)]; !ok {
		return nil, nil, opts, errInvalidSort
	}
	opts = mvcc.RangeOptions{Rev: r.Revision, KeysOnly: r.KeysOnly, CountOnly: r.CountOnly}
	if r.Limit > 0 && !needsAll(r) {
		opts.Limit = r.Limit + 1
	}
	return r.Key, r.RangeEnd, opts, nil
}

// rangeResponse turns the store's result into etcd's response: revision
// filters, sort, limit and "more", in etcd's order.
func rangeResponse(r *pb.RangeRequest, res mvcc.RangeResult) *pb.RangeResponse {
	resp := &pb.RangeResponse{Header: header(res.Rev), Count: res.Count}
	if r.CountOnly {
		return resp
	}
	kvs := res.KVs
	if r.MinModRevision != 0 || r.MaxModRevision != 0 || r.MinCreateRevision != 0 || r.MaxCreateRevision != 0 {
		kvs = slices.DeleteFunc(slices.Clone(kvs), func(kv mvcc.KeyValue) bool {
			return r.MinModRevision > 0 && kv.ModRevision < r.MinModRevision ||
				r.MaxModRevision > 0 && kv.ModRevision > r.MaxModRevision ||
				r.MinCreateRevision > 0 && kv.CreateRevision < r.MinCreateRevision ||
				r.MaxCreateRevision > 0 && kv.CreateRevision > r.MaxCreateRevision
		})
	}
	if o := sortOrder(r); o != pb.RangeRequest_NONE {
		cmp := sortCompare(r.SortTarget)
		if o == pb.RangeRequest_DESCEND {
			asc := cmp
			cmp = func(a, b mvcc.KeyValue) int { return asc(b, a) }
		}
		kvs = slices.Clone(kvs)
		slices.SortStableFunc(kvs, cmp)
	}
	if r.Limit > 0 && int64(len(kvs)) > r.Limit {
		kvs = kvs[:r.Limit]
		resp.More = true
	}
	resp.Kvs = make([]*mvccpb.KeyValue, len(kvs))
	for i := range kvs {
		resp.Kvs[i] = toPBKV(&kvs[i])
		if r.KeysOnly {
			resp.Kvs[i].Value = nil
		}
	}
	return resp
}

func sortCompare(t pb.RangeRequest_SortTarget) func(a, b mvcc.KeyValue) int {
	switch t {
	case pb.RangeRequest_VERSION:
		return func(a, b mvcc.KeyValue) int { return cmp.Compare(a.Version, b.Version) }
	case pb.RangeRequest_CREATE:
		return func(a, b mvcc.KeyValue) int { return cmp.Compare(a.CreateRevision, b.CreateRevision) }
	case pb.RangeRequest_MOD:
		return func(a, b mvcc.KeyValue) int { return cmp.Compare(a.ModRevision, b.ModRevision) }
	case pb.RangeRequest_VALUE:
		return func(a, b mvcc.KeyValue) int { return bytes.Compare(a.Value, b.Value) }
	}
	return func(a, b mvcc.KeyValue) int { return bytes.Compare(a.Key, b.Key) }
}

// toTxnRequest converts etcd's TxnRequest into the store's, nested txns
// included.
func toTxnRequest(r *pb.TxnRequest) (mvcc.TxnRequest, error) {
	req := mvcc.TxnRequest{Compare: make([]mvcc.Compare, len(r.Compare))}
	for i, c := range r.Compare {
		mc, err := toCompare(c)
		if err != nil {
			return req, fmt.Errorf("compare %d: %w", i, err)
		}
		req.Compare[i] = mc
	}
	var err error
	if req.Success, err = toOps(r.Success); err != nil {
		return req, fmt.Errorf("success: %w", err)
	}
	if req.Failure, err = toOps(r.Failure); err != nil {
		return req, fmt.Errorf("failure: %w", err)
	}
	return req, nil
}

func toOps(ops []*pb.RequestOp) ([]mvcc.Op, error) {
	out := make([]mvcc.Op, len(ops))
	for i, op := range ops {
		switch v := op.Request.(type) {
		case *pb.RequestOp_RequestRange:
			key, end, opts, err := rangeOptions(v.RequestRange)
			if err != nil {
				return nil, fmt.Errorf("op %d: %w", i, err)
			}
			out[i] = mvcc.RangeOp(key, end, opts)
		case *pb.RequestOp_RequestPut:
			o, err := putOp(v.RequestPut)
			if err != nil {
				return nil, fmt.Errorf("op %d: %w", i, err)
			}
			out[i] = o
		case *pb.RequestOp_RequestDeleteRange:
			out[i] = deleteOp(v.RequestDeleteRange)
		case *pb.RequestOp_RequestTxn:
			if v.RequestTxn == nil {
				return nil, invalid("op %d: nested txn without a request", i)
			}
			nested, err := toTxnRequest(v.RequestTxn)
			if err != nil {
				return nil, fmt.Errorf("op %d: %w", i, err)
			}
			out[i] = mvcc.TxnOp(nested)
		default:
			// etcd's answer to an empty op (checkRequestOp).
			return nil, fmt.Errorf("%w: op %d: no request", mvcc.ErrKeyNotFound, i)
		}
	}
	return out, nil
}

// putResponseOp is a txn's put response: the op, its oneof wrapper, the
// put response, its header and prev_kv in one allocation (five before;
// every v2 write is a txn with one put).
func putResponseOp(or mvcc.OpResponse) *pb.ResponseOp {
	all := &struct {
		op     pb.ResponseOp
		put    pb.ResponseOp_ResponsePut
		resp   pb.PutResponse
		header pb.ResponseHeader
		prev   mvccpb.KeyValue
	}{}
	all.header.Revision = or.Rev
	all.resp.Header = &all.header
	if p := or.PrevKV; p != nil {
		setPBKV(&all.prev, p)
		all.resp.PrevKv = &all.prev
	}
	all.put.ResponsePut = &all.resp
	all.op.Response = &all.put
	return &all.op
}

// toTxnResponse builds etcd's response to r from the store's result. A
// nested txn's response has an empty header (Rev 0), as etcd's.
func toTxnResponse(r *pb.TxnRequest, res mvcc.TxnResponse) *pb.TxnResponse {
	ops := r.Success
	if !res.Succeeded {
		ops = r.Failure
	}
	// The response, its header and, for a txn of one op (a v2 write), its
	// list of responses in one allocation.
	all := &struct {
		resp   pb.TxnResponse
		header pb.ResponseHeader
		one    [1]*pb.ResponseOp
	}{}
	all.header.Revision = res.Rev
	resp := &all.resp
	resp.Header, resp.Succeeded = &all.header, res.Succeeded
	if len(ops) == 1 {
		resp.Responses = all.one[:]
	} else {
		resp.Responses = make([]*pb.ResponseOp, len(ops))
	}
	for i, op := range ops {
		or := res.Responses[i]
		switch v := op.Request.(type) {
		case *pb.RequestOp_RequestRange:
			resp.Responses[i] = &pb.ResponseOp{Response: &pb.ResponseOp_ResponseRange{ResponseRange: rangeResponse(v.RequestRange, or.Range)}}
		case *pb.RequestOp_RequestPut:
			resp.Responses[i] = putResponseOp(or)
		case *pb.RequestOp_RequestDeleteRange:
			resp.Responses[i] = &pb.ResponseOp{Response: &pb.ResponseOp_ResponseDeleteRange{ResponseDeleteRange: deleteResponse(or, or.Rev)}}
		case *pb.RequestOp_RequestTxn:
			resp.Responses[i] = &pb.ResponseOp{Response: &pb.ResponseOp_ResponseTxn{ResponseTxn: toTxnResponse(v.RequestTxn, *or.Txn)}}
		}
	}
	return resp
}

func toCompare(c *pb.Compare) (mvcc.Compare, error) {
	mc := mvcc.Compare{Key: c.Key, End: c.RangeEnd}
	switch c.Result {
	case pb.Compare_EQUAL:
		mc.Result = mvcc.Equal
	case pb.Compare_NOT_EQUAL:
		mc.Result = mvcc.NotEqual
	case pb.Compare_LESS:
		mc.Result = mvcc.Less
	case pb.Compare_GREATER:
		mc.Result = mvcc.Greater
	default:
		return mc, invalid("compare result %d", c.Result)
	}
	switch c.Target {
	case pb.Compare_VALUE:
		mc.Target, mc.Value = mvcc.CompareValue, c.GetValue()
	case pb.Compare_VERSION:
		mc.Target, mc.Rev = mvcc.CompareVersion, c.GetVersion()
	case pb.Compare_CREATE:
		mc.Target, mc.Rev = mvcc.CompareCreateRevision, c.GetCreateRevision()
	case pb.Compare_MOD:
		mc.Target, mc.Rev = mvcc.CompareModRevision, c.GetModRevision()
	case pb.Compare_LEASE:
		mc.Target, mc.Rev = mvcc.CompareLease, c.GetLease()
	default:
		return mc, invalid("compare target %d", c.Target)
	}
	return mc, nil
}
