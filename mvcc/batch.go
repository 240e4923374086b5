package mvcc

import (
	"errors"
	"fmt"

	"github.com/stratadb/strata/engine"
	"github.com/stratadb/strata/mvcc/keyindex"
)

// Batch applies the writes of several consecutive commands with one
// engine commit: one Pebble batch, one WAL record, one publication,
// instead of one of each per command. It is the store's one write path
// for a replicated log's apply loop (a cluster member stages the entries
// it receives at once) and for a single member (which stages the
// proposals that arrive while the previous batch commits); a write by
// itself (Store.Txn, Entry.Txn) is a batch of one.
//
// Each staged write behaves as a write by itself: it is checked,
// evaluated against every write staged before it (in the batch or not),
// assigned its revision and returns its result at once, and an error the
// request causes is returned for that command alone, its index still
// recorded. The batch records the revision and the applied index of its
// last command (index 0: a command without a log position, which records
// none) in the same engine batch as the data, so after a crash either
// every staged command is in storage or none is, and AppliedIndex says
// which: replaying the log after it applies each entry exactly once.
//
// Nothing staged is visible before Commit: readers and watchers see the
// batch's revisions once it is committed (and durable, with sync = true),
// in order. A Batch takes the store's write lock at its first staged
// write and holds it until Commit, so other writers wait: the staged
// writes are evaluated against the state the earlier ones leave, which no
// other writer may change in between. Commit releases it as soon as the
// engine has the batch, before the WAL sync, so the next batch is staged
// while this one syncs (see commit.go). A Batch is for one goroutine.
//
//	b := s.BeginBatch()
//	for _, e := range committedEntries {
//		results[i], errs[i] = b.Txn(e.Index, e.Req)
//	}
//	if err := b.Commit(); err != nil { ... } // the store failed
//	// hand results to the waiters
//
// Compactions and lease grants and revocations are not staged: they are
// applied by themselves, with Store.Entry, after the batch before them
// committed.
type Batch struct {
	s *Store
	// locked is set while the batch holds writeMu: from its first
	// staged write to Commit.
	locked bool
	// eb holds the staged writes, created with the first.
	eb *engine.Batch
	// pend are the staged commands' publications, in log order.
	pend []*pending
	// waitTail is set when a staged write wrote nothing and recorded no
	// index: Commit then waits until every write it may have read is
	// published.
	waitTail bool
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

// BeginBatch starts a Batch. Call Commit exactly once, also after an
// error: it releases the write lock the batch took.
func (s *Store) BeginBatch() *Batch { return &Batch{s: s} }

// lock takes the store's write lock for the batch, once.
func (b *Batch) lock() {
	if !b.locked {
		b.s.writeMu.Lock()
		b.locked = true
		b.baseRev = b.s.lastRev
	}
}

// unlock releases the write lock if the batch holds it.
func (b *Batch) unlock() {
	if b.locked {
		b.locked = false
		b.s.writeMu.Unlock()
	}
}

// check reports why index cannot be staged in b.
func (b *Batch) check(index uint64) error {
	if b.done {
		return errBatchDone
	}
	return nil
}

// Txn is Store.Txn, staged, recording index (0: none). Even a Txn of
// only RangeOps goes through the write path, to see the writes staged
// before it and to record its index.
func (b *Batch) Txn(index uint64, req TxnRequest) (TxnResponse, error) {
	if err := checkTxn(&req); err != nil {
		return TxnResponse{}, b.skipOnError(index, err)
	}
	t, err := b.s.lockWrite(b, index)
	if err != nil {
		return TxnResponse{}, err
	}
	// Only writers change the index and they hold writeMu, so the writer
	// reads it without mu.
	var pathBuf [4]bool // the branches taken: on the stack for up to 4 txns (the outer and nested ones)
	path, err := b.s.decide(&req, t.begin, t.fetch, pathBuf[:0])
	if err != nil {
		return TxnResponse{}, err
	}
	checked := path
	if err := b.s.checkBranch(&req, t.begin, &checked); err != nil {
		// A rejected request: nothing written but the log index.
		if _, ferr := t.finish(TxnResponse{}); ferr != nil {
			return TxnResponse{}, ferr
		}
		return TxnResponse{}, err
	}
	resp, err := t.execTxn(&req, &path)
	if err != nil {
		return TxnResponse{}, t.abort(err)
	}
	return t.finish(resp)
}

// Skip records index as applied with no other change, for commands that
// do not touch the store (configuration changes, a new leader's empty
// entry, a command refused before it reached the store).
func (b *Batch) Skip(index uint64) error {
	if index == 0 {
		return nil
	}
	t, err := b.s.lockWrite(b, index)
	if err != nil {
		return err
	}
	_, err = t.finish(TxnResponse{})
	return err
}

// skipOnError returns err, a rejected request, after recording index as
// applied: a log entry that fails deterministically is applied too.
func (b *Batch) skipOnError(index uint64, err error) error {
	if serr := b.Skip(index); serr != nil {
		return serr
	}
	return err
}

// alone runs stage in a batch of its own and commits it: a write by
// itself. It returns stage's error (a rejected request) unless the commit
// failed.
func (s *Store) alone(stage func(b *Batch) error) error {
	b := s.BeginBatch()
	err := stage(b)
	if cerr := b.Commit(); cerr != nil {
		return cerr
	}
	return err
}

// skipOnError is Batch.skipOnError by itself.
func (s *Store) skipOnError(index uint64, err error) error {
	return s.alone(func(b *Batch) error { return b.skipOnError(index, err) })
}

// stage adds a finished write to the batch.
func (b *Batch) stage(t *writeTxn) error {
	if t.empty() {
		b.waitTail = true
		return nil
	}
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
	if p.index != 0 {
		b.s.lastIndex = p.index
	}
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

// Commit commits every staged command in one engine batch, releases the
// write lock, and returns once they are durable and published. An error
// means the store failed (reopen it), also if it failed while a command
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
		b.unlock()
		return err
	}
	if len(b.pend) == 0 {
		var p *pending
		if b.waitTail {
			p = s.tail()
		}
		b.unlock()
		if p != nil {
			<-p.done
			return p.err
		}
		return nil
	}
	err := s.enqueueLocked(b.eb, b.pend)
	b.unlock()
	if err != nil {
		return err
	}
	return s.awaitPublished(b.eb, b.pend)
}
