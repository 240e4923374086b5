package tiering

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/errors/oserror"
	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stratadb/strata/internal/fsutil"
)

// Path is one entry of db_paths: a directory for table files and the number
// of table bytes it is meant to hold (RocksDB's DbPath).
type Path struct {
	// Dir is the directory. It is created by New if missing.
	Dir string
	// TargetSize is the number of table bytes the path should hold before
	// lower levels go to the next path; the last path takes the rest. Must
	// be > 0.
	TargetSize uint64
}

// Logger receives the layout's log lines. Pebble's Logger satisfies it.
type Logger interface {
	Infof(format string, args ...any)
	Errorf(format string, args ...any)
}

// MoveInfo describes one table move by the mover, passed to
// Options.OnMove.
type MoveInfo struct {
	// File is the table's file name, for example "000123.sst".
	File string
	// Level is the table's level when the move was decided.
	Level int
	// From and To are path indexes (a draining directory has an index past
	// the configured paths; see Stats).
	From, To int
	// Reason says why the table moved.
	Reason MoveReason
	// Bytes is the table's size.
	Bytes int64
	// Duration is how long the move took.
	Duration time.Duration
	// Err is nil for a completed move. A move abandoned because Pebble
	// deleted the table meanwhile reports ErrObsolete.
	Err error
}

// Options tune a Layout. The zero value is usable.
type Options struct {
	// Shape holds Pebble's level-sizing options; set it with ShapeOf from
	// the pebble.Options the database is opened with. Zero fields take
	// Pebble's defaults.
	Shape LevelShape
	// Logger receives log lines about moves, recovery and failures. nil
	// means silent. The default value is nil.
	Logger Logger
	// OnMove, if set, is called after each move attempt, from the mover's
	// goroutine. The default value is nil.
	OnMove func(MoveInfo)
	// MoverInterval is how often the mover checks placement besides after
	// each flush and compaction. The default value is 10s.
	MoverInterval time.Duration
	// DisableMover keeps the background mover from running: tables are still
	// placed at creation, and Rebalance moves them on demand. The default
	// value is false.
	DisableMover bool
	// MoveRate caps the mover's copying in bytes per second, so relocating
	// tables does not starve foreground I/O (RocksDB's rate limiter plays
	// this part for its compactions). 0 means unlimited. The default value
	// is 0; the engine sets it from tiering_move_rate_mb.
	MoveRate int64
	// SettleTimeout bounds how long Settle waits for flushes and
	// compactions holding misplaced tables. The default value is 60s.
	SettleTimeout time.Duration

	// hook, in tests, runs at each step of a move; an error aborts it.
	hook func(step moveStep, file string) error
}

// Errors naming the rule a db_paths entry breaks. New wraps them in a
// *PathError naming the entry.
var (
	ErrNoPaths        = errors.New("tiering: db_paths is empty: list at least one path")
	ErrEmptyDir       = errors.New("tiering: path is empty")
	ErrTargetRange    = errors.New("tiering: target size out of range")
	ErrDuplicate      = errors.New("tiering: path listed twice")
	ErrNested         = errors.New("tiering: paths must not be nested")
	ErrCannotCreate   = errors.New("tiering: path is missing and cannot be created")
	ErrNotWritable    = errors.New("tiering: path is not writable")
	ErrObsolete       = errors.New("tiering: table deleted by Pebble during the move")
	ErrNotAttached    = errors.New("tiering: no database attached")
	ErrNotSettled     = errors.New("tiering: placement did not settle")
	ErrNoRoom         = errors.New("tiering: no path has room for the table")
	errStopped        = errors.New("tiering: mover stopped")
	errCannotRetarget = errors.New("tiering: cannot retarget a descriptor on this platform")
)

// MaxTargetSize bounds a path's target size: the largest integer a TOML
// file can hold, so that every valid layout can be written back.
const MaxTargetSize = math.MaxInt64

// PathError reports a problem with one db_paths entry: the one place the
// rules for db_paths are written, used by New and, mapped onto its field
// errors, by config's Validate.
type PathError struct {
	// Index is the entry's position in db_paths.
	Index int
	// Field is the entry's key at fault: "path" or "target_size_bytes".
	Field string
	// Value is that key's value as given (a string or a uint64).
	Value any
	// Rule says what is allowed, e.g. "must not be empty".
	Rule string
	// Err is the sentinel of the rule broken (ErrEmptyDir, ErrNested, ...),
	// wrapping the file system's error where there is one.
	Err error
}

func (e *PathError) Error() string {
	if s, ok := e.Value.(string); ok {
		return fmt.Sprintf("db_paths[%d].%s = %q: %s", e.Index, e.Field, s, e.Rule)
	}
	return fmt.Sprintf("db_paths[%d].%s = %v: %s", e.Index, e.Field, e.Value, e.Rule)
}

func (e *PathError) Unwrap() error { return e.Err }

// location is a directory table files may live in: a configured path or a
// directory being drained (an earlier path, or db_path when it is not a
// path).
type location struct {
	dir    string // as used with the base FS
	target uint64 // 0 for a draining directory
	drain  bool
}

// fileEntry is where one table or blob file lives.
type fileEntry struct {
	loc      int
	size     int64
	creating bool // open for writing by Pebble
	level    int  // from the mover's last scan; -1 unknown
	placedAs int  // the level its path was chosen for (creation, last move); -1 unknown
	// est is the size counted in its job's arriving bytes at location estAt
	// while the job runs: the target file size at placement, the real size
	// once written.
	est   int64
	estAt int
}

// job is one flush or compaction in flight, from its Begin event to its End.
type job struct {
	level  int
	inputs map[string]bool
	// leaving and arriving count bytes per location: the job's input tables
	// at its output level, and the estimated size of its outputs placed so
	// far.
	leaving  map[int]int64
	arriving map[int]int64
	files    []uint64 // file numbers created by the job
}

// Layout spreads Pebble's table files over several directories by level.
// Give FS() to Pebble as Options.FS, tee EventListener() into Pebble's
// listener, and call Attach once the database is open.
//
// Invariants:
//
//  1. Every table or blob file under db_path, as Pebble names it, lives in
//     exactly one location; the in-memory map says which. Metadata (MANIFEST,
//     OPTIONS, LOCK, markers) and every other file stay where Pebble puts
//     them.
//  2. Listing db_path shows the union of the table files of all locations
//     and db_path's own other files; temporary copies are hidden.
//  3. A move switches the map only after the new copy is complete, synced
//     and renamed into place, and removes the old copy only after the
//     switch; a reader opened after the switch opens the new copy.
//  4. At New, leftovers of an interrupted move (temporary copies, a table
//     present in two locations) are cleaned, keeping the complete copy.
type Layout struct {
	base     vfs.FS
	dbDir    string // as given
	dbDirKey string // canonical form for comparisons
	cwd      string
	paths    []Path
	locs     []location
	opts     Options
	shape    LevelShape
	targets  []uint64
	fs       *tieredFS

	mu       sync.Mutex // guards the fields below, up to passMu
	files    map[string]*fileEntry
	plan     Plan
	usage    [NumLevels]map[int]int64 // bytes per level per location, from the last scan
	jobs     map[int]*job
	pending  map[uint64]int // file number -> output level, between TableCreated and first write
	fileJob  map[uint64]int // file number -> job
	db       *pebble.DB
	pstats   []pathCounters // per location
	drained  map[int]bool
	orphans  []string    // old copies whose removal after a switch failed
	fullAt   []time.Time // per location: when it last returned ENOSPC; zero when it has room
	readers  map[string]map[*readFile]struct{}
	retained []int64                     // per location: bytes of moved-away copies a reader still holds open
	fates    [NumLevels][fateWindow]bool // latest compactions out of each level: moved down unchanged?
	fateNext [NumLevels]int              // compactions out of each level seen
	moveTo   [NumLevels]int              // output level of the latest move out of each level
	settling int                         // PlaceForSettle calls not yet done

	passMu sync.Mutex // one mover pass at a time

	dirty []atomic.Bool // per location: entries changed since db_path's handle last synced it

	countMu sync.Mutex // guards counts; taken last, never held while taking another lock
	counts  Counters

	limiter rateLimiter

	wakeCh    chan struct{}
	stopCh    chan struct{}
	doneCh    chan struct{}
	ctx       context.Context
	cancel    context.CancelFunc
	closeOnce sync.Once
	attached  atomic.Bool
}

// pathCounters are the running counts of one location (guarded by
// Layout.mu): the mover's moves in and out, and the new tables sent
// elsewhere because it was full.
type pathCounters struct {
	movedInFiles, movedInBytes   int64
	movedOutFiles, movedOutBytes int64
	failures                     int64
	spilledFiles, spilledBytes   int64
}

// count updates the layout's counters.
func (l *Layout) count(update func(c *Counters)) {
	l.countMu.Lock()
	update(&l.counts)
	l.countMu.Unlock()
}

// Counters returns the layout's running totals since New.
func (l *Layout) Counters() Counters {
	l.countMu.Lock()
	defer l.countMu.Unlock()
	return l.counts
}

// RecoveryStats counts what New cleaned up.
type RecoveryStats struct {
	// TempsRemoved counts partial copies of interrupted moves.
	TempsRemoved int
	// DuplicatesRemoved counts second copies of tables found in two
	// locations (a move interrupted between its rename and its removal of
	// the old copy, or a creation interrupted before its placeholder was
	// removed).
	DuplicatesRemoved int
}

// tempSuffix marks a mover's copy in progress. Pebble does not parse such
// names as tables, and the FS hides them.
const tempSuffix = ".tiering-tmp"

// pathsFile, in db_path, lists the table directories of the last open, so a
// path dropped from db_paths is drained rather than forgotten. Pebble
// ignores the name.
const pathsFile = "TIERING-PATHS"

// New validates paths, creates missing directories, cleans what an
// interrupted move left, and indexes every table file. dbDir is the
// directory given to pebble.Open: it keeps Pebble's metadata, and is
// normally paths[0].Dir. Table directories of the previous open that are no
// longer listed (and dbDir, when it is not a path) are drained by the mover.
//
// Errors from validation are *PathError values joined together, one per
// broken rule, each wrapping a sentinel (ErrNested, ErrZeroTarget, ...).
func New(base vfs.FS, dbDir string, paths []Path, opts Options) (*Layout, error) {
	l, err := newLayout(base, dbDir, paths, opts)
	if err != nil {
		return nil, err
	}
	if err := l.prepareDirs(); err != nil {
		return nil, err
	}
	if err := l.base.MkdirAll(dbDir, 0o755); err != nil {
		return nil, fmt.Errorf("tiering: db_path = %q: cannot create: %w", dbDir, err)
	}
	if err := l.addLocations(); err != nil {
		return nil, err
	}
	if err := l.index(true); err != nil {
		return nil, err
	}
	for i, loc := range l.locs {
		if loc.drain && l.countFiles(i) == 0 {
			l.drained[i] = true
		}
	}
	if err := l.writePathsFile(); err != nil {
		return nil, err
	}
	l.plan = l.computePlan([NumLevels]uint64{})
	l.fs = &tieredFS{l: l}
	l.ctx, l.cancel = context.WithCancel(context.Background())
	return l, nil
}

// Inspect reports the layout of a database without changing anything on
// disk and without running a mover: per path (and per directory still to
// drain) the table files and bytes found, the targets, and the plan as
// the LSM is, for levels as DB.SSTables returns them (nil: an empty LSM).
// It is what a read-only open shows, where no Layout runs; the running
// totals (Counters) are zero and Stats.Inspected is set.
func Inspect(base vfs.FS, dbDir string, paths []Path, shape LevelShape, levels [][]pebble.SSTableInfo) (Stats, error) {
	l, err := newLayout(base, dbDir, paths, Options{Shape: shape})
	if err != nil {
		return Stats{}, err
	}
	if err := l.addLocations(); err != nil {
		return Stats{}, err
	}
	if err := l.index(false); err != nil {
		return Stats{}, err
	}
	l.plan = Compute(levelSizes(levels), l.shape, l.targets)
	s := l.Stats()
	s.Inspected = true
	return s, nil
}

// newLayout validates paths and builds a layout over them, touching
// nothing on disk.
func newLayout(base vfs.FS, dbDir string, paths []Path, opts Options) (*Layout, error) {
	if base == nil {
		base = vfs.Default
	}
	cwd, _ := filepath.Abs(".")
	l := &Layout{
		base:    base,
		dbDir:   dbDir,
		cwd:     cwd,
		paths:   append([]Path(nil), paths...),
		opts:    opts,
		shape:   opts.Shape.withDefaults(),
		files:   make(map[string]*fileEntry),
		jobs:    make(map[int]*job),
		pending: make(map[uint64]int),
		fileJob: make(map[uint64]int),
		drained: make(map[int]bool),
		wakeCh:  make(chan struct{}, 1),
		stopCh:  make(chan struct{}),
		doneCh:  make(chan struct{}),
	}
	l.dbDirKey = l.canon(dbDir)
	if l.opts.MoverInterval <= 0 {
		l.opts.MoverInterval = 10 * time.Second
	}
	if l.opts.SettleTimeout <= 0 {
		l.opts.SettleTimeout = 60 * time.Second
	}
	l.limiter.rate = l.opts.MoveRate
	if err := validate(paths, l.canon); err != nil {
		return nil, err
	}
	for _, p := range paths {
		l.targets = append(l.targets, p.TargetSize)
	}
	return l, nil
}

// addLocations lists the table directories: the configured paths, then the
// directories to drain (db_path when it is not a path, and paths of the
// previous open no longer listed, as TIERING-PATHS records them).
func (l *Layout) addLocations() error {
	for _, p := range l.paths {
		l.locs = append(l.locs, location{dir: p.Dir, target: p.TargetSize})
	}
	known := make(map[string]bool)
	for _, loc := range l.locs {
		known[l.canon(loc.dir)] = true
	}
	addDrain := func(dir string) {
		if k := l.canon(dir); !known[k] {
			known[k] = true
			l.locs = append(l.locs, location{dir: dir, drain: true})
		}
	}
	addDrain(l.dbDir)
	prev, err := l.readPathsFile()
	if err != nil {
		return err
	}
	for _, dir := range prev {
		if _, err := l.base.Stat(dir); err == nil {
			addDrain(dir)
		}
	}
	l.pstats = make([]pathCounters, len(l.locs))
	l.dirty = make([]atomic.Bool, len(l.locs))
	l.fullAt = make([]time.Time, len(l.locs))
	l.retained = make([]int64, len(l.locs))
	l.readers = make(map[string]map[*readFile]struct{})
	for i := range l.usage {
		l.usage[i] = make(map[int]int64)
	}
	return nil
}

// canon returns the absolute, cleaned form of dir, for comparisons.
func (l *Layout) canon(dir string) string {
	dir = filepath.Clean(dir)
	if !filepath.IsAbs(dir) {
		dir = filepath.Join(l.cwd, dir)
	}
	return dir
}

// validate checks paths without side effects, reporting every problem.
func validate(paths []Path, canon func(string) string) error {
	if len(paths) == 0 {
		return ErrNoPaths
	}
	var errs []error
	for _, e := range check(paths, canon) {
		errs = append(errs, e)
	}
	return errors.Join(errs...)
}

// CheckPaths returns every broken rule of a db_paths list, without side
// effects: each entry needs a directory and a target from 1 to
// MaxTargetSize, and no two entries may name the same directory or nest
// (relative directories compare in their absolute form against the working
// directory). A conflict is reported once, on the later entry.
func CheckPaths(paths []Path) []*PathError {
	return check(paths, fsutil.Abs)
}

func check(paths []Path, canon func(string) string) []*PathError {
	var errs []*PathError
	keys := make([]string, len(paths))
	for i, p := range paths {
		if strings.TrimSpace(p.Dir) == "" {
			errs = append(errs, &PathError{i, "path", p.Dir, "must not be empty", ErrEmptyDir})
		} else {
			keys[i] = canon(p.Dir)
		}
		if p.TargetSize == 0 || p.TargetSize > MaxTargetSize {
			errs = append(errs, &PathError{i, "target_size_bytes", p.TargetSize,
				fmt.Sprintf("must be from 1 to %d", uint64(MaxTargetSize)), ErrTargetRange})
		}
	}
	for i := range paths {
		for j := range i {
			a, b := keys[j], keys[i]
			if a == "" || b == "" {
				continue
			}
			var rule string
			var sentinel error
			switch {
			case a == b:
				rule, sentinel = "is the same directory as db_paths[%d].path (%q): entries must be distinct", ErrDuplicate
			case fsutil.Contains(a, b):
				rule, sentinel = "lies inside db_paths[%d].path (%q): entries must not nest", ErrNested
			case fsutil.Contains(b, a):
				rule, sentinel = "contains db_paths[%d].path (%q): entries must not nest", ErrNested
			default:
				continue
			}
			errs = append(errs, &PathError{i, "path", paths[i].Dir, fmt.Sprintf(rule, j, paths[j].Dir), sentinel})
			break
		}
	}
	return errs
}

// prepareDirs creates missing paths and checks each is writable.
func (l *Layout) prepareDirs() error {
	var errs []error
	for i, p := range l.paths {
		if err := l.base.MkdirAll(p.Dir, 0o755); err != nil {
			errs = append(errs, &PathError{i, "path", p.Dir, "is missing and cannot be created: " + err.Error(), fmt.Errorf("%w: %w", ErrCannotCreate, err)})
			continue
		}
		probe := l.base.PathJoin(p.Dir, ".tiering-probe")
		f, err := l.base.Create(probe, vfs.WriteCategoryUnspecified)
		if err == nil {
			err = f.Close()
			if rmErr := l.base.Remove(probe); err == nil {
				err = rmErr
			}
		}
		if err != nil {
			errs = append(errs, &PathError{i, "path", p.Dir, "is not writable: " + err.Error(), fmt.Errorf("%w: %w", ErrNotWritable, err)})
		}
	}
	return errors.Join(errs...)
}

// fileKind tells table and blob files (placed by level) from the rest.
type fileKind int

const (
	kindOther fileKind = iota
	kindTable
	kindBlob
)

// parseName parses a Pebble table ("000123.sst") or blob ("000123.blob")
// file name.
func parseName(name string) (num uint64, kind fileKind) {
	i := strings.IndexByte(name, '.')
	if i <= 0 {
		return 0, kindOther
	}
	switch name[i+1:] {
	case "sst":
		kind = kindTable
	case "blob":
		kind = kindBlob
	default:
		return 0, kindOther
	}
	n, err := strconv.ParseUint(name[:i], 10, 64)
	if err != nil {
		return 0, kindOther
	}
	return n, kind
}

func tableName(num uint64) string { return fmt.Sprintf("%06d.sst", num) }

// index maps every table and blob file of every location. With fix (New)
// it removes temporary copies and the incomplete copy of any table found
// twice; without (Inspect) it changes nothing, skips temporary copies and
// counts a second copy's bytes as retained in its location.
func (l *Layout) index(fix bool) error {
	type found struct {
		loc  int
		size int64
	}
	all := make(map[string][]found)
	for i, loc := range l.locs {
		names, err := l.base.List(loc.dir)
		if err != nil {
			if oserror.IsNotExist(err) && loc.drain {
				continue
			}
			return fmt.Errorf("tiering: list %q: %w", loc.dir, err)
		}
		dirty := false
		for _, name := range names {
			full := l.base.PathJoin(loc.dir, name)
			if strings.HasSuffix(name, tempSuffix) {
				if !fix {
					continue
				}
				if err := l.base.Remove(full); err != nil && !oserror.IsNotExist(err) {
					return fmt.Errorf("tiering: remove partial copy %q: %w", full, err)
				}
				l.counts.Recovery.TempsRemoved++
				dirty = true
				continue
			}
			if _, kind := parseName(name); kind == kindOther {
				continue
			}
			fi, err := l.base.Stat(full)
			if err != nil {
				if !fix && oserror.IsNotExist(err) {
					continue
				}
				return fmt.Errorf("tiering: stat %q: %w", full, err)
			}
			all[name] = append(all[name], found{i, fi.Size()})
		}
		if dirty {
			if err := l.syncDir(i); err != nil {
				return err
			}
		}
	}
	dirty := make(map[int]bool)
	for name, copies := range all {
		// Keep the largest copy: a mover's copy is renamed into place only
		// when complete, and a creation placeholder is empty. Between equal
		// sizes keep the copy in a configured path, the earliest.
		sort.Slice(copies, func(i, j int) bool {
			if copies[i].size != copies[j].size {
				return copies[i].size > copies[j].size
			}
			di, dj := l.locs[copies[i].loc].drain, l.locs[copies[j].loc].drain
			if di != dj {
				return !di
			}
			return copies[i].loc < copies[j].loc
		})
		for _, c := range copies[1:] {
			if !fix {
				l.retained[c.loc] += c.size
				continue
			}
			full := l.base.PathJoin(l.locs[c.loc].dir, name)
			if err := l.base.Remove(full); err != nil && !oserror.IsNotExist(err) {
				return fmt.Errorf("tiering: remove duplicate %q: %w", full, err)
			}
			l.logf("tiering: removed duplicate %s (%d bytes), kept the copy in %s (%d bytes)", full, c.size, l.locs[copies[0].loc].dir, copies[0].size)
			l.counts.Recovery.DuplicatesRemoved++
			dirty[c.loc] = true
		}
		l.files[name] = &fileEntry{loc: copies[0].loc, size: copies[0].size, level: -1, placedAs: -1}
	}
	for loc := range dirty {
		if err := l.syncDir(loc); err != nil {
			return err
		}
	}
	return nil
}

// countFiles counts the files mapped to location loc. l.mu need not be held
// before the layout is shared.
func (l *Layout) countFiles(loc int) int {
	n := 0
	for _, e := range l.files {
		if e.loc == loc {
			n++
		}
	}
	return n
}

// readPathsFile returns the table directories recorded by the previous
// open. A file written for another db_path (the database was copied or
// moved) is ignored: its directories belong to the original.
func (l *Layout) readPathsFile() ([]string, error) {
	name := l.base.PathJoin(l.dbDir, pathsFile)
	f, err := l.base.Open(name)
	if err != nil {
		if oserror.IsNotExist(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("tiering: read %s: %w", name, err)
	}
	b, err := io.ReadAll(f)
	_ = f.Close()
	if err != nil {
		return nil, fmt.Errorf("tiering: read %s: %w", name, err)
	}
	var dirs []string
	for _, line := range strings.Split(string(b), "\n") {
		key, value, ok := strings.Cut(line, " ")
		switch {
		case !ok || strings.HasPrefix(line, "#"):
		case key == "db_path" && l.canon(value) != l.dbDirKey:
			l.logf("tiering: %s was written for db_path %q, not %q: ignoring its directories", name, value, l.dbDir)
			return nil, nil
		case key == "path":
			dirs = append(dirs, value)
		}
	}
	return dirs, nil
}

// writePathsFile records db_path, the configured paths and the directories
// still being drained, atomically.
func (l *Layout) writePathsFile() error {
	var b strings.Builder
	b.WriteString("# table directories of this database (package tiering); do not edit\n")
	fmt.Fprintf(&b, "db_path %s\n", l.dbDirKey)
	for i, loc := range l.locs {
		if loc.drain && (l.drained[i] || l.canon(loc.dir) == l.dbDirKey) {
			continue // drained, or db_path, which is always searched
		}
		fmt.Fprintf(&b, "path %s\n", l.canon(loc.dir))
	}
	if err := fsutil.WriteFileAtomic(l.base, l.dbDir, pathsFile, []byte(b.String())); err != nil {
		return fmt.Errorf("tiering: write %s: %w", pathsFile, err)
	}
	return nil
}

func (l *Layout) syncDir(loc int) error {
	if err := fsutil.SyncDir(l.base, l.locs[loc].dir); err != nil {
		return fmt.Errorf("tiering: sync directory %q: %w", l.locs[loc].dir, err)
	}
	return nil
}

// markDirty notes that location loc's directory changed and needs a sync
// when Pebble syncs db_path.
func (l *Layout) markDirty(loc int) { l.dirty[loc].Store(true) }

// physical is the path of file name in location loc.
func (l *Layout) physical(loc int, name string) string {
	return l.base.PathJoin(l.locs[loc].dir, name)
}

func (l *Layout) logf(format string, args ...any) {
	if l.opts.Logger != nil {
		l.opts.Logger.Infof(format, args...)
	}
}

func (l *Layout) errorf(format string, args ...any) {
	if l.opts.Logger != nil {
		l.opts.Logger.Errorf(format, args...)
	}
}

// FS returns the file system to give Pebble as Options.FS. Pebble's other
// files (WAL, MANIFEST, OPTIONS, LOCK) pass through to the base FS
// unchanged. It stays usable after Close.
func (l *Layout) FS() vfs.FS { return l.fs }

// LevelPaths returns the level-to-path map: for each level, the first path
// that holds it (a level split over paths continues on the next ones; see
// Plan).
func (l *Layout) LevelPaths() [NumLevels]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.plan.LevelPaths()
}

// Plan returns the current placement plan.
func (l *Layout) Plan() Plan {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.plan
}

// PlaceForSettle places new tables by the plan as the LSM is (the plan
// Settle brings every table to) instead of the plan ahead, until done is
// called. A full compaction (the engine's CompactAll) ends with Settle:
// its outputs placed by the plan ahead would be copied again by Settle,
// filling the fast paths the plan ahead keeps for levels yet to come.
func (l *Layout) PlaceForSettle() (done func()) {
	l.mu.Lock()
	l.settling++
	l.plan = Compute(l.levelSizesLocked(), l.shape, l.targets)
	l.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			l.settling--
			l.mu.Unlock()
		})
	}
}

// levelSizesLocked sums the last scan's bytes per level.
func (l *Layout) levelSizesLocked() (sizes [NumLevels]uint64) {
	for level, locs := range l.usage {
		for _, n := range locs {
			sizes[level] += uint64(max(n, 0))
		}
	}
	return sizes
}

// Attach gives the layout the open database: placement then follows the
// LSM's real shape, and the mover starts (unless Options.DisableMover),
// first relocating whatever an earlier open with other paths left behind.
// Call it once, right after pebble.Open.
func (l *Layout) Attach(db *pebble.DB) {
	l.mu.Lock()
	l.db = db
	l.mu.Unlock()
	// Make the plan for the real LSM now, so compactions that start before
	// the mover's first pass already place their outputs by it.
	l.passMu.Lock()
	if levels, err := db.SSTables(); err == nil {
		_, _ = l.planMoves(levels, false, nil)
	}
	l.passMu.Unlock()
	if l.opts.DisableMover || !l.attached.CompareAndSwap(false, true) {
		return
	}
	go l.run()
	l.wake()
}

// Close stops the mover and any Rebalance or Settle in progress: a move
// before its switch is rolled back (its temporary copy removed) and counted
// in Stats as interrupted, a move past its switch completes. The next open's
// mover, or the next Settle, picks the table up again, so a short-lived
// process converges over its runs. Call it before closing the database. The FS stays usable, so Pebble
// can still close through it.
func (l *Layout) Close() error {
	l.closeOnce.Do(func() {
		close(l.stopCh)
		l.cancel()
		if l.attached.Load() {
			<-l.doneCh
		}
		l.passMu.Lock()
		l.mu.Lock()
		l.db = nil
		l.mu.Unlock()
		l.passMu.Unlock()
	})
	return nil
}
