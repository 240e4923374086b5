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
	r := restorer{s: s, keyLease: map[string]int64{}}
	for ok := it.First(); ok; ok = it.Next() {
		if err := r.step(it); err != nil {
			return 0, err
		}
	}
	if err := it.Error(); err != nil {
		return 0, fmt.Errorf("mvcc: Open: scan revisions: %w", err)
	}
	if r.hasPending {
		if err := r.noIndexRecord(); err != nil {
			return 0, err
		}
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

// restorer is restore's state. A record is met before its index record,
// so it is held pending until the next key shows whether it has one.
// While the records met have index records, a record's value is not read
// at all; once one has none (a store written before index records, or the
// older part of one written across the change), restore reads that one
// with a Get and decodes the next records as they are met (eager), which
// costs what restore cost before index records, until an index record
// turns up again.
type restorer struct {
	s        *Store
	keyLease map[string]int64 // the latest version's lease, if any
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

// step takes the key (and, when needed, the value) it is at.
func (r *restorer) step(it *engine.Iterator) error {
	rev, index, err := decodeRevSlot(it.Key())
	if err != nil {
		return fmt.Errorf("mvcc: Open: %w", err)
	}
	if index {
		if !r.hasPending || r.pending != rev {
			return fmt.Errorf("mvcc: Open: %w: index record of revision %d.%d without its record", ErrCorrupt, rev.Main, rev.Sub)
		}
		r.hasPending, r.eager = false, false
		rec, err := decodeRecord(it.Value())
		if err == nil && len(rec.value) != 0 {
			err = fmt.Errorf("%w: it holds %d value bytes", ErrCorrupt, len(rec.value))
		}
		if err != nil {
			return fmt.Errorf("mvcc: Open: index record of revision %d.%d: %w", rev.Main, rev.Sub, err)
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
		r.setRecord(it.Value())
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
		v, err := r.s.db.Get(revKey(rev))
		if err != nil {
			return fmt.Errorf("mvcc: Open: read revision %d.%d: %w", rev.Main, rev.Sub, err)
		}
		r.setRecord(v)
		r.eager = true
	}
	if r.recErr != nil {
		return fmt.Errorf("mvcc: Open: revision %d.%d: %w", rev.Main, rev.Sub, r.recErr)
	}
	return r.apply(rev, &r.rec)
}

// apply adds revision rev, holding rec, to the index and the leases.
func (r *restorer) apply(rev keyindex.Revision, rec *record) error {
	if rec.mod != rev.Main {
		return fmt.Errorf("mvcc: Open: %w: revision %d.%d holds mod_revision %d", ErrCorrupt, rev.Main, rev.Sub, rec.mod)
	}
	if err := r.s.ix.Restore(rec.key, rev, rec.tomb, rec.create, rec.version); err != nil {
		return fmt.Errorf("mvcc: Open: %w: revision %d.%d of %q: %w", ErrCorrupt, rev.Main, rev.Sub, rec.key, err)
	}
	if rec.lease != 0 {
		r.keyLease[string(rec.key)] = rec.lease
	} else if len(r.keyLease) > 0 {
		delete(r.keyLease, string(rec.key))
	}
	r.last = rev
	return nil
}
