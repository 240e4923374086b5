package mvcc

import (
	"bytes"
	"context"
	"fmt"

	"github.com/stratadb/strata/engine"
	"github.com/stratadb/strata/mvcc/keyindex"
)

// WatchOption configures a Watcher.
type WatchOption func(*Watcher)

// WithPrevKV fills Event.PrevKV, at the cost of one storage read per event.
func WithPrevKV() WatchOption { return func(w *Watcher) { w.prevKV = true } }

// Watcher delivers the changes to a key or range in revision order. Read
// batches of events from C; a batch never splits the events of one
// revision. C is closed when the watcher stops; Err then tells why.
//
// A watcher never holds up writers. Live events wait in a buffer of
// Options.WatchBufferSize events; a reader that lets it overflow is not
// dropped: the buffer is discarded and the watcher reads the same events
// back from storage, catching up as it did from its start revision. It
// stops with ErrCompacted only if compaction drops events it has not yet
// delivered.
type Watcher struct {
	// C delivers the events.
	C <-chan []Event

	s      *Store
	r      keyRange
	prevKV bool
	c      chan []Event
	ctx    context.Context
	cancel context.CancelFunc
	wake   chan struct{}

	// Guarded by s.watchMu:
	// synced: live events are appended to pending; otherwise the watcher
	// reads from storage, starting at next.
	synced bool
	// next is the first revision not yet in pending or delivered.
	next int64
	// start is the revision the watch was asked to start from, 0 for
	// "now": progress waits for the store to reach it.
	start   int64
	pending []wevent
	// inflight is set while run hands a batch taken from pending to C.
	inflight bool
	err      error
	stopped  bool
	// overflows counts the buffer overflows (for tests).
	overflows int
}

// wevent is an event with the revision of the version it replaced.
type wevent struct {
	ev      Event
	prev    keyindex.Revision
	hasPrev bool
}

// Watch returns a Watcher of key (end nil), of [key, end), or of every key
// from key on (end "\x00"); an end at or before key is ErrEmptyWatchRange. It delivers every event from revision fromRev
// on: those already in the past are read from storage, then live ones.
// fromRev 0 means the next revision; a negative one is ErrCompacted, as
// etcd's store treats it. As in etcd, fromRev may be the
// compacted revision itself (its events, deletions included, are kept);
// below it Watch fails with ErrCompacted (see CompactRev for etcd's
// compact_revision).
//
// The watcher stops when ctx is done (Err: ctx.Err()), on Close (Err:
// context.Canceled), when the store closes (ErrClosed) or when compaction
// overtakes it (ErrCompacted).
func (s *Store) Watch(ctx context.Context, key, end []byte, fromRev int64, opts ...WatchOption) (*Watcher, error) {
	if err := checkKey(key); err != nil {
		return nil, err
	}
	if len(end) > 0 && !bytes.Equal(end, allKeys) && bytes.Compare(key, end) >= 0 {
		return nil, fmt.Errorf("%w: [%q, %q)", ErrEmptyWatchRange, key, end)
	}
	r, err := checkRange(key, end)
	if err != nil {
		return nil, err
	}
	r.key = bytes.Clone(r.key)
	r.end = bytes.Clone(r.end)
	w := &Watcher{s: s, r: r, c: make(chan []Event), wake: make(chan struct{}, 1)}
	w.C = w.c
	for _, o := range opts {
		o(w)
	}
	s.watchMu.Lock()
	defer s.watchMu.Unlock()
	if s.closed.Load() {
		return nil, ErrClosed
	}
	s.mu.RLock()
	compacted := s.compactRev
	s.mu.RUnlock()
	if fromRev < 0 {
		// etcd's store takes it as a revision below any compaction.
		return nil, fmt.Errorf("%w: watch from %d", ErrCompacted, fromRev)
	}
	w.start = fromRev
	if fromRev == 0 {
		fromRev = s.notified + 1
	}
	if fromRev < compacted {
		return nil, fmt.Errorf("%w: watch from %d, compacted at %d", ErrCompacted, fromRev, compacted)
	}
	w.next = fromRev
	w.synced = fromRev > s.notified
	w.ctx, w.cancel = context.WithCancel(ctx)
	s.watchers[w] = struct{}{}
	s.wg.Add(1)
	go w.run()
	return w, nil
}

// Close stops the watcher.
func (w *Watcher) Close() { w.cancel() }

// Progress returns the revision up to which the watcher has handed every
// event of its range to C, with ok false while it still has events to
// hand over (reading history, a batch pending or on its way). It is what
// etcd's progress notifications report: a client that got every batch
// from C so far has seen all changes to its range up to rev, even when
// none of the latest revisions touched the range. Call it from the
// goroutine that reads C, between two reads, so that no batch is held
// outside the watcher.
//
// A watcher started at a revision the store has not reached has nothing
// to report until the store reaches it (ok false), as in etcd: its next-1
// would claim revisions the store does not have, and below the events a
// client resuming there already received (a member restarted behind it).
func (w *Watcher) Progress() (rev int64, ok bool) {
	w.s.watchMu.Lock()
	defer w.s.watchMu.Unlock()
	if !w.synced || w.stopped || len(w.pending) > 0 || w.inflight || w.s.notified < w.start {
		return 0, false
	}
	return w.next - 1, true
}

// Err returns why the watcher stopped, nil while it runs.
func (w *Watcher) Err() error {
	w.s.watchMu.Lock()
	defer w.s.watchMu.Unlock()
	return w.err
}

// stopLocked ends the watcher with err; the caller holds s.watchMu.
func (w *Watcher) stopLocked(err error) {
	if w.stopped {
		return
	}
	w.stopped, w.err = true, err
	w.pending = nil
	delete(w.s.watchers, w)
	w.cancel()
}

func (w *Watcher) stop(err error) {
	w.s.watchMu.Lock()
	w.stopLocked(err)
	w.s.watchMu.Unlock()
}

// notify hands the writes of revision rev to the synced watchers. The
// caller holds pubMu and publishes in order, so revisions arrive in order.
func (s *Store) notify(rev int64, writes []write) {
	s.watchMu.Lock()
	defer s.watchMu.Unlock()
	s.notified = rev
	var events []wevent // built on the first match; shared by watchers
	for w := range s.watchers {
		if !w.synced || rev < w.next {
			continue
		}
		n := len(w.pending)
		for i := range writes {
			if !w.r.contains(writes[i].key) {
				continue
			}
			if events == nil {
				events = make([]wevent, len(writes))
				for j := range writes {
					events[j] = writes[j].event()
				}
			}
			w.pending = append(w.pending, events[i])
		}
		w.next = rev + 1
		if len(w.pending) > s.opts.WatchBufferSize {
			// The reader is slow: drop the buffer and read it back from
			// storage later.
			w.next = w.pending[0].ev.KV.ModRevision
			w.pending = nil
			w.synced = false
			w.overflows++
		}
		if len(w.pending) > n || !w.synced {
			select {
			case w.wake <- struct{}{}:
			default:
			}
		}
	}
}

// event copies a write into an event (the write's slices are the caller's).
func (w *write) event() wevent {
	r := w.record()
	kv := r.kv()
	kv.Key = bytes.Clone(kv.Key)
	kv.Value = bytes.Clone(kv.Value)
	t := EventPut
	if w.tomb {
		t = EventDelete
	}
	return wevent{ev: Event{Type: t, KV: kv}, prev: w.prev, hasPrev: w.hasPrev}
}

func (w *Watcher) run() {
	s := w.s
	defer s.wg.Done()
	defer close(w.c)
	for {
		s.watchMu.Lock()
		if w.stopped {
			s.watchMu.Unlock()
			return
		}
		if !w.synced {
			next := w.next
			s.watchMu.Unlock()
			evs, upTo, err := s.history(w, next)
			if err != nil {
				w.stop(err)
				return
			}
			if !w.send(evs) {
				return
			}
			s.watchMu.Lock()
			w.next = upTo + 1
			if s.notified <= upTo && !w.stopped {
				w.synced = true
			}
			s.watchMu.Unlock()
			continue
		}
		if len(w.pending) > 0 {
			evs := w.pending
			w.pending = nil
			w.inflight = true
			s.watchMu.Unlock()
			ok := w.send(evs)
			s.watchMu.Lock()
			w.inflight = false
			s.watchMu.Unlock()
			if !ok {
				return
			}
			continue
		}
		s.watchMu.Unlock()
		select {
		case <-w.wake:
		case <-w.ctx.Done():
			w.stop(w.ctx.Err())
			return
		}
	}
}

// send delivers evs, filling PrevKV if asked; false if the watcher stopped.
func (w *Watcher) send(wevs []wevent) bool {
	if len(wevs) == 0 {
		return true
	}
	evs := make([]Event, len(wevs))
	for i := range wevs {
		evs[i] = wevs[i].ev
		if w.prevKV && wevs[i].hasPrev {
			evs[i].PrevKV = w.s.prevKV(wevs[i].prev)
		}
	}
	select {
	case w.c <- evs:
		return true
	case <-w.ctx.Done():
		w.stop(w.ctx.Err())
		return false
	}
}

// prevKV reads the version at r, nil if compaction dropped it.
func (s *Store) prevKV(r keyindex.Revision) *KeyValue {
	v, err := s.db.Get(revKey(r))
	if err != nil {
		return nil
	}
	rec, err := decodeRecord(v)
	if err != nil || rec.tomb {
		return nil
	}
	kv := rec.kv()
	return &kv
}

// historyBatch is the number of events history reads at a time.
const historyBatch = 1000

// history reads the events of w's range from revision next on out of
// storage: up to the current revision, or fewer when there are more than
// historyBatch events, always whole revisions. upTo is the last revision
// covered.
func (s *Store) history(w *Watcher, next int64) (evs []wevent, upTo int64, err error) {
	s.mu.RLock()
	if s.closed.Load() {
		s.mu.RUnlock()
		return nil, 0, ErrClosed
	}
	if next < s.compactRev {
		s.mu.RUnlock()
		return nil, 0, fmt.Errorf("%w: watcher at %d, compacted at %d", ErrCompacted, next, s.compactRev)
	}
	cur := s.rev
	if next > cur {
		s.mu.RUnlock()
		return nil, next - 1, nil
	}
	// The iterator's view is taken under mu, before any compaction that
	// could delete what it reads.
	it, err := s.db.NewIter(&engine.IterOptions{
		LowerBound: revKey(keyindex.Revision{Main: next}),
		UpperBound: revKey(keyindex.Revision{Main: cur + 1}),
	})
	s.mu.RUnlock()
	if err != nil {
		return nil, 0, err
	}
	defer it.Close()
	upTo = cur
	lastMain := int64(-1)
	for ok := it.First(); ok; ok = it.Next() {
		rev, err := decodeRevKey(it.Key())
		if err != nil {
			return nil, 0, err
		}
		if rev.Main != lastMain && len(evs) >= historyBatch {
			upTo = lastMain
			break
		}
		lastMain = rev.Main
		rec, err := decodeRecord(it.Value())
		if err != nil {
			return nil, 0, err
		}
		if !w.r.contains(rec.key) {
			continue
		}
		kv := rec.kv()
		kv.Key = bytes.Clone(kv.Key)
		kv.Value = bytes.Clone(kv.Value)
		e := wevent{ev: Event{Type: EventPut, KV: kv}}
		if rec.tomb {
			e.ev.Type = EventDelete
		}
		evs = append(evs, e)
	}
	if err := it.Error(); err != nil {
		return nil, 0, err
	}
	if w.prevKV && len(evs) > 0 {
		// The previous versions, from the index.
		s.mu.RLock()
		for i := range evs {
			kv := &evs[i].ev.KV
			if kv.ModRevision-1 < s.compactRev {
				continue
			}
			if kr, ok := s.ix.Get(kv.Key, kv.ModRevision-1); ok {
				evs[i].prev, evs[i].hasPrev = kr.Mod, true
			}
		}
		s.mu.RUnlock()
	}
	return evs, upTo, nil
}
