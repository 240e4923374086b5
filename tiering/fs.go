package tiering

import (
	"io"
	"os"
	"sort"
	"strings"
	"sync"

	"github.com/cockroachdb/errors/oserror"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stratadb/strata/internal/fsutil"
)

// tieredFS is the vfs.FS given to Pebble. Names of table and blob files
// directly under db_path resolve to the location the layout's map gives;
// every other name passes through to the base FS.
type tieredFS struct {
	l *Layout
}

var _ vfs.FS = (*tieredFS)(nil)

// managed returns the base name of name when it is a table or blob file
// under db_path.
func (fs *tieredFS) managed(name string) (string, fileKind, bool) {
	l := fs.l
	base := l.base.PathBase(name)
	_, kind := parseName(base)
	if kind == kindOther {
		return "", kindOther, false
	}
	if l.canon(l.base.PathDir(name)) != l.dbDirKey {
		return "", kindOther, false
	}
	return base, kind, true
}

func (fs *tieredFS) isDBDir(dir string) bool { return fs.l.canon(dir) == fs.l.dbDirKey }

// lookup returns the location of file name, and whether it is known.
func (l *Layout) lookup(name string) (int, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if e, ok := l.files[name]; ok {
		return e.loc, true
	}
	return 0, false
}

// withLocation runs op on the physical path of file name. If op finds no
// file and the mover switched the file to another location meanwhile, op
// runs again there: a reader resolving a table during a move never sees it
// missing.
func (l *Layout) withLocation(name string, op func(path string) error) error {
	loc, _ := l.lookup(name)
	for attempt := 0; ; attempt++ {
		err := op(l.physical(loc, name))
		if err == nil || !oserror.IsNotExist(err) || attempt >= 3 {
			return err
		}
		now, ok := l.lookup(name)
		if !ok || now == loc {
			return err
		}
		loc = now
	}
}

// Create creates a file. A table or blob file is created as a placeholder
// in path 0 and placed by level at its first write (see tableFile).
func (fs *tieredFS) Create(name string, category vfs.DiskWriteCategory) (vfs.File, error) {
	base, kind, ok := fs.managed(name)
	if !ok {
		return fs.l.base.Create(name, category)
	}
	l := fs.l
	// Create replaces an existing file of that name, wherever it is (the
	// base FS's Create replaces one in path 0 itself).
	if loc, ok := l.lookup(base); ok && loc != 0 {
		if err := fs.removeManaged(base); err != nil && !oserror.IsNotExist(err) {
			return nil, err
		}
	}
	l.markDirty(0)
	f, err := l.base.Create(l.physical(0, base), category)
	if err != nil {
		return nil, err
	}
	num, _ := parseName(base)
	l.mu.Lock()
	l.files[base] = &fileEntry{loc: 0, creating: true, level: -1, placedAs: -1}
	l.mu.Unlock()
	l.count(func(c *Counters) { c.CreatedFiles++ })
	return &tableFile{l: l, name: base, num: num, kind: kind, category: category, inner: f}, nil
}

// Link creates newname as a hard link to oldname. A table linked into
// db_path (ingestion) lands in the location of its source table, or in path
// 0 when the source is outside the layout.
func (fs *tieredFS) Link(oldname, newname string) error {
	l := fs.l
	oldBase, _, oldManaged := fs.managed(oldname)
	newBase, _, newManaged := fs.managed(newname)
	switch {
	case !oldManaged && !newManaged:
		return l.base.Link(oldname, newname)
	case oldManaged && !newManaged:
		return l.withLocation(oldBase, func(p string) error { return l.base.Link(p, newname) })
	case !oldManaged && newManaged:
		// A table written in one of the layout's directories (TablePath)
		// stays on that device; any other lands in path 0.
		loc := l.locationOf(l.base.PathDir(oldname))
		l.markDirty(loc)
		if err := l.base.Link(oldname, l.physical(loc, newBase)); err != nil {
			return err
		}
		l.record(newBase, loc)
		return nil
	default:
		var loc int
		err := l.withLocation(oldBase, func(p string) error {
			loc, _ = l.lookup(oldBase)
			l.markDirty(loc)
			return l.base.Link(p, l.physical(loc, newBase))
		})
		if err == nil {
			l.record(newBase, loc)
		}
		return err
	}
}

// locationOf returns the configured path whose directory is dir, or 0.
func (l *Layout) locationOf(dir string) int {
	key := l.canon(dir)
	for i := range l.targets {
		if l.canon(l.locs[i].dir) == key {
			return i
		}
	}
	return 0
}

// TablePath returns where to write a table of one's own (not Pebble's) that
// will be ingested into level: name in the directory of the path the plan
// gives the level's next table (one with room). Pebble's ingestion hard-links
// it into the database, and the layout keeps it in that path, so it lands
// where its level belongs instead of in path 0 to be copied again. The
// caller removes its own name after the ingestion, as usual. If Pebble puts
// the table in another level than expected, the mover relocates it like any
// table whose level changed.
func (l *Layout) TablePath(level int, name string) string {
	if level < 0 || level >= NumLevels {
		level = NumLevels - 1
	}
	l.mu.Lock()
	est := l.shape.targetFileSize(level, l.plan.BaseLevel)
	to := l.plan.firstFit(level, 0, est, func(p int) int64 { return l.effUsageLocked(level, p) })
	l.mu.Unlock()
	to = l.withRoom(to, est)
	return l.base.PathJoin(l.locs[to].dir, name)
}

// record maps name to loc with its current size.
func (l *Layout) record(name string, loc int) {
	var size int64
	if fi, err := l.base.Stat(l.physical(loc, name)); err == nil {
		size = fi.Size()
	}
	l.mu.Lock()
	l.files[name] = &fileEntry{loc: loc, size: size, level: -1, placedAs: -1}
	l.mu.Unlock()
}

// Open opens a file for reading, a table wherever it lives. A table's
// reader follows the table when the mover relocates it (see readFile).
func (fs *tieredFS) Open(name string, opts ...vfs.OpenOption) (vfs.File, error) {
	base, _, ok := fs.managed(name)
	if !ok {
		return fs.l.base.Open(name, opts...)
	}
	l := fs.l
	for attempt := 0; ; attempt++ {
		var f vfs.File
		var loc int
		err := l.withLocation(base, func(p string) error {
			var err error
			loc, _ = l.lookup(base)
			f, err = l.base.Open(p, opts...)
			return err
		})
		if err != nil {
			return nil, err
		}
		r := &readFile{l: l, name: base, opts: opts, inner: f, loc: loc}
		if l.addReader(r) || attempt >= 3 {
			return r, nil
		}
		_ = f.Close() // switched meanwhile: open the new copy
	}
}

// readFile is a table opened for reading. When the mover switches the
// table to another path, the reader reopens it there and closes the old
// copy (the copies are identical), so the old copy's space is freed as
// soon as reads in flight on it finish rather than when Pebble's file cache
// lets go of it.
type readFile struct {
	l    *Layout
	name string
	opts []vfs.OpenOption

	mu       sync.RWMutex // held shared by reads, exclusively to switch inner
	inner    vfs.File
	loc      int
	closed   bool
	retained int64 // bytes of an old copy this reader still holds (reopen failed)
}

func (r *readFile) Read(p []byte) (int, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.inner.Read(p)
}

func (r *readFile) ReadAt(p []byte, off int64) (int, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.inner.ReadAt(p, off)
}

func (r *readFile) Stat() (vfs.FileInfo, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.inner.Stat()
}

func (r *readFile) Prefetch(off, n int64) error {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.inner.Prefetch(off, n)
}

func (r *readFile) Fd() uintptr {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.inner.Fd()
}

func (r *readFile) Write(p []byte) (int, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.inner.Write(p)
}

func (r *readFile) WriteAt(p []byte, off int64) (int, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.inner.WriteAt(p, off)
}

func (r *readFile) Preallocate(off, n int64) error {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.inner.Preallocate(off, n)
}

func (r *readFile) Sync() error {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.inner.Sync()
}

func (r *readFile) SyncData() error {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.inner.SyncData()
}

func (r *readFile) SyncTo(length int64) (bool, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.inner.SyncTo(length)
}

func (r *readFile) Close() error {
	r.l.removeReader(r)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	if r.retained > 0 {
		r.l.mu.Lock()
		r.l.retained[r.loc] -= r.retained
		r.l.mu.Unlock()
		r.retained = 0
	}
	return r.inner.Close()
}

// addReader registers r, unless the table moved since r resolved it.
func (l *Layout) addReader(r *readFile) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if e, ok := l.files[r.name]; ok && e.loc != r.loc {
		return false
	}
	set := l.readers[r.name]
	if set == nil {
		set = make(map[*readFile]struct{})
		l.readers[r.name] = set
	}
	set[r] = struct{}{}
	return true
}

func (l *Layout) removeReader(r *readFile) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if set := l.readers[r.name]; set != nil {
		delete(set, r)
		if len(set) == 0 {
			delete(l.readers, r.name)
		}
	}
}

// switchReaders points the open readers of table name at its copy in
// location to, closing their descriptors of the old copy in from. A reader
// whose reopen fails keeps the old copy; its bytes count in Stats against
// from until the reader closes.
func (l *Layout) switchReaders(name string, from, to int, size int64) {
	l.mu.Lock()
	var rs []*readFile
	for r := range l.readers[name] {
		rs = append(rs, r)
	}
	l.mu.Unlock()
	for _, r := range rs {
		nf, err := l.base.Open(l.physical(to, name), r.opts...)
		r.mu.Lock()
		switch {
		case r.closed || r.loc != from:
		case err != nil:
			if r.retained == 0 {
				r.retained = size
				l.mu.Lock()
				l.retained[from] += size
				l.mu.Unlock()
			}
			l.errorf("tiering: reopen %s in %s for a reader: %v; the reader keeps the old copy", name, l.locs[to].dir, err)
		default:
			old := r.inner
			r.inner, r.loc, nf = nf, to, old
		}
		r.mu.Unlock()
		if nf != nil {
			_ = nf.Close()
		}
	}
}

// OpenReadWrite opens a file for reading and writing, creating it if
// missing (a new table goes to path 0).
func (fs *tieredFS) OpenReadWrite(name string, category vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	base, _, ok := fs.managed(name)
	if !ok {
		return fs.l.base.OpenReadWrite(name, category, opts...)
	}
	l := fs.l
	if _, known := l.lookup(base); !known {
		f, err := l.base.OpenReadWrite(l.physical(0, base), category, opts...)
		if err == nil {
			l.record(base, 0)
		}
		return f, err
	}
	var f vfs.File
	err := l.withLocation(base, func(p string) error {
		var err error
		f, err = l.base.OpenReadWrite(p, category, opts...)
		return err
	})
	return f, err
}

// OpenDir opens a directory for syncing. db_path's handle syncs every
// location, so a table created in another path is durable when Pebble syncs
// db_path.
func (fs *tieredFS) OpenDir(name string) (vfs.File, error) {
	if !fs.isDBDir(name) {
		return fs.l.base.OpenDir(name)
	}
	d, err := fs.l.base.OpenDir(name)
	if err != nil {
		return nil, err
	}
	return &multiDir{File: d, l: fs.l}, nil
}

// Remove removes a file; a table is removed from wherever it lives.
func (fs *tieredFS) Remove(name string) error {
	base, _, ok := fs.managed(name)
	if !ok {
		return fs.l.base.Remove(name)
	}
	return fs.removeManaged(base)
}

// removeManaged unmaps table name, then removes it. A mover copying it
// finds it unmapped at its switch and drops its copy.
func (fs *tieredFS) removeManaged(name string) error {
	l := fs.l
	l.mu.Lock()
	e, ok := l.files[name]
	delete(l.files, name)
	l.mu.Unlock()
	if !ok {
		return l.base.Remove(l.physical(0, name))
	}
	l.markDirty(e.loc)
	return l.base.Remove(l.physical(e.loc, name))
}

// RemoveAll removes a directory tree; for db_path, the tables in the other
// locations go too.
func (fs *tieredFS) RemoveAll(name string) error {
	l := fs.l
	if fs.isDBDir(name) {
		l.mu.Lock()
		var names []string
		for n := range l.files {
			names = append(names, n)
		}
		l.mu.Unlock()
		for _, n := range names {
			if err := fs.removeManaged(n); err != nil && !oserror.IsNotExist(err) {
				return err
			}
		}
	}
	return l.base.RemoveAll(name)
}

// Rename renames a file. Renaming a table keeps it in its location; a file
// renamed into db_path as a table lands in path 0.
func (fs *tieredFS) Rename(oldname, newname string) error {
	l := fs.l
	oldBase, _, oldManaged := fs.managed(oldname)
	newBase, _, newManaged := fs.managed(newname)
	switch {
	case !oldManaged && !newManaged:
		return l.base.Rename(oldname, newname)
	case !oldManaged && newManaged:
		l.markDirty(0)
		if err := l.base.Rename(oldname, l.physical(0, newBase)); err != nil {
			return err
		}
		l.record(newBase, 0)
		return nil
	case oldManaged && !newManaged:
		err := l.withLocation(oldBase, func(p string) error {
			loc, _ := l.lookup(oldBase)
			l.markDirty(loc)
			return l.base.Rename(p, newname)
		})
		if err == nil {
			l.mu.Lock()
			delete(l.files, oldBase)
			l.mu.Unlock()
		}
		return err
	default:
		var loc int
		err := l.withLocation(oldBase, func(p string) error {
			loc, _ = l.lookup(oldBase)
			l.markDirty(loc)
			return l.base.Rename(p, l.physical(loc, newBase))
		})
		if err == nil {
			l.mu.Lock()
			if e, ok := l.files[oldBase]; ok {
				delete(l.files, oldBase)
				l.files[newBase] = e
			}
			l.mu.Unlock()
		}
		return err
	}
}

// ReuseForWrite passes through: Pebble recycles only WAL files.
func (fs *tieredFS) ReuseForWrite(oldname, newname string, category vfs.DiskWriteCategory) (vfs.File, error) {
	return fs.l.base.ReuseForWrite(oldname, newname, category)
}

func (fs *tieredFS) MkdirAll(dir string, perm os.FileMode) error {
	return fs.l.base.MkdirAll(dir, perm)
}

func (fs *tieredFS) Lock(name string) (io.Closer, error) { return fs.l.base.Lock(name) }

// List lists a directory. db_path lists as its own files other than tables,
// plus every table of every location.
func (fs *tieredFS) List(dir string) ([]string, error) {
	l := fs.l
	names, err := l.base.List(dir)
	if err != nil || !fs.isDBDir(dir) {
		return names, err
	}
	out := names[:0]
	for _, n := range names {
		if _, kind := parseName(n); kind != kindOther || strings.HasSuffix(n, tempSuffix) || n == pathsFile+".tmp" {
			continue
		}
		out = append(out, n)
	}
	l.mu.Lock()
	for n := range l.files {
		out = append(out, n)
	}
	l.mu.Unlock()
	sort.Strings(out)
	return out, nil
}

// Stat describes a file, a table wherever it lives.
func (fs *tieredFS) Stat(name string) (vfs.FileInfo, error) {
	base, _, ok := fs.managed(name)
	if !ok {
		return fs.l.base.Stat(name)
	}
	var fi vfs.FileInfo
	err := fs.l.withLocation(base, func(p string) error {
		var err error
		fi, err = fs.l.base.Stat(p)
		return err
	})
	return fi, err
}

func (fs *tieredFS) PathBase(path string) string    { return fs.l.base.PathBase(path) }
func (fs *tieredFS) PathJoin(elem ...string) string { return fs.l.base.PathJoin(elem...) }
func (fs *tieredFS) PathDir(path string) string     { return fs.l.base.PathDir(path) }
func (fs *tieredFS) Unwrap() vfs.FS                 { return fs.l.base }
func (fs *tieredFS) GetDiskUsage(path string) (vfs.DiskUsage, error) {
	return fs.l.base.GetDiskUsage(path)
}

// multiDir is db_path's directory handle; Sync also syncs every location
// whose entries changed since its last sync (Pebble syncs db_path after
// creating or removing tables).
type multiDir struct {
	vfs.File
	l *Layout
}

func (d *multiDir) Sync() error {
	err := d.File.Sync()
	for i, loc := range d.l.locs {
		if d.l.canon(loc.dir) == d.l.dbDirKey || !d.l.dirty[i].Swap(false) {
			continue
		}
		if serr := fsutil.SyncDir(d.l.base, loc.dir); serr != nil {
			d.l.dirty[i].Store(true)
			if err == nil {
				err = serr
			}
		}
	}
	return err
}
