package directio

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2/vfs"
)

const (
	// DefaultAlignment is the alignment used when Options.Alignment is 0.
	DefaultAlignment = 4096
	// DefaultReadaheadSize is the readahead chunk used when
	// Options.ReadaheadSize is 0; it matches Pebble's maximum readahead.
	DefaultReadaheadSize = 256 << 10
	// writeStageSize is the aligned staging buffer of a direct writer, as
	// RocksDB's writable_file_max_buffer_size.
	writeStageSize = 1 << 20
	// maxAlignment bounds Options.Alignment.
	maxAlignment = 1 << 20
)

// ErrUnsupported is matched (errors.Is) by every error that says a directory
// cannot do direct I/O: a *ProbeError.
var ErrUnsupported = errors.New("directio: direct I/O not supported")

// errProbeFile marks a probe that could not create its temporary file.
var errProbeFile = errors.New("cannot create the probe file")

// ProbeError says that the filesystem holding Path refuses direct I/O. It
// matches ErrUnsupported.
type ProbeError struct {
	// Path is the directory (or file) that was probed.
	Path string
	// Err is the cause: the errno of the refused open or write, or a
	// description of the refusal.
	Err error
}

// Error implements error.
func (e *ProbeError) Error() string {
	return fmt.Sprintf("directio: %s: the filesystem refuses O_DIRECT: %v", e.Path, e.Err)
}

// Unwrap returns the cause.
func (e *ProbeError) Unwrap() error { return e.Err }

// Is reports whether target is ErrUnsupported.
func (e *ProbeError) Is(target error) bool { return target == ErrUnsupported }

// Logger receives the package's one kind of log line: a directory falling
// back to buffered I/O. pebble.Logger satisfies it.
type Logger interface {
	Infof(format string, args ...interface{})
}

// Options says which table I/O goes direct.
type Options struct {
	// Reads opens table files (".sst") for reading with O_DIRECT, as RocksDB's
	// use_direct_reads. The default value is false.
	Reads bool
	// Writes writes the table files of flushes and compactions with O_DIRECT,
	// as RocksDB's use_direct_io_for_flush_and_compaction. The default value
	// is false.
	Writes bool
	// Alignment is the unit, in bytes, of direct I/O offsets, lengths and
	// buffer addresses: a power of two from 512 to 1 MiB, and a multiple of
	// the device's logical block size. 0 means DefaultAlignment (see the
	// package comment for why it is not detected). The default value is 0.
	Alignment int
	// ReadaheadSize is the chunk, in bytes, that a direct reader opened for
	// sequential reads (compaction inputs) reads at a time and keeps, and the
	// most a Prefetch call reads; rounded up to Alignment. Readers opened
	// without SequentialReadsOption (one per open table) hold at most 16
	// such chunks in all. 0 means DefaultReadaheadSize; negative disables
	// readahead. The default value is 0.
	ReadaheadSize int
	// Fallback makes a directory whose filesystem refuses O_DIRECT use
	// buffered I/O, reported in Stats().FallbackPaths and one log line,
	// instead of failing Probe and every direct open there. The default
	// value is false.
	Fallback bool
	// Logger receives the fallback log line; nil is silent. The default
	// value is nil.
	Logger Logger
}

// Stats counts direct I/O. Counts and bytes are of O_DIRECT system calls, so
// bytes include the rounding to the alignment (and, for writes, a partial
// last block rewritten after a mid-file Sync).
type Stats struct {
	// DirectReads is the number of O_DIRECT pread calls.
	DirectReads int64
	// DirectReadBytes is the number of bytes those calls returned.
	DirectReadBytes int64
	// DirectWrites is the number of O_DIRECT pwrite calls.
	DirectWrites int64
	// DirectWriteBytes is the number of bytes those calls wrote.
	DirectWriteBytes int64
	// FallbackPaths lists, sorted, the directories that use buffered I/O
	// because their filesystem refuses O_DIRECT (only with Options.Fallback).
	FallbackPaths []string
}

type counters struct {
	reads, readBytes, writes, writeBytes atomic.Int64
}

func (c *counters) read(n int) {
	c.reads.Add(1)
	c.readBytes.Add(int64(n))
}

func (c *counters) write(n int) {
	c.writes.Add(1)
	c.writeBytes.Add(int64(n))
}

// FS wraps a vfs.FS and opens table files for direct I/O as its Options say.
// Everything else passes through to the wrapped FS. It is safe for
// concurrent use.
type FS struct {
	innerFS // the wrapped FS; all methods but Create, Open and Unwrap pass through

	opts      Options
	align     int64
	readahead int64 // 0: no readahead
	stats     counters
	bufs      bufferPool
	chunks    chunkRing // readahead chunks of shared readers

	stage int // bytes a writer stages; tests make it small

	mu   sync.Mutex
	dirs map[string]dirState // probe result per directory
}

// innerFS names the embedded FS so that it stays unexported.
type innerFS = vfs.FS

type dirState struct {
	fallback bool  // use buffered I/O
	err      error // non-nil: refuse direct opens (no Fallback)
}

var _ vfs.FS = (*FS)(nil)

// NewFS wraps fs. An invalid Alignment is reported by Probe and by every
// direct open; opts is copied.
func NewFS(fs vfs.FS, opts Options) *FS {
	d := &FS{innerFS: fs, opts: opts, stage: writeStageSize, dirs: make(map[string]dirState)}
	d.align = int64(opts.Alignment)
	if d.align == 0 {
		d.align = DefaultAlignment
	}
	switch {
	case opts.ReadaheadSize == 0:
		d.readahead = DefaultReadaheadSize
	case opts.ReadaheadSize > 0:
		d.readahead = int64(opts.ReadaheadSize)
	}
	if validAlignment(d.align) == nil && d.readahead > 0 {
		d.readahead = alignUp(d.readahead, d.align)
	}
	d.bufs.align = int(d.align)
	return d
}

// Unwrap returns the wrapped FS.
func (d *FS) Unwrap() vfs.FS { return d.innerFS }

// Stats returns the counts so far.
func (d *FS) Stats() Stats {
	s := Stats{
		DirectReads:      d.stats.reads.Load(),
		DirectReadBytes:  d.stats.readBytes.Load(),
		DirectWrites:     d.stats.writes.Load(),
		DirectWriteBytes: d.stats.writeBytes.Load(),
	}
	d.mu.Lock()
	for dir, st := range d.dirs {
		if st.fallback {
			s.FallbackPaths = append(s.FallbackPaths, dir)
		}
	}
	d.mu.Unlock()
	slices.Sort(s.FallbackPaths)
	return s
}

// Probe checks that dir can do direct I/O with d's alignment (see the
// package function Probe), once per directory. It returns nil when neither
// Reads nor Writes is set, and, with Fallback, when dir falls back to
// buffered I/O (reported in Stats and the log). Call it at open for every
// directory that holds table files, so a refusal surfaces there and not at
// the first flush.
func (d *FS) Probe(dir string) error {
	if !d.opts.Reads && !d.opts.Writes {
		return nil
	}
	_, err := d.checkDir(dir, true)
	return err
}

// checkDir probes dir once and reports whether it falls back to buffered
// I/O, or why it cannot be used. Other errors (an invalid alignment, a
// missing directory) are returned and not remembered, except that a probe
// file that cannot be created (a read-only directory, a full disk) is, when
// not strict, taken as a pass: each file's own switch to O_DIRECT then
// decides, and opening the tables for reading still works.
func (d *FS) checkDir(dir string, strict bool) (fallback bool, err error) {
	dir = filepath.Clean(dir)
	d.mu.Lock()
	defer d.mu.Unlock()
	if st, ok := d.dirs[dir]; ok {
		return st.fallback, st.err
	}
	err = Probe(dir, int(d.align))
	switch {
	case err == nil:
		d.dirs[dir] = dirState{}
		return false, nil
	case errors.Is(err, ErrUnsupported) && d.opts.Fallback:
		d.dirs[dir] = dirState{fallback: true}
		d.logFallback(dir, err)
		return true, nil
	case errors.Is(err, ErrUnsupported):
		d.dirs[dir] = dirState{err: err}
		return false, err
	case !strict && errors.Is(err, errProbeFile):
		d.dirs[dir] = dirState{}
		return false, nil
	default:
		return false, err
	}
}

// markFallback records that a file in dir was refused O_DIRECT after the
// directory probe passed (for example a different filesystem mounted below
// it). With Fallback the directory falls back; otherwise err is returned.
func (d *FS) markFallback(dir string, err error) error {
	if !d.opts.Fallback || !errors.Is(err, ErrUnsupported) {
		return err
	}
	dir = filepath.Clean(dir)
	d.mu.Lock()
	st := d.dirs[dir]
	first := !st.fallback
	d.dirs[dir] = dirState{fallback: true}
	d.mu.Unlock()
	if first {
		d.logFallback(dir, err)
	}
	return nil
}

// logFallback writes the one log line of a directory falling back.
func (d *FS) logFallback(dir string, err error) {
	if d.opts.Logger == nil {
		return
	}
	var pe *ProbeError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	d.opts.Logger.Infof("directio: %s: table files use buffered I/O: the filesystem refuses O_DIRECT: %v", dir, err)
}

// Create implements vfs.FS. A table file created by a flush or compaction is
// written with O_DIRECT when Options.Writes is set.
func (d *FS) Create(name string, category vfs.DiskWriteCategory) (vfs.File, error) {
	if !d.opts.Writes || !isTable(name) || !directCategory(category) {
		return d.innerFS.Create(name, category)
	}
	dir := d.innerFS.PathDir(name)
	fallback, err := d.checkDir(dir, false)
	if err != nil {
		return nil, err
	}
	f, err := d.innerFS.Create(name, category)
	if err != nil {
		return nil, err
	}
	if fallback {
		return d.stagedWriter(name, f), nil
	}
	df, err := d.newWriter(name, f)
	if err != nil {
		if err = d.markFallback(dir, err); err == nil {
			return d.stagedWriter(name, f), nil
		}
		_ = f.Close()
		return nil, err
	}
	return df, nil
}

// Open implements vfs.FS. A table file is opened with O_DIRECT when
// Options.Reads is set; with vfs.SequentialReadsOption among opts it reads
// ahead (see Options.ReadaheadSize).
func (d *FS) Open(name string, opts ...vfs.OpenOption) (vfs.File, error) {
	if !d.opts.Reads || !isTable(name) {
		return d.innerFS.Open(name, opts...)
	}
	dir := d.innerFS.PathDir(name)
	if fallback, err := d.checkDir(dir, false); err != nil {
		return nil, err
	} else if fallback {
		return d.innerFS.Open(name, opts...)
	}
	f, err := d.innerFS.Open(name)
	if err != nil {
		return nil, err
	}
	sequential := slices.Contains(opts, vfs.SequentialReadsOption)
	df, err := d.newReader(name, f, sequential)
	if err != nil {
		if err = d.markFallback(dir, err); err == nil {
			for _, o := range opts {
				o.Apply(f)
			}
			return f, nil
		}
		_ = f.Close()
		return nil, err
	}
	for _, o := range opts {
		o.Apply(df)
	}
	return df, nil
}

// isTable reports whether name is a Pebble table file.
func isTable(name string) bool { return strings.HasSuffix(name, ".sst") }

// directCategory reports whether category is one Pebble gives flush and
// compaction outputs (compaction.go, getDiskWriteCategoryForCompaction).
func directCategory(c vfs.DiskWriteCategory) bool {
	switch c {
	case "pebble-memtable-flush", "pebble-compaction", "sql-row-spill":
		return true
	}
	return false
}

// validAlignment checks an alignment in bytes.
func validAlignment(a int64) error {
	if a < 512 || a > maxAlignment || a&(a-1) != 0 {
		return fmt.Errorf("directio: alignment = %d: must be a power of two from 512 to %d", a, maxAlignment)
	}
	return nil
}

func alignDown(x, a int64) int64 { return x &^ (a - 1) }
func alignUp(x, a int64) int64   { return (x + a - 1) &^ (a - 1) }
