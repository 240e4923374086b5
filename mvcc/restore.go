package mvcc

import (
	"fmt"

	"github.com/stratadb/strata/engine"
	"github.com/stratadb/strata/mvcc/keyindex"
)

// restore rebuilds the index from the revision keys, attaches each live
// key whose latest version carries a lease to that lease, and returns the
// largest revision found.
//
// It reads each revision's index record, not its record (codec.go): it
// reads every key under the revision prefix but the values of the index
// records only, so the records' values are neither fetched (from blob
// files, where Pebble keeps large values apart) nor decoded. A record with
// no index record after it, written before index records existed, is
// decoded whole; see restorer.
func (s *Store) restore() (int64, error) {
	it, err := s.db.NewIter(&engine.IterOptions{LowerBound: []byte{revPrefix}, UpperBound: []byte{revPrefix + 1}})
	if err != nil {
		return 0, err
	}
	defer it.Close()
	r, err := newRestorer(s.ix, s.db)
	if err != nil {
		return 0, err
	}
	for ok := it.First(); ok; ok = it.Next() {
		if err := r.step(it); err != nil {
			return 0, err
		}
	}
	if err := it.Error(); err != nil {
		return 0, fmt.Errorf("mvcc: Open: scan revisions: %w", err)
	}
	return s.adopt(r)
}

// adopt finishes r, whose index is s.ix, once every revision went through
// it: it applies the last record if it awaits an index record, attaches
// the leases of the live keys (s's leases restored already) and returns
// the largest revision.
func (s *Store) adopt(r *restorer) (int64, error) {
	if err := r.finish(); err != nil {
		return 0, err
	}
	for k, id := range r.keyLease {
		// A revoke deletes the keys and the lease in one batch, so a
		// missing lease means the data is damaged.
		if err := s.leases.attach(k, id); err != nil {
			return 0, fmt.Errorf("mvcc: Open: %w: key %q: %w", ErrCorrupt, k, err)
		}
	}
	return r.last.Main, nil
}

// pair is a key and its value, as an engine.Iterator is at them or a
// snapshot stream holds them; ValueAndErr is called only when needed (for
// an iterator it may fetch the value from a blob file, which can fail).
type pair interface {
	Key() []byte
	ValueAndErr() ([]byte, error)
}

// streamPair is a pair read from a snapshot stream.
type streamPair struct{ k, v []byte }

func (p streamPair) Key() []byte                  { return p.k }
func (p streamPair) ValueAndErr() ([]byte, error) { return p.v, nil }

// restorer is restore's state. A record is met before its index record,
// so it is held pending until the next key shows whether it has one.
// While the records met have index records, a record's value is not read
// at all; once one has none (a store written before index records, or the
// older part of one written across the change), restore reads that one
// with a Get and decodes the next records as they are met (eager), which
// costs what restore cost before index records, until an index record
// turns up again. A restorer fed from a snapshot stream (db nil) has every
// value at hand and nothing to Get: it decodes every record as met
// (always eager), which costs little beside reading the stream.
type restorer struct {
	index    *keyindex.Index   // the index filled, through ix until finish
	ix       *keyindex.Rebuild // nil once finished
	db       *engine.DB        // where a pending record is read; nil: always eager
	where    string            // what its errors begin with
	keyLease map[string]int64  // the latest version's lease, if any
	last     keyindex.Revision

	// pending is the last record met, whose index record has not been:
	// with eager set, decoded into rec (its key copied to key), or the
	// error decoding it.
	pending    keyindex.Revision
	hasPending bool
	eager      bool
	rec        record
	recErr     error
	key        []byte
}

// newRestorer returns a restorer filling ix, which must be empty; with db
// nil, one for a snapshot stream (always eager).
func newRestorer(ix *keyindex.Index, db *engine.DB) (*restorer, error) {
	where := "mvcc: Open"
	if db == nil {
		where = "snapshot"
	}
	rebuild, err := ix.StartRebuild()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	return &restorer{index: ix, ix: rebuild, db: db, where: where, keyLease: map[string]int64{}, eager: db == nil}, nil
}

// finish applies the last record met if it awaits an index record and
// completes the index: the revisions are over. It may be called again.
func (r *restorer) finish() error {
	if r.ix == nil {
		return nil
	}
	if r.hasPending {
		if err := r.noIndexRecord(); err != nil {
			return err
		}
	}
	r.ix.Finish()
	r.ix = nil
	return nil
}

// step takes the key (and, when needed, the value) p is at.
func (r *restorer) step(p pair) error {
	rev, index, err := decodeRevSlot(p.Key())
	if err != nil {
		return fmt.Errorf("%s: %w", r.where, err)
	}
	if index {
		if !r.hasPending || r.pending != rev {
			return fmt.Errorf("%s: %w: index record of revision %d.%d without its record", r.where, ErrCorrupt, rev.Main, rev.Sub)
		}
		r.hasPending, r.eager = false, r.db == nil
		v, err := p.ValueAndErr()
		var rec record
		if err == nil {
			rec, err = decodeRecord(v)
		}
		if err == nil && len(rec.value) != 0 {
			err = fmt.Errorf("%w: it holds %d value bytes", ErrCorrupt, len(rec.value))
		}
		if err != nil {
			return fmt.Errorf("%s: index record of revision %d.%d: %w", r.where, rev.Main, rev.Sub, err)
		}
		return r.apply(rev, &rec)
	}
	if r.hasPending {
		if err := r.noIndexRecord(); err != nil {
			return err
		}
	}
	r.pending, r.hasPending = rev, true
	if r.eager {
		v, err := p.ValueAndErr()
		if err != nil {
			return fmt.Errorf("%s: revision %d.%d: %w", r.where, rev.Main, rev.Sub, err)
		}
		r.setRecord(v)
	}
	return nil
}

// setRecord decodes the pending record from v, keeping its key.
func (r *restorer) setRecord(v []byte) {
	r.rec, r.recErr = decodeRecord(v)
	if r.recErr == nil {
		r.key = append(r.key[:0], r.rec.key...)
		r.rec.key, r.rec.value = r.key, nil
	}
}

// noIndexRecord applies the pending record, which has no index record.
func (r *restorer) noIndexRecord() error {
	rev := r.pending
	r.hasPending = false
	if !r.eager {
		v, err := r.db.Get(revKey(rev))
		if err != nil {
			return fmt.Errorf("%s: read revision %d.%d: %w", r.where, rev.Main, rev.Sub, err)
		}
		r.setRecord(v)
		r.eager = true
	}
	if r.recErr != nil {
		return fmt.Errorf("%s: revision %d.%d: %w", r.where, rev.Main, rev.Sub, r.recErr)
	}
	return r.apply(rev, &r.rec)
}

// apply adds revision rev, holding rec, to the index and the leases.
func (r *restorer) apply(rev keyindex.Revision, rec *record) error {
	if rec.mod != rev.Main {
		return fmt.Errorf("%s: %w: revision %d.%d holds mod_revision %d", r.where, ErrCorrupt, rev.Main, rev.Sub, rec.mod)
	}
	if err := r.ix.Restore(rec.key, rev, rec.tomb, rec.create, rec.version); err != nil {
		return fmt.Errorf("%s: %w: revision %d.%d of %q: %w", r.where, ErrCorrupt, rev.Main, rev.Sub, rec.key, err)
	}
	if rec.lease != 0 {
		r.keyLease[string(rec.key)] = rec.lease
	} else if len(r.keyLease) > 0 {
		delete(r.keyLease, string(rec.key))
	}
	r.last = rev
	return nil
}
