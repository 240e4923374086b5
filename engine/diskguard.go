package engine

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stratadb/strata/config"
)

// ErrNoSpace is returned by writes (Put, Delete, DeleteRange, Batch
// commits, Flush, Compact, CompactAll, WaitForCompactions, Checkpoint,
// DeleteSorted and the span writes) while the disk guard is tripped: the
// file system of db_path or wal_dir has less free space than
// DiskGuardOptions.MinFreeBytes, or it answered a write with ENOSPC or
// EDQUOT. The error wraps the cause (the file system's error
// where there was one, so errors.Is(err, syscall.ENOSPC) holds too). Reads
// go on; writes are accepted again, without a reopen, once space returns
// (DiskStatus, DiskGuardOptions.OnDiskFull). A server maps it to etcd's
// NOSPACE alarm.
var ErrNoSpace = errors.New("engine: no space left on device")

// ReserveFileName is the name of the reserve file the disk guard keeps in
// db_path (and wal_dir when separate): space set aside while the disk has
// room and given back when it runs out (see diskGuard). Pebble ignores the
// file; deleting it by hand is harmless (the guard makes it again).
const ReserveFileName = "STRATA-RESERVE"

// DiskGuardOptions configure the disk guard of a DB opened for writing
// (see diskGuard for the design). The zero value is the default.
type DiskGuardOptions struct {
	// ReserveBytes is the size of the reserve file kept in db_path and,
	// when separate, in wal_dir, released when the guard trips so that
	// the work in flight (the flush of every memtable, the MANIFEST, the
	// WAL) has room to finish. 0 means the default: twice the bytes of all
	// the memtables Pebble may hold (memtable_size_mb x
	// max_write_buffer_number) plus 16 MiB, capped at 5% of the file
	// system's size and at 1 GiB (CockroachDB's ballast cap); none where
	// the file system cannot report its size (a vfs.MemFS). The file is
	// allocated with fallocate on Linux, written with zeros elsewhere.
	// Negative means no reserve. The default value is 0.
	ReserveBytes int64
	// MinFreeBytes is the free-space floor: the guard trips when the free
	// space on db_path's or wal_dir's file system falls below it (it trips
	// on ENOSPC or EDQUOT whatever the floor). It clears once the free space
	// is at least MinFreeBytes + ReserveBytes + MinFreeBytes/2, so that
	// the reserve can be made again with room to spare. 0 means the
	// default, half of ReserveBytes; negative means trip on ENOSPC only. A
	// server's own free-space alarm should sit above this floor, so that
	// the engine still takes the deletes and compactions that free space
	// while the server refuses puts. The default value is 0.
	MinFreeBytes int64
	// OnDiskFull, if set, is called each time the guard trips (Full true)
	// or clears (Full false), in order, from a goroutine of the guard's:
	// never under the engine's or Pebble's locks, so it may call the DB's
	// methods (not Close). The default value is nil.
	OnDiskFull func(DiskStatus)
	// PollInterval is how often the guard reads the free space of its
	// directories; it also reads it after every MinFreeBytes/4 bytes
	// (at least 256 KiB) written through the engine. 0 means the default.
	// The default value is 1s.
	PollInterval time.Duration
}

// DiskStatus is the disk guard's state (DB.DiskStatus).
type DiskStatus struct {
	// Full reports that the guard is tripped: writes return ErrNoSpace.
	Full bool
	// Cause is why the guard tripped (wrapping ErrNoSpace); nil while not
	// Full.
	Cause error
	// Since is when Full last changed (or the DB was opened).
	Since time.Time
	// Dirs holds db_path first, then wal_dir if it is a separate
	// directory.
	Dirs []DirSpace
}

// DirSpace is the space of one directory the disk guard watches, as last
// read (at most DiskGuardOptions.PollInterval ago).
type DirSpace struct {
	// Role is "db_path" or "wal_dir"; Path the directory.
	Role, Path string
	// Known reports whether the file system reports its space; when it
	// does not (vfs.MemFS), the guard trips on ENOSPC alone and the byte
	// counts are 0.
	Known bool
	// FreeBytes is the space available to the process, the reserve file
	// not counted; TotalBytes is the file system's size.
	FreeBytes, TotalBytes uint64
	// MinFreeBytes is the floor the guard trips below.
	MinFreeBytes uint64
	// ReserveBytes is the size of the reserve file, HeldBytes what of it is
	// on disk now: 0 while the guard is tripped (released).
	ReserveBytes, HeldBytes int64
}

// DiskStatus reports the disk guard's state: whether writes are refused
// with ErrNoSpace and the free space of db_path and wal_dir. It is cheap
// (no system call; the guard refreshes the figures every PollInterval and
// as bytes are written). A read-only DB reports Full false and no Dirs.
func (db *DB) DiskStatus() DiskStatus { return db.disk.status() }

// WritesRefused returns the ErrNoSpace error a write would get now, nil
// while the disk guard accepts writes: one atomic load, for a caller that
// must know before it changes its own state (mvcc's write path). A write
// the guard refuses never reaches Pebble.
func (db *DB) WritesRefused() error { return db.disk.admit("write") }

// diskGuard keeps a full disk from crashing or wedging the engine. Pebble
// v2.1.7 is used as it is; the guard works from the outside, through a
// vfs.FS wrapper (guardFS) that every file Pebble writes goes through first.
//
// What Pebble does when a write or sync fails (read from its source):
//
//   - WAL (*.log): commitWrite panics on a failed WriteRecord, and Commit
//     calls Logger.Fatalf on a failed commit or WAL sync ("the commit
//     pipeline will be horked"); rotateWAL panics when the old log fails to
//     close or the new one to be created, with DB.mu released, on the
//     committing goroutine. The LogWriter's error is sticky: after one
//     failure the DB cannot write again until reopened.
//   - MANIFEST and its marker: logAndApply calls Logger.Fatalf on any failed
//     create, write, sync or marker move, on the flush's or compaction's
//     own goroutine, where no caller can recover it: the process dies.
//   - Blob files (*.blob): blob.FileWriter.Close calls Abort after a failed
//     objstorage Finish, and fileBufferedWritable.Finish has already set
//     its file to nil: a nil-pointer panic on the flush's goroutine for any
//     failure of the last write, the sync or the close of a blob file. An
//     earlier write's failure is safe (Abort sees the file).
//   - Tables (*.sst), OPTIONS and temporary files: safe. A failed flush or
//     compaction removes its outputs, reports BackgroundError and is retried
//     (flushes at once, with no backoff); Open returns the error.
//
// Hence three defences:
//
//  1. Headroom. A reserve file (ReserveFileName) holds DiskGuardOptions'
//     ReserveBytes in db_path and in a separate wal_dir while there is
//     room. The guard reads the free space of both every PollInterval and
//     after every few MB written, and trips when it falls below
//     MinFreeBytes or when any operation meets ENOSPC/EDQUOT. Tripping
//     refuses new writes at the API (ErrNoSpace) and deletes the reserve
//     files, so the memtables already accepted can be flushed and the
//     MANIFEST written: in normal operation nothing of Pebble's meets
//     ENOSPC. This is CockroachDB's ballast, released automatically.
//  2. No unsafe error reaches Pebble. On ENOSPC, guardFS trips the guard
//     (releasing the reserve) and retries at once. If that fails too, an
//     operation on a file whose failure Pebble cannot survive (the WAL,
//     the MANIFEST, its marker, CURRENT, blob files, directory syncs)
//     waits, retrying with backoff up to a second, until the file system
//     takes it: only the writes and the flush already in flight wait, new
//     writes are refused at once, reads go on, and everything continues
//     when space returns. Every other operation returns the error,
//     wrapping ErrNoSpace, after a pause of PollInterval, so that Pebble's
//     immediate flush and compaction retries run about once per
//     PollInterval instead of in a tight loop. Partial writes resume where
//     they stopped. Preallocation (the WAL's) is retried once and never
//     waits (Pebble ignores its error).
//  3. Recovery. While tripped, the guard clears once every watched file
//     system has MinFreeBytes + ReserveBytes + MinFreeBytes/2 free (when
//     it reports its space), no operation is waiting for space and none
//     met ENOSPC for three PollIntervals; it makes the reserve files again
//     first (staying tripped if it cannot), then accepts writes.
//
// Limits: during Open nothing waits (Open fails with ErrNoSpace instead);
// Close waits for a flush that waits for space, so a DB closed on a full
// disk returns once space returns (a process killed meanwhile loses no
// acknowledged write: they are in the WAL). A sync retried after ENOSPC
// (which local file systems report at write time, not sync time) relies on
// the file system keeping the dirty pages, as ext4 and XFS do for ENOSPC;
// EIO and other errors are not retried and reach Pebble as before. The WAL
// failover directory is not guarded.
type diskGuard struct {
	fs         vfs.FS // below the guard: reserve files, free space
	dirs       []*guardDir
	logger     Logger
	onChange   func(DiskStatus)
	poll       time.Duration
	checkEvery int64
	opts       DiskGuardOptions
	// need is the default reserve before the cap: twice the memtables'
	// bytes plus 16 MiB.
	need int64

	full    atomic.Bool
	opening atomic.Bool // until Open returns: nothing waits
	closing atomic.Bool // Close began: nothing pauses
	// written counts bytes written since the last free-space read.
	written atomic.Int64
	// lastNoSpace is when an operation last met ENOSPC (UnixNano).
	lastNoSpace atomic.Int64
	// waiting counts operations waiting for space.
	waiting atomic.Int32

	// causeP is cause, for admit without the lock; nil while not full.
	causeP atomic.Pointer[error]

	mu     sync.Mutex // guards the fields below and dirs' mutable fields
	cause  error
	since  time.Time
	events []DiskStatus // transitions not yet given to onChange

	kick    chan struct{}
	stopc   chan struct{}
	done    chan struct{}
	started bool
}

// guardDir is one watched directory.
type guardDir struct {
	role, path string
	reserve    int64 // ReserveBytes
	floor      uint64
	// Under diskGuard.mu:
	held        int64
	known       bool
	unsupported bool // GetDiskUsage said ErrUnsupported: never ask again
	free, total uint64
}

const (
	defaultDiskPoll = time.Second
	// maxSpaceBackoff bounds the wait between retries of an operation
	// waiting for space.
	maxSpaceBackoff = time.Second
)

// newDiskGuard returns the guard of a writable DB on fs (the file system
// below every wrapper of the engine's). It does no I/O: open does.
func newDiskGuard(fs vfs.FS, cfg *config.Config, popts *pebble.Options, o DiskGuardOptions, logger Logger) *diskGuard {
	g := &diskGuard{fs: fs, logger: logger, onChange: o.OnDiskFull, poll: o.PollInterval,
		kick: make(chan struct{}, 1), stopc: make(chan struct{}), done: make(chan struct{})}
	if g.poll <= 0 {
		g.poll = defaultDiskPoll
	}
	g.opening.Store(true)
	g.since = time.Now()
	g.dirs = append(g.dirs, &guardDir{role: "db_path", path: cfg.DBPath})
	if cfg.EnableWAL && cfg.WALDir != "" && filepath.Clean(cfg.WALDir) != filepath.Clean(cfg.DBPath) {
		g.dirs = append(g.dirs, &guardDir{role: "wal_dir", path: cfg.WALDir})
	}
	g.need = 2*int64(popts.MemTableSize)*int64(max(1, popts.MemTableStopWritesThreshold)) + 16<<20
	g.opts = o
	return g
}

// open makes the reserve files, or trips at once (releasing any reserve
// left from before) when the disk is already short of space, so that
// Pebble's Open has the room to replay its WAL and write its MANIFEST.
func (g *diskGuard) open() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.sizeLocked()
	for _, d := range g.dirs {
		if fi, err := g.fs.Stat(g.reservePath(d)); err == nil {
			d.held = fi.Size()
		}
	}
	if cause := g.shortLocked(); cause != nil {
		g.tripLocked(cause)
		return nil
	}
	for _, d := range g.dirs {
		if d.held != d.reserve {
			if err := g.makeReserveLocked(d); err != nil {
				if isNoSpace(err) {
					g.tripLocked(noSpace(err))
					return nil
				}
				return fmt.Errorf("engine: %s = %q: reserve file: %w", d.role, d.path, err)
			}
		}
	}
	return nil
}

// sizeLocked reads the free space of every directory and sets its reserve
// and floor from the options.
func (g *diskGuard) sizeLocked() {
	o := g.opts
	g.readUsageLocked()
	g.checkEvery = 1 << 20
	for _, d := range g.dirs {
		switch {
		case o.ReserveBytes > 0:
			d.reserve = o.ReserveBytes
		case o.ReserveBytes == 0 && d.known:
			d.reserve = min(g.need, int64(d.total/20), 1<<30)
		}
		switch {
		case o.MinFreeBytes > 0:
			d.floor = uint64(o.MinFreeBytes)
		case o.MinFreeBytes == 0:
			d.floor = uint64(d.reserve / 2)
		}
		g.checkEvery = max(256<<10, min(g.checkEvery, int64(d.floor/4)))
	}
}

// start ends Open's no-wait period and starts the guard's goroutine.
func (g *diskGuard) start() {
	if g == nil {
		return
	}
	g.opening.Store(false)
	g.started = true
	go g.run()
}

// beginClose makes operations that fail on no space return at once.
func (g *diskGuard) beginClose() {
	if g != nil {
		g.closing.Store(true)
	}
}

// stop ends the guard's goroutine, once Pebble is closed.
func (g *diskGuard) stop() {
	if g == nil || !g.started {
		return
	}
	g.started = false
	close(g.stopc)
	<-g.done
}

func (g *diskGuard) run() {
	defer close(g.done)
	t := time.NewTicker(g.poll)
	defer t.Stop()
	for {
		select {
		case <-g.stopc:
			g.deliver() // every transition is reported, the last ones too
			return
		case <-t.C:
		case <-g.kick:
		}
		g.check()
		g.deliver()
	}
}

// wake asks the guard's goroutine to check now.
func (g *diskGuard) wake() {
	select {
	case g.kick <- struct{}{}:
	default:
	}
}

// check reads the free space, trips below the floor and, while tripped,
// clears when it can.
func (g *diskGuard) check() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.written.Store(0)
	g.readUsageLocked()
	if !g.full.Load() {
		if cause := g.shortLocked(); cause != nil {
			g.tripLocked(cause)
		}
		return
	}
	g.maybeClearLocked()
}

func (g *diskGuard) readUsageLocked() {
	for _, d := range g.dirs {
		if d.unsupported {
			continue
		}
		u, err := g.fs.GetDiskUsage(d.path)
		if err != nil {
			d.unsupported = errors.Is(err, vfs.ErrUnsupported)
			continue
		}
		d.known, d.free, d.total = true, u.AvailBytes, u.TotalBytes
	}
}

// shortLocked returns the trip cause when a directory is below its floor.
func (g *diskGuard) shortLocked() error {
	for _, d := range g.dirs {
		if d.known && d.free < d.floor {
			return fmt.Errorf("%w: %s %q has %d bytes free, under the guard's floor of %d", ErrNoSpace, d.role, d.path, d.free, d.floor)
		}
	}
	return nil
}

// maybeClearLocked clears the guard if space returned (see diskGuard).
func (g *diskGuard) maybeClearLocked() {
	if g.waiting.Load() > 0 || time.Since(time.Unix(0, g.lastNoSpace.Load())) < 3*g.poll {
		return
	}
	for _, d := range g.dirs {
		if d.known && d.free < d.floor+uint64(d.reserve)+d.floor/2 {
			return
		}
	}
	for _, d := range g.dirs {
		if err := g.makeReserveLocked(d); err != nil {
			if isNoSpace(err) {
				g.lastNoSpace.Store(time.Now().UnixNano())
			} else if g.logger != nil {
				g.logger.Errorf("strata: disk guard: reserve file in %s %q: %v", d.role, d.path, err)
			}
			return
		}
	}
	g.readUsageLocked()
	g.full.Store(false)
	g.causeP.Store(nil)
	g.cause, g.since = nil, time.Now()
	st := g.statusLocked()
	g.events = append(g.events, st)
	if g.logger != nil {
		g.logger.Infof("strata: disk space is back (%s): writes are accepted again", describeDirs(st.Dirs))
	}
}

// tripLocked refuses writes from now on and releases the reserve files.
func (g *diskGuard) tripLocked(cause error) {
	released := g.releaseLocked()
	if g.full.Load() {
		return
	}
	g.readUsageLocked()
	g.cause, g.since = cause, time.Now()
	g.causeP.Store(&cause)
	g.full.Store(true)
	st := g.statusLocked()
	g.events = append(g.events, st)
	if g.logger != nil {
		g.logger.Errorf("strata: disk full, writes are refused until space returns: %v (released %d reserved bytes; %s)", cause, released, describeDirs(st.Dirs))
	}
	g.wake()
}

// releaseLocked deletes the reserve files and returns the bytes freed.
func (g *diskGuard) releaseLocked() int64 {
	var freed int64
	for _, d := range g.dirs {
		freed += g.releaseDirLocked(d)
	}
	return freed
}

// releaseDirLocked deletes d's reserve file and returns the bytes freed.
func (g *diskGuard) releaseDirLocked(d *guardDir) int64 {
	if d.held == 0 {
		return 0
	}
	if err := g.fs.Remove(g.reservePath(d)); err != nil && !errors.Is(err, os.ErrNotExist) {
		if g.logger != nil {
			g.logger.Errorf("strata: disk guard: release the reserve file in %s %q: %v", d.role, d.path, err)
		}
		return 0
	}
	held := d.held
	d.held = 0
	return held
}

func (g *diskGuard) reservePath(d *guardDir) string { return g.fs.PathJoin(d.path, ReserveFileName) }

// makeReserveLocked writes d's reserve file, of d.reserve bytes (none if
// d.reserve is 0), and syncs it.
func (g *diskGuard) makeReserveLocked(d *guardDir) (err error) {
	path := g.reservePath(d)
	if d.reserve <= 0 {
		g.releaseDirLocked(d)
		return nil
	}
	if d.held == d.reserve {
		return nil
	}
	f, err := g.fs.Create(path, "strata-reserve")
	if err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			_ = g.fs.Remove(path)
			d.held = 0
		} else {
			d.held = d.reserve
		}
	}()
	if !allocateFile(f, d.reserve) {
		zeros := make([]byte, 1<<20)
		for left := d.reserve; left > 0; {
			n := min(left, int64(len(zeros)))
			if _, err := f.Write(zeros[:n]); err != nil {
				return err
			}
			left -= n
		}
	}
	return f.Sync()
}

// admit returns the ErrNoSpace error while the guard is tripped.
func (g *diskGuard) admit(call string) error {
	if g == nil || !g.full.Load() {
		return nil
	}
	cause := g.causeP.Load()
	if cause == nil { // cleared meanwhile
		return nil
	}
	return fmt.Errorf("%s refused: %w", call, *cause)
}

// status returns a copy of the guard's state.
func (g *diskGuard) status() DiskStatus {
	if g == nil {
		return DiskStatus{}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.statusLocked()
}

func (g *diskGuard) statusLocked() DiskStatus {
	st := DiskStatus{Full: g.full.Load(), Cause: g.cause, Since: g.since}
	for _, d := range g.dirs {
		ds := DirSpace{Role: d.role, Path: d.path, Known: d.known, ReserveBytes: d.reserve, HeldBytes: d.held, MinFreeBytes: d.floor}
		if d.known {
			ds.FreeBytes, ds.TotalBytes = d.free, d.total
		}
		st.Dirs = append(st.Dirs, ds)
	}
	return st
}

// deliver gives the pending transitions to onChange, in order.
func (g *diskGuard) deliver() {
	g.mu.Lock()
	events := g.events
	g.events = nil
	g.mu.Unlock()
	if g.onChange == nil {
		return
	}
	for _, st := range events {
		g.onChange(st)
	}
}

func describeDirs(dirs []DirSpace) string {
	parts := make([]string, 0, len(dirs))
	for _, d := range dirs {
		if d.Known {
			parts = append(parts, fmt.Sprintf("%s %q: %d of %d bytes free", d.Role, d.Path, d.FreeBytes, d.TotalBytes))
		} else {
			parts = append(parts, fmt.Sprintf("%s %q: free space unknown", d.Role, d.Path))
		}
	}
	return strings.Join(parts, "; ")
}

// isNoSpace reports whether err is the file system running out of space.
func isNoSpace(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}

// noSpace wraps err in ErrNoSpace unless it already is.
func noSpace(err error) error {
	if errors.Is(err, ErrNoSpace) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrNoSpace, err)
}

// sawNoSpace records that an operation met ENOSPC: the guard trips.
func (g *diskGuard) sawNoSpace(err error, what string) {
	g.lastNoSpace.Store(time.Now().UnixNano())
	if g.full.Load() {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if _, file, _ := strings.Cut(what, " "); strings.Contains(err.Error(), file) {
		g.tripLocked(noSpace(err)) // the error names the file already
	} else {
		g.tripLocked(fmt.Errorf("%w: %s: %w", ErrNoSpace, what, err))
	}
}

// wrote counts n bytes written and wakes the guard's check every
// checkEvery bytes.
func (g *diskGuard) wrote(n int) {
	if g.written.Add(int64(n)) >= g.checkEvery {
		g.written.Store(0)
		g.wake()
	}
}

// retry runs op, handling no space as diskGuard describes: trip, retry
// once, then wait (critical) or pause and return the error wrapping
// ErrNoSpace.
func (g *diskGuard) retry(critical bool, what string, op func() error) error {
	err := op()
	if err == nil || !isNoSpace(err) {
		return err
	}
	g.sawNoSpace(err, what)
	counted := false
	defer func() {
		if counted {
			g.waiting.Add(-1)
		}
	}()
	for delay := 10 * time.Millisecond; ; delay = min(2*delay, maxSpaceBackoff) {
		if err = op(); err == nil || !isNoSpace(err) {
			return err
		}
		g.sawNoSpace(err, what)
		if !critical || g.opening.Load() {
			g.pause()
			return noSpace(err)
		}
		if !counted {
			counted = true
			g.waiting.Add(1)
		}
		time.Sleep(delay)
	}
}

// pause holds a failing operation for a PollInterval, so that Pebble's
// immediate retries of a failed flush or compaction do not spin; not
// during Open or Close.
func (g *diskGuard) pause() {
	if g.opening.Load() || g.closing.Load() {
		return
	}
	select {
	case <-time.After(g.poll):
	case <-g.stopc:
	}
}

// criticalFile reports whether Pebble cannot survive a failed write or
// sync of the file name (see diskGuard): the WAL, the MANIFEST, its marker,
// CURRENT and blob files.
func criticalFile(name string) bool {
	base := filepath.Base(name)
	return strings.HasSuffix(base, ".log") || strings.HasSuffix(base, ".blob") ||
		strings.HasPrefix(base, "MANIFEST-") || strings.HasPrefix(base, "marker.") || base == "CURRENT"
}

// guardFS is the file system wrapper of the disk guard: every write, sync,
// create, rename and link goes through diskGuard.retry.
type guardFS struct {
	vfs.FS
	g *diskGuard
}

// wrap returns fs with the guard's handling of no space; g may be nil.
func (g *diskGuard) wrap(fs vfs.FS) vfs.FS {
	if g == nil || testNoDiskGuardFS {
		return fs
	}
	return &guardFS{FS: fs, g: g}
}

// testNoDiskGuardFS, set only by tests, leaves the guard's file system
// wrapper out: Pebble sees the file system's errors as they come.
var testNoDiskGuardFS bool

func (fs *guardFS) file(f vfs.File, name string, critical bool) vfs.File {
	return &guardFile{File: f, g: fs.g, name: name, critical: critical}
}

func (fs *guardFS) Create(name string, category vfs.DiskWriteCategory) (vfs.File, error) {
	var f vfs.File
	crit := criticalFile(name)
	err := fs.g.retry(crit, "create "+name, func() (err error) {
		f, err = fs.FS.Create(name, category)
		return err
	})
	if err != nil {
		return nil, err
	}
	return fs.file(f, name, crit), nil
}

func (fs *guardFS) OpenReadWrite(name string, category vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	var f vfs.File
	crit := criticalFile(name)
	err := fs.g.retry(crit, "open "+name, func() (err error) {
		f, err = fs.FS.OpenReadWrite(name, category, opts...)
		return err
	})
	if err != nil {
		return nil, err
	}
	return fs.file(f, name, crit), nil
}

// ReuseForWrite renames a recycled WAL file and opens it; a retry after a
// failure that left the rename done opens the new name.
func (fs *guardFS) ReuseForWrite(oldname, newname string, category vfs.DiskWriteCategory) (vfs.File, error) {
	var f vfs.File
	crit := criticalFile(newname)
	err := fs.g.retry(crit, "reuse "+oldname+" as "+newname, func() (err error) {
		if _, serr := fs.FS.Stat(oldname); serr != nil {
			if _, nerr := fs.FS.Stat(newname); nerr == nil {
				f, err = fs.FS.OpenReadWrite(newname, category)
				return err
			}
		}
		f, err = fs.FS.ReuseForWrite(oldname, newname, category)
		return err
	})
	if err != nil {
		return nil, err
	}
	return fs.file(f, newname, crit), nil
}

func (fs *guardFS) OpenDir(name string) (vfs.File, error) {
	f, err := fs.FS.OpenDir(name)
	if err != nil {
		return nil, err
	}
	return fs.file(f, name, true), nil
}

func (fs *guardFS) Link(oldname, newname string) error {
	return fs.g.retry(criticalFile(newname), "link "+newname, func() error { return fs.FS.Link(oldname, newname) })
}

func (fs *guardFS) Rename(oldname, newname string) error {
	return fs.g.retry(criticalFile(newname), "rename to "+newname, func() error { return fs.FS.Rename(oldname, newname) })
}

func (fs *guardFS) MkdirAll(dir string, perm os.FileMode) error {
	return fs.g.retry(false, "mkdir "+dir, func() error { return fs.FS.MkdirAll(dir, perm) })
}

// Unwrap returns the file system below the guard.
func (fs *guardFS) Unwrap() vfs.FS { return fs.FS }

// guardFile is a file written through guardFS.
type guardFile struct {
	vfs.File
	g        *diskGuard
	name     string
	critical bool
}

func (f *guardFile) Write(p []byte) (int, error) {
	written := 0
	err := f.g.retry(f.critical, "write "+f.name, func() error {
		n, err := f.File.Write(p[written:])
		written += n
		return err
	})
	f.g.wrote(written)
	return written, err
}

func (f *guardFile) WriteAt(p []byte, off int64) (int, error) {
	written := 0
	err := f.g.retry(f.critical, "write "+f.name, func() error {
		n, err := f.File.WriteAt(p[written:], off+int64(written))
		written += n
		return err
	})
	f.g.wrote(written)
	return written, err
}

func (f *guardFile) Sync() error {
	return f.g.retry(f.critical, "sync "+f.name, f.File.Sync)
}

func (f *guardFile) SyncData() error {
	return f.g.retry(f.critical, "sync "+f.name, f.File.SyncData)
}

func (f *guardFile) SyncTo(length int64) (fullSync bool, err error) {
	err = f.g.retry(f.critical, "sync "+f.name, func() (err error) {
		fullSync, err = f.File.SyncTo(length)
		return err
	})
	return fullSync, err
}

// Preallocate retries once after tripping the guard and never waits:
// Pebble ignores its error, and the writes that follow are guarded.
func (f *guardFile) Preallocate(offset, length int64) error {
	err := f.File.Preallocate(offset, length)
	if err == nil || !isNoSpace(err) {
		return err
	}
	f.g.sawNoSpace(err, "preallocate "+f.name)
	if err = f.File.Preallocate(offset, length); err != nil && isNoSpace(err) {
		return noSpace(err)
	}
	return err
}

// Close is not retried (the file is closed either way); no space trips the
// guard.
func (f *guardFile) Close() error {
	err := f.File.Close()
	if err != nil && isNoSpace(err) {
		f.g.sawNoSpace(err, "close "+f.name)
		return noSpace(err)
	}
	return err
}
