package keyindex

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
)

// Export calls fn for each key of the index in key order with its revision
// list in the index's own encoding (see revlist.go): what Load takes back
// to rebuild the same index without replaying the revisions. Both slices
// alias index memory or a buffer reused across calls: they are valid only
// during the call. An error from fn stops the walk and is returned.
//
// The encoding is the index's in-memory one, so exporting costs a walk of
// the tree and no re-encoding; whoever stores it (mvcc's key index
// checkpoint) versions its file format, and a change of the list encoding
// must change that version.
func (ix *Index) Export(fn func(key, list []byte) error) error {
	var err error
	var buf [inlineMax]byte
	ix.tree.Ascend(func(id uint32) bool {
		err = fn(ix.keyOf(id), ix.list(id, buf[:0]))
		return err == nil
	})
	return err
}

// ErrList is returned by Loader.Add for a key out of order or a revision
// list that is not one Export could have produced.
var ErrList = errors.New("keyindex: bad exported list")

// Loader fills an empty index from what Export gave, key by key in
// increasing key order: each key costs a slot, a copy of its list and an
// insertion at the tree's right edge (which stays in cache), ordered by
// slot id, which follows key order here (see Index.idOrder), so that no
// key is compared but with the one before. Until Finish the index may be
// used only through the Loader; a Loader that failed leaves the index
// partly filled: discard the index.
type Loader struct {
	ix   *Index
	last uint32
	n    int
	// due collects the lists' entries for the index's dueLog, which
	// wants them in revision order.
	due []dueRev
}

// StartLoad begins filling ix, which must be empty (as New returns it).
func (ix *Index) StartLoad() (*Loader, error) {
	if ix.nslots != 0 || ix.tree.Len() != 0 {
		return nil, errNotEmpty
	}
	ix.idOrder = true
	return &Loader{ix: ix}, nil
}

// Finish ends the load: the index orders its keys by their bytes again,
// logs the loaded history for Compact (dueLog) and may be used.
func (l *Loader) Finish() {
	l.ix.idOrder = false
	l.ix.due.addSorted(l.due)
	l.due = nil
}

// Add adds key with its revision list, both as Export gave them (they are
// copied), and reports whether the key is live: its latest revision is a
// put. The key must sort after the previous one; the list is checked
// whole (ErrList), so damaged input never reaches the index.
func (l *Loader) Add(key, list []byte) (live bool, err error) {
	if err := checkKey(key); err != nil {
		return false, err
	}
	if l.n > 0 && bytes.Compare(key, l.ix.keyOf(l.last)) <= 0 {
		return false, fmt.Errorf("%w: key %q does not sort after %q", ErrList, key, l.ix.keyOf(l.last))
	}
	t, err := checkList(list)
	if err != nil {
		return false, fmt.Errorf("%w: key %q: %w", ErrList, key, err)
	}
	id := l.ix.newSlot(key)
	if l.n > 0 && id <= l.last {
		// Never: an empty index hands out slot ids in increasing order.
		return false, fmt.Errorf("%w: slot %d after %d", ErrList, id, l.last)
	}
	l.ix.setList(id, 0, list)
	if len(list) >= bigList {
		l.ix.tails[id] = t
	}
	l.ix.tree.ReplaceOrInsert(id)
	if rev, ok := listDue(list); ok {
		l.due = append(l.due, dueRev{rev, id})
	}
	l.last = id
	l.n++
	return t.live(), nil
}

// checkList decodes a whole revision list, checking every rule the index
// keeps (revlist.go): main revisions strictly increasing and in range, a
// sub revision only when non-zero, a header only first and followed by a
// later put, a tombstone only first or after a put, at least one entry.
// It returns the list's tail.
func checkList(b []byte) (tail, error) {
	i := 0
	read := func(what string) (uint64, error) {
		v, n := binary.Uvarint(b[i:])
		if n <= 0 {
			return 0, fmt.Errorf("%s at byte %d: bad varint", what, i)
		}
		i += n
		return v, nil
	}
	t := tail{empty: true}
	var prevMain, headerCreate int64
	if len(b) > 0 && b[0] == headerTag {
		i = 1
		c, err := read("header create")
		if err != nil {
			return t, err
		}
		vb, err := read("header version")
		if err != nil {
			return t, err
		}
		if c < 1 || c > MaxMain || vb < 1 || vb > MaxMain {
			return t, fmt.Errorf("header create %d, version base %d out of range", c, vb)
		}
		headerCreate = int64(c)
		t.create, t.version = int64(c), int64(vb)
	}
	for first := true; i < len(b); first = false {
		x, err := read("entry")
		if err != nil {
			return t, err
		}
		d := x >> 2
		if d == 0 || d > uint64(MaxMain-prevMain) {
			return t, fmt.Errorf("entry at byte %d: main revision step %d after %d", i, d, prevMain)
		}
		e := Revision{Main: prevMain + int64(d)}
		prevMain = e.Main
		if x&tagSub != 0 {
			sub, err := read("sub revision")
			if err != nil {
				return t, err
			}
			if sub == 0 || sub > MaxMain {
				return t, fmt.Errorf("revision %d: sub revision %d out of range", e.Main, sub)
			}
			e.Sub = int64(sub)
		}
		tomb := x&tagTomb != 0
		switch {
		case first && headerCreate != 0 && (tomb || e.Main <= headerCreate):
			return t, fmt.Errorf("header created at %d followed by revision %d (tombstone %t)", headerCreate, e.Main, tomb)
		case tomb && !first && !t.live():
			return t, fmt.Errorf("tombstone at %d after a tombstone", e.Main)
		case tomb:
			t.lastTomb = true
		default:
			if !t.live() && !(first && headerCreate != 0) {
				t.create, t.version = e.Main, 0
			}
			t.version++
			t.lastTomb = false
		}
		t.last, t.empty = e, false
	}
	if t.empty {
		return t, errors.New("no revisions")
	}
	return t, nil
}
