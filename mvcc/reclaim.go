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
// compacted in slices of at most reclaimSliceRevisions revisions; before
// each, the reclaimer waits while the engine's compactions are behind
// (engine.DB.CompactionsBehind), and after each it rests as long as the
// slice took, so that it has at most half of the slot.
const (
	reclaimDensity        = 0.1
	reclaimSliceRevisions = 1 << 16
	reclaimPoll           = 100 * time.Millisecond
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
	// ran counts the spans compacted, err is the last compaction's error
	// (Pebble's event listener logs it): what tests read.
	ran int
	err error

	wake   chan struct{}
	cancel context.CancelFunc
	done   chan struct{}
}

func newReclaimer(db *engine.DB) *reclaimer {
	ctx, cancel := context.WithCancel(context.Background())
	r := &reclaimer{db: db, wake: make(chan struct{}, 1), cancel: cancel, done: make(chan struct{})}
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
		r.mu.Unlock()
		if lo == hi {
			continue
		}
		err := r.compact(ctx, lo, hi)
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

// compact compacts the revision keys of [lo, hi) and the index records
// beside them, slice by slice (see reclaimSliceRevisions).
func (r *reclaimer) compact(ctx context.Context, lo, hi int64) error {
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
			if err := sleep(ctx, time.Since(began)); err != nil {
				return err
			}
		}
	}
	return nil
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
