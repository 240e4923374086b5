package keyindex

import (
	"cmp"
	"math"
	"slices"
)

// dueLog lists the keys that have history for Compact to drop, by the
// revision from which they have some, so that a compaction visits only
// the keys it drops history of instead of walking the whole tree. A
// compaction holds writers up; at 1.1 million pods it walked every key
// twice (a dry run and the change) while the keys with history to drop
// were an eighth of them.
//
// A key's version becomes droppable by Compact(atRev) once a later entry
// of the key is at or below atRev, and a tombstone once it is below atRev.
// So a key is due from the revision of its list's second entry, or of its
// first if that is a tombstone (a tombstone at exactly atRev stays, as in
// etcd, and the key stays due for the next compaction). A key is in the
// log at most once: it enters when it gets its second entry (or is
// created by a tombstone, which only a rebuilt or loaded index does), and
// a compaction that visits it puts it back by its new list if it still
// has more than one entry. Entries are kept in revision order, so
// Compact(atRev) takes a prefix.
//
// An entry is 8 bytes, a revision relative to its chunk's base and a slot
// id, plus a bit per slot; one entry per key rather than per version keeps
// it small beside the lists (the package doc gives the measure).
type dueLog struct {
	chunks []*dueChunk
	// head is the first entry of chunks[0] not yet taken.
	head int
	// in has bit id set while slot id is in the log.
	in []uint64
}

const dueChunkLen = 4096

type dueChunk struct {
	base int64
	n    int
	e    [dueChunkLen]dueEntry
}

type dueEntry struct {
	delta uint32 // revision - base
	id    uint32
}

// dueRev is a log entry with its whole revision.
type dueRev struct {
	rev int64
	id  uint32
}

func byDueRev(a, b dueRev) int { return cmp.Compare(a.rev, b.rev) }

func (l *dueLog) has(id uint32) bool {
	return int(id/64) < len(l.in) && l.in[id/64]&(1<<(id%64)) != 0
}

func (l *dueLog) mark(id uint32, in bool) {
	for int(id/64) >= len(l.in) {
		l.in = append(l.in, 0)
	}
	if in {
		l.in[id/64] |= 1 << (id % 64)
	} else {
		l.in[id/64] &^= 1 << (id % 64)
	}
}

// add logs slot id as due from rev, unless it is in the log already; rev
// is at least every revision logged before.
func (l *dueLog) add(rev int64, id uint32) {
	if l.has(id) {
		return
	}
	l.mark(id, true)
	l.push(rev, id)
}

func (l *dueLog) push(rev int64, id uint32) {
	var c *dueChunk
	if n := len(l.chunks); n > 0 {
		c = l.chunks[n-1]
	}
	if c == nil || c.n == dueChunkLen || rev-c.base > math.MaxUint32 {
		c = &dueChunk{base: rev}
		l.chunks = append(l.chunks, c)
	}
	c.e[c.n] = dueEntry{delta: uint32(rev - c.base), id: id}
	c.n++
}

// each calls fn for each entry in revision order until fn returns false.
func (l *dueLog) each(fn func(rev int64, id uint32) bool) {
	for i, c := range l.chunks {
		start := 0
		if i == 0 {
			start = l.head
		}
		for _, e := range c.e[start:c.n] {
			if !fn(c.base+int64(e.delta), e.id) {
				return
			}
		}
	}
}

// pop takes the log's first key if it is due at atRev, and clears its
// mark: a compaction that keeps the key due marks it again, so that a
// write between the steps of a compaction does not log it twice.
func (l *dueLog) pop(atRev int64) (uint32, bool) {
	for len(l.chunks) > 0 {
		c := l.chunks[0]
		if l.head < c.n {
			e := c.e[l.head]
			if c.base+int64(e.delta) > atRev {
				return 0, false
			}
			l.head++
			l.mark(e.id, false)
			return e.id, true
		}
		if len(l.chunks) == 1 {
			return 0, false // the chunk adds go to
		}
		l.chunks[0] = nil
		l.chunks, l.head = l.chunks[1:], 0
	}
	return 0, false
}

// putBack ends a compaction: the keys of again, which it popped and left
// with history, go back in, each due from its revision. Keys logged since
// it popped them are at later revisions, so the merge keeps the order.
func (l *dueLog) putBack(again []dueRev) {
	if len(again) == 0 {
		return
	}
	slices.SortFunc(again, byDueRev)
	for _, a := range again {
		l.mark(a.id, true)
	}
	// Merge again into what is left, into a new log.
	old := *l
	*l = dueLog{in: old.in}
	old.each(func(rev int64, id uint32) bool {
		for len(again) > 0 && again[0].rev <= rev {
			l.push(again[0].rev, again[0].id)
			again = again[1:]
		}
		l.push(rev, id)
		return true
	})
	for _, a := range again {
		l.push(a.rev, a.id)
	}
}

// len returns the number of keys in the log.
func (l *dueLog) len() int {
	n := 0
	for i, c := range l.chunks {
		n += c.n
		if i == 0 {
			n -= l.head
		}
	}
	return n
}

// listDue returns the revision from which a key with list b has history
// to drop, and false if it has none whatever later compactions come.
func listDue(b []byte) (int64, bool) {
	it := newListIter(b)
	first, ok := it.next()
	if !ok {
		return 0, false
	}
	if first.tomb {
		return first.rev.Main, true
	}
	second, ok := it.next()
	return second.rev.Main, ok
}

// addSorted logs entries that came out of revision order (a Loader's).
func (l *dueLog) addSorted(entries []dueRev) {
	slices.SortFunc(entries, byDueRev)
	for _, e := range entries {
		l.add(e.rev, e.id)
	}
}
