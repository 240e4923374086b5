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
	"github.com/stratadb/strata/engine"
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
	// errRequestTooLarge is a proposal whose encoding is over
	// server.max_request_bytes (etcd's ErrRequestTooLarge, checked as
	// etcd does before proposing).
	errRequestTooLarge = errors.New("server: request is too large")
	// errNoSpace is a write refused for space: over quota_backend_bytes
	// or min_free_disk_bytes, or while a NOSPACE alarm is raised (etcd's
	// ErrNoSpace, "etcdserver: mvcc: database space exceeded").
	errNoSpace = errors.New("server: database space exceeded")
)

// unsupported returns an errUnsupported naming what is not supported.
func unsupported(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errUnsupported, fmt.Sprintf(format, args...))
}

// invalid returns an errInvalid naming the problem.
func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errInvalid, fmt.Sprintf(format, args...))
}

// errorRow is one error of the store, the apply path or the server's own
// checks: what the client gets, and whether the command caused it.
type errorRow struct {
	err error
	// grpc is etcd's rpctypes error for err, whose message clientv3
	// matches (to retry on Unavailable, to surface ErrCompacted). Nil:
	// err has no etcd counterpart and keeps its own message, prefixed
	// "etcdserver: ", under code.
	grpc error
	code codes.Code
	// stops says that err, returned by apply, stops the node: the store
	// failed, and memory no longer matches storage. An error that does
	// not stop the node is the command's own outcome (a failed check, a
	// compacted revision): every member applies it alike, and the
	// proposer's client gets it.
	stops bool
}

// errorTable is every error the server maps, once, in the order they are
// matched (errors.Is; the first row that matches wins, so a wrapped error
// comes before the error it wraps). It answers both questions asked of an
// error: which gRPC status a handler returns (toGRPC) and whether apply
// stops the node for it (stopsNode). Auth's errors are auth's table
// (auth.GRPCError): all are the command's own. An error in neither table
// stops the node and reaches clients as codes.Internal.
var errorTable = []errorRow{
	// The command's own outcome.
	{err: mvcc.ErrCompacted, grpc: rpctypes.ErrGRPCCompacted},
	{err: mvcc.ErrFutureRev, grpc: rpctypes.ErrGRPCFutureRev},
	{err: mvcc.ErrEmptyKey, grpc: rpctypes.ErrGRPCEmptyKey},
	{err: mvcc.ErrDuplicateKeyInTxn, grpc: rpctypes.ErrGRPCDuplicateKey},
	{err: mvcc.ErrLeaseNotFound, grpc: rpctypes.ErrGRPCLeaseNotFound},
	{err: mvcc.ErrLeaseExists, grpc: rpctypes.ErrGRPCLeaseExist},
	{err: mvcc.ErrLeaseTTLTooLarge, grpc: rpctypes.ErrGRPCLeaseTTLTooLarge},
	{err: mvcc.ErrKeyNotFound, grpc: rpctypes.ErrGRPCKeyNotFound},
	{err: mvcc.ErrValueProvided, grpc: rpctypes.ErrGRPCValueProvided},
	{err: mvcc.ErrLeaseProvided, grpc: rpctypes.ErrGRPCLeaseProvided},
	{err: errTooManyOps, grpc: rpctypes.ErrGRPCTooManyOps},
	{err: errRequestTooLarge, grpc: rpctypes.ErrGRPCRequestTooLarge},
	{err: errInvalidSort, grpc: rpctypes.ErrGRPCInvalidSortOption},
	{err: errNoSpace, grpc: rpctypes.ErrGRPCNoSpace},
	// The engine's disk guard refused the write: the disk is full below
	// the free-space floor (see engine.ErrNoSpace).
	{err: engine.ErrNoSpace, grpc: rpctypes.ErrGRPCNoSpace},
	// A write refused while a CORRUPT alarm is raised (corrupt.go).
	{err: errCorrupt, grpc: rpctypes.ErrGRPCCorrupt},
	{err: mvcc.ErrKeyTooLarge, code: codes.InvalidArgument},
	{err: mvcc.ErrValueTooLarge, code: codes.InvalidArgument},
	{err: errValueTooLarge, code: codes.InvalidArgument},
	{err: mvcc.ErrInvalidRange, code: codes.InvalidArgument},
	{err: mvcc.ErrInvalidTxn, code: codes.InvalidArgument},
	{err: mvcc.ErrInvalidLease, code: codes.InvalidArgument},
	{err: errInvalid, code: codes.InvalidArgument},
	// Watch sends it as a canceled watch, etcd's "watcher range is empty".
	{err: mvcc.ErrEmptyWatchRange, code: codes.InvalidArgument},
	{err: errUnsupported, code: codes.Unimplemented},
	// A replayed entry: the store has it, and it is not applied again.
	{err: mvcc.ErrAlreadyApplied, code: codes.Internal},

	// The store failed, or is closed: the node stops.
	{err: mvcc.ErrClosed, grpc: rpctypes.ErrGRPCStopped, stops: true},
	{err: mvcc.ErrCorrupt, code: codes.Internal, stops: true},
	// A damaged block of a table or blob file (corrupt.go): a read gets
	// etcd's DataLoss "etcdserver: corrupt cluster"; apply that meets one
	// fails as on any failed read of the store (stops), but a member of a
	// cluster then replaces its store with the leader's state and goes
	// on (cluster.ErrStateDamaged, apply.go's stateDamaged).
	{err: engine.ErrCorruption, grpc: rpctypes.ErrGRPCCorrupt, stops: true},

	// The cluster's: never a result of apply, so none is the command's.
	{err: cluster.ErrNoLeader, grpc: rpctypes.ErrGRPCNoLeader, stops: true},
	{err: cluster.ErrTimeout, grpc: rpctypes.ErrGRPCTimeout, stops: true},
	{err: context.DeadlineExceeded, grpc: rpctypes.ErrGRPCTimeout, stops: true},
	{err: context.Canceled, grpc: rpctypes.ErrGRPCCanceled, stops: true},
	{err: cluster.ErrStopped, grpc: rpctypes.ErrGRPCStopped, stops: true},
	{err: cluster.ErrNotEnoughStartedMembers, grpc: rpctypes.ErrGRPCMemberNotEnoughStarted, stops: true},
	{err: cluster.ErrMemberNotLearner, grpc: rpctypes.ErrGRPCMemberNotLearner, stops: true},
	{err: cluster.ErrLearnerNotReady, grpc: rpctypes.ErrGRPCLearnerNotReady, stops: true},
	{err: cluster.ErrTooManyLearners, grpc: rpctypes.ErrGRPCTooManyLearners, stops: true},
	{err: cluster.ErrMemberNotFound, grpc: rpctypes.ErrGRPCMemberNotFound, stops: true},
	{err: cluster.ErrPeerURLExists, grpc: rpctypes.ErrGRPCPeerURLExist, stops: true},
	{err: cluster.ErrNotLeader, grpc: rpctypes.ErrGRPCNotLeader, stops: true},
	{err: cluster.ErrBadLeaderTransferee, grpc: rpctypes.ErrGRPCBadLeaderTransferee, stops: true},
	{err: cluster.ErrLeaderTransferTimeout, grpc: errLeaderTransferTimeout, stops: true},
	{err: cluster.ErrSingleMember, code: codes.Unimplemented, stops: true},
}

// errLeaderTransferTimeout is etcd's message for a leader transfer that
// took too long.
var errLeaderTransferTimeout = status.Error(codes.Unavailable, "etcdserver: request timed out, leader transfer took too long")

// lookupError returns the row of err, nil if it has none.
func lookupError(err error) *errorRow {
	for i := range errorTable {
		if errors.Is(err, errorTable[i].err) {
			return &errorTable[i]
		}
	}
	return nil
}

// stopsNode reports whether err, returned by apply, is the store's
// failure (the node stops) rather than the command's own outcome (the
// client gets it).
func stopsNode(err error) bool {
	if auth.IsError(err) {
		return false
	}
	row := lookupError(err)
	return row == nil || row.stops
}

// toGRPC maps an error of the store, the apply path or the server's checks
// to the status a handler returns, from errorTable (or auth's table). An
// error already a status passes through.
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
	row := lookupError(err)
	switch {
	case row == nil:
		return status.Error(codes.Internal, "etcdserver: "+err.Error())
	case row.grpc != nil:
		return row.grpc
	}
	return status.Error(row.code, "etcdserver: "+err.Error())
}

// errorfValueTooLarge names the size and the limit of a value refused.
func errorfValueTooLarge(n int, limit int64) error {
	return fmt.Errorf("%w: %d bytes, server.max_value_bytes = %d", errValueTooLarge, n, limit)
}
