package tiering

import (
	"errors"
	"os"
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// tableFile is a table or blob file Pebble is writing. It is created as a
// placeholder in path 0 because Pebble's Create learns only the file's
// name: the level comes from the TableCreated event, which Pebble fires on
// the same goroutine right after Create returns and before the first byte
// is written. At its first write (or Sync, or Close) the file looks its
// level up and, when the level belongs in another path, creates the real
// file there and retargets the placeholder's descriptor onto it with
// dup3(2), so the descriptor number Pebble's syncing wrapper took at
// construction (vfs.NewSyncingFile calls Fd) keeps working and now writes to
// the chosen path. The empty placeholder is then removed.
//
// A file whose level is unknown at its first write (no TableCreated: an
// ingestion copying an external table) stays in path 0 and the mover
// relocates it once the LSM says where it is.
type tableFile struct {
	l        *Layout
	name     string
	num      uint64
	kind     fileKind
	category vfs.DiskWriteCategory

	placed atomic.Bool
	mu     sync.Mutex // guards inner while placing
	inner  vfs.File
	// moved is the file's path when placement retargeted the descriptor:
	// the kernel reports errors under the placeholder's name, which fixErr
	// corrects.
	moved string
	loc   int   // location of the file being written
	off   int64 // bytes written so far (Pebble writes tables sequentially)
}

// fixErr names the file's real path in an *os.PathError from a retargeted
// descriptor.
func (f *tableFile) fixErr(err error) error {
	var pe *os.PathError
	if err != nil && f.moved != "" && errors.As(err, &pe) {
		pe.Path = f.moved
	}
	return err
}

var _ vfs.File = (*tableFile)(nil)

// place picks the file's directory once.
func (f *tableFile) place() {
	if f.placed.Load() {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.placed.Load() {
		return
	}
	var loc int
	f.inner, loc = f.l.placeFile(f.name, f.num, f.category, f.inner)
	if loc != 0 {
		f.moved = f.l.physical(loc, f.name)
	}
	f.loc = loc
	f.placed.Store(true)
}

func (f *tableFile) file() vfs.File {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.inner
}

// Write writes through to the file's path. When the device is full
// (ENOSPC), the table continues in the next path with room (see
// relocateLocked) and the write is retried there, as RocksDB moves on to the
// next db_path; only when no path has room does Pebble see the error.
func (f *tableFile) Write(p []byte) (int, error) {
	f.place()
	f.mu.Lock()
	defer f.mu.Unlock()
	n, err := f.inner.Write(p)
	f.off += int64(n)
	for err != nil && vfs.IsNoSpaceError(err) {
		if rerr := f.relocateLocked(); rerr != nil {
			break
		}
		var m int
		m, err = f.inner.Write(p[n:])
		n += m
		f.off += int64(m)
	}
	f.l.count(func(c *Counters) { c.CreatedBytes += int64(n) })
	return n, f.fixErr(err)
}

func (f *tableFile) WriteAt(p []byte, off int64) (int, error) {
	f.place()
	f.mu.Lock()
	defer f.mu.Unlock()
	n, err := f.inner.WriteAt(p, off)
	f.off = max(f.off, off+int64(n))
	for err != nil && vfs.IsNoSpaceError(err) {
		if rerr := f.relocateLocked(); rerr != nil {
			break
		}
		var m int
		m, err = f.inner.WriteAt(p[n:], off+int64(n))
		n += m
		f.off = max(f.off, off+int64(n))
	}
	f.l.count(func(c *Counters) { c.CreatedBytes += int64(n) })
	return n, f.fixErr(err)
}

func (f *tableFile) Read(p []byte) (int, error)              { return f.file().Read(p) }
func (f *tableFile) ReadAt(p []byte, off int64) (int, error) { return f.file().ReadAt(p, off) }
func (f *tableFile) Stat() (vfs.FileInfo, error)             { return f.file().Stat() }
func (f *tableFile) Prefetch(off, n int64) error             { return f.file().Prefetch(off, n) }

// Fd returns the descriptor; before placement it is the placeholder's,
// which placement retargets in place.
func (f *tableFile) Fd() uintptr { return f.file().Fd() }

func (f *tableFile) Preallocate(off, n int64) error {
	f.place()
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.fixErr(f.inner.Preallocate(off, n))
}

func (f *tableFile) Sync() error {
	f.place()
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.fixErr(f.inner.Sync())
}

func (f *tableFile) SyncData() error {
	f.place()
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.fixErr(f.inner.SyncData())
}

func (f *tableFile) SyncTo(length int64) (bool, error) {
	f.place()
	f.mu.Lock()
	defer f.mu.Unlock()
	full, err := f.inner.SyncTo(length)
	return full, f.fixErr(err)
}

func (f *tableFile) Close() error {
	f.place()
	f.mu.Lock()
	defer f.mu.Unlock()
	var size int64
	if fi, err := f.inner.Stat(); err == nil {
		size = fi.Size()
	}
	err := f.fixErr(f.inner.Close())
	f.l.mu.Lock()
	if e, ok := f.l.files[f.name]; ok && e.creating {
		e.creating = false
		e.size = size
		f.l.fileClosedLocked(f.num, e)
	}
	f.l.mu.Unlock()
	return err
}

// placeFile moves a new file from its placeholder in path 0 to the path its
// level belongs in, returning the vfs.File to write through and its
// location.
func (l *Layout) placeFile(name string, num uint64, category vfs.DiskWriteCategory, ph vfs.File) (vfs.File, int) {
	to, est, known := l.choosePath(name, num)
	if !known {
		l.count(func(c *Counters) { c.PlacedInFirstPath++ })
		return ph, 0
	}
	l.count(func(c *Counters) { c.PlacedAtCreation++ })
	to = l.withRoom(to, est)
	if to == 0 {
		return ph, 0
	}
	l.mu.Lock()
	e, ok := l.files[name]
	live := ok && e.creating
	l.mu.Unlock()
	if !live {
		return ph, 0 // removed by Pebble before its first write
	}
	dst := l.physical(to, name)
	l.markDirty(to)
	real, err := l.base.Create(dst, category)
	if err != nil {
		l.errorf("tiering: create %s: %v; the table stays in %s for the mover", dst, err, l.locs[0].dir)
		return ph, 0
	}
	out, err := retarget(ph, real)
	if err != nil {
		_ = real.Close()
		_ = l.base.Remove(dst)
		l.errorf("tiering: place %s in %s: %v; the table stays in %s for the mover", name, l.locs[to].dir, err, l.locs[0].dir)
		return ph, 0
	}
	l.mu.Lock()
	if e, ok := l.files[name]; ok && e.creating {
		e.loc = to
	}
	l.mu.Unlock()
	if err := l.base.Remove(l.physical(0, name)); err != nil {
		l.errorf("tiering: remove placeholder %s: %v", l.physical(0, name), err)
	}
	return out, to
}
