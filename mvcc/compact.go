package mvcc

import (
	"errors"
	"fmt"

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
	s.compactMu.Lock()
	defer s.compactMu.Unlock()
	if s.closed.Load() {
		return ErrClosed
	}
	if s.leftover != nil {
		if err := s.runCompaction(s.leftover); err != nil {
			return err
		}
	}

	job, reject, err := s.scheduleCompaction(index, rev)
	if err != nil {
		return err
	}
	if reject != nil {
		// A rejected request: nothing written but the log index.
		return s.skipOnError(index, reject)
	}
	// Watchers reading history below rev fail when they next read.
	return s.runCompaction(job)
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
	job = s.planCompaction(rev)
	job.index = index
	// The first batch schedules the compaction and deletes the first
	// revisions; readers wait for it (they could be reading those), and
	// only after it does memory change, so a failure leaves the store as
	// it was.
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.compactStep(job); err != nil {
		if !errors.Is(err, errInjected) {
			// Whether the batch reached storage is unknown.
			err = s.fail(fmt.Errorf("mvcc: store failed, reopen it: schedule compaction at %d: %w", rev, err))
		}
		return nil, nil, err
	}
	s.ix.Compact(rev, true, nil)
	s.compactRev = rev
	if index != 0 {
		s.applied, s.lastIndex = index, index
	}
	return job, nil, nil
}

func (s *Store) runCompaction(job *compactJob) error {
	for !job.finished() {
		if err := s.compactStep(job); err != nil {
			s.leftover = job
			return fmt.Errorf("mvcc: compaction at %d: %w", job.rev, err)
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

// planCompaction lists what compacting at rev deletes. The caller holds
// writeMu or is Open.
func (s *Store) planCompaction(rev int64) *compactJob {
	job := &compactJob{rev: rev}
	s.ix.Compact(rev, false, func(r keyindex.Revision) {
		if len(job.drops) == 0 {
			job.lo, job.hi = r.Main, r.Main+1
		}
		job.lo, job.hi = min(job.lo, r.Main), max(job.hi, r.Main+1)
		job.drops = append(job.drops, r)
	})
	job.dropped = int64(len(job.drops))
	return job
}

// compactStep commits the next batch of a compaction: the schedule marker
// in the first, the finish marker in the last.
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
	end := min(len(job.drops), job.pos+s.opts.CompactionBatchSize)
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
	last := end == len(job.drops)
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
