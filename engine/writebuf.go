package engine

import (
	"strings"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// tableWriteBufferSize is how many bytes of a table file being written
// collect before they go to the file system in one write.
//
// Pebble writes a table through a 4 KB bufio.Writer (objstorageprovider's
// fileBufferedWritable), so a flush or compaction of 200 MB makes about
// 50,000 write calls, one per 4 KB block; RocksDB's WritableFileWriter
// buffers up to 1 MB. On 200 MB of 2 KB JSON documents those calls cost
// about a third more kernel time per byte than RocksDB's and a goroutine
// handoff each when the system call blocks (docs/benchmarks.md, "Speed
// against RocksDB"). 256 KB takes the call count down 64 times for 256 KB
// per table being written (one flush and max_background_jobs compactions
// at most).
const tableWriteBufferSize = 256 << 10

// tableWriteBufferFS collects the writes to table and blob files (*.sst,
// *.blob: both written block by block) created through it into
// tableWriteBufferSize chunks. Every other file (the WAL, the MANIFEST,
// OPTIONS) passes through untouched, as do reads.
type tableWriteBufferFS struct{ vfs.FS }

func (fs tableWriteBufferFS) Create(name string, category vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.Create(name, category)
	if err != nil || !(strings.HasSuffix(name, ".sst") || strings.HasSuffix(name, ".blob")) {
		return f, err
	}
	return &bufferedTableFile{File: f, buf: make([]byte, 0, tableWriteBufferSize)}, nil
}

// bufferedTableFile holds a table file's writes until tableWriteBufferSize
// bytes have collected. Everything that looks at the file's bytes, size or
// durability (Sync, SyncData, SyncTo, Stat, reads, WriteAt, Close) first
// writes out what is held, so Pebble sees exactly the file it wrote.
type bufferedTableFile struct {
	vfs.File
	buf []byte
}

// Write keeps p (Pebble may reuse p after Write returns, so it is copied).
func (f *bufferedTableFile) Write(p []byte) (int, error) {
	if len(f.buf)+len(p) > cap(f.buf) {
		if err := f.flush(); err != nil {
			return 0, err
		}
		if len(p) >= cap(f.buf) {
			return f.File.Write(p)
		}
	}
	f.buf = append(f.buf, p...)
	return len(p), nil
}

// flush writes out the held bytes.
func (f *bufferedTableFile) flush() error {
	if len(f.buf) == 0 {
		return nil
	}
	n, err := f.File.Write(f.buf)
	// A short write leaves the rest held, so a retry cannot skip bytes.
	f.buf = f.buf[:copy(f.buf, f.buf[n:])]
	return err
}

func (f *bufferedTableFile) Sync() error {
	if err := f.flush(); err != nil {
		return err
	}
	return f.File.Sync()
}

func (f *bufferedTableFile) SyncData() error {
	if err := f.flush(); err != nil {
		return err
	}
	return f.File.SyncData()
}

func (f *bufferedTableFile) SyncTo(length int64) (bool, error) {
	if err := f.flush(); err != nil {
		return false, err
	}
	return f.File.SyncTo(length)
}

func (f *bufferedTableFile) Stat() (vfs.FileInfo, error) {
	if err := f.flush(); err != nil {
		return nil, err
	}
	return f.File.Stat()
}

func (f *bufferedTableFile) Read(p []byte) (int, error) {
	if err := f.flush(); err != nil {
		return 0, err
	}
	return f.File.Read(p)
}

func (f *bufferedTableFile) ReadAt(p []byte, off int64) (int, error) {
	if err := f.flush(); err != nil {
		return 0, err
	}
	return f.File.ReadAt(p, off)
}

func (f *bufferedTableFile) WriteAt(p []byte, off int64) (int, error) {
	if err := f.flush(); err != nil {
		return 0, err
	}
	return f.File.WriteAt(p, off)
}

// Close writes out what is held, then closes; the file is closed even when
// that write fails, and the write's error is returned.
func (f *bufferedTableFile) Close() error {
	err := f.flush()
	if cerr := f.File.Close(); err == nil {
		err = cerr
	}
	return err
}
