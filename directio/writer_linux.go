//go:build linux

package directio

import (
	"errors"
	"io"
	"os"

	"github.com/cockroachdb/pebble/v2/vfs"
	"golang.org/x/sys/unix"
)

// writer is a table file being written with O_DIRECT.
//
// Invariants, with A the alignment and buf[:n] the staged bytes:
//  1. off is a multiple of A, and the file's bytes [0, off) are on disk.
//  2. The file's logical content is [0, off) on disk followed by buf[:n];
//     its logical size is off+n.
//  3. buf[:flushed] is also on disk at off (written padded by a Sync), and
//     the file's length on disk is off+flushed when flushed > 0 or after a
//     Sync; otherwise it is at least off.
//
// Example (A = 4096, stage = 1 MiB): Write 5000 bytes -> off 0, n 5000,
// nothing on disk. Sync -> pwrite 8192 bytes (5000 + zero padding) at 0,
// ftruncate to 5000, keep the 904-byte tail: off 4096, n 904, flushed 904.
// Write 3192 bytes -> n 4096. Close -> pwrite 4096 bytes at 4096 (rewriting
// the partial block), no truncate needed: the file is 8192 bytes, exactly as
// written.
type writer struct {
	d     *FS
	f     vfs.File // owns the descriptor
	fd    int
	name  string
	stats *counters // nil for a staged writer without O_DIRECT

	bufp    *[]byte
	buf     []byte
	off     int64
	n       int
	flushed int
	err     error // sticky: once a write fails, the file is unusable
	closed  bool
}

var _ vfs.File = (*writer)(nil)

// newWriter wraps f, a new file with a real descriptor; direct says whether
// the descriptor has O_DIRECT (for Stats).
func newWriter(d *FS, name string, f vfs.File, stage int, direct bool) *writer {
	bp := d.bufs.get(stage)
	w := &writer{d: d, f: f, fd: int(f.Fd()), name: name, bufp: bp, buf: *bp}
	if direct {
		w.stats = &d.stats
	}
	return w
}

func (w *writer) check(op string) error {
	if w.closed {
		return &os.PathError{Op: op, Path: w.name, Err: os.ErrClosed}
	}
	return w.err
}

// Write stages p and writes every full stage buffer.
func (w *writer) Write(p []byte) (int, error) {
	if err := w.check("write"); err != nil {
		return 0, err
	}
	written := 0
	for len(p) > 0 {
		c := copy(w.buf[w.n:], p)
		w.n += c
		p = p[c:]
		if w.n == len(w.buf) {
			if err := w.d.pwriteFull(w.stats, w.f, w.name, w.fd, w.buf, w.off); err != nil {
				w.err = err
				return written, err
			}
			w.off += int64(w.n)
			w.n, w.flushed = 0, 0
		}
		written += c
	}
	return written, nil
}

// flushTail writes the staged bytes padded to the alignment, truncates the
// file to its logical size, and keeps the unaligned tail staged.
func (w *writer) flushTail() error {
	if w.n == w.flushed {
		return nil
	}
	a := w.d.align
	padded := int(alignUp(int64(w.n), a))
	clear(w.buf[w.n:padded])
	if err := w.d.pwriteFull(w.stats, w.f, w.name, w.fd, w.buf[:padded], w.off); err != nil {
		w.err = err
		return err
	}
	if padded != w.n {
		if err := unix.Ftruncate(w.fd, w.off+int64(w.n)); err != nil {
			w.err = &os.PathError{Op: "truncate", Path: w.name, Err: err}
			return w.err
		}
	}
	full := int(alignDown(int64(w.n), a))
	copy(w.buf, w.buf[full:w.n])
	w.off += int64(full)
	w.n -= full
	w.flushed = w.n
	return nil
}

// Sync writes the staged bytes and fsyncs.
func (w *writer) Sync() error {
	if err := w.check("sync"); err != nil {
		return err
	}
	if err := w.flushTail(); err != nil {
		return err
	}
	return w.f.Sync()
}

// SyncData writes the staged bytes and fdatasyncs.
func (w *writer) SyncData() error {
	if err := w.check("sync"); err != nil {
		return err
	}
	if err := w.flushTail(); err != nil {
		return err
	}
	return w.f.SyncData()
}

// SyncTo does nothing: the bytes written so far bypassed the page cache, so
// there is no dirty data to start writeback for, and SyncTo promises no
// durability. It never reports a full sync.
func (w *writer) SyncTo(length int64) (fullSync bool, err error) {
	return false, w.check("sync")
}

// Close writes the staged bytes (padded, then truncated) and closes the
// file. Like os.File, it does not sync.
func (w *writer) Close() error {
	if w.closed {
		return &os.PathError{Op: "close", Path: w.name, Err: os.ErrClosed}
	}
	err := w.err
	if err == nil {
		err = w.flushTail()
	}
	w.closed = true
	w.d.bufs.put(w.bufp)
	w.bufp, w.buf = nil, nil
	if cerr := w.f.Close(); err == nil {
		err = cerr
	}
	return err
}

// Read reads at the file offset, which writes leave at the end of the file,
// as os.File's shared offset does: it returns io.EOF.
func (w *writer) Read(p []byte) (int, error) {
	if err := w.check("read"); err != nil {
		return 0, err
	}
	if len(p) == 0 {
		return 0, nil
	}
	return 0, io.EOF
}

// ReadAt reads written bytes, from the disk below the staging buffer and
// from the buffer above. It must not run concurrently with Write or Sync.
func (w *writer) ReadAt(p []byte, off int64) (int, error) {
	if err := w.check("read"); err != nil {
		return 0, err
	}
	if off < 0 {
		return 0, &os.PathError{Op: "readat", Path: w.name, Err: errors.New("negative offset")}
	}
	if len(p) == 0 {
		return 0, nil
	}
	n := 0
	if off < w.off {
		want := min(int64(len(p)), w.off-off)
		m, err := w.d.readDirect(w.stats, w.f, w.name, w.fd, p[:want], off)
		n += m
		if err != nil {
			return n, err
		}
	}
	if pos := off + int64(n); n < len(p) && pos < w.off+int64(w.n) {
		n += copy(p[n:], w.buf[pos-w.off:w.n])
	}
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// WriteAt is not supported: Pebble writes table files sequentially.
func (w *writer) WriteAt(p []byte, off int64) (int, error) {
	return 0, &os.PathError{Op: "writeat", Path: w.name, Err: errors.ErrUnsupported}
}

// Preallocate passes through (fallocate with FALLOC_FL_KEEP_SIZE).
func (w *writer) Preallocate(offset, length int64) error {
	if err := w.check("preallocate"); err != nil {
		return err
	}
	return w.f.Preallocate(offset, length)
}

// Stat reports the logical size, staged bytes included.
func (w *writer) Stat() (vfs.FileInfo, error) {
	if err := w.check("stat"); err != nil {
		return nil, err
	}
	fi, err := w.f.Stat()
	if err != nil {
		return nil, err
	}
	return sizedFileInfo{FileInfo: fi, size: w.off + int64(w.n)}, nil
}

// Prefetch does nothing.
func (w *writer) Prefetch(offset, length int64) error { return nil }

// Fd returns the real (O_DIRECT) descriptor; see the package comment.
func (w *writer) Fd() uintptr { return w.f.Fd() }

// sizedFileInfo overrides the size of a FileInfo.
type sizedFileInfo struct {
	vfs.FileInfo
	size int64
}

func (fi sizedFileInfo) Size() int64 { return fi.size }
