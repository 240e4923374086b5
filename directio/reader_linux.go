//go:build linux

package directio

import (
	"errors"
	"io"
	"os"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// reader is a table file opened for reading with O_DIRECT. ReadAt is safe
// for concurrent use, as io.ReaderAt requires.
//
// Readahead: a chunk is an immutable aligned range of the file read in one
// request; the reader keeps the last one. A sequential reader (opened with
// vfs.SequentialReadsOption) reads a chunk of FS.readahead bytes whenever a
// read smaller than that misses it; Prefetch reads the requested range
// (capped) into a chunk on any reader. Concurrent readers replace each
// other's chunk, which costs reads, never correctness. A shared reader lives
// as long as Pebble keeps its table open, so the chunks of shared readers
// are bounded FS-wide (chunkRing); a sequential reader is closed with its
// iterator and keeps its chunk until then.
type reader struct {
	d          *FS
	f          vfs.File // owns the descriptor
	fd         int
	name       string
	sequential bool

	chunk  atomic.Pointer[chunk]
	closed atomic.Bool
	pos    int64 // Read's offset; Read is not for concurrent use
}

// serve copies p's bytes at off from c, if c has them (or has them up to a
// known end of file).
func (c *chunk) serve(p []byte, off int64) (n int, ok bool, err error) {
	end := c.off + int64(len(c.data))
	if off < c.off || off > end || (off == end && !c.eof) {
		return 0, false, nil
	}
	if off+int64(len(p)) > end && !c.eof {
		return 0, false, nil
	}
	n = copy(p, c.data[off-c.off:])
	if n < len(p) {
		return n, true, io.EOF
	}
	return n, true, nil
}

var _ vfs.File = (*reader)(nil)

func (r *reader) check(op string) error {
	if r.closed.Load() {
		return &os.PathError{Op: op, Path: r.name, Err: os.ErrClosed}
	}
	return nil
}

// ReadAt reads len(p) bytes at off, with os.File.ReadAt's results.
func (r *reader) ReadAt(p []byte, off int64) (int, error) {
	if err := r.check("read"); err != nil {
		return 0, err
	}
	if off < 0 {
		return 0, &os.PathError{Op: "readat", Path: r.name, Err: errors.New("negative offset")}
	}
	if len(p) == 0 {
		return 0, nil
	}
	if c := r.chunk.Load(); c != nil {
		if n, ok, err := c.serve(p, off); ok {
			return n, err
		}
	}
	if ra := r.d.readahead; r.sequential && ra > 0 && int64(len(p)) < ra {
		a := r.d.align
		start := alignDown(off, a)
		c, err := r.fill(start, max(ra, alignUp(off+int64(len(p)), a)-start))
		if err != nil {
			return 0, err
		}
		if n, ok, err := c.serve(p, off); ok {
			return n, err
		}
		// off is past the end of the file.
		return 0, io.EOF
	}
	return r.d.readDirect(&r.d.stats, r.f, r.name, r.fd, p, off)
}

// fill reads the aligned range [off, off+size) into a new chunk and keeps it.
func (r *reader) fill(off, size int64) (*chunk, error) {
	buf := alignedBuffer(int(size), int(r.d.align))
	n, err := r.d.preadFull(&r.d.stats, r.f, r.name, r.fd, buf, off)
	if err != nil {
		return nil, err
	}
	c := &chunk{off: off, data: buf[:n], eof: n < len(buf)}
	r.chunk.Store(c)
	if !r.sequential {
		r.d.chunks.keep(&r.chunk, c)
	}
	return c, nil
}

// Prefetch reads [offset, offset+length), rounded out to the alignment and
// capped at the readahead size, into the reader's chunk, so that the reads
// Pebble's readahead announced are served from memory.
func (r *reader) Prefetch(offset, length int64) error {
	ra := r.d.readahead
	if ra <= 0 || length <= 0 || r.check("prefetch") != nil {
		return nil
	}
	a := r.d.align
	start := alignDown(offset, a)
	end := alignUp(offset+min(length, ra), a)
	if c := r.chunk.Load(); c != nil && start >= c.off && (end <= c.off+int64(len(c.data)) || c.eof) {
		return nil
	}
	_, err := r.fill(start, end-start)
	return err
}

// Read reads at the file offset and advances it, as os.File.Read.
func (r *reader) Read(p []byte) (int, error) {
	n, err := r.ReadAt(p, r.pos)
	r.pos += int64(n)
	if n > 0 && err == io.EOF {
		err = nil
	}
	return n, err
}

// Close closes the file.
func (r *reader) Close() error {
	if r.closed.Swap(true) {
		return &os.PathError{Op: "close", Path: r.name, Err: os.ErrClosed}
	}
	r.chunk.Store(nil)
	return r.f.Close()
}

// Write fails as on any file opened for reading.
func (r *reader) Write(p []byte) (int, error) { return r.f.Write(p) }

// WriteAt fails as on any file opened for reading.
func (r *reader) WriteAt(p []byte, off int64) (int, error) { return r.f.WriteAt(p, off) }

// Preallocate passes through.
func (r *reader) Preallocate(offset, length int64) error { return r.f.Preallocate(offset, length) }

// Stat passes through.
func (r *reader) Stat() (vfs.FileInfo, error) { return r.f.Stat() }

// Sync passes through.
func (r *reader) Sync() error { return r.f.Sync() }

// SyncData passes through.
func (r *reader) SyncData() error { return r.f.SyncData() }

// SyncTo passes through.
func (r *reader) SyncTo(length int64) (bool, error) { return r.f.SyncTo(length) }

// Fd returns the real (O_DIRECT) descriptor.
func (r *reader) Fd() uintptr { return r.f.Fd() }
