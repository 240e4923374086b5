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
	return &mvccpb.KeyValue{Key: kv.Key, CreateRevision: kv.CreateRevision, ModRevision: kv.ModRevision,
		Version: kv.Version, Value: kv.Value, Lease: kv.Lease}
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
	if r.Limit < 0 {
		return nil, nil, opts, invalid("limit %d is negative", r.Limit)
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
