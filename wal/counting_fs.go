package wal

import (
	"io"
	"os"
	"strings"
	"sync/atomic"

	"github.com/cockroachdb/errors/oserror"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// Stats counts what the WAL cost at the file system.
type Stats struct {
	// Files is the number of WAL files created (recycled files included).
	Files int64
	// BytesWritten is the number of bytes written to WAL files.
	BytesWritten int64
	// Syncs is the number of Sync/SyncData/SyncTo calls on WAL files: each is
	// one durability point on the device.
	Syncs int64
}

// CountingFS is a vfs.FS that passes everything through and counts bytes
// written to and syncs of WAL files (names ending in ".log").
//
// With the WAL disabled it also keeps WAL files off the disk: Pebble still
// creates one empty log file per open when DisableWAL is set (and never
// writes a record to it), so a disabled CountingFS gives Pebble a file that
// discards what is written and exists nowhere, and treats the removal of
// such a missing log as done. Logs already on disk from earlier opens are
// read and removed as usual.
type CountingFS struct {
	vfs.FS
	disabled            bool
	files, bytes, syncs atomic.Int64
}

// NewCountingFS wraps fs. With walDisabled, new WAL files are discarded (see
// CountingFS).
func NewCountingFS(fs vfs.FS, walDisabled bool) *CountingFS {
	return &CountingFS{FS: fs, disabled: walDisabled}
}

// Stats returns the counts so far.
func (fs *CountingFS) Stats() Stats {
	return Stats{Files: fs.files.Load(), BytesWritten: fs.bytes.Load(), Syncs: fs.syncs.Load()}
}

// IsWALFile reports whether name is a Pebble WAL file name.
func IsWALFile(name string) bool { return strings.HasSuffix(name, ".log") }

// Create implements vfs.FS.
func (fs *CountingFS) Create(name string, category vfs.DiskWriteCategory) (vfs.File, error) {
	if fs.disabled && IsWALFile(name) {
		return discardFile{}, nil
	}
	f, err := fs.FS.Create(name, category)
	return fs.wrap(name, f, err)
}

// Remove implements vfs.FS.
func (fs *CountingFS) Remove(name string) error {
	err := fs.FS.Remove(name)
	if err != nil && fs.disabled && IsWALFile(name) && oserror.IsNotExist(err) {
		return nil // a discarded log never existed
	}
	return err
}

// ReuseForWrite implements vfs.FS; Pebble recycles WAL files through it.
func (fs *CountingFS) ReuseForWrite(oldname, newname string, category vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.ReuseForWrite(oldname, newname, category)
	return fs.wrap(newname, f, err)
}

// OpenReadWrite implements vfs.FS.
func (fs *CountingFS) OpenReadWrite(name string, category vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	f, err := fs.FS.OpenReadWrite(name, category, opts...)
	return fs.wrap(name, f, err)
}

func (fs *CountingFS) wrap(name string, f vfs.File, err error) (vfs.File, error) {
	if err != nil || !IsWALFile(name) {
		return f, err
	}
	fs.files.Add(1)
	return &countingFile{File: f, fs: fs}, nil
}

// Unwrap returns the wrapped file system.
func (fs *CountingFS) Unwrap() vfs.FS { return fs.FS }

type countingFile struct {
	vfs.File
	fs *CountingFS
}

func (f *countingFile) Write(p []byte) (int, error) {
	n, err := f.File.Write(p)
	f.fs.bytes.Add(int64(n))
	return n, err
}

func (f *countingFile) WriteAt(p []byte, off int64) (int, error) {
	n, err := f.File.WriteAt(p, off)
	f.fs.bytes.Add(int64(n))
	return n, err
}

func (f *countingFile) Sync() error {
	f.fs.syncs.Add(1)
	return f.File.Sync()
}

func (f *countingFile) SyncData() error {
	f.fs.syncs.Add(1)
	return f.File.SyncData()
}

func (f *countingFile) SyncTo(length int64) (bool, error) {
	f.fs.syncs.Add(1)
	return f.File.SyncTo(length)
}

// discardFile is the WAL file of a database whose WAL is disabled: writes
// vanish, it has no descriptor and reads find nothing.
type discardFile struct{}

func (discardFile) Close() error                           { return nil }
func (discardFile) Read([]byte) (int, error)               { return 0, io.EOF }
func (discardFile) ReadAt([]byte, int64) (int, error)      { return 0, io.EOF }
func (discardFile) Write(p []byte) (int, error)            { return len(p), nil }
func (discardFile) WriteAt(p []byte, _ int64) (int, error) { return len(p), nil }
func (discardFile) Preallocate(int64, int64) error         { return nil }
func (discardFile) Stat() (vfs.FileInfo, error)            { return nil, os.ErrNotExist }
func (discardFile) Sync() error                            { return nil }
func (discardFile) SyncTo(int64) (bool, error)             { return true, nil }
func (discardFile) SyncData() error                        { return nil }
func (discardFile) Prefetch(int64, int64) error            { return nil }
func (discardFile) Fd() uintptr                            { return vfs.InvalidFd }
