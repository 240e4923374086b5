package directio

import (
	"math/bits"
	"sync"
	"sync/atomic"
	"unsafe"
)

// maxPooledBuffer is the largest buffer a bufferPool keeps.
const maxPooledBuffer = 1 << 20

// alignedBuffer returns a zeroed buffer of size bytes whose first byte's
// address is a multiple of align (a power of two). It over-allocates by
// align and slices at the first aligned offset; the capacity is size, so an
// append cannot move it off the alignment silently.
func alignedBuffer(size, align int) []byte {
	b := make([]byte, size+align)
	off := int(uintptr(unsafe.Pointer(&b[0])) & uintptr(align-1))
	if off != 0 {
		off = align - off
	}
	return b[off : off+size : off+size]
}

// isAligned reports whether p's address is a multiple of align.
func isAligned(p []byte, align int64) bool {
	return len(p) == 0 || uintptr(unsafe.Pointer(&p[0]))&uintptr(align-1) == 0
}

// bufferPool hands out aligned buffers in power-of-two size classes from the
// alignment up to maxPooledBuffer; larger buffers are allocated each time.
type bufferPool struct {
	align int
	pools [bits.UintSize]sync.Pool // index: log2 of the class size
}

// get returns an aligned buffer of at least size bytes (len == cap == the
// class size). Its contents are arbitrary.
func (p *bufferPool) get(size int) *[]byte {
	if size < p.align {
		size = p.align
	}
	if size > maxPooledBuffer {
		b := alignedBuffer(size, p.align)
		return &b
	}
	class := bits.Len(uint(size - 1)) // 1<<class >= size
	if b, ok := p.pools[class].Get().(*[]byte); ok {
		return b
	}
	b := alignedBuffer(1<<class, p.align)
	return &b
}

// put returns a buffer from get.
func (p *bufferPool) put(b *[]byte) {
	n := len(*b)
	if n > maxPooledBuffer || n&(n-1) != 0 {
		return
	}
	p.pools[bits.Len(uint(n-1))].Put(b)
}

// chunk is a readahead chunk: the file's bytes [off, off+len(data)), read in
// one request and never modified; eof says the file ends at off+len(data).
type chunk struct {
	off  int64
	data []byte
	eof  bool
}

// sharedChunks bounds the readahead chunks that readers shared by many
// iterators (Pebble's file cache keeps one per open table, for as long as
// the table is open) may hold in all: 16 x 256 KiB by default.
const sharedChunks = 16

// chunkRing remembers the last sharedChunks chunks kept by shared readers
// and drops the oldest when a new one is kept, so that idle tables do not
// pin their last chunk.
type chunkRing struct {
	mu   sync.Mutex
	ring [sharedChunks]struct {
		holder *atomic.Pointer[chunk]
		c      *chunk
	}
	next int
}

// keep records that holder now holds c and drops the chunk kept
// sharedChunks calls ago, unless its holder has replaced it since.
func (r *chunkRing) keep(holder *atomic.Pointer[chunk], c *chunk) {
	r.mu.Lock()
	old := r.ring[r.next]
	r.ring[r.next].holder, r.ring[r.next].c = holder, c
	r.next = (r.next + 1) % sharedChunks
	r.mu.Unlock()
	if old.holder != nil {
		old.holder.CompareAndSwap(old.c, nil)
	}
}
