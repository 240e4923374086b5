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

// WatchStream carries the events of any number of watchers to one
// consumer, as etcd's WatchStream does for a gRPC stream: writers hand
// each revision's events to the watchers of its keys (found through an
// index, see watchGroup) and wake the stream; the consumer, one goroutine,
// takes them with Next. No goroutine runs per watcher.
//
//	ws := store.NewWatchStream()
//	w, err := ws.Watch(key, end, fromRev)
//	for {
//		b, ok := ws.Next()
//		if !ok {
//			<-ws.Ready() // or the consumer's own stop signal
//			continue
//		}
//		// b.Watcher, b.Events (whole revisions, in order), b.Err (it stopped)
//	}
//
// A watcher never holds up writers. Live events wait in its buffer of
// Options.WatchBufferSize events; a consumer that lets it overflow is not
// dropped: the buffer is discarded and the watcher reads the same events
// back from storage (in Next, on the consumer's goroutine), as it does
// from a past start revision. It stops with ErrCompacted only if
// compaction drops events it has not yet delivered.
type WatchStream struct {
	s *Store
	// ready holds a signal when a watcher was queued since the last Next.
	ready chan struct{}

	// Guarded by s.watchMu:
	// queue holds the watchers with something for Next (events, history
	// to read, an error to report), each once, in the order they got it.
	queue    []*Watcher
	watchers watcherSet
	// last is the watcher of the batch Next returned last: it counts as
	// handed over (Progress) from the next call of Next.
	last *Watcher
}

// WatchBatch is what Next hands over: events of one watcher, whole
// revisions in revision order, or the error that stopped it.
type WatchBatch struct {
	Watcher *Watcher
	Events  []Event
	// Err is set when the store stopped the watcher (ErrCompacted,
	// ErrClosed); no batch of it follows. A watcher stopped with Close
	// reports nothing.
	Err error
}

// Watcher is one watch of a key or range (see WatchStream). Store.Watch
// makes one with its own channel C; those of a WatchStream deliver through
// Next, and C is nil.
type Watcher struct {
	// C delivers the events of a watcher made by Store.Watch. A batch
	// never splits the events of one revision. C is closed when the
	// watcher stops; Err then tells why.
	C <-chan []Event

	s      *Store
	ws     *WatchStream
	r      keyRange
	prevKV bool

	// c and cancel belong to Store.Watch's pump.
	c      chan []Event
	cancel context.CancelFunc

	// Guarded by s.watchMu:
	// synced: the watcher is in s.synced and live events are appended to
	// pending; otherwise Next reads its events from storage from next on.
	synced bool
	// next is the first revision whose events are not yet in pending
	// or handed over (a synced watcher is not given revisions below it).
	next int64
	// start is the revision the watch was asked to start from, 0 for
	// "now": progress waits for the store to reach it.
	start   int64
	pending []wevent
	// queued: the watcher is in ws.queue. held: Next handed over a
	// batch of it (or is reading its history) and the consumer has not
	// yet come back for the next one.
	queued, held bool
	// notifiedAt is the revision notify last appended to pending.
	notifiedAt int64
	err        error
	stopped    bool
	// report: the consumer is still to be told err (through Next).
	report bool
	// overflows counts the buffer overflows (for tests).
	overflows int
}

// wevent is an event with the revision of the version it replaced.
type wevent struct {
	ev      Event
	prev    keyindex.Revision
	hasPrev bool
}

// NewWatchStream returns an empty stream.
func (s *Store) NewWatchStream() *WatchStream {
	return &WatchStream{s: s, ready: make(chan struct{}, 1), watchers: watcherSet{}}
}

// Ready is signalled (capacity 1) when Next may have something: wait on
// it after Next returned false.
func (ws *WatchStream) Ready() <-chan struct{} { return ws.ready }

// Watch adds a watcher of key (end nil), of [key, end), or of every key
// from key on (end "\x00"); an end at or before key is
// ErrEmptyWatchRange. It delivers every event from revision fromRev on:
// those already in the past are read from storage, then live ones.
// fromRev 0 means the next revision; a negative one is ErrCompacted, as
// etcd's store treats it. As in etcd, fromRev may be the compacted
// revision itself (its events, deletions included, are kept); below it
// Watch fails with ErrCompacted (see CompactRev for etcd's
// compact_revision).
func (ws *WatchStream) Watch(key, end []byte, fromRev int64, opts ...WatchOption) (*Watcher, error) {
	s := ws.s
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
	w := &Watcher{s: s, ws: ws, r: r}
	for _, o := range opts {
		o(w)
	}
	if fromRev < 0 {
		// etcd's store takes it as a revision below any compaction.
		return nil, fmt.Errorf("%w: watch from %d", ErrCompacted, fromRev)
	}
	s.watchMu.Lock()
	defer s.watchMu.Unlock()
	if s.closed.Load() {
		return nil, ErrClosed
	}
	s.mu.RLock()
	compacted := s.compactRev
	s.mu.RUnlock()
	w.start = fromRev
	if fromRev == 0 {
		fromRev = s.notified + 1
	}
	if fromRev < compacted {
		return nil, fmt.Errorf("%w: watch from %d, compacted at %d", ErrCompacted, fromRev, compacted)
	}
	w.next = fromRev
	s.watchers[w] = struct{}{}
	ws.watchers[w] = struct{}{}
	if fromRev > s.notified {
		w.synced = true
		s.synced.add(w)
	} else {
		ws.enqueueLocked(w)
	}
	return w, nil
}

// enqueueLocked queues w for Next and wakes the consumer; the caller
// holds s.watchMu.
func (ws *WatchStream) enqueueLocked(w *Watcher) {
	if w.queued {
		return
	}
	w.queued = true
	ws.queue = append(ws.queue, w)
	select {
	case ws.ready <- struct{}{}:
	default:
	}
}

// Next returns the next batch of the stream's watchers, false if none has
// anything now (wait on Ready). Call it from one goroutine at a time: the
// batch it returned before counts as handed over once it is called again
// (see Watcher.Progress). A watcher behind the store reads its events from
// storage here, up to historyBatch events at a time, taking turns with the
// others.
func (ws *WatchStream) Next() (WatchBatch, bool) {
	s := ws.s
	s.watchMu.Lock()
	defer s.watchMu.Unlock()
	if ws.last != nil {
		ws.last.held = false
		ws.last = nil
	}
	for len(ws.queue) > 0 {
		w := ws.queue[0]
		ws.queue[0] = nil
		ws.queue = ws.queue[1:]
		w.queued = false
		if w.stopped {
			if b, ok := w.reportLocked(); ok {
				return b, true
			}
			continue
		}
		if w.synced {
			if len(w.pending) == 0 {
				continue
			}
			evs := w.pending
			w.pending = nil
			w.held, ws.last = true, w
			s.watchMu.Unlock()
			out := w.events(evs)
			s.watchMu.Lock()
			return WatchBatch{Watcher: w, Events: out}, true
		}
		next := w.next
		w.held = true // its events are out of storage and not yet handed over
		s.watchMu.Unlock()
		evs, upTo, err := s.history(w, next)
		var out []Event
		if err == nil {
			out = w.events(evs)
		}
		s.watchMu.Lock()
		w.held = false
		if w.stopped {
			if b, ok := w.reportLocked(); ok {
				return b, true
			}
			continue
		}
		if err != nil {
			w.stopLocked(err, false)
			return WatchBatch{Watcher: w, Err: err}, true
		}
		w.next = upTo + 1
		if s.notified <= upTo {
			w.synced = true
			s.synced.add(w)
		} else {
			ws.enqueueLocked(w)
		}
		if len(out) == 0 {
			continue
		}
		w.held, ws.last = true, w
		return WatchBatch{Watcher: w, Events: out}, true
	}
	return WatchBatch{}, false
}

// reportLocked returns the batch that tells the consumer why w stopped,
// false if there is none to tell; the caller holds s.watchMu.
func (w *Watcher) reportLocked() (WatchBatch, bool) {
	if !w.report {
		return WatchBatch{}, false
	}
	w.report = false
	return WatchBatch{Watcher: w, Err: w.err}, true
}

// Close stops every watcher of the stream.
func (ws *WatchStream) Close() {
	ws.s.watchMu.Lock()
	defer ws.s.watchMu.Unlock()
	for w := range ws.watchers {
		w.stopLocked(context.Canceled, false)
	}
}

// Watch returns a Watcher with its own channel C (a WatchStream of one
// and a goroutine that feeds C; a server with many watchers uses
// WatchStream itself). See WatchStream.Watch for the arguments.
//
// The watcher stops when ctx is done (Err: ctx.Err()), on Close (Err:
// context.Canceled), when the store closes (ErrClosed) or when compaction
// overtakes it (ErrCompacted).
func (s *Store) Watch(ctx context.Context, key, end []byte, fromRev int64, opts ...WatchOption) (*Watcher, error) {
	ws := s.NewWatchStream()
	w, err := ws.Watch(key, end, fromRev, opts...)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	w.c = make(chan []Event)
	w.C = w.c
	s.watchMu.Lock()
	w.cancel = cancel
	s.wg.Add(1)
	s.watchMu.Unlock()
	go w.pump(ctx)
	return w, nil
}

// pump feeds C from the watcher's stream until it stops.
func (w *Watcher) pump(ctx context.Context) {
	defer w.s.wg.Done()
	defer close(w.c)
	for {
		b, ok := w.ws.Next()
		if !ok {
			select {
			case <-w.ws.ready:
				continue
			case <-ctx.Done():
				w.stop(ctx.Err())
				return
			}
		}
		if b.Err != nil {
			return
		}
		select {
		case w.c <- b.Events:
		case <-ctx.Done():
			w.stop(ctx.Err())
			return
		}
	}
}

// Close stops the watcher; Err becomes context.Canceled. A watcher of a
// WatchStream reports nothing more through Next.
func (w *Watcher) Close() { w.stop(context.Canceled) }

// Progress returns the revision up to which the watcher has handed every
// event of its range over, with ok false while it still has events to
// hand over (reading history, a batch pending or on its way). It is what
// etcd's progress notifications report: a client that got every batch so
// far has seen all changes to its range up to rev, even when none of the
// latest revisions touched the range. Call it from the stream's consumer
// between two batches (for Store.Watch: from the goroutine that reads C,
// between two reads), so that no batch is held outside the watcher.
//
// A watcher started at a revision the store has not reached has nothing
// to report until the store reaches it (ok false), as in etcd: it would
// claim revisions the store does not have, and below the events a client
// resuming there already received (a member restarted behind it). Nor
// does it report below the events it delivered.
func (w *Watcher) Progress() (rev int64, ok bool) {
	s := w.s
	s.watchMu.Lock()
	defer s.watchMu.Unlock()
	if !w.synced || w.stopped || len(w.pending) > 0 || w.held || s.notified < w.start {
		return 0, false
	}
	// A synced watcher has been given every event up to notified; after
	// catching up from storage, next-1 may be past it (and reached).
	return max(s.notified, w.next-1), true
}

// Err returns why the watcher stopped, nil while it runs.
func (w *Watcher) Err() error {
	w.s.watchMu.Lock()
	defer w.s.watchMu.Unlock()
	return w.err
}

// stopLocked ends the watcher with err; with report, Next hands err to
// the consumer. The caller holds s.watchMu.
func (w *Watcher) stopLocked(err error, report bool) {
	if w.stopped {
		return
	}
	w.stopped, w.err = true, err
	w.pending = nil
	if w.synced {
		w.s.synced.remove(w)
		w.synced = false
	}
	delete(w.s.watchers, w)
	delete(w.ws.watchers, w)
	if w.cancel != nil {
		w.cancel()
	}
	if report {
		w.report = true
		w.ws.enqueueLocked(w)
	}
}

func (w *Watcher) stop(err error) {
	w.s.watchMu.Lock()
	w.stopLocked(err, false)
	w.s.watchMu.Unlock()
}

// notify hands the writes of revision rev to the synced watchers of their
// keys, found through s.synced. The caller holds pubMu and publishes in
// order, so revisions arrive in order.
func (s *Store) notify(rev int64, writes []write) {
	s.watchMu.Lock()
	defer s.watchMu.Unlock()
	s.notified = rev
	var events []wevent // built on the first match; shared by watchers
	var touched []*Watcher
	for i := range writes {
		s.synced.each(writes[i].key, func(w *Watcher) {
			if rev < w.next {
				return // it starts at a later revision
			}
			if events == nil {
				events = make([]wevent, len(writes))
				for j := range writes {
					events[j] = writes[j].event()
				}
			}
			w.pending = append(w.pending, events[i])
			if w.notifiedAt != rev {
				w.notifiedAt = rev
				touched = append(touched, w)
			}
		})
	}
	for _, w := range touched {
		w.next = rev + 1
		if len(w.pending) > s.opts.WatchBufferSize {
			// The consumer is slow: drop the buffer and read it back from
			// storage later.
			w.next = w.pending[0].ev.KV.ModRevision
			w.pending = nil
			w.synced = false
			s.synced.remove(w)
			w.overflows++
		}
		w.ws.enqueueLocked(w)
	}
}

// rewindWatchersLocked makes every watcher read from storage again, from
// its first event not handed over: the store's contents were replaced
// (a snapshot) under notified. The caller holds s.watchMu.
func (s *Store) rewindWatchersLocked() {
	for w := range s.watchers {
		if len(w.pending) > 0 {
			w.next = w.pending[0].ev.KV.ModRevision
		}
		w.pending = nil
		if w.synced {
			s.synced.remove(w)
			w.synced = false
		}
		w.ws.enqueueLocked(w)
	}
}

// stopWatchers stops every watcher with ErrClosed (Store.Close).
func (s *Store) stopWatchers() {
	s.watchMu.Lock()
	for w := range s.watchers {
		w.stopLocked(ErrClosed, true)
	}
	s.watchMu.Unlock()
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

// events makes the batch handed over, filling PrevKV if asked (a storage
// read each, outside the locks).
func (w *Watcher) events(wevs []wevent) []Event {
	evs := make([]Event, len(wevs))
	for i := range wevs {
		evs[i] = wevs[i].ev
		if w.prevKV && wevs[i].hasPrev {
			evs[i].PrevKV = w.s.prevKV(wevs[i].prev)
		}
	}
	return evs
}

// prevKV reads the version at r, nil if compaction dropped it: from the
// record cache if there (writes add their records to it, and a
// Kubernetes object is often updated a few times in a row, a pod's status
// as it starts), else from the engine.
func (s *Store) prevKV(r keyindex.Revision) *KeyValue {
	rec, err := s.fetch(r)
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
		rev, index, err := decodeRevSlot(it.Key())
		if err != nil {
			return nil, 0, err
		}
		if index {
			continue
		}
		if rev.Main != lastMain && len(evs) >= historyBatch {
			upTo = lastMain
			break
		}
		lastMain = rev.Main
		v, err := it.ValueAndErr()
		if err != nil {
			return nil, 0, err
		}
		rec, err := decodeRecord(v)
		if err != nil {
			return nil, 0, err
		}
		if !w.r.contains(rec.key) {
			continue
		}
		packed := rec.dict != 0
		if _, err := w.s.dicts.expand(nil, &rec); err != nil {
			return nil, 0, err
		}
		kv := rec.kv()
		kv.Key = bytes.Clone(kv.Key)
		if !packed {
			kv.Value = bytes.Clone(kv.Value) // else expand's, the caller's
		}
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
