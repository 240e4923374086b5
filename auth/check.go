package auth

import (
	"context"
	"errors"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	etcdauth "go.etcd.io/etcd/server/v3/auth"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// LeaseKeys returns the keys attached to lease id, nil if there is no
// such lease (the mvcc store's lease sets).
type LeaseKeys func(id int64) [][]byte

// CheckCommand checks, where a KV or lease command is applied, that the
// user of its header may run it, as etcd's authApplierV3 does: put,
// delete and txn (each compare and the ops of both branches, nested txns
// included), and a lease revoke or a put with a lease whose keys the user
// may not write. Other commands pass.
func (s *Store) CheckCommand(r *pb.InternalRaftRequest, leases LeaseKeys) error {
	if !s.etcd.IsAuthEnabled() {
		return nil
	}
	ai := headerInfo(r.Header)
	switch {
	case r.Put != nil:
		return s.checkPut(ai, leases, r.Put)
	case r.DeleteRange != nil:
		return s.checkDelete(ai, r.DeleteRange)
	case r.Txn != nil:
		return s.CheckTxn(ai, leases, r.Txn)
	case r.LeaseRevoke != nil:
		return s.checkLeaseWrite(ai, leases, r.LeaseRevoke.ID)
	}
	return nil
}

func (s *Store) checkPut(ai *Info, leases LeaseKeys, r *pb.PutRequest) error {
	if err := s.etcd.IsPutPermitted(ai, r.Key); err != nil {
		return err
	}
	// A key the user may not write holds the lease: the user cannot
	// revoke it, so may not attach to it either.
	if err := s.checkLeaseWrite(ai, leases, r.Lease); err != nil {
		return err
	}
	if r.PrevKv {
		return s.etcd.IsRangePermitted(ai, r.Key, nil)
	}
	return nil
}

func (s *Store) checkDelete(ai *Info, r *pb.DeleteRangeRequest) error {
	if err := s.etcd.IsDeleteRangePermitted(ai, r.Key, r.RangeEnd); err != nil {
		return err
	}
	if r.PrevKv {
		return s.etcd.IsRangePermitted(ai, r.Key, r.RangeEnd)
	}
	return nil
}

// CheckTxn checks every compare and every op of both branches of a txn,
// nested txns included (etcd's checkTxnPermission): a txn is refused if
// any branch could do what the user may not, whichever branch runs.
func (s *Store) CheckTxn(ai *Info, leases LeaseKeys, r *pb.TxnRequest) error {
	for _, c := range r.Compare {
		if err := s.etcd.IsRangePermitted(ai, c.Key, c.RangeEnd); err != nil {
			return err
		}
	}
	for _, ops := range [][]*pb.RequestOp{r.Success, r.Failure} {
		for _, op := range ops {
			var err error
			switch v := op.Request.(type) {
			case *pb.RequestOp_RequestRange:
				if v.RequestRange != nil {
					err = s.etcd.IsRangePermitted(ai, v.RequestRange.Key, v.RequestRange.RangeEnd)
				}
			case *pb.RequestOp_RequestPut:
				if v.RequestPut != nil {
					err = s.checkPut(ai, leases, v.RequestPut)
				}
			case *pb.RequestOp_RequestDeleteRange:
				if v.RequestDeleteRange != nil {
					err = s.checkDelete(ai, v.RequestDeleteRange)
				}
			case *pb.RequestOp_RequestTxn:
				if v.RequestTxn != nil {
					err = s.CheckTxn(ai, leases, v.RequestTxn)
				}
			}
			if err != nil {
				return err
			}
		}
	}
	return nil
}

// checkLeaseWrite fails unless the user may write every key attached to
// lease id (root may always; no lease passes).
func (s *Store) checkLeaseWrite(ai *Info, leases LeaseKeys, id int64) error {
	if id == 0 || leases == nil {
		return nil
	}
	keys := leases(id)
	if keys == nil || s.etcd.IsAdminPermitted(ai) == nil {
		return nil
	}
	for _, k := range keys {
		if err := s.etcd.IsPutPermitted(ai, k); err != nil {
			return err
		}
	}
	return nil
}

// CheckLeaseRead is etcd's check of LeaseTimeToLive with keys and of
// LeaseLeases: the request's user must exist, and unless root may read
// every key of the leases; the result is refused if auth changed
// meanwhile. keys are the keys of the leases concerned.
func (s *Store) CheckLeaseRead(ctx context.Context, keys [][]byte) error {
	return s.checkLeaseKeys(ctx, keys, func(ai *Info, k []byte) error { return s.etcd.IsRangePermitted(ai, k, []byte{}) })
}

// CheckLeaseRenew is etcd's check of a lease keep-alive: unless root, the
// user must be able to write every key of the lease.
func (s *Store) CheckLeaseRenew(ctx context.Context, keys [][]byte) error {
	return s.checkLeaseKeys(ctx, keys, func(ai *Info, k []byte) error { return s.etcd.IsPutPermitted(ai, k) })
}

func (s *Store) checkLeaseKeys(ctx context.Context, keys [][]byte, check func(*Info, []byte) error) error {
	rev := s.etcd.Revision()
	ai, err := s.requireInfo(ctx)
	if ai == nil || err != nil {
		return err
	}
	if s.etcd.IsAdminPermitted(ai) == nil {
		return nil
	}
	for _, k := range keys {
		if err := check(ai, k); err != nil {
			return err
		}
	}
	if rev != s.etcd.Revision() {
		return ErrAuthOldRevision
	}
	return nil
}

// grpcErrors is etcd's table of auth errors and the gRPC errors clients
// receive (v3rpc's toGRPCErrorMap).
var grpcErrors = map[error]error{
	etcdauth.ErrRootUserNotExist:     rpctypes.ErrGRPCRootUserNotExist,
	etcdauth.ErrRootRoleNotExist:     rpctypes.ErrGRPCRootRoleNotExist,
	etcdauth.ErrUserAlreadyExist:     rpctypes.ErrGRPCUserAlreadyExist,
	etcdauth.ErrUserEmpty:            rpctypes.ErrGRPCUserEmpty,
	etcdauth.ErrUserNotFound:         rpctypes.ErrGRPCUserNotFound,
	etcdauth.ErrRoleAlreadyExist:     rpctypes.ErrGRPCRoleAlreadyExist,
	etcdauth.ErrRoleNotFound:         rpctypes.ErrGRPCRoleNotFound,
	etcdauth.ErrRoleEmpty:            rpctypes.ErrGRPCRoleEmpty,
	etcdauth.ErrAuthFailed:           rpctypes.ErrGRPCAuthFailed,
	etcdauth.ErrPermissionNotGiven:   rpctypes.ErrGRPCPermissionNotGiven,
	etcdauth.ErrPermissionDenied:     rpctypes.ErrGRPCPermissionDenied,
	etcdauth.ErrRoleNotGranted:       rpctypes.ErrGRPCRoleNotGranted,
	etcdauth.ErrPermissionNotGranted: rpctypes.ErrGRPCPermissionNotGranted,
	etcdauth.ErrAuthNotEnabled:       rpctypes.ErrGRPCAuthNotEnabled,
	etcdauth.ErrInvalidAuthToken:     rpctypes.ErrGRPCInvalidAuthToken,
	etcdauth.ErrInvalidAuthMgmt:      rpctypes.ErrGRPCInvalidAuthMgmt,
	etcdauth.ErrAuthOldRevision:      rpctypes.ErrGRPCAuthOldRevision,
}

// GRPCError returns the gRPC error etcd sends for an auth error, nil if
// err is not one. An auth error etcd has no entry for (a password given
// for a user without one) goes out as etcd sends it: codes.Unknown with
// its message.
func GRPCError(err error) error {
	for e, g := range grpcErrors {
		if errors.Is(err, e) {
			return g
		}
	}
	if errors.Is(err, etcdauth.ErrNoPasswordUser) {
		return status.Error(codes.Unknown, etcdauth.ErrNoPasswordUser.Error())
	}
	return nil
}

// IsError reports whether err is one of etcd's auth errors: the
// request's fault, for the client.
func IsError(err error) bool { return GRPCError(err) != nil }
