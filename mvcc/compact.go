package mvcc

import (
	"errors"
	"fmt"
	"time"

	"github.com/stratadb/strata/mvcc/keyindex"
)

// Compact drops the history below rev: afterwards a read at a revision
// below rev fails with ErrCompacted, and a read at rev or later sees what it
// saw before. Each key keeps its latest version at or below rev and
// everything after; a key deleted below rev goes, one deleted exactly at
// rev keeps its deletion until the next compaction (so a watch from rev
// sees it, as in etcd). The dropped revisions are deleted from storage and
// from the index, so both disk space and index memory are returned.
//
// As in etcd, rev must be above the last compaction's (ErrCompacted) and at
// most the current revision (ErrFutureRev); the first compaction may be at
// 0, even on an empty store.
//
// Compact is durable in steps: the first engine batch records "compaction
// scheduled at rev" together with the first deletions; the last records
// "finished". If the store crashes in between, Open finishes the
// compaction. Reads and writes go on while Compact deletes; only
// planning it holds writers up. If a deletion batch fails, Compact returns
// the error and the next Compact (or Open) finishes the deletions.
func (s *Store) Compact(rev int64) error { return s.compact(0, rev) }

func (s *Store) compact(index uint64, rev int64) error {
	wait, err := s.startCompaction(index, rev)
	if err != nil {
		return err
	}
	return wait()
}

// startCompaction schedules the compaction at rev (its first batch and,
// with index, the log position; from then reads below rev fail) and
// leaves the rest to a goroutine: the index's drop, in slices, and the
// deletions; wait returns their result. An apply loop that waited for
// them would hold every write behind them: a compaction of a million
// revisions (Kubernetes' five minutes at 30 GB) takes over half a second
// (BenchmarkCompactionHold). etcd also compacts in the background.
//
// The goroutine holds compactMu until the deletions end, so the next
// compaction, HashKV, a snapshot's restore and Close wait for them. If a
// batch fails, the job is left over and the next of those finishes it.
func (s *Store) startCompaction(index uint64, rev int64) (wait func() error, err error) {
	s.compactMu.Lock()
	handedOver := false
	defer func() {
		if !handedOver {
			s.compactMu.Unlock()
		}
	}()
	if s.closed.Load() {
		return nil, ErrClosed
	}
	if s.leftover != nil {
		if err := s.runCompaction(s.leftover, false); err != nil {
			return nil, err
		}
	}

	job, reject, err := s.scheduleCompaction(index, rev)
	if err != nil {
		return nil, err
	}
	if reject != nil {
		// A rejected request: nothing written but the log index.
		return nil, s.skipOnError(index, reject)
	}
	// Watchers reading history below rev fail when they next read.
	done := make(chan struct{})
	var runErr error
	handedOver = true
	go func() {
		defer s.compactMu.Unlock()
		s.compactIndex(job)
		runErr = s.runCompaction(job, true)
		close(done)
	}()
	return func() error {
		<-done
		return runErr
	}, nil
}

// WaitCompaction returns once the deletions of every compaction scheduled
// before the call are done: what etcd's physical compaction waits for. A
// compaction whose deletions failed is finished now, or its error
// returned.
func (s *Store) WaitCompaction() error {
	s.compactMu.Lock()
	defer s.compactMu.Unlock()
	if s.closed.Load() {
		return ErrClosed
	}
	if s.leftover != nil {
		return s.runCompaction(s.leftover, false)
	}
	return nil
}

// scheduleCompaction, under writeMu, checks rev (reject says why it
// cannot be compacted at: compacted already, or in the future) and
// schedules the compaction: the first engine batch deletes the first
// revisions and records the compaction, then the index drops them.
func (s *Store) scheduleCompaction(index uint64, rev int64) (job *compactJob, reject, err error) {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	if _, err := s.beginWrite(index); err != nil {
		return nil, nil, err
	}
	// Every write assigned so far becomes durable and visible first, so
	// the compaction starts from a published state.
	s.drainLocked()
	cur, compacted := s.lastRev, s.compactRev
	switch {
	case rev <= compacted:
		return nil, fmt.Errorf("%w: compact at %d, already compacted at %d", ErrCompacted, rev, compacted), nil
	case rev > cur:
		return nil, fmt.Errorf("%w: compact at %d, current revision is %d", ErrFutureRev, rev, cur), nil
	}
	// The first batch records the compaction (and the log position) and
	// deletes nothing; only once it is durable does memory change, so a
	// failure leaves the store as it was, and a crash after it leaves a
	// compaction that Open finishes. From here a read below rev fails;
	// compactIndex then drops the history from the index.
	job = &compactJob{rev: rev, index: index}
	if err := s.compactStep(job); err != nil {
		if !errors.Is(err, errInjected) {
			// Whether the batch reached storage is unknown.
			err = s.fail(fmt.Errorf("mvcc: store failed, reopen it: schedule compaction at %d: %w", rev, err))
		}
		return nil, nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.compactRev = rev
	if index != 0 {
		s.applied, s.lastIndex = index, index
	}
	return job, nil, nil
}

// compactIndexSlice is the number of keys compactIndex compacts under one
// hold of the locks: about 3 ms of writers held up (a million keys are
// 200 ms in all).
const compactIndexSlice = 16384

// compactIndex drops the job's history from the key index and lists the
// revisions to delete, in slices of compactIndexSlice keys, taking the
// writers' and readers' locks for each slice only: the walk of a million
// keys would otherwise hold every write for its whole length. Under
// compactMu, after scheduleCompaction.
func (s *Store) compactIndex(job *compactJob) {
	var next []byte
	for {
		s.writeMu.Lock()
		s.mu.Lock()
		next = s.ix.CompactFrom(job.rev, next, compactIndexSlice, job.add)
		s.mu.Unlock()
		s.writeMu.Unlock()
		if next == nil {
			break
		}
	}
	job.dropped = int64(len(job.drops))
}

// runCompaction commits the job's remaining batches. Paced, as in the
// background, it rests after each as long as the batch took (until Close
// begins): deletions run beside writes, and unpaced, a compaction of
// 200,000 revisions filled memtables faster than they were flushed and
// stopped every write for a second (docs/mvcc.md). etcd also rests
// between its batches (10 ms after each 1,000 revisions).
func (s *Store) runCompaction(job *compactJob, paced bool) error {
	for !job.finished() {
		start := time.Now()
		if err := s.compactStep(job); err != nil {
			s.leftover = job
			return fmt.Errorf("mvcc: compaction at %d: %w", job.rev, err)
		}
		if paced && !job.finished() && !s.closed.Load() {
			time.Sleep(time.Since(start))
		}
	}
	s.leftover = nil
	if s.reclaim != nil {
		s.reclaim.add(job.lo, job.hi, job.dropped)
	}
	return nil
}

// compactJob is a compaction's list of revision keys to delete, in the
// order Index.Compact reports them (per key increasing, so a key's
// tombstone is deleted last).
type compactJob struct {
	rev int64
	// index is the log index the first batch records, 0 for none.
	index uint64
	drops []keyindex.Revision
	// lo and hi bound the main revisions of drops (hi exclusive), dropped
	// is their number: what the reclaimer is given.
	lo, hi, dropped int64
	pos             int
	// step counts the batches committed.
	step int
	done bool
}

func (j *compactJob) finished() bool { return j.done }

// add lists r among the revisions the job deletes.
func (j *compactJob) add(r keyindex.Revision) {
	if len(j.drops) == 0 {
		j.lo, j.hi = r.Main, r.Main+1
	}
	j.lo, j.hi = min(j.lo, r.Main), max(j.hi, r.Main+1)
	j.drops = append(j.drops, r)
}

// planCompaction lists what compacting at rev deletes, leaving the index
// as it is. The caller is Open.
func (s *Store) planCompaction(rev int64) *compactJob {
	job := &compactJob{rev: rev}
	s.ix.Compact(rev, false, job.add)
	job.dropped = int64(len(job.drops))
	return job
}

// compactStep commits the next batch of a compaction: the first records
// the schedule marker alone, the next ones delete, and the last records
// the finish marker.
func (s *Store) compactStep(job *compactJob) error {
	b := s.db.NewBatch()
	defer b.Close()
	if job.step == 0 {
		if err := b.Put(metaCompactScheduled, encodeInt64(job.rev)); err != nil {
			return err
		}
		if job.index != 0 {
			if err := b.Put(metaApplied, encodeInt64(int64(job.index))); err != nil {
				return err
			}
		}
	}
	end := job.pos
	if job.step > 0 {
		end = min(len(job.drops), job.pos+s.opts.CompactionBatchSize)
	}
	var key []byte
	for _, r := range job.drops[job.pos:end] {
		// The record and its index record (absent in a store written
		// before index records: the deletion is then a no-op).
		key = appendRevKey(key[:0], r)
		if err := b.Delete(key); err != nil {
			return err
		}
		if err := b.Delete(append(key, revIndexSuffix)); err != nil {
			return err
		}
	}
	last := job.step > 0 && end == len(job.drops)
	if last {
		if err := b.Put(metaCompactFinished, encodeInt64(job.rev)); err != nil {
			return err
		}
	}
	if h := s.opts.hooks.beforeCompactCommit; h != nil {
		if err := h(job.step); err != nil {
			return err
		}
	}
	if err := b.Commit(); err != nil {
		return err
	}
	job.pos, job.step, job.done = end, job.step+1, last
	if last {
		job.drops = nil
	}
	return nil
}
