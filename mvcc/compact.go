package mvcc

import (
	"cmp"
	"fmt"
	"slices"
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
// scheduled at rev"; the dropped revisions are then deleted, and the last
// batch records "finished". If the store crashes in between, Open resumes
// the compaction in the background. Reads and writes go on while Compact
// deletes; only scheduling it (a WAL sync) holds writers up, and each
// step of its walk of the key index (a few milliseconds) holds readers
// and writers.
// If a deletion fails, Compact returns the error and the next Compact (or
// Open) finishes the deletions.
func (s *Store) Compact(rev int64) error { return s.compact(0, rev, false) }

// compact schedules the compaction at rev and runs its deletions: before
// returning, or, with background, in a goroutine that holds compactMu
// until they are done (so that the next compaction, HashKV, a restore and
// Close wait for them; a failure leaves them to the next, as leftover).
func (s *Store) compact(index uint64, rev int64, background bool) error {
	s.compactMu.Lock()
	handedOff := false
	defer func() {
		if !handedOff {
			s.compactMu.Unlock()
		}
	}()
	if s.closed.Load() {
		return ErrClosed
	}
	if err := s.finishLeftover(); err != nil {
		return err
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
	if !background {
		return s.runCompaction(job)
	}
	handedOff = true
	s.runInBackground(job)
	return nil
}

// runInBackground runs job in a goroutine that holds compactMu, which
// the caller took, until it is done, resting between pieces of its work
// (compactPace). An error leaves the job as leftover, for whoever takes
// compactMu next.
func (s *Store) runInBackground(job *compactJob) {
	job.pace = newCompactPace(s.opts.hooks.compactSleep, &s.closed)
	go func() {
		defer s.compactMu.Unlock()
		_ = s.runCompaction(job)
	}()
}

// WaitCompaction waits until the deletions of the compactions scheduled
// so far are done, finishing any a failure left, and returns that
// failure: what etcd's physical compaction waits for.
func (s *Store) WaitCompaction() error {
	s.compactMu.Lock()
	defer s.compactMu.Unlock()
	if s.closed.Load() {
		return ErrClosed
	}
	return s.finishLeftover()
}

// finishLeftover runs the deletions a compaction could not finish, if
// any. The caller holds compactMu.
func (s *Store) finishLeftover() error {
	if s.leftover == nil {
		return nil
	}
	return s.runCompaction(s.leftover)
}

// scheduleCompaction, under writeMu, checks rev (reject says why it
// cannot be compacted at: compacted already, or in the future) and
// schedules the compaction: the schedule marker is committed in the write
// pipeline and waited for, and reads below rev fail from then on. The
// walk of the index that drops the history and lists it for deletion is
// the job's first step (walkIndex).
func (s *Store) scheduleCompaction(index uint64, rev int64) (job *compactJob, reject, err error) {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	if _, err := s.beginWrite(index); err != nil {
		return nil, nil, err
	}
	cur, compacted := s.lastRev, s.compactRev
	switch {
	case rev <= compacted:
		return nil, fmt.Errorf("%w: compact at %d, already compacted at %d", ErrCompacted, rev, compacted), nil
	case rev > cur:
		return nil, fmt.Errorf("%w: compact at %d, current revision is %d", ErrFutureRev, rev, cur), nil
	}
	job = &compactJob{rev: rev, index: index}
	if err := s.commitSchedule(job); err != nil {
		return nil, nil, err
	}
	// Reads below rev fail from here on; the history goes in the walk,
	// compactStep's first step, which writers need not wait for.
	s.mu.Lock()
	s.compactRev = rev
	s.mu.Unlock()
	job.start = time.Now()
	job.walk = s.ix.StartCompaction(rev, job.add)
	return job, nil, nil
}

// commitSchedule commits the marker that schedules job, with its log
// index, and waits until it is published: the first step of a
// compaction. It goes through the write pipeline, so the one WAL sync it
// waits for also makes every write before it durable and published.
// Memory changes only after it, so a failure leaves the store as it was
// (the store has failed then, unless the failure is a test's). The marker
// is synced even on an engine that does not sync commits: the tombstones
// are ingested, durable at once, and must not outlive the marker that
// says their revisions are compacted. The caller holds writeMu; readers
// go on meanwhile.
func (s *Store) commitSchedule(job *compactJob) error {
	if h := s.opts.hooks.beforeCompactCommit; h != nil {
		if err := h(0); err != nil {
			return err
		}
	}
	eb := s.db.NewBatch()
	defer eb.Close()
	if err := eb.Put(metaCompactScheduled, encodeInt64(job.rev)); err != nil {
		return s.fail(fmt.Errorf("mvcc: store failed, reopen it: schedule compaction at %d: %w", job.rev, err))
	}
	ps := []*pending{{index: job.index}}
	if err := s.enqueueWithLocked(eb, ps, eb.CommitSyncNoWait); err != nil {
		return err
	}
	if err := s.awaitPublished(eb, ps); err != nil {
		return err
	}
	job.step = 1
	return nil
}

func (s *Store) runCompaction(job *compactJob) error {
	for !job.finished() {
		if err := s.compactStep(job); err != nil {
			s.leftover = job
			err = fmt.Errorf("mvcc: compaction at %d: %w", job.rev, err)
			s.logErrorf("%v; the next compaction or Open finishes it", err)
			return err
		}
	}
	s.leftover = nil
	took := time.Since(job.start)
	s.metrics.total.Observe(millis(took))
	s.metrics.keys.Add(float64(job.dropped))
	s.metrics.last.Set(float64(time.Now().Unix()))
	var rested time.Duration
	if job.pace != nil {
		rested = job.pace.rested
	}
	s.logInfof("mvcc: finished scheduled compaction at revision %d: revisions deleted %d, took %v, index pause %v, rested %v",
		job.rev, job.dropped, took.Round(time.Microsecond), job.indexPause.Round(time.Microsecond), rested.Round(time.Microsecond))
	if s.reclaim != nil {
		s.reclaim.add(job.lo, job.hi, job.dropped)
	}
	if s.opts.HashCompactions {
		s.keepCompactionHash(job.rev)
	}
	return nil
}

// compactJob is a compaction's list of revision keys to delete, and how
// far it got.
type compactJob struct {
	rev int64
	// index is the log index the schedule marker records, 0 for none.
	index uint64
	// walk drops the history from the key index, in steps (walkIndex);
	// nil once done.
	walk *keyindex.Compaction
	// start is when the compaction was scheduled, indexPause the longest
	// step of its walk, which readers and writers wait for
	// (compactionMetrics).
	start      time.Time
	indexPause time.Duration
	drops      []keyindex.Revision
	// lo and hi bound the main revisions of drops (hi exclusive), dropped
	// is their number: what the reclaimer is given.
	lo, hi, dropped int64
	// step is the next step to take (see compactStep).
	step int
	// pace rests a background compaction between pieces of its work;
	// nil for one a caller waits for.
	pace *compactPace
	done bool
}

func (j *compactJob) finished() bool { return j.done }

// add lists a revision the compaction drops (keyindex.Index.Compact's
// callback).
func (j *compactJob) add(r keyindex.Revision) {
	if len(j.drops) == 0 {
		j.lo, j.hi = r.Main, r.Main+1
	}
	j.lo, j.hi = min(j.lo, r.Main), max(j.hi, r.Main+1)
	j.drops = append(j.drops, r)
	j.dropped++
}

// compactStep takes the next of a compaction's steps after the schedule
// marker (commitSchedule, step 0):
//
//  1. walk the key index to drop the history (walkIndex), then ingest
//     the tombstones of every dropped revision (deleteRevisions).
//  2. commit the finish marker.
//
// A step that fails is taken again by the next Compact, or by Open.
func (s *Store) compactStep(job *compactJob) error {
	if h := s.opts.hooks.beforeCompactCommit; h != nil {
		if err := h(job.step); err != nil {
			return err
		}
	}
	if job.step == 1 {
		s.walkIndex(job)
		// In DeleteSorted's order, sorted here, outside writeMu: a million
		// revisions sort in about a tenth of a second, which writers need
		// not wait for. A retry re-sorts sorted revisions, in linear time.
		slices.SortFunc(job.drops, func(a, b keyindex.Revision) int {
			return cmp.Or(cmp.Compare(a.Main, b.Main), cmp.Compare(a.Sub, b.Sub))
		})
		if err := s.deleteRevisions(job.drops, job.pace); err != nil {
			return err
		}
		job.step++
		return nil
	}
	b := s.db.NewBatch()
	defer b.Close()
	if err := b.Put(metaCompactFinished, encodeInt64(job.rev)); err != nil {
		return err
	}
	if err := b.Commit(); err != nil {
		return err
	}
	job.done, job.drops = true, nil
	return nil
}

// walkKeys is how many keys a step of a compaction's walk of the key
// index visits under mu: a few milliseconds' hold. At 200,000 pods a
// compaction visits about 120,000 keys; in one hold, in the apply loop,
// that was the put p99 of the second the compaction came (63-65 ms).
const walkKeys = 4096

// walkIndex drops job's history from the key index, walkKeys keys at a
// time, each step under writeMu and mu: writers read the index under
// writeMu alone (only they change it otherwise), readers under mu. Both
// go on between steps (keyindex.Compaction says why that is safe), and
// reads below the compaction's revision already fail
// (scheduleCompaction). A step waits for the batch being staged to
// commit, since a Batch holds writeMu across its commands. It runs under
// compactMu, so no other compaction, restore or Close comes between its
// steps. A background compaction rests between steps (compactPace).
func (s *Store) walkIndex(job *compactJob) {
	if job.walk == nil {
		return
	}
	step := walkKeys
	if s.opts.hooks.walkKeys > 0 {
		step = s.opts.hooks.walkKeys
	}
	for done := false; !done; {
		s.writeMu.Lock()
		start := time.Now()
		s.mu.Lock()
		done = job.walk.Step(step)
		if h := s.opts.hooks.inWalkStep; h != nil {
			h()
		}
		s.mu.Unlock()
		s.writeMu.Unlock()
		job.indexPause = max(job.indexPause, time.Since(start))
		if !done {
			job.pace.point()
		}
	}
	job.walk = nil
	s.metrics.indexPause.Observe(millis(job.indexPause))
}

// deleteRevisions deletes the records of revs (increasing) and their index
// records (absent in a store written before index records: the deletion
// is then a no-op) in one ingestion of tables of tombstones
// (engine.DB.DeleteSorted). Committed in batches, the tombstones shared
// memtables with the writes of the moment, so every flushed table spanned
// from the dropped history to the newest revision and its compaction
// rewrote every table in between; an ingested table spans the dropped
// revisions alone, and one ingestion holds up commits once (docs/mvcc-compaction.md).
// pace rests a background compaction every 1,024 revisions written.
func (s *Store) deleteRevisions(revs []keyindex.Revision, pace *compactPace) error {
	return s.db.DeleteSorted(func(del func(key []byte) error) error {
		var key []byte
		for i, r := range revs {
			if i%1024 == 0 {
				pace.point()
			}
			key = appendRevKey(key[:0], r)
			if err := del(key); err != nil {
				return err
			}
			if err := del(append(key, revIndexSuffix)); err != nil {
				return err
			}
		}
		return nil
	})
}
