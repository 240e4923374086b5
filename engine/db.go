// Package engine is Strata's embedded storage engine: a Pebble LSM tree that
// honours every field of a RocksDB-style config.Config.
//
//	cfg := config.Default()
//	cfg.DBPath = dir
//	db, err := engine.Open(cfg)
//	if err != nil { ... }
//	defer db.Close()
//	_ = db.Put([]byte("k"), []byte("v"))
//	v, err := db.Get([]byte("k")) // engine.ErrNotFound when missing
//
// Config fields become Pebble options in one place (internal/pebbleconf). What
// Pebble lacks is built here on Pebble's public hooks: per-level codecs that a
// full compaction really applies (CompactAll), the RocksDB-format OPTIONS file
// (config.RocksDBOptionsFileName, written on every open), WAL accounting
// (package wal), a rocksdb.stats-style report (Stats, Metrics, Collector),
// and a disk guard: on a full disk writes fail with ErrNoSpace, reads go
// on, and writes resume once space returns (DiskStatus,
// DiskGuardOptions.OnDiskFull; see diskGuard).
package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stratadb/strata/config"
	"github.com/stratadb/strata/directio"
	"github.com/stratadb/strata/internal/fsutil"
	"github.com/stratadb/strata/internal/pebbleconf"
	"github.com/stratadb/strata/tiering"
	"github.com/stratadb/strata/wal"
)

// testPebbleOptions, set only by tests, adjusts the Pebble options at Open.
var testPebbleOptions func(*pebble.Options)

// ErrNotFound is returned by Get when the key is absent.
var ErrNotFound = errors.New("engine: not found")

// ErrClosed is returned by operations on a closed DB.
var ErrClosed = errors.New("engine: closed")

// Logger receives Strata's and Pebble's log lines: Infof the informational
// ones, Errorf the errors met where no caller can receive them (a failed
// background flush or compaction, Pebble's own error lines). A nil Logger
// in Options means silent; background errors are counted in Metrics either
// way. It has the methods of Pebble's Logger but Fatalf, which the engine
// turns into ErrFatal.
type Logger interface {
	Infof(format string, args ...any)
	Errorf(format string, args ...any)
}

// Options are the run-time hooks of a DB that do not belong in a config file.
type Options struct {
	// FS is the file system every file goes through; tests pass vfs.NewMem(),
	// a crashable or an error-injecting FS. nil means the OS file system
	// with Pebble's disk-health checks.
	FS vfs.FS
	// Logger receives log lines; nil means silent.
	Logger Logger
	// EventListener, if set, receives Pebble's events in addition to
	// Strata's own listener.
	EventListener *pebble.EventListener
	// ReadOnly opens an existing database for reading only, as
	// pebble.Options.ReadOnly and bbolt's ReadOnly: nothing on disk
	// changes (no OPTIONS-rocksdb rewrite, no leftover cleanup, no WAL
	// recycling, no flushes, compactions or tiering moves; the WAL is
	// replayed into memory). Writes, Flush, Compact, CompactAll and
	// Checkpoint return ErrReadOnly. Table files of a tiered database are
	// found in its db_paths and in the directories its tiering record
	// lists. db_path must exist. The default value is false.
	ReadOnly bool
	// OnCorruption, if set, is called with every error the engine meets
	// that says a file of the database is damaged (errors.Is(err,
	// ErrCorruption): a block whose checksum does not match, a table that
	// does not decode): by a read (Get, View, an Iterator's Error or
	// Close, a Snapshot's Get or View), before the read returns it, and by
	// Pebble's background work (a flush or compaction that met it,
	// reported through BackgroundError). Pebble's error names the file
	// ("pebble: file 000011: block ...: crc32c checksum mismatch"). It is
	// called on the goroutine that met the error, once per read that
	// fails (so many times for one damaged block), and must return
	// quickly, without I/O. The default value is nil: not called.
	OnCorruption func(err error)
	// DiskGuard configures what a full disk does (see ErrNoSpace,
	// DiskStatus and DiskGuardOptions): writes are refused with ErrNoSpace
	// and resume once space returns, and Pebble never crashes on ENOSPC. A
	// read-only DB has no guard. The default value is the zero
	// DiskGuardOptions, the defaults it documents.
	DiskGuard DiskGuardOptions
}

// DB is an open Strata database. It is safe for concurrent use.
type DB struct {
	cfg   *config.Config
	pdb   *pebble.DB
	popts *pebble.Options
	fs    vfs.FS
	walFS *wal.CountingFS
	// dio is the direct I/O layer, nil unless a use_direct_* option is set.
	dio *directio.FS
	// layout spreads tables over db_paths; nil when db_paths is empty.
	layout *tiering.Layout
	logger Logger
	// onCorruption is Options.OnCorruption (see seen).
	onCorruption func(error)
	wo           *pebble.WriteOptions
	// res is cfg resolved: the codec of each level, the notes, the cache
	// split.
	res *config.Resolved

	// guard admits every write and keeps a table rewrite from losing one
	// (see writeGuard); rewriteMu serializes rewrites.
	guard     *writeGuard
	rewriteMu sync.Mutex
	// ops makes Close safe against concurrent calls (see opGate); resMu
	// guards its set of open iterators and snapshots.
	ops   opGate
	resMu sync.Mutex
	// ctx is cancelled by Close, stopping a running CompactAll.
	ctx    context.Context
	cancel context.CancelFunc
	// readOnly is Options.ReadOnly.
	readOnly bool
	// testBeforeRewrite, set only by tests, runs between Pebble's
	// compaction and the codec rewrite of Compact and CompactAll.
	testBeforeRewrite func()
	// testChunksOnly, set only by tests, skips touchAndCompact, so every
	// table is rewritten chunk by chunk under the write guard.
	testChunksOnly bool
	// testNoRewrites, set only by tests, makes every rewrite pass do
	// nothing, so the tables that kept another level's codec remain.
	testNoRewrites bool
	// opened is when Open returned the DB: Metrics' counters start there.
	opened time.Time
	// openSnapshots counts snapshots not yet closed.
	openSnapshots atomic.Int64
	// commitLatency times batch commits (CommitLatency).
	commitLatency prometheus.Histogram

	stalls   stallCounter
	rewrite  rewriteCounter
	bgErrors bgErrorCounter
	closed   atomic.Bool
	// fatal is Pebble's fatal error once one was met (see ErrFatal).
	fatal atomic.Pointer[FatalError]
	// disk is the disk guard (see diskGuard); nil when read-only.
	disk *diskGuard
	// dirFS is fs under the disk guard, for Dir.
	dirFS vfs.FS
	// noSpaceLogged is when a background error for lack of space was last
	// logged (UnixNano): while the disk is full they are logged once a
	// minute, and counted every time.
	noSpaceLogged atomic.Int64
}

// Open opens (creating if needed) the database that cfg describes, with the
// run-time hooks of opts if given (at most one Options; none means the OS
// file system, silent, read-write). It validates cfg, rejects settings
// Strata cannot deliver, never modifies cfg, and writes the RocksDB-format
// OPTIONS file into db_path.
func Open(cfg *config.Config, opts ...Options) (*DB, error) {
	if cfg == nil {
		return nil, errors.New("engine: Open: config is nil")
	}
	if len(opts) > 1 {
		return nil, fmt.Errorf("engine: Open: %d Options given, at most one is allowed", len(opts))
	}
	var o Options
	if len(opts) == 1 {
		o = opts[0]
	}
	res, err := cfg.Resolve() // a validated copy
	if err != nil {
		return nil, err
	}
	cfg = res.Config
	if err := checkDeliverable(cfg); err != nil {
		return nil, err
	}
	fs := o.FS
	if fs == nil {
		fs = vfs.Default
	}
	if o.ReadOnly {
		if _, err := fs.Stat(cfg.DBPath); err != nil {
			return nil, fmt.Errorf("engine: db_path = %q: a read-only open needs an existing database: %w", cfg.DBPath, err)
		}
	} else if err := fs.MkdirAll(cfg.DBPath, 0o755); err != nil {
		return nil, fmt.Errorf("engine: db_path = %q: cannot create the directory: %w", cfg.DBPath, err)
	}
	recorded, err := config.ReadRecorded(cfg.DBPath, func(name string) (io.ReadCloser, error) { return fs.Open(name) })
	if err != nil {
		return nil, fmt.Errorf("engine: %w", err)
	}
	popts := pebbleconf.Options(res)
	defer popts.Cache.Unref()

	db := &DB{cfg: cfg, res: res, fs: fs, logger: o.Logger, popts: popts, guard: newWriteGuard(), readOnly: o.ReadOnly, opened: time.Now(),
		commitLatency: newLatencyHistogram(), onCorruption: o.OnCorruption}
	db.ctx, db.cancel = context.WithCancel(context.Background())
	popts.ReadOnly = o.ReadOnly
	if testPebbleOptions != nil {
		testPebbleOptions(popts)
	}
	tableFS, err := db.directIO(fs, o.FS == nil)
	if err != nil {
		return nil, err
	}
	db.dirFS = fs
	if o.ReadOnly {
		tableFS = readOnlyFS(tableFS, cfg.DBPath, tableDirs(cfg, recorded))
	} else if tableFS, err = db.tiered(tableFS, popts); err != nil {
		return nil, err
	} else {
		// Every file Pebble writes goes through the guard first, above
		// direct I/O and tiering, below the table write buffer (so a blob
		// file's held bytes are written, and guarded, at its sync).
		db.disk = newDiskGuard(fs, cfg, popts, o.DiskGuard, o.Logger)
		tableFS = db.disk.wrap(tableFS)
		db.dirFS = db.disk.wrap(fs)
	}
	if !cfg.UseDirectIOForFlushAndCompaction {
		// Direct I/O writes stage whole aligned blocks already.
		tableFS = tableWriteBufferFS{tableFS}
	}
	db.walFS = wal.NewCountingFS(tableFS, !cfg.EnableWAL)
	popts.FS = db.walFS
	popts.Logger = pebbleLogger{o.Logger}
	popts.EventListener = db.eventListener(o.EventListener)
	if o.FS == nil {
		popts.WithFSDefaults()
	}
	placement := wal.Placement{
		DBPath:       cfg.DBPath,
		Dir:          cfg.WALDir,
		FailoverDir:  cfg.WALFailoverDir,
		PreviousDirs: recorded.PreviousWALDirs(),
		Disabled:     !cfg.EnableWAL,
		ReadOnly:     o.ReadOnly,
	}
	if err := placement.Apply(popts, fs); err != nil {
		return nil, err
	}
	db.wo = pebble.NoSync
	if cfg.Sync {
		db.wo = pebble.Sync
	}

	if !o.ReadOnly {
		if err := removeLeftovers(fs, cfg.DBPath); err != nil {
			db.closeLayout()
			return nil, err
		}
		if err := db.disk.open(); err != nil {
			db.closeLayout()
			return nil, err
		}
	}
	pdb, err := openPebble(cfg.DBPath, popts)
	if err != nil {
		db.closeLayout()
		if isLockConflict(err) && !errors.Is(err, ErrLocked) {
			return nil, fmt.Errorf("engine: open %q: %w: %w", cfg.DBPath, ErrLocked, err)
		}
		return nil, fmt.Errorf("engine: open %q: %w", cfg.DBPath, err)
	}
	db.pdb = pdb
	db.disk.start()
	if db.layout != nil {
		db.layout.Attach(pdb)
	}
	if !o.ReadOnly {
		if err := db.writeOptionsFile(); err != nil {
			db.disk.beginClose()
			db.closeLayout()
			_ = pdb.Close()
			db.disk.stop()
			return nil, err
		}
	}
	db.logOpen()
	return db, nil
}

// writeOptionsFile replaces db_path/OPTIONS-rocksdb atomically.
func (db *DB) writeOptionsFile() error {
	text := db.res.RocksDBOptions()
	if db.layout != nil {
		text += "\n# strata: level-to-path map at open (db_paths index per level, L0 first; it follows the LSM as it grows): " + db.layout.Stats().Plan.String() + "\n"
	}
	if err := fsutil.WriteFileAtomic(db.fs, db.cfg.DBPath, config.RocksDBOptionsFileName, []byte(text)); err != nil {
		return fmt.Errorf("engine: write %s: %w", db.fs.PathJoin(db.cfg.DBPath, config.RocksDBOptionsFileName), err)
	}
	return nil
}

// removeLeftovers deletes files an interrupted rewrite or OPTIONS write left
// in db_path. Pebble never references them, so nothing is lost.
func removeLeftovers(fs vfs.FS, dir string) error {
	names, err := fs.List(dir)
	if err != nil {
		return fmt.Errorf("engine: db_path = %q: %w", dir, err)
	}
	for _, name := range names {
		if strings.HasPrefix(name, rewritePrefix) || name == config.RocksDBOptionsFileName+".tmp" {
			if err := fs.Remove(fs.PathJoin(dir, name)); err != nil {
				return fmt.Errorf("engine: remove leftover %s: %w", fs.PathJoin(dir, name), err)
			}
		}
	}
	return nil
}

func (db *DB) logOpen() {
	if db.logger == nil {
		return
	}
	db.logger.Infof("strata: opened %s (wal %s; compression %s)",
		db.cfg.DBPath, db.walDirDescription(), db.res.DescribeCodecs())
	if notes := db.res.Notes; len(notes) > 0 {
		parts := make([]string, len(notes))
		for i, n := range notes {
			parts[i] = fmt.Sprintf("%s = %v (%s)", n.Key, n.Value, n.Reason)
		}
		db.logger.Infof("strata: settings without effect on Pebble: %s", strings.Join(parts, "; "))
	}
}

func (db *DB) walDirDescription() string {
	if !db.cfg.EnableWAL {
		return "disabled"
	}
	if db.cfg.WALDir == "" {
		return db.cfg.DBPath
	}
	return db.cfg.WALDir
}

// Config returns a copy of the configuration the database was opened with.
func (db *DB) Config() *config.Config { return db.cfg.Clone() }

// Dir returns the file system and directory (db_path) of the database's
// files, for a layer above that keeps a file of its own beside them (mvcc's
// key index checkpoint), through the same file system as the database.
// Its writes go through the disk guard: one that meets ENOSPC trips it and
// fails with ErrNoSpace.
func (db *DB) Dir() (vfs.FS, string) { return db.dirFS, db.cfg.DBPath }

// ReadOnly reports whether the database was opened with Options.ReadOnly:
// nothing on disk may change, beside it either.
func (db *DB) ReadOnly() bool { return db.readOnly }

// Put sets key to value.
func (db *DB) Put(key, value []byte) (err error) {
	ticket, err := db.enterWrite(key, key)
	if err != nil {
		return err
	}
	defer db.guard.leave(ticket)
	defer db.recoverFatal(&err)
	return db.pdb.Set(key, value, db.wo)
}

// Delete removes key; deleting an absent key is not an error.
func (db *DB) Delete(key []byte) (err error) {
	ticket, err := db.enterWrite(key, key)
	if err != nil {
		return err
	}
	defer db.guard.leave(ticket)
	defer db.recoverFatal(&err)
	return db.pdb.Delete(key, db.wo)
}

// DeleteRange removes every key in [start, end).
func (db *DB) DeleteRange(start, end []byte) (err error) {
	if err := checkRange(start, end); err != nil {
		return err
	}
	ticket, err := db.enterWrite(start, end)
	if err != nil {
		return err
	}
	defer db.guard.leave(ticket)
	defer db.recoverFatal(&err)
	return db.pdb.DeleteRange(start, end, db.wo)
}

// Get returns a copy of the value of key, or ErrNotFound.
func (db *DB) Get(key []byte) ([]byte, error) {
	if err := db.enterOp(); err != nil {
		return nil, err
	}
	defer db.leaveOp()
	var out []byte
	err := lookup(db.pdb, key, db.useL6Filters(), func(v []byte) error {
		out = append([]byte(nil), v...)
		return nil
	})
	return out, db.seen(err)
}

// View calls fn with the value of key without copying it, or returns
// ErrNotFound. The value is valid only until fn returns; fn must not keep it
// or modify it. View is Get without the allocation, for hot read paths.
func (db *DB) View(key []byte, fn func(value []byte) error) error {
	if err := db.enterOp(); err != nil {
		return err
	}
	defer db.leaveOp()
	return db.seen(lookup(db.pdb, key, db.useL6Filters(), fn))
}

// ErrInvalidRange is returned for a key range whose start does not sort
// before its end.
var ErrInvalidRange = errors.New("engine: invalid range")

func checkRange(start, end []byte) error {
	if bytes.Compare(start, end) >= 0 {
		return fmt.Errorf("%w: [%q, %q): start must sort before end", ErrInvalidRange, start, end)
	}
	return nil
}

// Flush writes the memtable to an L0 table and waits for it.
func (db *DB) Flush() (err error) {
	if err := db.enterOp(); err != nil {
		return err
	}
	defer db.leaveOp()
	defer db.recoverFatal(&err)
	if err := db.writable("Flush"); err != nil {
		return err
	}
	return db.pdb.Flush()
}

// stallCounter counts write stalls.
type stallCounter struct {
	mu       sync.Mutex
	count    int64
	total    time.Duration
	began    time.Time
	lastWhy  string
	inFlight bool
}

func (s *stallCounter) begin(why string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.count++
	s.began = time.Now()
	s.lastWhy = why
	s.inFlight = true
}

func (s *stallCounter) end() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.inFlight {
		s.total += time.Since(s.began)
		s.inFlight = false
	}
}

func (s *stallCounter) load() (count int64, total time.Duration, lastWhy string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	total = s.total
	if s.inFlight {
		total += time.Since(s.began)
	}
	return s.count, total, s.lastWhy
}

// bgErrorCounter counts the errors of Pebble's background work and keeps
// the last one.
type bgErrorCounter struct {
	count atomic.Int64
	last  atomic.Pointer[error]
}

func (c *bgErrorCounter) record(err error) {
	c.last.Store(&err)
	c.count.Add(1)
}

func (c *bgErrorCounter) load() BackgroundErrorMetrics {
	m := BackgroundErrorMetrics{Count: c.count.Load()}
	if last := c.last.Load(); last != nil {
		m.Last = *last
	}
	return m
}

func (db *DB) eventListener(user *pebble.EventListener) *pebble.EventListener {
	own := pebble.EventListener{
		WriteStallBegin: func(info pebble.WriteStallBeginInfo) { db.stalls.begin(info.Reason) },
		WriteStallEnd:   func() { db.stalls.end() },
		BackgroundError: func(err error) {
			db.bgErrors.record(err)
			_ = db.seen(err)
			if db.logger != nil && db.logBackgroundError(err) {
				db.logger.Errorf("strata: background error: %v", err)
			}
		},
	}
	if user != nil {
		own = pebble.TeeEventListener(own, *user)
	}
	if db.layout != nil {
		own = pebble.TeeEventListener(db.layout.EventListener(), own)
	}
	own.EnsureDefaults(nil)
	return &own
}

// logBackgroundError reports whether to log err: every error, but for lack
// of space (a flush or compaction Pebble retries every PollInterval while
// the disk is full) once a minute.
func (db *DB) logBackgroundError(err error) bool {
	if !errors.Is(err, ErrNoSpace) {
		return true
	}
	now, last := time.Now().UnixNano(), db.noSpaceLogged.Load()
	return now-last >= int64(time.Minute) && db.noSpaceLogged.CompareAndSwap(last, now)
}

// pebbleLogger adapts a Logger (possibly nil, meaning silent) to Pebble's.
type pebbleLogger struct{ l Logger }

func (p pebbleLogger) Infof(format string, args ...any) {
	if p.l != nil {
		p.l.Infof(format, args...)
	}
}

func (p pebbleLogger) Errorf(format string, args ...any) {
	if p.l != nil {
		p.l.Errorf(format, args...)
	}
}

// Fatalf is called by Pebble on a broken invariant and on I/O errors it
// cannot continue after (a failed MANIFEST or WAL write); Pebble does not
// expect it to return. It panics with a *FatalError, which the engine's
// calls recover into an error (see recoverFatal).
func (p pebbleLogger) Fatalf(format string, args ...any) {
	fe := &FatalError{msg: fmt.Sprintf("pebble: "+format, args...)}
	for _, a := range args {
		if err, ok := a.(error); ok {
			fe.err = err
			break
		}
	}
	panic(fe)
}
