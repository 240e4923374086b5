package keyindex

import "math"

// Compact drops the history at or below atRev, as etcd's keyIndex.compact
// does: for each key, every version before its latest one at or below
// atRev, and that one too if it is a tombstone below atRev. A tombstone at
// exactly atRev stays (as in etcd 3.7), so a watch from atRev still sees
// that deletion; the next compaction drops it. So a read at atRev or later
// sees the same as before, and a read below atRev is no longer possible.
// Keys left without history are removed. A key whose kept version
// continues a generation gets a list header, so create_revision and
// version survive.
//
// Only the keys with history to drop are visited (see dueLog): the work
// follows the history dropped, not the size of the index.
//
// dropped, if not nil, is called for each dropped revision, in increasing
// order per key (the store sorts them all and deletes them from storage in
// one ingestion, so a crash never leaves a key's tombstone deleted and an
// older put of it not).
//
// Afterwards, arenas whose garbage exceeds a quarter of their live bytes
// are copied, so the memory of the dropped history is returned.
func (ix *Index) Compact(atRev int64, dropped func(Revision)) {
	c := ix.StartCompaction(atRev, dropped)
	for !c.Step(math.MaxInt) {
	}
}

// Compaction is Compact in steps, each visiting a bounded number of keys,
// so that a caller that locks the index for each step holds its readers
// and writers up for one step at a time rather than for the whole walk.
// Between steps the index may be read at atRev or later and take Puts and
// Tombstones (at revisions above atRev, which change nothing a compaction
// at atRev decides), but no other compaction, Restore or Load.
type Compaction struct {
	ix      *Index
	atRev   int64
	dropped func(Revision)
	// again lists the keys visited that keep history to drop later; they
	// go back in the due log at the end.
	again []dueRev
	// walked is set once no key is left to visit; done once the arena
	// reclaim that follows has ended too.
	walked, done bool
}

// StartCompaction begins a compaction at atRev (see Compact); Step does
// the work.
func (ix *Index) StartCompaction(atRev int64, dropped func(Revision)) *Compaction {
	return &Compaction{ix: ix, atRev: atRev, dropped: dropped}
}

// Step visits up to n of the keys due at the compaction's revision and
// reports whether the compaction is done. On the step that finds none
// left, it puts back the keys that keep history and begins to return the
// arenas' garbage, which the steps after it return: gcSlotsPerKey lists
// or keys moved for each key a step may visit, so that no step copies
// every list or every key at once.
func (c *Compaction) Step(n int) (done bool) {
	if c.done {
		return true
	}
	ix := c.ix
	if !c.walked {
		var remove []uint32
		var buf [inlineMax]byte
		visited := 0
		for ; visited < n; visited++ {
			id, ok := ix.due.pop(c.atRev)
			if !ok {
				c.walked = true
				break
			}
			if c.visit(id, buf[:0]) {
				remove = append(remove, id)
			}
		}
		for _, id := range remove {
			ix.removeSlot(id)
		}
		if !c.walked {
			return false
		}
		ix.due.putBack(c.again)
		c.again = nil
		if !ix.revs.reclaiming() && ix.revs.garbage*4 > ix.revs.live {
			ix.startGCRevs()
		}
		if !ix.keys.reclaiming() && ix.keys.garbage*4 > ix.keys.live {
			ix.startGCKeys()
		}
		n -= visited
	}
	budget := math.MaxInt
	if n < math.MaxInt/gcSlotsPerKey {
		budget = n * gcSlotsPerKey
	}
	// One arena at a time, so a step moves no more than its budget.
	switch {
	case ix.revs.reclaiming():
		ix.gcRevsStep(budget)
	case ix.keys.reclaiming():
		ix.gcKeysStep(budget)
	}
	if ix.revs.reclaiming() || ix.keys.reclaiming() {
		return false
	}
	c.done = true
	return true
}

// gcSlotsPerKey is how many slots (lists, or keys) a step's reclaim of an
// arena visits for each key the step may visit: moving a list or a key
// costs about a fifth of dropping a key's history.
const gcSlotsPerKey = 4

// visit drops key id's history at or below the compaction's revision and
// reports whether the key is left with none, to be removed. A key left
// with history to drop later is marked due again and listed in again.
func (c *Compaction) visit(id uint32, buf []byte) (remove bool) {
	ix, atRev := c.ix, c.atRev
	keep := func(b []byte) {
		if rev, ok := listDue(b); ok {
			ix.due.mark(id, true)
			c.again = append(c.again, dueRev{rev, id})
		}
	}
	b := ix.list(id, buf)
	// Locate the last entry at or below atRev.
	it := newListIter(b)
	k, end := -1, 0 // that entry's index and end offset
	var ke entry
	for i := 0; ; i++ {
		e, ok := it.next()
		if !ok || e.rev.Main > atRev {
			break
		}
		k, end, ke = i, it.i, e
	}
	dropKept := ke.tomb && ke.rev.Main < atRev
	if k < 0 || k == 0 && !dropKept {
		// Nothing at or below atRev, or only the kept version (a
		// tombstone at atRev, which the next compaction drops).
		keep(b)
		return false
	}
	// Report the dropped entries.
	if c.dropped != nil {
		it := newListIter(b)
		for i := 0; i < k || i == k && dropKept; i++ {
			e, _ := it.next()
			c.dropped(e.rev)
		}
	}
	oldCap := ix.listCapOf(id)
	var nb []byte
	switch {
	case ke.tomb && !dropKept:
		// Keep the tombstone at atRev as the list's first entry.
		nb = appendEntry(nil, 0, ke.rev, true)
		nb = append(nb, b[end:]...)
	case ke.tomb:
		// Drop through the tombstone; the next entry starts a new
		// generation and becomes absolute.
		if end == len(b) {
			return true
		}
		it := newListIter(b[end:])
		it.prevMain = ke.rev.Main
		e, _ := it.next()
		nb = appendEntry(nil, 0, e.rev, e.tomb)
		nb = append(nb, b[end+it.i:]...)
	default:
		if ke.version > 1 {
			nb = appendHeader(nb, ke.create, ke.version-1)
		}
		nb = appendEntry(nb, 0, ke.rev, false)
		nb = append(nb, b[end:]...)
	}
	ix.setList(id, oldCap, nb)
	keep(nb)
	return false
}

// removeSlot deletes slot id's key from the tree and frees its memory.
func (ix *Index) removeSlot(id uint32) {
	ix.tree.Delete(id)
	s := ix.slot(id)
	if s.revs&inlineFlag == 0 {
		ix.revs.free(ref(s.revs), ix.listCapOf(id))
	}
	k := s.key
	ix.keys.free(k, k.n())
	delete(ix.tails, id)
	*s = slot{key: freeSlot, revs: uint64(ix.free)}
	ix.free = id
	ix.nfree++
}
