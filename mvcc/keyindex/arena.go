package keyindex

// ref addresses bytes in an arena: a chunk, an offset in it and a length,
// packed into one uint64 so that a slot holds no pointer (the GC never scans
// the slots or the B-tree items).
//
//	bits 40..62  chunk index (23 bits: 8M chunks of at most 1 MiB)
//	bits 20..39  offset in the chunk
//	bits  0..19  length; lenDedicated marks a dedicated chunk, whose length
//	             is the length of the chunk itself
//
// Bit 63 is never set in a ref; a revision field uses it to mark an inline
// list (see inlineFlag).
type ref uint64

const (
	refLenBits   = 20
	refOffBits   = 20
	refChunkBits = 23

	// maxChunkSize bounds a shared chunk; offsets must fit refOffBits.
	maxChunkSize = 1 << refOffBits
	// minChunkSize is the first chunk of an arena; later ones double up to
	// maxChunkSize, so a small index stays small.
	minChunkSize = 4 << 10
	// lenDedicated in a ref's length field marks a dedicated chunk.
	lenDedicated = 1<<refLenBits - 1
	// dedicatedMin is the capacity from which a revision list gets a chunk
	// of its own, grown by append, instead of space in a shared chunk.
	dedicatedMin = 16 << 10
)

func makeRef(chunk, off, n int) ref {
	return ref(uint64(chunk)<<(refOffBits+refLenBits) | uint64(off)<<refLenBits | uint64(n))
}

func (r ref) chunk() int      { return int(r >> (refOffBits + refLenBits)) }
func (r ref) off() int        { return int(r>>refLenBits) & (1<<refOffBits - 1) }
func (r ref) n() int          { return int(r) & (1<<refLenBits - 1) }
func (r ref) dedicated() bool { return r.n() == lenDedicated }

// arena stores byte strings in large chunks so that a million keys cost a
// few hundred allocations instead of a million. Shared chunks are only
// appended to; bytes that are no longer referenced are counted as garbage
// and reclaimed by copying the live ones into new chunks, step by step
// (retire; Index.gcRevsStep, Index.gcKeysStep). Dedicated chunks hold one
// large, growing string each.
type arena struct {
	chunks [][]byte
	// cur is the chunk that allocations go to; -1 before the first.
	cur int
	// freeChunks lists chunk indexes whose dedicated chunk was released.
	freeChunks []int
	// live and garbage count bytes of shared chunks that are referenced
	// and no longer referenced; dedicated counts dedicated chunks' capacity.
	live, garbage, dedicated int64
	// reserved counts the bytes of all chunks allocated (shared ones fully).
	reserved int64
	// nextSize is the size of the next shared chunk: they double from
	// minChunkSize up to maxChunkSize.
	nextSize int
	// shared lists the indexes of the shared chunks allocations went to
	// since the last retire; retired lists those a reclaim is emptying,
	// and retiring marks them by index (see retire).
	shared, retired []int
	retiring        []bool
}

func newArena() arena { return arena{cur: -1} }

// bytes returns the n bytes r addresses; the slice aliases the arena.
func (a *arena) bytes(r ref) []byte {
	c := a.chunks[r.chunk()]
	if r.dedicated() {
		return c
	}
	off := r.off()
	return c[off : off+r.n() : off+r.n()]
}

// alloc reserves capacity bytes in a shared chunk and returns a ref of
// length n <= capacity whose bytes (the first n of the reservation) the
// caller fills. capacity must be at most maxChunkSize.
func (a *arena) alloc(n, capacity int) (ref, []byte) {
	if a.cur < 0 || cap(a.chunks[a.cur])-len(a.chunks[a.cur]) < capacity {
		size := max(minChunkSize, a.nextSize, capacity)
		c := make([]byte, 0, size)
		a.reserved += int64(size)
		a.dropTail()
		a.cur = a.newChunkIndex(c)
		a.shared = append(a.shared, a.cur)
		a.nextSize = min(maxChunkSize, 2*size)
	}
	c := a.chunks[a.cur]
	off := len(c)
	a.chunks[a.cur] = c[:off+capacity]
	a.live += int64(capacity)
	return makeRef(a.cur, off, n), a.chunks[a.cur][off : off+n : off+capacity]
}

// allocDedicated stores b in a chunk of its own with room for capacity.
func (a *arena) allocDedicated(b []byte, capacity int) ref {
	c := make([]byte, len(b), capacity)
	copy(c, b)
	a.dedicated += int64(cap(c))
	return makeRef(a.newChunkIndex(c), 0, lenDedicated)
}

func (a *arena) newChunkIndex(c []byte) int {
	if n := len(a.freeChunks); n > 0 {
		i := a.freeChunks[n-1]
		a.freeChunks = a.freeChunks[:n-1]
		a.chunks[i] = c
		return i
	}
	a.chunks = append(a.chunks, c)
	return len(a.chunks) - 1
}

// free marks the capacity bytes that r addresses as garbage, or releases
// r's dedicated chunk.
func (a *arena) free(r ref, capacity int) {
	if r.dedicated() {
		i := r.chunk()
		a.dedicated -= int64(cap(a.chunks[i]))
		a.chunks[i] = nil
		a.freeChunks = append(a.freeChunks, i)
		return
	}
	a.live -= int64(capacity)
	a.garbage += int64(capacity)
}

// appendDedicated appends b to r's dedicated chunk.
func (a *arena) appendDedicated(r ref, b []byte) {
	i := r.chunk()
	old := cap(a.chunks[i])
	a.chunks[i] = append(a.chunks[i], b...)
	a.dedicated += int64(cap(a.chunks[i]) - old)
}

// extendInPlace grows the reservation of r, which must be the last one in
// the current chunk, from oldCap to newCap bytes if the chunk has room.
func (a *arena) extendInPlace(r ref, oldCap, newCap int) bool {
	if r.dedicated() || r.chunk() != a.cur {
		return false
	}
	c := a.chunks[a.cur]
	if r.off()+oldCap != len(c) || r.off()+newCap > cap(c) {
		return false
	}
	a.chunks[a.cur] = c[:r.off()+newCap]
	a.live += int64(newCap - oldCap)
	return true
}

// dropTail leaves the current chunk: its unused tail is lost.
func (a *arena) dropTail() {
	if a.cur >= 0 {
		a.garbage += int64(cap(a.chunks[a.cur]) - len(a.chunks[a.cur]))
		a.cur = -1
	}
}

// retire begins a reclaim of the shared chunks' garbage that the caller
// carries out in steps: the shared chunks that hold strings now are
// retired, later allocations go to new chunks, the caller moves every
// live string out of a retired chunk (isRetired, move), and release then
// frees the retired chunks. Until then both copies' chunks are held.
func (a *arena) retire() {
	a.dropTail()
	a.retiring = make([]bool, len(a.chunks))
	for _, i := range a.shared {
		a.retiring[i] = true
	}
	a.retired, a.shared = a.shared, nil
	// The live strings may be few: new chunks start small again.
	a.nextSize = 0
}

// reclaiming reports whether a reclaim begun by retire is under way.
func (a *arena) reclaiming() bool { return a.retiring != nil }

// isRetired reports whether r is in a chunk retire retired.
func (a *arena) isRetired(r ref) bool {
	i := r.chunk()
	return !r.dedicated() && i < len(a.retiring) && a.retiring[i]
}

// move copies the string r addresses (capacity bytes reserved) into the
// current chunk, frees r, and returns the new ref.
func (a *arena) move(r ref, capacity int) ref {
	nr, dst := a.alloc(r.n(), capacity)
	copy(dst, a.bytes(r))
	a.free(r, capacity)
	return nr
}

// release frees the retired chunks, which no ref may address any more.
// Every byte of them is garbage by then (freed, moved, or a lost tail),
// so the garbage and the reservations shrink by their sizes.
func (a *arena) release() {
	for _, i := range a.retired {
		n := int64(cap(a.chunks[i]))
		a.reserved -= n
		a.garbage -= n
		a.chunks[i] = nil
		a.freeChunks = append(a.freeChunks, i)
	}
	a.retired, a.retiring = nil, nil
}

// heapBytes is the memory the arena holds: every chunk's capacity and the
// chunk table.
func (a *arena) heapBytes() int64 {
	return a.reserved + a.dedicated + int64(cap(a.chunks))*24
}
