package keyindex

import (
	"math"
	"slices"
)

// dueLog lists the keys that have history for Compact to drop, in the
// order it becomes droppable, so that a compaction visits only those keys
// instead of walking the whole tree. A compaction holds writers up; at
// 1.1 million pods a walk of every key, twice (a dry run and the change),
// stopped the writes for over a second, while the keys with history to
// drop were a tenth of them.
//
// A key's version becomes droppable by Compact(atRev) once a later entry
// of the key is at or below atRev, and a tombstone once it is below atRev.
// So every entry that follows another in a key's list is logged at its
// revision (Compact at that revision or later drops what it follows), and
// so is a tombstone that starts a list (only a rebuilt or loaded index has
// one). Entries come in revision order; Compact(atRev) takes the prefix at
// or below atRev. A tombstone exactly at atRev stays (etcd keeps it for a
// watch from atRev); its key is carried to the next compaction, which
// drops it.
//
// An entry is 8 bytes: a revision relative to its chunk's base and a slot
// id. The log holds the history written since the last compaction, which
// the index's lists hold anyway at 3-4 bytes a version.
type dueLog struct {
	chunks []*dueChunk
	// head is the first entry of chunks[0] not yet taken.
	head int
	// carried are the keys whose tombstone the last compaction kept at its
	// revision: the next compaction visits them first.
	carried []uint32
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

// add logs that slot id has history droppable from main revision rev on;
// rev is at least every revision added before.
func (l *dueLog) add(rev int64, id uint32) {
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

// due calls fn for the carried keys and each logged key droppable at
// atRev, in log order; a key may come more than once.
func (l *dueLog) due(atRev int64, fn func(id uint32)) {
	for _, id := range l.carried {
		fn(id)
	}
	for i, c := range l.chunks {
		start := 0
		if i == 0 {
			start = l.head
		}
		for _, e := range c.e[start:c.n] {
			if c.base+int64(e.delta) > atRev {
				return
			}
			fn(e.id)
		}
	}
}

// take drops the carried keys and the entries at or below atRev: what a
// compaction at atRev has visited.
func (l *dueLog) take(atRev int64) {
	l.carried = l.carried[:0]
	for len(l.chunks) > 0 {
		c := l.chunks[0]
		for l.head < c.n && c.base+int64(c.e[l.head].delta) <= atRev {
			l.head++
		}
		if l.head < c.n || len(l.chunks) == 1 {
			return // entries left, or the chunk adds go to
		}
		l.chunks[0] = nil
		l.chunks, l.head = l.chunks[1:], 0
	}
}

// carry has the next compaction visit slot id.
func (l *dueLog) carry(id uint32) { l.carried = append(l.carried, id) }

// len returns the number of entries logged and not taken.
func (l *dueLog) len() int {
	n := len(l.carried)
	for i, c := range l.chunks {
		n += c.n
		if i == 0 {
			n -= l.head
		}
	}
	return n
}

// logList logs the entries of slot id's list b, which a Loader added out
// of revision order, into pending; sortPending then moves them to the log.
func logList(pending []dueRev, id uint32, b []byte) []dueRev {
	it := newListIter(b)
	for i := 0; ; i++ {
		e, ok := it.next()
		if !ok {
			return pending
		}
		if i > 0 || e.tomb {
			pending = append(pending, dueRev{rev: e.rev.Main, id: id})
		}
	}
}

// dueRev is a log entry with its whole revision, as a Loader collects
// them before sorting.
type dueRev struct {
	rev int64
	id  uint32
}

// addSorted sorts pending by revision and logs it.
func (l *dueLog) addSorted(pending []dueRev) {
	slices.SortFunc(pending, func(a, b dueRev) int {
		switch {
		case a.rev < b.rev:
			return -1
		case a.rev > b.rev:
			return 1
		}
		return 0
	})
	for _, p := range pending {
		l.add(p.rev, p.id)
	}
}
