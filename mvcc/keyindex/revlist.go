package keyindex

import (
	"encoding/binary"
	"math/bits"
)

// Revision is a point in a store's history: the main revision of a write
// transaction and the sub revision of one operation in it.
type Revision struct {
	Main int64
	Sub  int64
}

// Less orders revisions by main, then sub revision.
func (r Revision) Less(o Revision) bool {
	return r.Main < o.Main || r.Main == o.Main && r.Sub < o.Sub
}

// MaxMain bounds main revisions: a list entry shifts the delta of two main
// revisions left by two bits.
const MaxMain = 1<<61 - 1

// A revision list is a key's history: its entries in increasing revision
// order, each one uvarint
//
//	x = (main - previous main) << 2 | tombstone << 1 | hasSub
//
// followed, when hasSub, by the sub revision as a uvarint. The first entry's
// previous main is 0. As main revisions strictly increase within a key
// (a transaction writes a key at most once), x >> 2 is never 0, so a list
// may start with the marker byte 0 followed by two uvarints, created and
// versionBase: the header of a generation whose first puts a compaction
// dropped. Entries up to a tombstone form a generation (etcd's), the
// lifetime of the key from a put on an absent key to its deletion.
//
// Example: put at 5, put at 9.1 (main 9, sub 1), delete at 12, put at 20 is
//
//	x=5<<2 | x=4<<2|1 sub=1 | x=3<<2|2 | x=8<<2
//
// eight bytes. Compacting at 10 keeps 9.1 (the latest at or below 10) with
// a header for the puts it dropped: 0 created=5 versionBase=1, then
// x=9<<2|1 sub=1, x=3<<2|2, x=8<<2.
//
// The encoding is also stored: Export hands lists out as they are, and
// mvcc's key index checkpoint keeps them in a file, so a change here must
// change that file's format version (mvcc/checkpoint.go).
const (
	tagSub    = 1
	tagTomb   = 2
	headerTag = 0
)

// entry is one decoded list entry with the state of its generation.
type entry struct {
	rev  Revision
	tomb bool
	// create and version describe the generation a put belongs to: its
	// first put's main revision and the number of puts up to this one.
	create, version int64
}

// listIter walks a revision list.
type listIter struct {
	b        []byte
	i        int
	prevMain int64
	// generation state after the last entry returned
	live            bool
	create, version int64
}

func newListIter(b []byte) listIter {
	it := listIter{b: b}
	if len(b) > 0 && b[0] == headerTag {
		it.i = 1
		it.create = int64(it.uvarint())
		it.version = int64(it.uvarint())
		it.live = true
	}
	return it
}

func (it *listIter) uvarint() uint64 {
	// Fast path for the one-byte case.
	if c := it.b[it.i]; c < 0x80 {
		it.i++
		return uint64(c)
	}
	v, n := binary.Uvarint(it.b[it.i:])
	it.i += n
	return v
}

// next decodes the next entry; ok is false at the end of the list.
func (it *listIter) next() (e entry, ok bool) {
	if it.i >= len(it.b) {
		return entry{}, false
	}
	x := it.uvarint()
	e.rev.Main = it.prevMain + int64(x>>2)
	it.prevMain = e.rev.Main
	if x&tagSub != 0 {
		e.rev.Sub = int64(it.uvarint())
	}
	if x&tagTomb != 0 {
		e.tomb = true
		it.live = false
		return e, true
	}
	if !it.live {
		it.live = true
		it.create = e.rev.Main
		it.version = 0
	}
	it.version++
	e.create, e.version = it.create, it.version
	return e, true
}

// appendEntry encodes one entry after an entry at prevMain.
func appendEntry(b []byte, prevMain int64, r Revision, tomb bool) []byte {
	x := uint64(r.Main-prevMain) << 2
	if r.Sub != 0 {
		x |= tagSub
	}
	if tomb {
		x |= tagTomb
	}
	b = binary.AppendUvarint(b, x)
	if r.Sub != 0 {
		b = binary.AppendUvarint(b, uint64(r.Sub))
	}
	return b
}

func appendHeader(b []byte, create, versionBase int64) []byte {
	b = append(b, headerTag)
	b = binary.AppendUvarint(b, uint64(create))
	return binary.AppendUvarint(b, uint64(versionBase))
}

// listCap is the capacity reserved for a list of n bytes: exact up to 32
// bytes, then n rounded up to a sixteenth of its power of two, so a long
// history grows in place most of the time and wastes under 12.5%. Because
// listCap(m) == listCap(n) for every n <= m <= listCap(n), the capacity of
// a list is a function of its length and need not be stored.
func listCap(n int) int {
	if n <= 32 {
		return n
	}
	shift := bits.Len(uint(n)) - 4
	return (n + 1<<shift - 1) >> shift << shift
}

// tail summarises the end of a list: enough to append an entry and to read
// the latest version without decoding the list.
type tail struct {
	last     Revision
	lastTomb bool
	// create and version of the last entry's generation, if it is a put.
	create, version int64
	// empty is true for a list without entries.
	empty bool
}

func (t tail) live() bool { return !t.empty && !t.lastTomb }

// scanTail decodes a whole list into its tail.
func scanTail(b []byte) tail {
	t := tail{empty: true}
	it := newListIter(b)
	for {
		e, ok := it.next()
		if !ok {
			return t
		}
		t = tail{last: e.rev, lastTomb: e.tomb, create: e.create, version: e.version}
	}
}

// at returns the entry visible at atRev: the last one with main <= atRev.
func at(b []byte, atRev int64) (e entry, ok bool) {
	it := newListIter(b)
	for {
		n, more := it.next()
		if !more || n.rev.Main > atRev {
			return e, ok
		}
		e, ok = n, true
	}
}
