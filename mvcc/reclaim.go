package mvcc

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/stratadb/strata/engine"
	"github.com/stratadb/strata/mvcc/keyindex"
)

// Reclaiming the space of compacted history. Compact deletes the dropped
// revisions with point tombstones, but a tombstone frees nothing until a
// compaction carries it down to the table that holds its revision, and the
// engine's own compactions follow new writes, which all land at the end of
// the revision order: the history's tables, far below, are never picked.
// A store whose values live in blob files kept every value it ever wrote
// (29.4 of 29.5 GB written, after compactions, at 1.1 million pods). So,
// with Options.ReclaimHistory, after a compaction the store compacts the
// engine over the span of the revisions it dropped
// (engine.DB.CompactBackground, paced as the engine's own compactions),
// in the background; the
// blob files then lose those references, and the engine deletes or
// rewrites them (enable_blob_garbage_collection).
//
// That rewrites every table in the span, so it waits until the dropped
// revisions are at least reclaimDensity of the revisions the span covers:
// a busy key's history (a dense span) goes at once, a few revisions
// dropped across the whole history wait for more. Spans add up across
// compactions until then.
//
// It is background work, and must not hold for long the compaction slot
// the engine's own compactions need to keep up with writes (the whole
// history is 0.17 GB of tables at 1.1 million pods). So a span is
// compacted in slices of at most reclaimSliceRevisions revisions (the
// compaction's tombstones are in tables of their own of a few thousand
// revisions, engine.DB.DeleteSorted, so a slice rewrites only the tables
// under its own); before each, the reclaimer waits while the engine's
// compactions are behind (engine.DB.CompactionsBehind), and after each it
// rests at least as long as the slice took, so that it has at most half
// of the slot.
//
// Nothing needs the space back at once, and on a server with one CPU the
// puts share it with the reclaim: done in one go it slowed the puts of
// the seconds after each compaction (docs/mvcc-compaction.md). So the reclaimer
// spreads a span's slices over reclaimSpread of the time between the
// last two compactions (at most reclaimSpreadMax): an apiserver
// compacting every 5 minutes gets its space back within 4, in slices
// its puts hardly notice.
const (
	reclaimDensity        = 0.1
	reclaimSliceRevisions = 1 << 15
	reclaimPoll           = 100 * time.Millisecond
	reclaimSpread         = 0.75
	reclaimSpreadMax      = 5 * time.Minute
)

// reclaimer compacts the engine over dropped history, one span at a time,
// in its own goroutine.
type reclaimer struct {
	db *engine.DB

	mu sync.Mutex
	// lo and hi bound the main revisions of the pending span (hi
	// exclusive; lo == hi when none); dropped counts the revisions
	// dropped in it.
	lo, hi, dropped int64
	// added is when add was last called, interval the time between its
	// last two calls (0 before the second): how often compactions come.
	added    time.Time
	interval time.Duration
	// ran counts the spans compacted, err is the last compaction's error
	// (Pebble's event listener logs it): what tests read.
	ran int
	err error

	// rest waits between slices: sleep, but for tests.
	rest func(ctx context.Context, d time.Duration) error

	wake   chan struct{}
	cancel context.CancelFunc
	done   chan struct{}
}

func newReclaimer(db *engine.DB) *reclaimer {
	ctx, cancel := context.WithCancel(context.Background())
	r := &reclaimer{db: db, rest: sleep, wake: make(chan struct{}, 1), cancel: cancel, done: make(chan struct{})}
	go r.run(ctx)
	return r
}

// add records that a compaction dropped n revisions whose main revisions
// lie in [lo, hi), and wakes the goroutine once the pending span is dense
// enough.
func (r *reclaimer) add(lo, hi, n int64) {
	if lo >= hi {
		return
	}
	r.mu.Lock()
	now := time.Now()
	if !r.added.IsZero() {
		r.interval = now.Sub(r.added)
	}
	r.added = now
	if r.lo == r.hi {
		r.lo, r.hi = lo, hi
	} else {
		r.lo, r.hi = min(r.lo, lo), max(r.hi, hi)
	}
	r.dropped += n
	dense := float64(r.dropped) >= reclaimDensity*float64(r.hi-r.lo)
	r.mu.Unlock()
	if dense {
		select {
		case r.wake <- struct{}{}:
		default:
		}
	}
}

func (r *reclaimer) run(ctx context.Context) {
	defer close(r.done)
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.wake:
		}
		r.mu.Lock()
		lo, hi := r.lo, r.hi
		r.lo, r.hi, r.dropped = 0, 0, 0
		spread := r.spreadLocked()
		r.mu.Unlock()
		if lo == hi {
			continue
		}
		err := r.compact(ctx, lo, hi, time.Now().Add(spread))
		if ctx.Err() != nil || errors.Is(err, engine.ErrClosed) {
			return
		}
		r.mu.Lock()
		r.ran++
		r.err = err
		r.mu.Unlock()
		if err != nil {
			// Pebble's event listener has logged it; the next compaction's
			// span includes this one again.
			r.add(lo, hi, 0)
		}
	}
}

// spreadLocked is the time to spread a span's slices over: reclaimSpread
// of the time between the last two compactions, at most
// reclaimSpreadMax. The caller holds mu.
func (r *reclaimer) spreadLocked() time.Duration {
	return min(time.Duration(reclaimSpread*float64(r.interval)), reclaimSpreadMax)
}

// compact compacts the revision keys of [lo, hi) and the index records
// beside them, slice by slice (see reclaimSliceRevisions), spreading the
// slices until deadline.
func (r *reclaimer) compact(ctx context.Context, lo, hi int64, deadline time.Time) error {
	for start := lo; start < hi; {
		end := min(hi, start+reclaimSliceRevisions)
		for r.db.CompactionsBehind() {
			if err := sleep(ctx, reclaimPoll); err != nil {
				return err
			}
		}
		began := time.Now()
		if err := r.db.CompactBackground(ctx, revKey(keyindex.Revision{Main: start}), revKey(keyindex.Revision{Main: end})); err != nil {
			return err
		}
		if start = end; start < hi {
			left := (hi - start + reclaimSliceRevisions - 1) / reclaimSliceRevisions
			if err := r.rest(ctx, reclaimRest(time.Since(began), time.Until(deadline), left)); err != nil {
				return err
			}
		}
	}
	return nil
}

// reclaimRest is the rest after a slice that took took, with left slices
// still to compact in the time until the deadline: what spreads them
// evenly over it, but never less than took.
func reclaimRest(took, until time.Duration, left int64) time.Duration {
	return max(took, until/time.Duration(left)-took)
}

// sleep waits d, or until ctx ends (then returning its error).
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// stop ends the goroutine, dropping a compaction under way, and waits for
// it.
func (r *reclaimer) stop() {
	r.cancel()
	<-r.done
}

// status returns how many spans were compacted and the last one's error.
func (r *reclaimer) status() (ran int, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ran, r.err
}
