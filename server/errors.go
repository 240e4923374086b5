package server

import (
	"context"
	"errors"
	"fmt"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/stratadb/strata/auth"
	"github.com/stratadb/strata/cluster"
	"github.com/stratadb/strata/mvcc"
)

// Errors of the server's own checks, before a request reaches the store.
var (
	// errUnsupported marks a request field or call Strata does not
	// implement; it becomes codes.Unimplemented.
	errUnsupported = errors.New("server: not supported")
	// errInvalid marks a malformed request; it becomes
	// codes.InvalidArgument.
	errInvalid = errors.New("server: invalid request")
	// errValueTooLarge is a value over server.max_value_bytes.
	errValueTooLarge = errors.New("server: value is too large")
)

// unsupported returns an errUnsupported naming what is not supported.
func unsupported(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errUnsupported, fmt.Sprintf(format, args...))
}

// invalid returns an errInvalid naming the problem.
func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errInvalid, fmt.Sprintf(format, args...))
}

// toGRPC maps an error of the store, the apply path or the server's checks
// onto etcd's rpctypes errors, whose messages clientv3 matches (for
// example to retry on Unavailable, or to surface ErrCompacted). Errors
// etcd has no counterpart for keep their own message under the code that
// fits.
func toGRPC(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	if g := auth.GRPCError(err); g != nil {
		return g
	}
	switch {
	case errors.Is(err, mvcc.ErrCompacted):
		return rpctypes.ErrGRPCCompacted
	case errors.Is(err, mvcc.ErrFutureRev):
		return rpctypes.ErrGRPCFutureRev
	case errors.Is(err, mvcc.ErrEmptyKey):
		return rpctypes.ErrGRPCEmptyKey
	case errors.Is(err, mvcc.ErrDuplicateKeyInTxn):
		return rpctypes.ErrGRPCDuplicateKey
	case errors.Is(err, mvcc.ErrLeaseNotFound):
		return rpctypes.ErrGRPCLeaseNotFound
	case errors.Is(err, mvcc.ErrLeaseExists):
		return rpctypes.ErrGRPCLeaseExist
	case errors.Is(err, mvcc.ErrLeaseTTLTooLarge):
		return rpctypes.ErrGRPCLeaseTTLTooLarge
	case errors.Is(err, mvcc.ErrKeyNotFound):
		return rpctypes.ErrGRPCKeyNotFound
	case errors.Is(err, mvcc.ErrValueProvided):
		return rpctypes.ErrGRPCValueProvided
	case errors.Is(err, mvcc.ErrLeaseProvided):
		return rpctypes.ErrGRPCLeaseProvided
	case errors.Is(err, errTooManyOps):
		return rpctypes.ErrGRPCTooManyOps
	case errors.Is(err, errInvalidSort):
		return rpctypes.ErrGRPCInvalidSortOption
	case errors.Is(err, mvcc.ErrKeyTooLarge), errors.Is(err, mvcc.ErrValueTooLarge),
		errors.Is(err, errValueTooLarge), errors.Is(err, mvcc.ErrInvalidRange),
		errors.Is(err, mvcc.ErrInvalidTxn), errors.Is(err, mvcc.ErrInvalidLease), errors.Is(err, errInvalid):
		return status.Error(codes.InvalidArgument, "etcdserver: "+err.Error())
	case errors.Is(err, errUnsupported):
		return status.Error(codes.Unimplemented, "etcdserver: "+err.Error())
	case errors.Is(err, cluster.ErrNoLeader):
		return rpctypes.ErrGRPCNoLeader
	case errors.Is(err, cluster.ErrTimeout), errors.Is(err, context.DeadlineExceeded):
		return rpctypes.ErrGRPCTimeout
	case errors.Is(err, context.Canceled):
		return rpctypes.ErrGRPCCanceled
	case errors.Is(err, cluster.ErrStopped), errors.Is(err, mvcc.ErrClosed):
		return rpctypes.ErrGRPCStopped
	case errors.Is(err, cluster.ErrNotEnoughStartedMembers):
		return rpctypes.ErrGRPCMemberNotEnoughStarted
	case errors.Is(err, cluster.ErrMemberNotLearner):
		return rpctypes.ErrGRPCMemberNotLearner
	case errors.Is(err, cluster.ErrLearnerNotReady):
		return rpctypes.ErrGRPCLearnerNotReady
	case errors.Is(err, cluster.ErrTooManyLearners):
		return rpctypes.ErrGRPCTooManyLearners
	case errors.Is(err, cluster.ErrMemberNotFound):
		return rpctypes.ErrGRPCMemberNotFound
	case errors.Is(err, cluster.ErrPeerURLExists):
		return rpctypes.ErrGRPCPeerURLExist
	case errors.Is(err, cluster.ErrNotLeader):
		return rpctypes.ErrGRPCNotLeader
	case errors.Is(err, cluster.ErrBadLeaderTransferee):
		return rpctypes.ErrGRPCBadLeaderTransferee
	case errors.Is(err, cluster.ErrLeaderTransferTimeout):
		return status.Error(codes.Unavailable, "etcdserver: request timed out, leader transfer took too long")
	case errors.Is(err, cluster.ErrSingleMember):
		return status.Error(codes.Unimplemented, "etcdserver: "+err.Error())
	}
	return status.Error(codes.Internal, "etcdserver: "+err.Error())
}

// errorfValueTooLarge names the size and the limit of a value refused.
func errorfValueTooLarge(n int, limit int64) error {
	return fmt.Errorf("%w: %d bytes, server.max_value_bytes = %d", errValueTooLarge, n, limit)
}
