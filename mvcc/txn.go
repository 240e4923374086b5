package mvcc

import (
	"bytes"
	"cmp"
	"fmt"

	"github.com/stratadb/strata/mvcc/keyindex"
)

// Put sets key to value in a new revision and returns it. For a lease or
// prev_kv, use Txn with a PutOp.
func (s *Store) Put(key, value []byte) (rev int64, err error) {
	resp, err := s.Txn(TxnRequest{Success: []Op{PutOp(key, value)}})
	return resp.Rev, err
}

// Delete deletes key. It returns the new revision and 1, or, if the key
// did not exist, the current revision and 0 (no new revision).
func (s *Store) Delete(key []byte) (rev, deleted int64, err error) {
	return s.DeleteRange(key, nil)
}

// DeleteRange deletes every key in [key, end) ("\x00" as end: every key
// from key on; nil: key alone) in one new revision, each deletion a sub
// revision. It returns that revision and the number of keys deleted, or the
// current revision and 0 if there was none.
func (s *Store) DeleteRange(key, end []byte) (rev, deleted int64, err error) {
	resp, err := s.Txn(TxnRequest{Success: []Op{DeleteOp(key, end)}})
	if err != nil {
		return 0, 0, err
	}
	return resp.Rev, resp.Responses[0].Deleted, nil
}

// Txn runs a transaction atomically, as etcd's Txn (and, with one op, its
// Put, DeleteRange and Range) does: it evaluates the compares on the
// latest revision, then runs the Success ops if all hold and the Failure
// ops otherwise. The writes of the branch share one new revision, each
// written key a sub revision in op order; a Txn that writes nothing makes
// no revision. Each op sees the writes of the ops before it (a RangeOp
// after a PutOp of the same key reads the new value).
//
// An OpTxn nests a Txn (etcd 3.3+). As in etcd, the compares of every
// nested Txn are evaluated first, like the outer ones on the state before
// the whole Txn (not on the writes of the ops before it), which decides
// the branch of each; then the ops of the branches taken run in order,
// nested ones where they stand, all at the one revision.
//
// Everything is checked first, and on error nothing is written: keys,
// ranges and values; writes that collide (ErrDuplicateKeyInTxn, see
// collectWrites); then for the branches taken, in op order, a range's
// revision (ErrFutureRev, ErrCompacted), a put's lease (ErrLeaseNotFound)
// and for IgnoreValue or IgnoreLease its key (ErrKeyNotFound), each
// against the state before the Txn.
//
// A Txn with only RangeOps (nested or not) reads the current revision
// without waiting for writers. The others return once their writes are
// durable.
func (s *Store) Txn(req TxnRequest) (TxnResponse, error) { return s.txn(0, req) }

// txn runs req by itself (a batch of one), recording index.
func (s *Store) txn(index uint64, req TxnRequest) (TxnResponse, error) {
	if index == 0 && req.readOnly() {
		if err := checkTxn(&req); err != nil {
			return TxnResponse{}, err
		}
		return s.readTxn(req)
	}
	var resp TxnResponse
	err := s.alone(func(b *Batch) (err error) {
		resp, err = b.Txn(index, req)
		return err
	})
	if err != nil {
		return TxnResponse{}, err
	}
	return resp, nil
}

// readOnly reports whether no op of either branch writes, nested Txns
// included.
func (req *TxnRequest) readOnly() bool {
	for _, ops := range [][]Op{req.Success, req.Failure} {
		for _, op := range ops {
			switch op.Type {
			case OpRange:
			case OpTxn:
				if !op.Txn.readOnly() {
					return false
				}
			default:
				return false
			}
		}
	}
	return true
}

// decide evaluates the compares of req, then those of each nested Txn of
// the branch taken, at rev, and appends the outcomes to path in that
// (depth-first) order: etcd's compareToPath. checkBranch and execTxn take
// them back in the same order.
func (s *Store) decide(req *TxnRequest, rev int64, fetch func(keyindex.Revision) (record, error), path []bool) ([]bool, error) {
	ok, err := s.compare(req.Compare, rev, fetch)
	if err != nil {
		return nil, err
	}
	path = append(path, ok)
	for _, op := range req.branch(ok) {
		if op.Type == OpTxn {
			if path, err = s.decide(op.Txn, rev, fetch, path); err != nil {
				return nil, err
			}
		}
	}
	return path, nil
}

// takeBranch returns the next outcome of a path from decide.
func takeBranch(path *[]bool) bool {
	ok := (*path)[0]
	*path = (*path)[1:]
	return ok
}

// readTxn runs a Txn of RangeOps at the current revision, under mu.
func (s *Store) readTxn(req TxnRequest) (TxnResponse, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed.Load() {
		return TxnResponse{}, ErrClosed
	}
	cur := s.rev
	path, err := s.decide(&req, cur, s.fetch, nil)
	if err != nil {
		return TxnResponse{}, err
	}
	checked := path
	if err := s.checkBranch(&req, cur, &checked); err != nil {
		return TxnResponse{}, err
	}
	resp, err := s.readBranch(&req, cur, &path)
	resp.Rev = cur
	return resp, err
}

// readBranch runs the branch of a read-only Txn that path says.
func (s *Store) readBranch(req *TxnRequest, cur int64, path *[]bool) (TxnResponse, error) {
	ok := takeBranch(path)
	ops := req.branch(ok)
	resp := TxnResponse{Succeeded: ok, Responses: make([]OpResponse, len(ops))}
	for i, op := range ops {
		if op.Type == OpTxn {
			nested, err := s.readBranch(op.Txn, cur, path)
			if err != nil {
				return TxnResponse{}, err
			}
			resp.Responses[i] = OpResponse{Type: OpTxn, Txn: &nested}
			continue
		}
		kr, _ := checkRange(op.Key, op.End) // checked in checkTxn
		r, err := s.rangeAt(kr, op.Options, cur, nil, nil)
		if err != nil {
			return TxnResponse{}, err
		}
		resp.Responses[i] = OpResponse{Type: OpRange, Rev: r.Rev, Range: r}
	}
	return resp, nil
}

// checkRangeRev is etcd's check of a Txn's range revision against the
// revision the Txn starts from (0 is the latest).
func (s *Store) checkRangeRev(rev, cur int64) error {
	switch {
	case rev == 0:
		return nil
	case rev > cur:
		return fmt.Errorf("%w: %d, current revision is %d", ErrFutureRev, rev, cur)
	case rev < s.compactRev:
		return fmt.Errorf("%w: %d, compacted at %d", ErrCompacted, rev, s.compactRev)
	}
	return nil
}

// checkBranch runs the checks of the branches path says, nested ones
// included, on the state at begin (before the Txn), before anything is
// written: etcd's checkTxn. The caller holds writeMu or mu.
func (s *Store) checkBranch(req *TxnRequest, begin int64, path *[]bool) error {
	for i, op := range req.branch(takeBranch(path)) {
		switch op.Type {
		case OpRange:
			if err := s.checkRangeRev(op.Options.Rev, begin); err != nil {
				return fmt.Errorf("op %d: %w", i, err)
			}
		case OpPut:
			if op.Lease != 0 && s.leases.byID[op.Lease] == nil {
				return fmt.Errorf("op %d: %w: %d", i, ErrLeaseNotFound, op.Lease)
			}
			if op.IgnoreValue || op.IgnoreLease {
				if _, live := s.ix.Get(op.Key, begin); !live {
					return fmt.Errorf("op %d: %w: %q (IgnoreValue or IgnoreLease needs it)", i, ErrKeyNotFound, op.Key)
				}
			}
		case OpTxn:
			if err := s.checkBranch(op.Txn, begin, path); err != nil {
				return fmt.Errorf("op %d: %w", i, err)
			}
		}
	}
	return nil
}

// execTxn runs the checked branch of req that path says, nested Txns
// where they stand. An error here is the engine's: the index may already
// hold part of the txn.
func (t *writeTxn) execTxn(req *TxnRequest, path *[]bool) (TxnResponse, error) {
	ok := takeBranch(path)
	ops := req.branch(ok)
	resp := TxnResponse{Succeeded: ok, Responses: make([]OpResponse, len(ops))}
	for i, op := range ops {
		if op.Type == OpTxn {
			nested, err := t.execTxn(op.Txn, path)
			if err != nil {
				return TxnResponse{}, err
			}
			resp.Responses[i] = OpResponse{Type: OpTxn, Txn: &nested}
			continue
		}
		r, err := t.exec(op)
		if err != nil {
			return TxnResponse{}, err
		}
		resp.Responses[i] = r
	}
	return resp, nil
}

// exec runs one checked op. An error here is the engine's: the index may
// already hold part of the txn.
func (t *writeTxn) exec(op Op) (OpResponse, error) {
	s := t.s
	kr, _ := checkRange(op.Key, op.End) // checked in checkTxn
	switch op.Type {
	case OpPut:
		w := write{key: op.Key, value: op.Value, lease: op.Lease}
		resp := OpResponse{Type: OpPut}
		if cur, live := s.ix.Get(op.Key, t.rev()); live {
			w.create, w.version, w.prev, w.hasPrev = cur.Create, cur.Version+1, cur.Mod, true
			if op.PrevKV || op.IgnoreValue || op.IgnoreLease {
				rec, err := t.fetch(cur.Mod)
				if err != nil {
					return OpResponse{}, err
				}
				prev := rec.kv()
				if op.IgnoreValue {
					w.value = prev.Value
				}
				if op.IgnoreLease {
					w.lease = prev.Lease
				}
				if op.PrevKV {
					resp.PrevKV = &prev
				}
			}
		} else {
			w.create, w.version = t.begin+1, 1
		}
		if err := t.add(w); err != nil {
			return OpResponse{}, err
		}
		resp.Rev = t.rev()
		return resp, nil
	case OpDelete:
		return t.deleteRange(kr, op.PrevKV)
	default: // OpRange
		r, err := s.rangeAt(kr, op.Options, t.rev(), t.fetch, nil)
		if err != nil {
			return OpResponse{}, err
		}
		return OpResponse{Type: OpRange, Rev: r.Rev, Range: r}, nil
	}
}

// deleteRange deletes the live keys of kr, with their previous versions
// if prevKV.
func (t *writeTxn) deleteRange(kr keyRange, prevKV bool) (OpResponse, error) {
	s := t.s
	type victim struct {
		key []byte
		kr  keyindex.KeyRev
	}
	var vs []victim
	s.liveKeys(kr, t.rev(), func(key []byte, cur keyindex.KeyRev) {
		vs = append(vs, victim{bytes.Clone(key), cur})
	})
	resp := OpResponse{Type: OpDelete, Deleted: int64(len(vs))}
	for _, v := range vs {
		if prevKV {
			rec, err := t.fetch(v.kr.Mod)
			if err != nil {
				return OpResponse{}, err
			}
			resp.PrevKVs = append(resp.PrevKVs, rec.kv())
		}
		if err := t.add(write{key: v.key, tomb: true, prev: v.kr.Mod, hasPrev: true}); err != nil {
			return OpResponse{}, err
		}
	}
	resp.Rev = t.rev()
	return resp, nil
}

// write is one key written by a transaction.
type write struct {
	key, value      []byte
	rev             keyindex.Revision
	tomb            bool
	create, version int64
	lease           int64
	// prev is the revision of the version it replaces, if hasPrev.
	prev    keyindex.Revision
	hasPrev bool
}

func (w *write) record() record {
	if w.tomb {
		return record{key: w.key, mod: w.rev.Main, tomb: true}
	}
	return record{key: w.key, value: w.value, create: w.create, mod: w.rev.Main, version: w.version, lease: w.lease}
}

// liveKeys calls fn for each key of r live at rev. The key aliases index
// memory. The caller holds writeMu or mu (so the index does not change
// under it).
func (s *Store) liveKeys(r keyRange, rev int64, fn func(key []byte, kr keyindex.KeyRev)) {
	if r.single() {
		if kr, ok := s.ix.Get(r.key, rev); ok {
			fn(r.key, kr)
		}
		return
	}
	if r.empty() {
		return
	}
	s.ix.Range(r.key, r.upper(), rev, func(key []byte, kr keyindex.KeyRev) bool {
		fn(key, kr)
		return true
	})
}

// compare evaluates compares at revision rev, as etcd does: a compare
// over a range holds if it holds for every key in it, an empty range
// compares as a missing key (zeros), and a value compare on a missing key
// fails.
func (s *Store) compare(cs []Compare, rev int64, fetch func(keyindex.Revision) (record, error)) (bool, error) {
	for _, c := range cs {
		kr, _ := checkRange(c.Key, c.End) // checked in checkTxn
		var kvs []keyindex.KeyRev
		s.liveKeys(kr, rev, func(_ []byte, r keyindex.KeyRev) { kvs = append(kvs, r) })
		if len(kvs) == 0 {
			if c.Target == CompareValue || !compareHolds(c, KeyValue{}) {
				return false, nil
			}
			continue
		}
		for _, r := range kvs {
			kv := KeyValue{CreateRevision: r.Create, ModRevision: r.Mod.Main, Version: r.Version}
			if c.Target == CompareValue || c.Target == CompareLease {
				rec, err := fetch(r.Mod)
				if err != nil {
					return false, err
				}
				kv = rec.kv()
			}
			if !compareHolds(c, kv) {
				return false, nil
			}
		}
	}
	return true, nil
}

// compareHolds applies one compare to one key's version.
func compareHolds(c Compare, kv KeyValue) bool {
	var order int
	switch c.Target {
	case CompareValue:
		order = bytes.Compare(kv.Value, c.Value)
	case CompareVersion:
		order = cmp.Compare(kv.Version, c.Rev)
	case CompareCreateRevision:
		order = cmp.Compare(kv.CreateRevision, c.Rev)
	case CompareModRevision:
		order = cmp.Compare(kv.ModRevision, c.Rev)
	case CompareLease:
		order = cmp.Compare(kv.Lease, c.Rev)
	}
	switch c.Result {
	case Equal:
		return order == 0
	case NotEqual:
		return order != 0
	case Less:
		return order < 0
	}
	return order > 0
}

// checkTxn validates a request before anything is read or written: its
// own fields and those of its nested Txns, then the writes of each branch
// (collectWrites).
func checkTxn(req *TxnRequest) error {
	if err := validateTxn(req); err != nil {
		return err
	}
	if mayCollide(req.Success) {
		if _, err := collectWrites(req.Success); err != nil {
			return fmt.Errorf("success: %w", err)
		}
	}
	if mayCollide(req.Failure) {
		if _, err := collectWrites(req.Failure); err != nil {
			return fmt.Errorf("failure: %w", err)
		}
	}
	return nil
}

// mayCollide reports whether two writes of a branch could touch one key,
// which collectWrites checks: a branch of one put or delete (every Put,
// DeleteRange and v2 write) cannot, and needs no map of its keys.
func mayCollide(ops []Op) bool {
	return len(ops) > 1 || len(ops) == 1 && ops[0].Type == OpTxn
}

// validateTxn checks the compares and ops of a Txn and of its nested ones.
func validateTxn(req *TxnRequest) error {
	for i, c := range req.Compare {
		if _, err := checkRange(c.Key, c.End); err != nil {
			return fmt.Errorf("compare %d: %w", i, err)
		}
		if c.Target < CompareValue || c.Target > CompareLease {
			return fmt.Errorf("%w: compare %d: target %d", ErrInvalidTxn, i, c.Target)
		}
		if c.Result < Equal || c.Result > Greater {
			return fmt.Errorf("%w: compare %d: result %d", ErrInvalidTxn, i, c.Result)
		}
	}
	if err := validateOps(req.Success); err != nil {
		return fmt.Errorf("success: %w", err)
	}
	if err := validateOps(req.Failure); err != nil {
		return fmt.Errorf("failure: %w", err)
	}
	return nil
}

// validateOps validates the ops of one branch.
func validateOps(ops []Op) error {
	for i, op := range ops {
		switch op.Type {
		case OpPut:
			if err := checkKey(op.Key); err != nil {
				return fmt.Errorf("op %d: %w", i, err)
			}
			if err := checkValue(op.Value); err != nil {
				return fmt.Errorf("op %d: %w", i, err)
			}
			if op.IgnoreValue && len(op.Value) != 0 {
				return fmt.Errorf("op %d: %w: IgnoreValue with a %d-byte value", i, ErrValueProvided, len(op.Value))
			}
			if op.IgnoreLease && op.Lease != 0 {
				return fmt.Errorf("op %d: %w: IgnoreLease with lease %d", i, ErrLeaseProvided, op.Lease)
			}
		case OpDelete, OpRange:
			if _, err := checkRange(op.Key, op.End); err != nil {
				return fmt.Errorf("op %d: %w", i, err)
			}
		case OpTxn:
			if op.Txn == nil {
				return fmt.Errorf("%w: op %d: nested txn without a request", ErrInvalidTxn, i)
			}
			if err := validateTxn(op.Txn); err != nil {
				return fmt.Errorf("op %d: %w", i, err)
			}
		default:
			return fmt.Errorf("%w: op %d: type %d", ErrInvalidTxn, i, op.Type)
		}
	}
	return nil
}

// branchWrites are the keys the ops of a branch may put and the ranges
// they may delete, nested Txns included (both of their branches).
type branchWrites struct {
	puts map[string]struct{}
	dels []keyRange
}

// deletes reports whether a delete of w covers key.
func (w *branchWrites) deletes(key string) bool {
	for _, d := range w.dels {
		if d.contains([]byte(key)) {
			return true
		}
	}
	return false
}

// collectWrites returns the writes of a validated branch, or
// ErrDuplicateKeyInTxn if two of them could write the same key: etcd's
// checkIntervals (its gRPC layer's check, before anything is applied).
// Of two ops that may both run, no key may be put twice, nor put and
// deleted; the branches of one nested Txn exclude each other, so each may
// put the same key. Two deletes may overlap.
//
// etcd's rule lets through two cases that write one key twice in a
// revision, which Strata refuses too (its key index holds one write per
// key and revision): a put of a key that a delete with range end "\x00"
// (every key from its key on) covers, which etcd's interval check misses,
// and a nested Txn deleting a key that an earlier nested Txn of the same
// branch puts (etcd checks a nested Txn's puts against the deletes of the
// ones before it, not its deletes against their puts).
func collectWrites(ops []Op) (branchWrites, error) {
	w := branchWrites{puts: map[string]struct{}{}}
	for _, op := range ops {
		if op.Type == OpDelete {
			kr, _ := checkRange(op.Key, op.End) // validated
			w.dels = append(w.dels, kr)
		}
	}
	for i, op := range ops {
		if op.Type != OpTxn {
			continue
		}
		then, err := collectWrites(op.Txn.Success)
		if err != nil {
			return w, fmt.Errorf("op %d: success: %w", i, err)
		}
		els, err := collectWrites(op.Txn.Failure)
		if err != nil {
			return w, fmt.Errorf("op %d: failure: %w", i, err)
		}
		for k := range w.puts {
			if then.deletes(k) || els.deletes(k) {
				return w, fmt.Errorf("%w: op %d: %q is put and deleted", ErrDuplicateKeyInTxn, i, k)
			}
		}
		// Both branches against the writes before this op (they exclude
		// each other, not those).
		for _, puts := range []map[string]struct{}{then.puts, els.puts} {
			for k := range puts {
				if _, dup := w.puts[k]; dup {
					return w, fmt.Errorf("%w: op %d: %q put twice", ErrDuplicateKeyInTxn, i, k)
				}
				if w.deletes(k) {
					return w, fmt.Errorf("%w: op %d: %q is put and deleted", ErrDuplicateKeyInTxn, i, k)
				}
			}
		}
		for _, puts := range []map[string]struct{}{then.puts, els.puts} {
			for k := range puts {
				w.puts[k] = struct{}{}
			}
		}
		w.dels = append(append(w.dels, then.dels...), els.dels...)
	}
	for i, op := range ops {
		if op.Type != OpPut {
			continue
		}
		k := string(op.Key)
		if _, dup := w.puts[k]; dup {
			return w, fmt.Errorf("%w: op %d: %q put twice", ErrDuplicateKeyInTxn, i, k)
		}
		if w.deletes(k) {
			return w, fmt.Errorf("%w: op %d: %q is put and deleted", ErrDuplicateKeyInTxn, i, k)
		}
		w.puts[k] = struct{}{}
	}
	return w, nil
}
