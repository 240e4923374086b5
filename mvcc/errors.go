package mvcc

import (
	"errors"

	"github.com/stratadb/strata/mvcc/keyindex"
)

// MaxValueSize is the largest value a Put accepts: 1.5 MiB, etcd's default
// request size limit (--max-request-bytes).
const MaxValueSize = 3 << 19

// MaxKeySize is the longest key accepted: 32 KiB, bbolt's limit. Keys live
// in the in-memory index, so they should be short.
const MaxKeySize = keyindex.MaxKeySize

// MaxLeaseTTL is the longest lease TTL in seconds, etcd's MaxLeaseTTL.
const MaxLeaseTTL = 9000000000

var (
	// ErrCompacted is returned for a read, watch or compaction at a
	// revision that compaction has already dropped.
	ErrCompacted = errors.New("mvcc: required revision has been compacted")
	// ErrFutureRev is returned for a read or compaction at a revision the
	// store has not reached.
	ErrFutureRev = errors.New("mvcc: required revision is a future revision")
	// ErrEmptyKey is returned when a key is empty.
	ErrEmptyKey = errors.New("mvcc: key is not provided")
	// ErrKeyTooLarge is returned for a key longer than MaxKeySize.
	ErrKeyTooLarge = errors.New("mvcc: key is too large")
	// ErrInvalidRange is returned when a range end sorts before its key.
	ErrInvalidRange = errors.New("mvcc: range end sorts before the key")
	// ErrEmptyWatchRange is returned by Watch for a range end at or
	// before the key (etcd's "watcher range is empty").
	ErrEmptyWatchRange = errors.New("mvcc: watcher range is empty")
	// ErrValueTooLarge is returned for a value longer than MaxValueSize.
	ErrValueTooLarge = errors.New("mvcc: value is too large")
	// ErrDuplicateKeyInTxn is returned for a Txn branch that writes a key
	// twice: two puts of one key, or a put of a key that a delete of the
	// same branch covers (etcd's "duplicate key given in txn request").
	ErrDuplicateKeyInTxn = errors.New("mvcc: duplicate key given in txn request")
	// ErrInvalidTxn is returned for a Txn with an unknown op or compare.
	ErrInvalidTxn = errors.New("mvcc: invalid txn request")
	// ErrKeyNotFound is returned for a put with IgnoreValue or IgnoreLease
	// of a key that does not exist (etcd's "etcdserver: key not found").
	ErrKeyNotFound = errors.New("mvcc: key not found")
	// ErrValueProvided is returned for a put with IgnoreValue and a value.
	ErrValueProvided = errors.New("mvcc: value is provided")
	// ErrLeaseProvided is returned for a put with IgnoreLease and a lease.
	ErrLeaseProvided = errors.New("mvcc: lease is provided")
	// ErrLeaseNotFound is returned for a lease ID that was never granted
	// or is revoked (etcd's lease.ErrLeaseNotFound).
	ErrLeaseNotFound = errors.New("mvcc: lease not found")
	// ErrLeaseExists is returned when granting a lease ID that exists.
	ErrLeaseExists = errors.New("mvcc: lease already exists")
	// ErrLeaseTTLTooLarge is returned for a TTL above MaxLeaseTTL.
	ErrLeaseTTLTooLarge = errors.New("mvcc: too large lease TTL")
	// ErrInvalidLease is returned for lease ID 0 (it means "no lease") or
	// a negative TTL.
	ErrInvalidLease = errors.New("mvcc: invalid lease")
	// ErrAlreadyApplied is returned by the writes of an Entry whose index
	// is not above the last applied one: the entry is already in the
	// store, and applying it again would apply it twice.
	ErrAlreadyApplied = errors.New("mvcc: log entry already applied")
	// ErrClosed is returned by operations on a closed Store.
	ErrClosed = errors.New("mvcc: closed")
	// ErrCorrupt is returned when stored data does not decode.
	ErrCorrupt = errors.New("mvcc: corrupt data")
)
