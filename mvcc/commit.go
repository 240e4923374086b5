package mvcc

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/stratadb/strata/engine"
	"github.com/stratadb/strata/mvcc/keyindex"
)

// The write path, with group commit:
//
//  1. Under writeMu a writer reads the latest state (including writes not
//     yet durable), assigns the next revision (and log index), updates
//     the index and lease sets, commits its batch to the engine with
//     CommitNoSyncWait and appends a pending entry to the queue.
//  2. It releases writeMu and waits for the WAL sync. Writers that
//     arrived meanwhile have done step 1 and share the next sync.
//  3. When its sync returns it marks its entry synced and publishes the
//     queue's synced prefix in revision order: the current revision
//     (and applied index) readers see advances, watchers get the events.
//  4. It returns once its own entry is published.
//
// So a write is acknowledged only when durable, readers and watchers
// never see a revision before it is durable, and they see revisions in
// order. Readers never see the index entries above the published
// revision: every read is at a revision <= rev.

// pending is a batch committed to the engine and not yet published.
type pending struct {
	// rev is the revision it makes, 0 if none; index its log index, 0 if
	// none; writes its changes, for the watchers.
	rev    int64
	index  uint64
	writes []write
	// synced is set when its WAL sync returned, with err. Guarded by
	// pubMu.
	synced bool
	err    error
	// done is closed when it is published (or failed: err is set). Of the
	// pendings one engine batch commits, only the last has one.
	done chan struct{}
}

// writeTxn is one write under writeMu: its changes so far.
type writeTxn struct {
	s     *Store
	index uint64
	// b is the Batch the write is staged in; nil only for a lease grant
	// or revocation (lease.go), which takes writeMu itself and commits by
	// itself in finish.
	b *Batch
	// begin is the revision before the write (the last assigned).
	begin int64
	// writes are the txn's changes; write i is revision {begin+1, i}.
	writes    []write
	leasePuts [][2]int64 // id, ttl
	leaseDels []int64
	// aux are the txn's aux writes (see AuxWrite).
	aux []AuxWrite
}

// beginWrite starts a write; the caller holds writeMu and, on error,
// releases it.
func (s *Store) beginWrite(index uint64) (*writeTxn, error) {
	if s.closed.Load() {
		return nil, ErrClosed
	}
	if err := s.failure(); err != nil {
		return nil, err
	}
	if index != 0 && index <= s.lastIndex {
		return nil, fmt.Errorf("%w: index %d, last applied %d", ErrAlreadyApplied, index, s.lastIndex)
	}
	if err := s.refused(index); err != nil {
		return nil, err
	}
	return &writeTxn{s: s, index: index, begin: s.lastRev}, nil
}

// refused returns the engine's ErrNoSpace error while its disk guard
// refuses writes, for a write with no log index (index 0), which is then
// refused whole before it changes anything in memory: nothing to roll
// back, and the next write after space returns goes on from the same
// revision. A write with a log index is not refused here: a log entry
// must be applied, not skipped, so its commit waits for space instead
// (see commitAdmitted).
func (s *Store) refused(index uint64) error {
	if index != 0 {
		return nil
	}
	if err := s.db.WritesRefused(); err != nil {
		return fmt.Errorf("mvcc: write refused, nothing applied: %w", err)
	}
	return nil
}

// lockWrite starts a write of log index index staged in b, taking writeMu
// for b if it does not hold it yet (b keeps it until Commit).
func (s *Store) lockWrite(b *Batch, index uint64) (*writeTxn, error) {
	if err := b.check(index); err != nil {
		return nil, err
	}
	if !b.locked {
		// Refused at once, not after waiting for writeMu, which a commit
		// waiting for space may hold (commitAdmitted).
		if err := s.refused(index); err != nil {
			return nil, err
		}
	}
	b.lock()
	t, err := s.beginWrite(index)
	if err != nil {
		return nil, err
	}
	t.b = b
	return t, nil
}

// unlock ends a write that wrote nothing: it releases writeMu unless the
// write is staged in a Batch, which keeps it.
func (t *writeTxn) unlock() {
	if t.b == nil {
		t.s.writeMu.Unlock()
	}
}

// rev is the revision the txn's reads see: its own once it has written.
func (t *writeTxn) rev() int64 {
	if len(t.writes) > 0 {
		return t.begin + 1
	}
	return t.begin
}

// add applies a write to the index and the lease sets.
func (t *writeTxn) add(w write) error {
	s := t.s
	w.rev = keyindex.Revision{Main: t.begin + 1, Sub: int64(len(t.writes))}
	var err error
	s.mu.Lock()
	if w.tomb {
		_, err = s.ix.Tombstone(w.key, w.rev)
	} else {
		err = s.ix.Put(w.key, w.rev)
	}
	s.mu.Unlock()
	if err != nil {
		// A broken invariant: the index disagrees with the writer.
		return fmt.Errorf("mvcc: index update at revision %d: %w", w.rev.Main, err)
	}
	t.writes = append(t.writes, w)
	s.setKeyLease(w.key, w.lease)
	return nil
}

// fetch reads the record of revision r: the txn's own (not in the engine
// before the commit), or the engine's.
func (t *writeTxn) fetch(r keyindex.Revision) (record, error) {
	if r.Main == t.begin+1 && r.Sub < int64(len(t.writes)) {
		return t.writes[r.Sub].record(), nil
	}
	if t.b != nil {
		// Written by an earlier entry of the batch: not in the engine yet.
		if w := t.b.staged(r); w != nil {
			return w.record(), nil
		}
	}
	return t.s.fetch(r)
}

// fetch reads the record of revision r from the record cache or the
// engine. The record's key and value are the caller's.
func (s *Store) fetch(r keyindex.Revision) (record, error) {
	if enc, ok := s.recs.get(r); ok {
		return s.decodeOwned(append([]byte(nil), enc...))
	}
	v, err := s.db.Get(revKey(r))
	if err != nil {
		return record{}, s.readError(r, err)
	}
	rec, err := s.decodeOwned(v)
	if err == nil {
		s.recs.add(r, v)
	}
	return rec, err
}

// abort ends a write that failed after it changed the index: the store
// fails (reopen it), since memory no longer matches storage. It releases
// writeMu (a Batch releases it at Commit).
func (t *writeTxn) abort(err error) error {
	err = t.s.fail(fmt.Errorf("mvcc: store failed, reopen it: write of revision %d: %w", t.begin+1, err))
	t.unlock()
	return err
}

// finish commits the txn, releases writeMu, waits until the batch is
// durable and published, and returns resp with its revision. A txn with
// nothing to write waits until every write it may have read is published.
// A txn staged in a Batch only adds its writes to the batch and returns:
// Batch.Commit commits and publishes them.
func (t *writeTxn) finish(resp TxnResponse) (TxnResponse, error) {
	s := t.s
	resp.Rev = t.rev()
	if t.b != nil {
		if err := t.b.stage(t); err != nil {
			return TxnResponse{}, t.abort(err)
		}
		return resp, nil
	}
	if t.empty() {
		p := s.tail()
		s.writeMu.Unlock()
		if p != nil {
			<-p.done
			if p.err != nil {
				return TxnResponse{}, p.err
			}
		}
		return resp, nil
	}
	b := s.db.NewBatch()
	defer b.Close()
	sc := scratches.Get().(*scratch)
	p, err := t.put(b, sc)
	scratches.Put(sc)
	if err != nil {
		return TxnResponse{}, t.abort(err)
	}
	// writeMu was taken by the caller (lease.go's grant and revoke): it
	// is released here, between the engine commit and the sync wait.
	err = s.enqueueLocked(b, []*pending{p})
	s.writeMu.Unlock()
	if err == nil {
		err = s.awaitPublished(b, []*pending{p})
	}
	if err != nil {
		return TxnResponse{}, err
	}
	return resp, nil
}

// empty reports whether the txn has nothing to commit: no write, no
// index, no lease or aux change.
func (t *writeTxn) empty() bool {
	return len(t.writes) == 0 && t.index == 0 && len(t.leasePuts) == 0 && len(t.leaseDels) == 0 && len(t.aux) == 0
}

// scratch holds a key and a value buffer that writes reuse (the engine
// batch and the record cache copy what they keep).
type scratch struct{ key, val []byte }

// scratches recycles scratch buffers, so that a write allocates none.
var scratches = sync.Pool{New: func() any { return new(scratch) }}

// put adds the txn's records, lease changes and revision to eb and
// returns its pending publication. The records go to the record cache
// too: the next put of a hot key returns one as its prev_kv, and reads of
// the key fetch it (a failed commit fails the store, cache and all).
func (t *writeTxn) put(eb *engine.Batch, sc *scratch) (*pending, error) {
	for i := range t.writes {
		r := t.writes[i].record()
		var err error
		if sc.val, err = t.s.dicts.appendRecord(eb, sc.val[:0], &r); err != nil {
			return nil, err
		}
		if sc.key, err = putRevision(eb, sc.key, t.writes[i].rev, &r, sc.val); err != nil {
			return nil, err
		}
		t.s.recs.add(t.writes[i].rev, sc.val)
	}
	p := &pending{index: t.index, writes: t.writes}
	if len(t.writes) > 0 {
		p.rev = t.begin + 1
	}
	for _, l := range t.leasePuts {
		if err := eb.Put(leaseKey(l[0]), encodeInt64(l[1])); err != nil {
			return nil, err
		}
	}
	for _, id := range t.leaseDels {
		if err := eb.Delete(leaseKey(id)); err != nil {
			return nil, err
		}
	}
	if err := t.putAux(eb); err != nil {
		return nil, err
	}
	return p, nil
}

// enqueueLocked commits eb, which holds the writes of ps (in revision
// order, at least one), to the engine without waiting for the WAL sync,
// with the store's revision and applied index as of the last of them, so
// after a crash either all of ps are in storage or none; then it queues
// ps for publication. The caller holds writeMu, releases it, and then
// calls awaitPublished: writers that come meanwhile share the sync. On
// error the store has failed.
func (s *Store) enqueueLocked(eb *engine.Batch, ps []*pending) error {
	return s.enqueueWithLocked(eb, ps, eb.CommitNoSyncWait)
}

// enqueueWithLocked is enqueueLocked committing eb with commit, which
// must not wait for the WAL sync (CommitNoSyncWait or CommitSyncNoWait).
func (s *Store) enqueueWithLocked(eb *engine.Batch, ps []*pending, commit func() error) error {
	var rev int64
	var index uint64
	for _, p := range ps {
		if p.rev != 0 {
			rev = p.rev
		}
		if p.index != 0 {
			index = p.index
		}
	}
	err := putMeta(eb, rev, index)
	if err == nil {
		err = s.commitAdmitted(commit, rev, index)
	}
	if err != nil {
		return s.fail(fmt.Errorf("mvcc: store failed, reopen it: commit of revision %d, index %d: %w", rev, index, err))
	}
	if s.opts.hooks.syncUnderLock {
		ps[len(ps)-1].err = eb.SyncWait()
	}
	if rev != 0 {
		s.lastRev = rev
	}
	if index != 0 {
		s.lastIndex = index
	}
	// Only the last is waited for (see Store.tail): the others are
	// published before it.
	last := ps[len(ps)-1]
	last.done = make(chan struct{})
	s.pubMu.Lock()
	s.queue = append(s.queue, ps...)
	s.pubMu.Unlock()
	return nil
}

// commitAdmitted runs commit, an engine batch commit of revision rev and
// log index index whose writes are already in memory (the key index, the
// lease sets, the record cache, lastRev). When the engine's disk guard
// refuses it (engine.ErrNoSpace: the guard refuses before Pebble sees
// the batch, so nothing of it is in storage), it is tried again, under
// writeMu, until the guard accepts it or the store closes: memory then
// matches storage again and nothing is acknowledged before it is durable.
// This is a write that passed refused (a log entry, or one that raced
// the guard tripping): the engine's writes in flight wait for space the
// same way, while new writes with no log index are refused at once
// (refused, called before writeMu). Any other error, or a close or
// AbandonSpaceWaits while waiting, fails the store.
func (s *Store) commitAdmitted(commit func() error, rev int64, index uint64) error {
	if h := s.opts.hooks.beforeCommit; h != nil {
		h()
	}
	err := commit()
	if err == nil || !errors.Is(err, engine.ErrNoSpace) {
		return err
	}
	s.logErrorf("mvcc: commit of revision %d, index %d refused for lack of space: it is tried again until space returns (%v)", rev, index, err)
	start, wait := time.Now(), time.Millisecond
	for errors.Is(err, engine.ErrNoSpace) && !s.closed.Load() && !s.spaceWaitsAbandoned.Load() {
		if h := s.opts.hooks.noSpaceWait; h != nil {
			h()
		}
		time.Sleep(wait)
		wait = min(2*wait, maxNoSpaceWait)
		if s.db.WritesRefused() == nil {
			err = commit()
		}
	}
	if err == nil {
		s.logInfof("mvcc: commit of revision %d, index %d accepted after waiting %v for space", rev, index, time.Since(start).Round(time.Millisecond))
	}
	return err
}

// AbandonSpaceWaits makes a commit waiting for space (see commitAdmitted),
// and every later one the disk guard refuses, give up: the store fails,
// and the write is not applied (a log entry is applied again after a
// reopen, from the applied index). For a shutdown while the disk is full:
// a raft node's Stop waits for the entry being applied.
func (s *Store) AbandonSpaceWaits() { s.spaceWaitsAbandoned.Store(true) }

// maxNoSpaceWait bounds the pause between two tries of a commit the disk
// guard refused.
const maxNoSpaceWait = 100 * time.Millisecond

// awaitPublished waits for the WAL sync of eb, which enqueueLocked
// committed with ps, publishes what is synced, and returns once the last
// of ps is published. The caller no longer holds writeMu.
func (s *Store) awaitPublished(eb *engine.Batch, ps []*pending) error {
	syncErr := ps[len(ps)-1].err // set by the syncUnderLock hook
	if err := eb.SyncWait(); err != nil {
		syncErr = err
	}
	s.pubMu.Lock()
	for _, p := range ps {
		p.synced, p.err = true, syncErr
	}
	s.publishLocked()
	s.pubMu.Unlock()
	last := ps[len(ps)-1]
	<-last.done
	return last.err
}

// putMeta adds the store's revision and applied index to eb (0: not
// changed).
func putMeta(eb *engine.Batch, rev int64, index uint64) error {
	if rev != 0 {
		if err := eb.Put(metaRev, encodeInt64(rev)); err != nil {
			return err
		}
	}
	if index != 0 {
		return eb.Put(metaApplied, encodeInt64(int64(index)))
	}
	return nil
}

// publishLocked publishes the synced prefix of the queue, in order. The
// caller holds pubMu.
func (s *Store) publishLocked() {
	for len(s.queue) > 0 && s.queue[0].synced {
		p := s.queue[0]
		s.queue[0] = nil
		s.queue = s.queue[1:]
		switch {
		case p.err != nil:
			p.err = s.fail(fmt.Errorf("mvcc: store failed, reopen it: WAL sync of revision %d: %w", p.rev, p.err))
			if s.pubFailed == nil {
				s.pubFailed = p.err
			}
		case s.pubFailed != nil:
			// It was written on top of a batch whose sync failed.
			p.err = s.pubFailed
		default:
			s.mu.Lock()
			if p.rev != 0 {
				s.rev = p.rev
			}
			if p.index != 0 {
				s.applied = p.index
			}
			s.mu.Unlock()
			if p.rev != 0 {
				s.notify(p.rev, p.writes)
			}
		}
		p.writes = nil
		if p.done != nil {
			close(p.done)
		}
	}
}

// tail returns the last pending batch, nil if none.
func (s *Store) tail() *pending {
	s.pubMu.Lock()
	defer s.pubMu.Unlock()
	if len(s.queue) == 0 {
		return nil
	}
	return s.queue[len(s.queue)-1]
}

// drainLocked waits until every committed batch is published; the caller
// holds writeMu, so no new one is queued meanwhile.
func (s *Store) drainLocked() {
	if p := s.tail(); p != nil {
		<-p.done
	}
}

// fail records the store's first failure and returns it.
func (s *Store) fail(err error) error {
	s.failed.CompareAndSwap(nil, &err)
	return *s.failed.Load()
}

// failure returns the store's failure, nil if none.
func (s *Store) failure() error {
	if p := s.failed.Load(); p != nil {
		return *p
	}
	return nil
}

// putRevision adds to eb revision rev's record, enc (the encoding of r,
// its value compressed or not), and its index record, which Open reads
// instead of the record (see codec.go). key is scratch space for the
// engine keys and the index record, returned for reuse.
func putRevision(eb *engine.Batch, key []byte, rev keyindex.Revision, r *record, enc []byte) ([]byte, error) {
	key = appendRevKey(key[:0], rev)
	if err := eb.Put(key, enc); err != nil {
		return key, err
	}
	key = append(key, revIndexSuffix)
	n := len(key)
	key = appendIndexRecord(key, r)
	return key[:n], eb.Put(key[:n], key[n:])
}
