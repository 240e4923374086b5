package mvcc

import (
	"errors"
	"fmt"

	"github.com/stratadb/strata/engine"
	"github.com/stratadb/strata/mvcc/keyindex"
)

// Batch applies the writes of several consecutive log entries with one
// engine commit, where Entry makes one commit per entry. A replicated
// log's apply loop that receives many committed entries at once (a
// cluster member under load) stages them all and commits once: one
// Pebble batch, one WAL record, one publication, instead of one of each
// per entry.
//
// Each staged write behaves as Entry's: it is checked, evaluated against
// every write staged before it (in the batch or not), assigned its
// revision and returns its result at once, and an error the request
// causes is returned for that entry alone, its index still recorded. The
// batch records the revision and the applied index of its last entry in
// the same engine batch as the data, so after a crash either every staged
// entry is in storage or none is, and AppliedIndex says which: replaying
// the log after it applies each entry exactly once.
//
// Nothing staged is visible before Commit: readers and watchers see the
// batch's revisions once it is committed (and durable, with sync = true),
// in order. A Batch holds the store's write lock from BeginBatch to
// Commit, so other writers wait; it is for one goroutine.
//
//	b := s.BeginBatch()
//	for _, e := range committedEntries {
//		results[i], errs[i] = b.Entry(e.Index).Txn(e.Req)
//	}
//	if err := b.Commit(); err != nil { ... } // the store failed
//	// hand results to the waiters
//
// Compactions and lease grants and revocations are not staged: commit the
// batch, apply them with Store.Entry, and begin another.
type Batch struct {
	s *Store
	// eb holds the staged writes, created with the first.
	eb *engine.Batch
	// pend are the staged entries' publications, in log order.
	pend []*pending
	// baseRev is the last revision assigned before the batch; revs[i] are
	// the writes of revision baseRev+1+i (each staged write that writes
	// makes the next revision).
	baseRev int64
	revs    [][]write
	// sc holds reusable key and value buffers (from scratches).
	sc   *scratch
	done bool
}

// errBatchDone is returned by a Batch used after its Commit.
var errBatchDone = errors.New("mvcc: batch already committed")

// BeginBatch starts a Batch. It takes the store's write lock: call Commit
// exactly once, also after an error, to release it.
func (s *Store) BeginBatch() *Batch {
	s.writeMu.Lock()
	return &Batch{s: s, baseRev: s.lastRev}
}

// BatchEntry is the writes of one log entry staged in a Batch: Entry's
// Txn and Skip, committed by Batch.Commit.
type BatchEntry struct {
	b     *Batch
	index uint64
}

// Entry returns the writes of the log entry at index, which must be above
// every index applied or staged before (ErrAlreadyApplied otherwise) and
// not 0.
func (b *Batch) Entry(index uint64) BatchEntry { return BatchEntry{b: b, index: index} }

// Txn is Entry.Txn, staged.
func (e BatchEntry) Txn(req TxnRequest) (TxnResponse, error) {
	return e.b.s.txnIn(e.b, e.index, req)
}

// Skip is Entry.Skip, staged.
func (e BatchEntry) Skip() error { return e.b.s.skipIn(e.b, e.index) }

// check reports why index cannot be staged in b.
func (b *Batch) check(index uint64) error {
	if b.done {
		return errBatchDone
	}
	if index == 0 {
		return errors.New("mvcc: Batch.Entry(0): a batch stages log entries, whose index is above 0")
	}
	return nil
}

// stage adds a finished write to the batch.
func (b *Batch) stage(t *writeTxn) error {
	if b.eb == nil {
		b.eb = b.s.db.NewBatch()
		b.sc = scratches.Get().(*scratch)
	}
	p, err := t.put(b.eb, b.sc)
	if err != nil {
		return err
	}
	if p.rev != 0 {
		if want := b.baseRev + 1 + int64(len(b.revs)); p.rev != want {
			// A broken invariant: revisions are assigned one by one under
			// the write lock the batch holds.
			return fmt.Errorf("mvcc: batch staged revision %d, expected %d", p.rev, want)
		}
		b.revs = append(b.revs, t.writes)
		b.s.lastRev = p.rev
	}
	b.s.lastIndex = p.index
	b.pend = append(b.pend, p)
	return nil
}

// staged returns the write of revision r if an earlier entry of the batch
// made it, nil otherwise.
func (b *Batch) staged(r keyindex.Revision) *write {
	i := r.Main - b.baseRev - 1
	if i < 0 || i >= int64(len(b.revs)) || r.Sub < 0 || r.Sub >= int64(len(b.revs[i])) {
		return nil
	}
	return &b.revs[i][r.Sub]
}

// Len returns the number of entries staged.
func (b *Batch) Len() int { return len(b.pend) }

// Commit commits every staged entry in one engine batch, releases the
// write lock, and returns once they are durable and published. An error
// means the store failed (reopen it), also if it failed while an entry
// was staged; nothing staged was acknowledged then, and the applied index
// after a reopen says which entries to apply again.
func (b *Batch) Commit() error {
	if b.done {
		return errBatchDone
	}
	b.done = true
	s := b.s
	if b.eb != nil {
		defer b.eb.Close()
		scratches.Put(b.sc)
	}
	if err := s.failure(); err != nil {
		s.writeMu.Unlock()
		return err
	}
	if len(b.pend) == 0 {
		s.writeMu.Unlock()
		return nil
	}
	return s.commitLocked(b.eb, b.pend...)
}
