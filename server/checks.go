package server

import (
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"github.com/stratadb/strata/mvcc"
)

// The KV service's checks of a request before it is proposed: etcd's
// checkPutRequest, checkDeleteRequest, checkRangeRequest and
// checkTxnRequest (v3rpc/key.go), in etcd's order, so that a request
// that breaks several rules gets etcd's answer (an empty key over
// max_request_bytes is "key is not provided", as etcd checks the key
// before it measures the proposal). Apply checks the same again: a
// follower applies what the log holds.

// checkPut is etcd's checkPutRequest.
func checkPut(r *pb.PutRequest) error {
	switch {
	case len(r.GetKey()) == 0:
		return mvcc.ErrEmptyKey
	case r.GetIgnoreValue() && len(r.GetValue()) != 0:
		return mvcc.ErrValueProvided
	case r.GetIgnoreLease() && r.GetLease() != 0:
		return mvcc.ErrLeaseProvided
	}
	return nil
}

// checkDelete is etcd's checkDeleteRequest.
func checkDelete(r *pb.DeleteRangeRequest) error {
	if len(r.GetKey()) == 0 {
		return mvcc.ErrEmptyKey
	}
	return nil
}

// checkRange is etcd's checkRangeRequest.
func checkRange(r *pb.RangeRequest) error {
	if len(r.GetKey()) == 0 {
		return mvcc.ErrEmptyKey
	}
	if _, ok := pb.RangeRequest_SortOrder_name[int32(r.GetSortOrder())]; !ok {
		return errInvalidSort
	}
	if _, ok := pb.RangeRequest_SortTarget_name[int32(r.GetSortTarget())]; !ok {
		return errInvalidSort
	}
	return nil
}

// checkTxn is etcd's checkTxnRequest: the size (the compares and the ops
// of each branch count against limit, server.max_txn_ops), then the
// compares' keys, then each op, a nested txn against what its
// parent left of limit; an op without a request is etcd's "key not
// found".
func checkTxn(r *pb.TxnRequest, limit int) error {
	opc := max(len(r.GetCompare()), len(r.GetSuccess()), len(r.GetFailure()))
	if opc > limit {
		return errTooManyOps
	}
	for _, c := range r.GetCompare() {
		if len(c.GetKey()) == 0 {
			return mvcc.ErrEmptyKey
		}
	}
	for _, ops := range [][]*pb.RequestOp{r.GetSuccess(), r.GetFailure()} {
		for _, op := range ops {
			var err error
			switch v := op.GetRequest().(type) {
			case *pb.RequestOp_RequestRange:
				err = checkRange(v.RequestRange)
			case *pb.RequestOp_RequestPut:
				err = checkPut(v.RequestPut)
			case *pb.RequestOp_RequestDeleteRange:
				err = checkDelete(v.RequestDeleteRange)
			case *pb.RequestOp_RequestTxn:
				err = checkTxn(v.RequestTxn, limit-opc)
			default:
				err = mvcc.ErrKeyNotFound
			}
			if err != nil {
				return err
			}
		}
	}
	return nil
}
