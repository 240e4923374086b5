package engine

import (
	"bytes"
	"sync"
)

// writeGuard lets a table rewrite replace a key span without losing a write
// and without stopping writers elsewhere (see rewrite.go).
//
// A rewrite reads a span through an iterator (a view at some sequence
// number S), writes the pairs into a new table and ingests it with an excise
// of the span. The excise deletes everything in the span below the
// ingestion's sequence number, so a write that landed in the span after S
// would be lost. The guard makes that impossible:
//
//  1. Every write enters the guard before it reaches Pebble and leaves it
//     after Pebble acknowledged it. On entry it records its key bounds in
//     every watched span it overlaps, and waits while a span it overlaps is
//     gated.
//  2. watch(span) starts recording and then waits until every write that
//     entered before it has left, so writes the rewrite's iterator cannot
//     see are recorded.
//  3. gateIfClean(span, lo, hi) atomically checks that no recorded write
//     touched [lo, hi) and, if so, gates [lo, hi): writes into it wait until
//     ungate, writes elsewhere go on. The ingestion runs under the gate, so
//     no write can land in [lo, hi) between S and the ingestion.
//
// A gate lasts one ingestion (milliseconds), or, when optimistic attempts
// keep finding the chunk dirty, the rewrite of one small chunk (rewriteGatedBytes)
// plus its ingestion.
type writeGuard struct {
	mu   sync.Mutex
	cond *sync.Cond // broadcast when an inflight count reaches zero

	// epoch flips when a span starts being watched; inflight counts the
	// writes inside the guard by the parity of the epoch they entered in.
	// watch waits for the previous parity to drain. Watches are serialized
	// (rewriteMu), so at most two epochs have writes in flight.
	epoch    uint64
	inflight [2]int64
	spans    []*watchedSpan
	// closed makes enter fail: the DB is closing.
	closed bool
}

// maxTouches bounds the write bounds a watched span records; past it the
// span counts as touched everywhere.
const maxTouches = 4096

// watchedSpan is a key span [start, end) under rewrite (end nil: unbounded).
type watchedSpan struct {
	start, end []byte
	// touches are the [lo, hi] bounds of writes that entered while the span
	// was watched and overlapped it; all means too many to keep.
	touches [][2][]byte
	all     bool
	// gateLo, gateHi bound the gated part [gateLo, gateHi) while open is
	// non-nil; open is closed when the gate lifts.
	gateLo, gateHi []byte
	open           chan struct{}
}

func newWriteGuard() *writeGuard {
	g := &writeGuard{}
	g.cond = sync.NewCond(&g.mu)
	return g
}

// overlaps reports whether the inclusive bounds [lo, hi] meet [start, end).
func overlaps(lo, hi, start, end []byte) bool {
	return (end == nil || bytes.Compare(lo, end) < 0) && bytes.Compare(hi, start) >= 0
}

// enter admits a write whose keys lie within [lo, hi] (inclusive; for a
// range deletion hi is its exclusive end, which is conservative). It returns
// the ticket to pass to leave, or false once the guard is closed.
func (g *writeGuard) enter(lo, hi []byte) (ticket int, ok bool) {
	g.mu.Lock()
	for {
		if g.closed {
			g.mu.Unlock()
			return 0, false
		}
		wait := g.gated(lo, hi)
		if wait == nil {
			break
		}
		g.mu.Unlock()
		<-wait
		g.mu.Lock()
	}
	for _, s := range g.spans {
		if !overlaps(lo, hi, s.start, s.end) {
			continue
		}
		if len(s.touches) >= maxTouches {
			s.all, s.touches = true, nil
		}
		if !s.all {
			s.touches = append(s.touches, [2][]byte{bytes.Clone(lo), bytes.Clone(hi)})
		}
	}
	ticket = int(g.epoch & 1)
	g.inflight[ticket]++
	g.mu.Unlock()
	return ticket, true
}

// gated returns the channel to wait on when [lo, hi] meets a gate, else nil.
func (g *writeGuard) gated(lo, hi []byte) chan struct{} {
	for _, s := range g.spans {
		if s.open != nil && overlaps(lo, hi, s.gateLo, s.gateHi) {
			return s.open
		}
	}
	return nil
}

// leave ends a write admitted by enter.
func (g *writeGuard) leave(ticket int) {
	g.mu.Lock()
	g.inflight[ticket]--
	if g.inflight[ticket] == 0 {
		g.cond.Broadcast()
	}
	g.mu.Unlock()
}

// watch starts recording writes into [start, end) and returns once every
// write that entered before has left.
func (g *writeGuard) watch(start, end []byte) *watchedSpan {
	s := &watchedSpan{start: start, end: end}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.spans = append(g.spans, s)
	g.drainLocked()
	return s
}

// drainLocked starts a new epoch and waits until the writes of the previous
// one have left. Callers are serialized (rewriteMu), so all writes in flight
// belong to the current epoch when it starts.
func (g *writeGuard) drainLocked() {
	g.epoch++
	old := (g.epoch - 1) & 1
	for g.inflight[old] > 0 {
		g.cond.Wait()
	}
}

// unwatch stops recording for s and lifts its gate if any.
func (g *writeGuard) unwatch(s *watchedSpan) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.ungateLocked(s)
	for i, x := range g.spans {
		if x == s {
			g.spans = append(g.spans[:i], g.spans[i+1:]...)
			break
		}
	}
}

// gateIfClean gates [lo, hi) of s if no write recorded since watch touched
// it and reports whether it did. Writes admitted before the gate that did
// not touch [lo, hi) may still be in flight; they cannot land in it.
func (g *writeGuard) gateIfClean(s *watchedSpan, lo, hi []byte) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if s.touched(lo, hi) {
		return false
	}
	s.gateLo, s.gateHi, s.open = lo, hi, make(chan struct{})
	return true
}

// gate gates [lo, hi) of s unconditionally and waits for the writes in
// flight that touched s to leave, so none of them can land in [lo, hi)
// after the caller reads it. Writes into s entered since watch are the only
// ones that can be in flight there (watch drained the older ones).
func (g *writeGuard) gate(s *watchedSpan, lo, hi []byte) {
	g.mu.Lock()
	defer g.mu.Unlock()
	s.gateLo, s.gateHi, s.open = lo, hi, make(chan struct{})
	// Drain the writes that entered before the gate: a new epoch, and wait
	// for the old one. New writes into [lo, hi) wait at the gate; others
	// enter the new epoch and are not waited for.
	g.drainLocked()
	s.touches, s.all = nil, false
}

// ungate lifts the gate of s.
func (g *writeGuard) ungate(s *watchedSpan) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.ungateLocked(s)
}

func (g *writeGuard) ungateLocked(s *watchedSpan) {
	if s.open != nil {
		close(s.open)
		s.open, s.gateLo, s.gateHi = nil, nil, nil
	}
}

// touched reports whether a recorded write met [lo, hi).
func (s *watchedSpan) touched(lo, hi []byte) bool {
	if s.all {
		return true
	}
	for _, t := range s.touches {
		if overlaps(t[0], t[1], lo, hi) {
			return true
		}
	}
	return false
}

// close makes every later enter fail and waits for the writes inside to
// leave.
func (g *writeGuard) close() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.closed = true
	for _, s := range g.spans {
		g.ungateLocked(s)
	}
	for g.inflight[0] > 0 || g.inflight[1] > 0 {
		g.cond.Wait()
	}
}
