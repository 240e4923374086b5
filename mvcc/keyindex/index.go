package keyindex

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/google/btree"
)

// MaxKeySize is the longest key the index stores.
const MaxKeySize = 32 << 10

// ErrRevision is returned by Put, Tombstone and Restore for a revision that
// is out of range or not above the key's last one.
var ErrRevision = errors.New("keyindex: revision out of order")

// ErrKey is returned for an empty key or one longer than MaxKeySize.
var ErrKey = errors.New("keyindex: invalid key")

// KeyRev describes the version of a key visible at some revision.
type KeyRev struct {
	// Mod is the revision that wrote the version (its mod_revision is
	// Mod.Main).
	Mod Revision
	// Create is the main revision of the put that created the key's
	// current generation (its create_revision).
	Create int64
	// Version counts the puts of the generation up to this one; 1 for a
	// newly created key.
	Version int64
}

// slot is the per-key record: where the key's bytes and its revision list
// live. Both fields are plain integers, so the slot pages are pointer-free
// allocations the GC never scans.
type slot struct {
	key  ref
	revs uint64 // a ref, or an inline list when inlineFlag is set
}

// An inline list of up to 7 bytes lives in the slot's revs field itself:
// bit 63 set, the length in bits 56..58, the bytes in bits 0..55. A key with
// one or two versions (the common case) then needs no arena space for its
// history.
const (
	inlineFlag  = 1 << 63
	inlineMax   = 7
	inlineShift = 56
)

// slotsPerPage is the number of slots in one page (64 KiB).
const slotsPerPage = 4096

// slot returns slot id.
func (ix *Index) slot(id uint32) *slot {
	return &ix.slots[id/slotsPerPage][id%slotsPerPage]
}

// freeSlot marks a slot on the free list; its revs field holds the next
// free slot id.
const freeSlot ref = math.MaxUint64

// probeBase starts the item ids that stand for a key being searched
// rather than a stored key: items are slot ids (uint32), so a search needs
// an id whose key is the searched one. Ids below probeBase are slots.
const (
	probeBase = 1 << 31
	numProbes = 64
	// writerProbe is reserved for methods that modify the index, which the
	// caller runs with exclusive access.
	writerProbe = 0
	// bigList is the list length from which a key's tail is cached in
	// Index.tails, so appending and reading the latest version stay O(1)
	// for keys with long histories.
	bigList = 64
)

// Index maps keys to their revision histories: etcd's treeIndex of
// keyIndex values, laid out for memory.
//
//  1. The B-tree (google/btree, degree 64) holds 4-byte slot ids ordered by
//     their keys; a node holds up to 127 ids in one 512-byte array.
//  2. Slot i (16 bytes in pages of 4096) refers to the key's bytes in the
//     key arena and to its revision list (see revlist.go), inline when it
//     fits in 7 bytes and in the revision arena otherwise.
//  3. Arenas are a few large pointer-free chunks. Keys are written once;
//     a list that outgrows its reservation moves to the arena's end and
//     leaves garbage, reclaimed by copying, a few lists at a time, once
//     it exceeds a quarter of the live bytes. Compact frees the garbage
//     of removed keys the same way.
//
// The measured cost of a key and of a version is in the package doc; a
// version's few bytes are its delta-encoded revision (3-4 bytes) plus
// arena garbage awaiting a copy.
//
// Methods that only read (Get, Range, Len, Stats, History) may run
// concurrently with each other; the others need exclusive access. The
// caller (mvcc.Store) holds a sync.RWMutex.
type Index struct {
	tree *btree.BTreeG[uint32]
	// slots are kept in pages of slotsPerPage, so that growing never
	// copies them (a slice would reallocate and copy, and leave the old
	// array as garbage).
	slots  []*[slotsPerPage]slot
	nslots int
	// free heads the list of free slot ids, or is math.MaxUint32.
	free  uint32
	nfree int
	keys  arena
	revs  arena
	// tails caches the tail of lists of at least bigList bytes.
	tails map[uint32]tail
	// due lists the keys with history for Compact to drop.
	due dueLog
	// gcNext is the next slot a reclaim of the revision arena under way
	// visits (startGCRevs); gcKeysFrom, empty at first, the next key a
	// reclaim of the key arena moves (startGCKeys).
	gcNext     uint32
	gcKeysFrom []byte

	probes    [numProbes][]byte
	probeFree chan uint32

	scratch []byte
	// idOrder, set only while a Loader fills an empty index, orders the
	// tree by slot id: the Loader hands out ids in increasing order to
	// keys in increasing order, so the two orders agree, and its
	// insertions compare integers instead of keys.
	idOrder bool
}

// New returns an empty index.
func New() *Index {
	ix := &Index{
		free:      math.MaxUint32,
		keys:      newArena(),
		revs:      newArena(),
		tails:     map[uint32]tail{},
		probeFree: make(chan uint32, numProbes-1),
	}
	for i := uint32(1); i < numProbes; i++ {
		ix.probeFree <- i
	}
	ix.tree = btree.NewG(64, ix.less)
	return ix
}

func (ix *Index) keyOf(id uint32) []byte {
	if id >= probeBase {
		return ix.probes[id-probeBase]
	}
	return ix.keys.bytes(ix.slot(id).key)
}

func (ix *Index) less(a, b uint32) bool {
	if ix.idOrder {
		return a < b
	}
	return bytes.Compare(ix.keyOf(a), ix.keyOf(b)) < 0
}

// probe returns an item id standing for key, for a search; release it with
// unprobe. Readers share a pool of probes; a writer uses its own.
func (ix *Index) probe(key []byte, writer bool) uint32 {
	p := uint32(writerProbe)
	if !writer {
		p = <-ix.probeFree
	}
	ix.probes[p] = key
	return probeBase + p
}

func (ix *Index) unprobe(id uint32) {
	p := id - probeBase
	ix.probes[p] = nil
	if p != writerProbe {
		ix.probeFree <- p
	}
}

func (ix *Index) find(key []byte, writer bool) (uint32, bool) {
	p := ix.probe(key, writer)
	id, ok := ix.tree.Get(p)
	ix.unprobe(p)
	return id, ok
}

// list returns the revision list of slot id: an inline list is copied into
// buf, any other aliases the arena.
func (ix *Index) list(id uint32, buf []byte) []byte {
	r := ix.slot(id).revs
	if r&inlineFlag != 0 {
		n := int(r>>inlineShift) & 7
		var b [8]byte
		binary.LittleEndian.PutUint64(b[:], r)
		return append(buf[:0], b[:n]...)
	}
	return ix.revs.bytes(ref(r))
}

func (ix *Index) tailOf(id uint32) tail {
	if t, ok := ix.tails[id]; ok {
		return t
	}
	var buf [inlineMax]byte
	return scanTail(ix.list(id, buf[:0]))
}

// Len returns the number of keys with a retained history (live or not).
func (ix *Index) Len() int { return ix.tree.Len() }

// Get returns the version of key visible at atRev; ok is false if the key
// did not exist then (never written, deleted, or compacted away).
func (ix *Index) Get(key []byte, atRev int64) (kr KeyRev, ok bool) {
	id, found := ix.find(key, false)
	if !found {
		return KeyRev{}, false
	}
	return ix.get(id, atRev)
}

func (ix *Index) get(id uint32, atRev int64) (KeyRev, bool) {
	if t, ok := ix.tails[id]; ok && t.last.Main <= atRev {
		if !t.live() {
			return KeyRev{}, false
		}
		return KeyRev{Mod: t.last, Create: t.create, Version: t.version}, true
	}
	var buf [inlineMax]byte
	e, ok := at(ix.list(id, buf[:0]), atRev)
	if !ok || e.tomb {
		return KeyRev{}, false
	}
	return KeyRev{Mod: e.rev, Create: e.create, Version: e.version}, true
}

// Range calls fn, in key order, for each key in [key, end) that has a
// version visible at atRev; a nil end means no upper bound. fn returns
// false to stop. The key passed to fn aliases index memory: copy it to keep
// it beyond fn.
func (ix *Index) Range(key, end []byte, atRev int64, fn func(key []byte, kr KeyRev) bool) {
	p := ix.probe(key, false)
	defer ix.unprobe(p)
	ix.tree.AscendGreaterOrEqual(p, func(id uint32) bool {
		k := ix.keyOf(id)
		if end != nil && bytes.Compare(k, end) >= 0 {
			return false
		}
		kr, ok := ix.get(id, atRev)
		if !ok {
			return true
		}
		return fn(k, kr)
	})
}

// History calls fn for each retained revision of key in increasing order,
// with the tombstone flag. It serves tests and debugging.
func (ix *Index) History(key []byte, fn func(rev Revision, tomb bool)) {
	id, ok := ix.find(key, false)
	if !ok {
		return
	}
	var buf [inlineMax]byte
	it := newListIter(ix.list(id, buf[:0]))
	for {
		e, more := it.next()
		if !more {
			return
		}
		fn(e.rev, e.tomb)
	}
}

func checkKey(key []byte) error {
	if len(key) == 0 || len(key) > MaxKeySize {
		return fmt.Errorf("%w: length %d, want 1..%d", ErrKey, len(key), MaxKeySize)
	}
	return nil
}

func checkRev(t tail, rev Revision) error {
	if rev.Main < 1 || rev.Main > MaxMain || rev.Sub < 0 {
		return fmt.Errorf("%w: %d.%d out of range", ErrRevision, rev.Main, rev.Sub)
	}
	if !t.empty && rev.Main <= t.last.Main {
		return fmt.Errorf("%w: %d.%d after %d.%d", ErrRevision, rev.Main, rev.Sub, t.last.Main, t.last.Sub)
	}
	return nil
}

// Put records a put of key at rev, which must be above every revision of
// the key already recorded (main revisions strictly increase per key).
func (ix *Index) Put(key []byte, rev Revision) error {
	return ix.record(key, rev, false, 0, 0, false)
}

// Tombstone records a deletion of key at rev if the key is live, and
// reports whether it was.
func (ix *Index) Tombstone(key []byte, rev Revision) (bool, error) {
	id, ok := ix.find(key, true)
	if !ok {
		return false, nil
	}
	t := ix.tailOf(id)
	if !t.live() {
		return false, nil
	}
	if err := checkRev(t, rev); err != nil {
		return false, err
	}
	ix.appendTo(id, t, rev, true)
	return true, nil
}

// Restore appends a revision read back from storage while rebuilding the
// index, in increasing revision order. create and version are the stored
// record's: when they show that the key's first retained put continues a
// generation whose earlier puts were compacted away, the list gets a
// header so versions keep counting from there.
func (ix *Index) Restore(key []byte, rev Revision, tomb bool, create, version int64) error {
	return ix.record(key, rev, tomb, create, version, true)
}

func (ix *Index) record(key []byte, rev Revision, tomb bool, create, version int64, restore bool) error {
	if err := checkKey(key); err != nil {
		return err
	}
	if id, ok := ix.find(key, true); ok {
		return ix.appendRev(id, rev, tomb)
	}
	id, err := ix.newKey(key, rev, tomb, create, version, restore)
	if err != nil {
		return err
	}
	ix.tree.ReplaceOrInsert(id)
	return nil
}

// appendRev appends rev to the list of the key in slot id.
func (ix *Index) appendRev(id uint32, rev Revision, tomb bool) error {
	t := ix.tailOf(id)
	if err := checkRev(t, rev); err != nil {
		return err
	}
	ix.appendTo(id, t, rev, tomb)
	return nil
}

// newKey gives key, absent from the index, a slot whose list holds rev,
// and returns the slot; the caller puts it into the tree.
func (ix *Index) newKey(key []byte, rev Revision, tomb bool, create, version int64, restore bool) (uint32, error) {
	if err := checkRev(tail{empty: true}, rev); err != nil {
		return 0, err
	}
	b := ix.scratch[:0]
	if restore && !tomb && version > 1 {
		b = appendHeader(b, create, version-1)
	}
	b = appendEntry(b, 0, rev, tomb)
	ix.scratch = b
	id := ix.newSlot(key)
	ix.setList(id, 0, b)
	if tomb {
		ix.due.add(rev.Main, id)
	}
	return id, nil
}

func (ix *Index) newSlot(key []byte) uint32 {
	kr, dst := ix.keys.alloc(len(key), len(key))
	copy(dst, key)
	s := slot{key: kr, revs: inlineFlag}
	if ix.free != math.MaxUint32 {
		id := ix.free
		ix.free = uint32(ix.slot(id).revs)
		ix.nfree--
		*ix.slot(id) = s
		return id
	}
	if ix.nslots == len(ix.slots)*slotsPerPage {
		ix.slots = append(ix.slots, new([slotsPerPage]slot))
	}
	id := uint32(ix.nslots)
	ix.nslots++
	*ix.slot(id) = s
	return id
}

// appendTo appends an entry to slot id's list, whose tail is t.
func (ix *Index) appendTo(id uint32, t tail, rev Revision, tomb bool) {
	var e [20]byte
	enc := appendEntry(e[:0], t.last.Main, rev, tomb)
	// Update the tail.
	if tomb {
		t.lastTomb = true
	} else {
		if !t.live() {
			t.create, t.version = rev.Main, 0
		}
		t.version++
		t.lastTomb = false
	}
	t.last, t.empty = rev, false
	// The key has history to drop from rev on, if not from earlier.
	ix.due.add(rev.Main, id)

	s := ix.slot(id)
	var n int
	if s.revs&inlineFlag != 0 {
		n = int(s.revs>>inlineShift) & 7
		if n+len(enc) <= inlineMax {
			var b [8]byte
			binary.LittleEndian.PutUint64(b[:], s.revs)
			copy(b[n:], enc)
			s.revs = inlineList(b[:n+len(enc)])
			return
		}
		var buf [inlineMax]byte
		old := ix.list(id, buf[:0])
		ix.scratch = append(append(ix.scratch[:0], old...), enc...)
		ix.setList(id, 0, ix.scratch)
		n += len(enc)
	} else if r := ref(s.revs); r.dedicated() {
		ix.revs.appendDedicated(r, enc)
		n = len(ix.revs.bytes(r))
	} else {
		n = r.n() + len(enc)
		oldCap, newCap := listCap(r.n()), listCap(n)
		if newCap == oldCap || ix.revs.extendInPlace(r, oldCap, newCap) {
			c := ix.revs.chunks[r.chunk()]
			copy(c[r.off()+r.n():], enc)
			s.revs = uint64(makeRef(r.chunk(), r.off(), n))
		} else {
			ix.scratch = append(append(ix.scratch[:0], ix.revs.bytes(r)...), enc...)
			ix.setList(id, oldCap, ix.scratch)
		}
	}
	if n >= bigList {
		ix.tails[id] = t
	}
}

func inlineList(b []byte) uint64 {
	var w [8]byte
	copy(w[:], b)
	return binary.LittleEndian.Uint64(w[:])&(1<<inlineShift-1) | uint64(len(b))<<inlineShift | inlineFlag
}

// setList stores b as slot id's list, freeing the old one (oldCap bytes
// reserved in a shared chunk, or a dedicated chunk).
func (ix *Index) setList(id uint32, oldCap int, b []byte) {
	s := ix.slot(id)
	if s.revs&inlineFlag == 0 {
		ix.revs.free(ref(s.revs), oldCap)
	}
	switch c := listCap(len(b)); {
	case len(b) <= inlineMax:
		s.revs = inlineList(b)
	case c >= dedicatedMin:
		s.revs = uint64(ix.revs.allocDedicated(b, c))
	default:
		r, dst := ix.revs.alloc(len(b), c)
		copy(dst, b)
		s.revs = uint64(r)
	}
	if len(b) < bigList {
		delete(ix.tails, id)
	}
	ix.maybeGC()
}

// listCapOf returns the capacity reserved for slot id's list in a shared
// chunk (0 for inline and dedicated lists).
func (ix *Index) listCapOf(id uint32) int {
	r := ix.slot(id).revs
	if r&inlineFlag != 0 || ref(r).dedicated() {
		return 0
	}
	return listCap(ref(r).n())
}

// gcMinGarbage is the garbage an arena may hold before a copy reclaims it.
const gcMinGarbage = 256 << 10

// gcSlotsPerChange is how many slots a reclaim of the revision arena
// visits each time a list changes while it is under way: about half a
// microsecond more per Put, and a step of a compaction's walk (4,096
// keys) about 2 ms longer. A reclaim of a million keys is done after
// some 70,000 changes, whose own garbage is then about a seventh of the
// live bytes, short of the quarter that begins the next one.
const gcSlotsPerChange = 16

// maybeGC advances the revision arena's reclaim under way, or begins one
// once the arena's garbage exceeds a quarter of its live bytes. It runs
// on every list change, under the caller's write lock.
func (ix *Index) maybeGC() {
	if ix.revs.reclaiming() {
		ix.gcRevsStep(gcSlotsPerChange)
		return
	}
	a := &ix.revs
	if a.garbage < gcMinGarbage || a.garbage*4 < a.live {
		return
	}
	ix.startGCRevs()
}

// startGCRevs begins a reclaim of the revision arena: its chunks are
// retired, and gcRevsStep moves the lists out of them a few slots at a
// time, in slot order. Copying every list at once held the index's
// writers and readers for about 30 ms at 1.1 million keys
// (BenchmarkCompactionSteps); in steps, no Put or step of a compaction
// waits for more than its share. Lists written meanwhile go to new
// chunks, so a slot the reclaim has passed never points into a retired
// one.
func (ix *Index) startGCRevs() {
	ix.revs.retire()
	ix.gcNext = 0
}

// gcRevsStep visits up to n slots of the reclaim under way, moving their
// lists out of retired chunks, and ends the reclaim after the last slot.
func (ix *Index) gcRevsStep(n int) {
	a := &ix.revs
	for ; n > 0 && int(ix.gcNext) < ix.nslots; n-- {
		s := ix.slot(ix.gcNext)
		ix.gcNext++
		if s.key == freeSlot || s.revs&inlineFlag != 0 || !a.isRetired(ref(s.revs)) {
			continue
		}
		r := ref(s.revs)
		s.revs = uint64(a.move(r, listCap(r.n())))
	}
	if int(ix.gcNext) >= ix.nslots {
		a.release()
	}
}

// startGCKeys begins a reclaim of the key arena, which only a compaction's
// removal of keys fills with garbage: its chunks are retired, and
// gcKeysStep moves the keys out of them a few at a time, in key order, so
// that a range reads them from consecutive bytes. Copying every key at
// once held the index's writers and readers for 174 ms at 1.5
// million keys (BenchmarkCompactionStepsDeletes). Keys created meanwhile
// go to new chunks, which the reclaim passes over.
func (ix *Index) startGCKeys() {
	ix.keys.retire()
	ix.gcKeysFrom = ix.gcKeysFrom[:0]
}

// gcKeysStep moves up to n keys of the reclaim under way out of retired
// chunks, in key order from the first key it has not moved, and ends the
// reclaim after the last. No key is removed while it is under way (only a
// compaction's walk removes keys, and the reclaim follows the walk), so
// resuming at the first key not moved visits every key once.
func (ix *Index) gcKeysStep(n int) {
	a := &ix.keys
	stopped := false
	move := func(id uint32) bool {
		s := ix.slot(id)
		if n == 0 {
			ix.gcKeysFrom = append(ix.gcKeysFrom[:0], a.bytes(s.key)...)
			stopped = true
			return false
		}
		n--
		if a.isRetired(s.key) {
			s.key = a.move(s.key, s.key.n())
		}
		return true
	}
	if len(ix.gcKeysFrom) == 0 {
		ix.tree.Ascend(move)
	} else {
		p := ix.probe(ix.gcKeysFrom, true)
		ix.tree.AscendGreaterOrEqual(p, move)
		ix.unprobe(p)
	}
	if !stopped {
		a.release()
		ix.gcKeysFrom = ix.gcKeysFrom[:0]
	}
}

// Stats describes the index's memory.
type Stats struct {
	// Keys is the number of keys with a retained history.
	Keys int
	// Slots is the number of slots, free ones included.
	Slots int
	// FreeSlots is the number of slots free for reuse.
	FreeSlots int
	// KeyArenaBytes and RevArenaBytes are the arenas' chunk capacities.
	KeyArenaBytes, RevArenaBytes int64
	// KeyGarbage and RevGarbage are the bytes of those no longer used.
	KeyGarbage, RevGarbage int64
}

// Stats returns the index's memory statistics.
func (ix *Index) Stats() Stats {
	return Stats{
		Keys:          ix.tree.Len(),
		Slots:         ix.nslots,
		FreeSlots:     ix.nfree,
		KeyArenaBytes: ix.keys.heapBytes(),
		RevArenaBytes: ix.revs.heapBytes(),
		KeyGarbage:    ix.keys.garbage,
		RevGarbage:    ix.revs.garbage,
	}
}
