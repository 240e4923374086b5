package keyindex

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
	var remove []uint32
	var again []dueRev
	var buf [inlineMax]byte
	// Only the keys due at atRev can have history to drop (see dueLog).
	ix.due.due(atRev, func(id uint32) {
		b := ix.list(id, buf[:0])
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
			if rev, ok := listDue(b); ok {
				again = append(again, dueRev{rev, id})
			}
			return
		}
		// Report the dropped entries.
		if dropped != nil {
			it := newListIter(b)
			for i := 0; i < k || i == k && dropKept; i++ {
				e, _ := it.next()
				dropped(e.rev)
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
				remove = append(remove, id)
				return
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
		if rev, ok := listDue(nb); ok {
			again = append(again, dueRev{rev, id})
		}
	})
	ix.due.requeue(atRev, again)
	for _, id := range remove {
		ix.removeSlot(id)
	}
	if ix.revs.garbage*4 > ix.revs.live {
		ix.gcRevs()
	}
	if ix.keys.garbage*4 > ix.keys.live {
		ix.gcKeys()
	}
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
