package mvcc

import (
	"bytes"
	"fmt"
	"slices"

	"github.com/stratadb/strata/mvcc/keyindex"
)

// Put sets key to value in a new revision and returns it.
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

// Txn runs a transaction atomically: it evaluates the compares on the
// latest revision, then runs the Success ops if all hold and the Failure
// ops otherwise. The writes of the branch share one new revision, each
// written key a sub revision in op order; a Txn that writes nothing makes
// no revision. Every key, range and value is checked first, and a branch
// that writes a key twice fails with ErrDuplicateKeyInTxn (two deletes
// may overlap, as in etcd): on error nothing is written.
//
// RangeOps read the store as of the start of the Txn, before its writes.
func (s *Store) Txn(req TxnRequest) (TxnResponse, error) {
	if err := checkTxn(&req); err != nil {
		return TxnResponse{}, err
	}
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	if s.closed.Load() {
		return TxnResponse{}, ErrClosed
	}
	if s.failed != nil {
		return TxnResponse{}, s.failed
	}
	// Only writers change the index and s.rev, and we hold writeMu, so
	// both can be read without mu here.
	cur := s.rev
	ok, err := s.compare(req.Compare, cur)
	if err != nil {
		return TxnResponse{}, err
	}
	ops := req.Success
	if !ok {
		ops = req.Failure
	}
	resp := TxnResponse{Succeeded: ok, Rev: cur, Responses: make([]OpResponse, len(ops))}

	newRev := cur + 1
	var writes []write
	var deleted map[string]bool // keys deleted by earlier ops of this txn
	for i, op := range ops {
		resp.Responses[i].Type = op.Type
		switch op.Type {
		case OpPut:
			w := write{key: op.Key, value: op.Value, rev: keyindex.Revision{Main: newRev, Sub: int64(len(writes))}}
			if kr, live := s.ix.Get(op.Key, cur); live {
				w.create, w.version, w.prev, w.hasPrev = kr.Create, kr.Version+1, kr.Mod, true
			} else {
				w.create, w.version = newRev, 1
			}
			writes = append(writes, w)
		case OpDelete:
			kr, _ := checkRange(op.Key, op.End) // checked in checkTxn
			var n int64
			s.liveKeys(kr, cur, func(key []byte, prev keyindex.KeyRev) {
				if deleted[string(key)] {
					return // an overlapping delete of this txn took it
				}
				if deleted == nil {
					deleted = map[string]bool{}
				}
				deleted[string(key)] = true
				n++
				writes = append(writes, write{key: bytes.Clone(key), tomb: true, prev: prev.Mod, hasPrev: true,
					rev: keyindex.Revision{Main: newRev, Sub: int64(len(writes))}})
			})
			resp.Responses[i].Deleted = n
		case OpRange:
			opts := op.Options
			if opts.Rev <= 0 {
				opts.Rev = cur
			}
			r, err := s.Range(op.Key, op.End, opts)
			if err != nil {
				return TxnResponse{}, err
			}
			resp.Responses[i].Range = r
		}
	}
	if len(writes) == 0 {
		return resp, nil
	}
	if err := s.commit(newRev, writes); err != nil {
		return TxnResponse{}, err
	}
	resp.Rev = newRev
	return resp, nil
}

// write is one key written by a transaction.
type write struct {
	key, value      []byte
	rev             keyindex.Revision
	tomb            bool
	create, version int64
	// prev is the revision of the version it replaces, if hasPrev.
	prev    keyindex.Revision
	hasPrev bool
}

func (w *write) record() record {
	if w.tomb {
		return record{key: w.key, mod: w.rev.Main, tomb: true}
	}
	return record{key: w.key, value: w.value, create: w.create, mod: w.rev.Main, version: w.version}
}

// commit writes a transaction's records and the current revision in one
// batch, then applies it to the index and hands it to the watchers.
func (s *Store) commit(newRev int64, writes []write) error {
	b := s.db.NewBatch()
	defer b.Close()
	var key, val []byte
	for i := range writes {
		r := writes[i].record()
		key = appendRevKey(key[:0], writes[i].rev)
		val = appendRecord(val[:0], &r)
		if err := b.Put(key, val); err != nil {
			return err
		}
	}
	if err := b.Put(metaRev, encodeInt64(newRev)); err != nil {
		return err
	}
	if err := b.Commit(); err != nil {
		s.failed = fmt.Errorf("mvcc: store failed, reopen it: write of revision %d: %w", newRev, err)
		return s.failed
	}
	s.mu.Lock()
	var ierr error
	for i := range writes {
		w := &writes[i]
		if w.tomb {
			_, ierr = s.ix.Tombstone(w.key, w.rev)
		} else {
			ierr = s.ix.Put(w.key, w.rev)
		}
		if ierr != nil {
			break
		}
	}
	s.rev = newRev
	s.mu.Unlock()
	if ierr != nil {
		// A broken invariant: the index disagrees with storage.
		s.failed = fmt.Errorf("mvcc: store failed, reopen it: index update at revision %d: %w", newRev, ierr)
		return s.failed
	}
	s.notify(newRev, writes)
	return nil
}

// liveKeys calls fn for each key of r live at rev. The key aliases index
// memory. The caller holds writeMu (so the index does not change).
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

// compare evaluates compares against revision rev.
func (s *Store) compare(cs []Compare, rev int64) (bool, error) {
	for _, c := range cs {
		kr, live := s.ix.Get(c.Key, rev)
		var cmp int
		switch c.Target {
		case CompareValue:
			if !live {
				return false, nil // etcd: a value compare on a missing key fails
			}
			v, err := s.db.Get(revKey(kr.Mod))
			if err != nil {
				return false, fmt.Errorf("mvcc: read %q at %d: %w", c.Key, kr.Mod.Main, err)
			}
			rec, err := decodeRecord(v)
			if err != nil {
				return false, err
			}
			cmp = bytes.Compare(rec.value, c.Value)
		case CompareVersion:
			cmp = cmpInt(kr.Version, c.Rev)
		case CompareCreateRevision:
			cmp = cmpInt(kr.Create, c.Rev)
		case CompareModRevision:
			cmp = cmpInt(kr.Mod.Main, c.Rev)
		}
		var ok bool
		switch c.Result {
		case Equal:
			ok = cmp == 0
		case NotEqual:
			ok = cmp != 0
		case Less:
			ok = cmp < 0
		case Greater:
			ok = cmp > 0
		}
		if !ok {
			return false, nil
		}
	}
	return true, nil
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// checkTxn validates a request before anything is read or written.
func checkTxn(req *TxnRequest) error {
	for i, c := range req.Compare {
		if err := checkKey(c.Key); err != nil {
			return fmt.Errorf("compare %d: %w", i, err)
		}
		if c.Target < CompareValue || c.Target > CompareModRevision {
			return fmt.Errorf("%w: compare %d: target %d", ErrInvalidTxn, i, c.Target)
		}
		if c.Result < Equal || c.Result > Greater {
			return fmt.Errorf("%w: compare %d: result %d", ErrInvalidTxn, i, c.Result)
		}
	}
	if err := checkOps(req.Success); err != nil {
		return fmt.Errorf("success: %w", err)
	}
	if err := checkOps(req.Failure); err != nil {
		return fmt.Errorf("failure: %w", err)
	}
	return nil
}

// checkOps validates one branch, with etcd's duplicate rules: no key put
// twice, no put of a key that a delete covers.
func checkOps(ops []Op) error {
	var puts [][]byte
	var dels []keyRange
	for i, op := range ops {
		switch op.Type {
		case OpPut:
			if err := checkKey(op.Key); err != nil {
				return fmt.Errorf("op %d: %w", i, err)
			}
			if err := checkValue(op.Value); err != nil {
				return fmt.Errorf("op %d: %w", i, err)
			}
			puts = append(puts, op.Key)
		case OpDelete, OpRange:
			kr, err := checkRange(op.Key, op.End)
			if err != nil {
				return fmt.Errorf("op %d: %w", i, err)
			}
			if op.Type == OpDelete {
				dels = append(dels, kr)
			}
		default:
			return fmt.Errorf("%w: op %d: type %d", ErrInvalidTxn, i, op.Type)
		}
	}
	if len(puts) > 1 {
		sorted := slices.Clone(puts)
		slices.SortFunc(sorted, bytes.Compare)
		for i := 1; i < len(sorted); i++ {
			if bytes.Equal(sorted[i-1], sorted[i]) {
				return fmt.Errorf("%w: %q put twice", ErrDuplicateKeyInTxn, sorted[i])
			}
		}
	}
	for _, p := range puts {
		for _, d := range dels {
			if d.contains(p) {
				return fmt.Errorf("%w: %q is put and deleted", ErrDuplicateKeyInTxn, p)
			}
		}
	}
	return nil
}
