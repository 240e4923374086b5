package mvcc

import (
	"bytes"
	"fmt"
)

// KeyValue is a version of a key, etcd's mvccpb.KeyValue.
type KeyValue struct {
	// Key is the key.
	Key []byte
	// Value is the value; nil in a KeysOnly range and in a DELETE event.
	Value []byte
	// CreateRevision is the revision of the put that created the key
	// (since its last deletion); 0 in a DELETE event.
	CreateRevision int64
	// ModRevision is the revision of the write of this version (the
	// deletion in a DELETE event).
	ModRevision int64
	// Version counts the puts since the key was created: 1 for a new key;
	// 0 in a DELETE event.
	Version int64
	// Lease is the ID of the lease the key is attached to, 0 for none.
	// As in etcd, a KeysOnly range leaves it 0.
	Lease int64
}

// RangeOptions select what Range returns.
type RangeOptions struct {
	// Rev is the revision to read at; 0 (or negative) reads the latest.
	// Below the compacted revision Range fails with ErrCompacted, above
	// the current one with ErrFutureRev.
	Rev int64
	// Limit caps the number of KeyValues returned; 0 (or negative) means
	// no limit. Count still counts every key in the range.
	Limit int64
	// KeysOnly returns the KeyValues without values and leases, read from
	// the index alone (no storage read), as etcd's keys_only does.
	KeysOnly bool
	// CountOnly returns only Count.
	CountOnly bool
	// SkipCount stops the walk of the index once Limit keys are found, so
	// Count is only those (etcd's range without its total count). A
	// reader of a large range in chunks, each from where the last ended,
	// would otherwise count the rest of the range for every chunk.
	SkipCount bool
	// Charge, if not nil, is told the size of each record's key and value
	// before a Range of several records copies it out of storage; an
	// error from it ends the Range with that error, so that a caller can
	// bound the memory a large Range takes before it has taken it.
	Charge func(bytes int) error
}

// RangeResult is what Range returns.
type RangeResult struct {
	// KVs are the keys in the range at the revision read, in key order, at
	// most Limit of them.
	KVs []KeyValue
	// Count is the number of keys in the range at the revision read,
	// regardless of Limit.
	Count int64
	// Rev is the store's current revision when the range was read (etcd's
	// header revision), also for a read at an older revision. Inside a Txn
	// that has already written, it is the Txn's revision.
	Rev int64
}

// allKeys is etcd's range end meaning "every key from the start key on".
var allKeys = []byte{0}

// keyRange is a validated key, end pair.
type keyRange struct {
	key []byte
	// end is nil for a single key; unbounded is set for etcd's "\x00".
	end       []byte
	unbounded bool
}

func (r keyRange) single() bool { return r.end == nil && !r.unbounded }

// upper returns the exclusive upper bound, nil for none.
func (r keyRange) upper() []byte {
	if r.unbounded {
		return nil
	}
	if r.end == nil {
		return append(r.key[:len(r.key):len(r.key)], 0)
	}
	return r.end
}

func (r keyRange) contains(k []byte) bool {
	if r.single() {
		return bytes.Equal(k, r.key)
	}
	return bytes.Compare(k, r.key) >= 0 && (r.unbounded || bytes.Compare(k, r.end) < 0)
}

// overlaps reports whether two ranges share a key.
func (r keyRange) overlaps(o keyRange) bool {
	if r.single() {
		return o.contains(r.key)
	}
	if o.single() {
		return r.contains(o.key)
	}
	// [a, b) and [c, d) overlap iff a < d and c < b.
	aBeforeD := o.unbounded || bytes.Compare(r.key, o.end) < 0
	cBeforeB := r.unbounded || bytes.Compare(o.key, r.end) < 0
	return aBeforeD && cBeforeB && !r.empty() && !o.empty()
}

func (r keyRange) empty() bool {
	return !r.single() && !r.unbounded && bytes.Compare(r.key, r.end) >= 0
}

// checkRange validates key and end: end nil or empty means the single key,
// "\x00" every key from key on, anything else [key, end).
func checkRange(key, end []byte) (keyRange, error) {
	if err := checkKey(key); err != nil {
		return keyRange{}, err
	}
	switch {
	case len(end) == 0:
		return keyRange{key: key}, nil
	case bytes.Equal(end, allKeys):
		return keyRange{key: key, unbounded: true}, nil
	case bytes.Compare(end, key) < 0:
		return keyRange{}, fmt.Errorf("%w: [%q, %q)", ErrInvalidRange, key, end)
	}
	if len(end) > MaxKeySize+1 {
		return keyRange{}, fmt.Errorf("%w: range end of %d bytes, limit %d", ErrKeyTooLarge, len(end), MaxKeySize+1)
	}
	return keyRange{key: key, end: end}, nil
}

func checkKey(key []byte) error {
	if len(key) == 0 {
		return ErrEmptyKey
	}
	if len(key) > MaxKeySize {
		return fmt.Errorf("%w: %d bytes, limit %d", ErrKeyTooLarge, len(key), MaxKeySize)
	}
	return nil
}

func checkValue(v []byte) error {
	if len(v) > MaxValueSize {
		return fmt.Errorf("%w: %d bytes, limit %d", ErrValueTooLarge, len(v), MaxValueSize)
	}
	return nil
}

// PrefixEnd returns the range end that makes [prefix, end) cover every key
// starting with prefix (etcd's clientv3.GetPrefixRangeEnd); "\x00", every
// key, for a prefix of only 0xff bytes.
func PrefixEnd(prefix []byte) []byte {
	end := bytes.Clone(prefix)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return []byte{0}
}

// CompareTarget is the field of a key a Compare looks at.
type CompareTarget int

const (
	// CompareValue compares the value (a missing key never matches).
	CompareValue CompareTarget = iota
	// CompareVersion compares the version (0 for a missing key).
	CompareVersion
	// CompareCreateRevision compares the create_revision (0 if missing).
	CompareCreateRevision
	// CompareModRevision compares the mod_revision (0 if missing).
	CompareModRevision
	// CompareLease compares the lease ID (0 if missing or none).
	CompareLease
)

// CompareResult is the relation a Compare checks.
type CompareResult int

const (
	// Equal checks field == operand.
	Equal CompareResult = iota
	// NotEqual checks field != operand.
	NotEqual
	// Less checks field < operand.
	Less
	// Greater checks field > operand.
	Greater
)

// Compare is a condition of a Txn on the latest version of one key, or of
// every key of a range (etcd's range_end): all of them must satisfy it, and
// an empty range compares as one missing key.
type Compare struct {
	// Key is the key compared.
	Key []byte
	// End, if set, makes the compare cover [Key, End), or every key from
	// Key on for "\x00", as in Range.
	End []byte
	// Target is the field compared.
	Target CompareTarget
	// Result is the relation that must hold.
	Result CompareResult
	// Value is the operand of CompareValue, compared bytewise.
	Value []byte
	// Rev is the operand of the other targets: a version, a revision or
	// a lease ID.
	Rev int64
}

// OpType is the kind of a Txn operation.
type OpType int

const (
	// OpPut sets Key to Value.
	OpPut OpType = iota + 1
	// OpDelete deletes the keys of Key, End (see Range for End).
	OpDelete
	// OpRange reads Key, End with Range's options.
	OpRange
	// OpTxn runs a nested Txn (etcd's RequestOp_RequestTxn): its compares
	// are evaluated on the state before the whole Txn, its ops write at
	// the Txn's revision and see the writes of the ops before them.
	OpTxn
)

// Op is one operation of a Txn branch; build it with PutOp, DeleteOp or
// RangeOp and set the optional fields (etcd's PutRequest and
// DeleteRangeRequest flags) on the result.
type Op struct {
	Type     OpType
	Key, End []byte
	Value    []byte
	// Lease attaches the key to a lease (OpPut); 0 for none. The lease must
	// exist (ErrLeaseNotFound). A put moves the key off its former lease.
	Lease int64
	// IgnoreValue keeps the key's current value and IgnoreLease its
	// current lease (OpPut); the key must exist (ErrKeyNotFound). Value
	// must then be empty (ErrValueProvided), Lease 0 (ErrLeaseProvided).
	IgnoreValue, IgnoreLease bool
	// PrevKV returns the version an OpPut replaces (OpResponse.PrevKV), or
	// the versions an OpDelete deletes (OpResponse.PrevKVs).
	PrevKV  bool
	Options RangeOptions
	// Txn is the nested transaction of an OpTxn.
	Txn *TxnRequest
}

// PutOp returns an Op that sets key to value.
func PutOp(key, value []byte) Op { return Op{Type: OpPut, Key: key, Value: value} }

// DeleteOp returns an Op that deletes key, or the keys of [key, end).
func DeleteOp(key, end []byte) Op { return Op{Type: OpDelete, Key: key, End: end} }

// RangeOp returns an Op that reads key, or [key, end). As in etcd, it sees
// the writes of the ops before it in the same Txn.
func RangeOp(key, end []byte, opts RangeOptions) Op {
	return Op{Type: OpRange, Key: key, End: end, Options: opts}
}

// TxnOp returns an Op that runs a nested transaction.
func TxnOp(req TxnRequest) Op { return Op{Type: OpTxn, Txn: &req} }

// TxnRequest is a transaction: if every Compare holds, the Success ops
// run, else the Failure ops, all at one new revision.
type TxnRequest struct {
	Compare          []Compare
	Success, Failure []Op
}

// branch returns the ops that run when the compares hold (ok) or not.
func (req *TxnRequest) branch(ok bool) []Op {
	if ok {
		return req.Success
	}
	return req.Failure
}

// OpResponse is the result of one Op.
type OpResponse struct {
	Type OpType
	// Rev is the revision etcd puts in this op's response header: the
	// Txn's revision once the Txn has written (an OpPut always has), the
	// revision before it otherwise. For an OpRange it is Range.Rev.
	Rev int64
	// Deleted is the number of keys an OpDelete deleted.
	Deleted int64
	// PrevKV is the version an OpPut with PrevKV replaced; nil if the key
	// did not exist.
	PrevKV *KeyValue
	// PrevKVs are the versions an OpDelete with PrevKV deleted, in key
	// order.
	PrevKVs []KeyValue
	// Range is the result of an OpRange.
	Range RangeResult
	// Txn is the result of an OpTxn. Its Rev is 0: etcd's response to a
	// nested txn carries an empty header.
	Txn *TxnResponse
}

// TxnResponse is the result of a Txn.
type TxnResponse struct {
	// Succeeded reports whether the compares held (Success ran).
	Succeeded bool
	// Rev is the revision of the Txn's writes, or the current revision
	// if it wrote nothing (no new revision then): etcd's header revision.
	Rev int64
	// Responses has one entry per op of the branch that ran.
	Responses []OpResponse
}

// EventType is the kind of a watch Event.
type EventType int

const (
	// EventPut is a put: KV is the new version.
	EventPut EventType = iota
	// EventDelete is a deletion: KV holds the key and ModRevision, the
	// deletion's revision.
	EventDelete
)

func (t EventType) String() string {
	switch t {
	case EventPut:
		return "PUT"
	case EventDelete:
		return "DELETE"
	}
	return fmt.Sprintf("EventType(%d)", int(t))
}

// Event is one change delivered by a Watcher.
type Event struct {
	Type EventType
	KV   KeyValue
	// PrevKV is the version before the change, with WithPrevKV; nil
	// without it, for a newly created key, or if compaction dropped it.
	PrevKV *KeyValue
}
