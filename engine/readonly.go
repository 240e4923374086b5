package engine

import (
	"fmt"
	"io"

	"os"
	"slices"
	"strings"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stratadb/strata/config"
	"github.com/stratadb/strata/internal/fsutil"
)

// tableDirs are the directories besides db_path where a read-only open
// looks for table files: the configured db_paths and those the tiering
// record lists (paths of an earlier open, still being drained).
func tableDirs(cfg *config.Config, rec *config.Recorded) []string {
	var dirs []string
	add := func(d string) {
		if d != "" && !fsutil.SamePath(d, cfg.DBPath) && !slices.ContainsFunc(dirs, func(x string) bool { return fsutil.SamePath(x, d) }) {
			dirs = append(dirs, d)
		}
	}
	for _, p := range cfg.DBPaths {
		add(p.Path)
	}
	for _, d := range rec.TableDirs {
		add(d)
	}
	return dirs
}

// readOnlyFS is the file system of a read-only open: table files named in
// db_path are found in whichever table directory holds them (a tiered
// database), db_path's listing shows them all, and every call that would
// change something fails with ErrReadOnly. Lock takes a shared lock on the
// operating system's file system (see sharedLock) and none on another.
type roFS struct {
	vfs.FS
	dbPath string
	dirs   []string
}

func readOnlyFS(fs vfs.FS, dbPath string, dirs []string) vfs.FS {
	return &roFS{FS: fs, dbPath: dbPath, dirs: dirs}
}

// resolve returns where name really is: itself, or for a table file in
// db_path that is not there, its copy in a table directory.
func (f *roFS) resolve(name string) string {
	if _, err := f.FS.Stat(name); err == nil || !strings.HasSuffix(name, ".sst") || !fsutil.SamePath(f.FS.PathDir(name), f.dbPath) {
		return name
	}
	base := f.FS.PathBase(name)
	for _, d := range f.dirs {
		alt := f.FS.PathJoin(d, base)
		if _, err := f.FS.Stat(alt); err == nil {
			return alt
		}
	}
	return name
}

func (f *roFS) Open(name string, opts ...vfs.OpenOption) (vfs.File, error) {
	return f.FS.Open(f.resolve(name), opts...)
}

func (f *roFS) Stat(name string) (vfs.FileInfo, error) { return f.FS.Stat(f.resolve(name)) }

func (f *roFS) List(dir string) ([]string, error) {
	names, err := f.FS.List(dir)
	if err != nil || !fsutil.SamePath(dir, f.dbPath) {
		return names, err
	}
	for _, d := range f.dirs {
		more, err := f.FS.List(d)
		if err != nil {
			continue // a directory that is gone holds no table
		}
		for _, n := range more {
			if strings.HasSuffix(n, ".sst") && !slices.Contains(names, n) {
				names = append(names, n)
			}
		}
	}
	return names, nil
}

func (f *roFS) refuse(op, name string) error {
	return &os.PathError{Op: op, Path: name, Err: fmt.Errorf("%w: the file system is read-only", ErrReadOnly)}
}

func (f *roFS) Create(name string, _ vfs.DiskWriteCategory) (vfs.File, error) {
	return nil, f.refuse("create", name)
}
func (f *roFS) Link(oldname, newname string) error { return f.refuse("link", newname) }
func (f *roFS) OpenReadWrite(name string, _ vfs.DiskWriteCategory, _ ...vfs.OpenOption) (vfs.File, error) {
	return nil, f.refuse("open for writing", name)
}
func (f *roFS) Remove(name string) error             { return f.refuse("remove", name) }
func (f *roFS) RemoveAll(name string) error          { return f.refuse("remove", name) }
func (f *roFS) Rename(oldname, newname string) error { return f.refuse("rename", oldname) }
func (f *roFS) ReuseForWrite(oldname, newname string, _ vfs.DiskWriteCategory) (vfs.File, error) {
	return nil, f.refuse("reuse", oldname)
}
func (f *roFS) MkdirAll(dir string, perm os.FileMode) error {
	if _, err := f.FS.Stat(dir); err == nil {
		return nil
	}
	return f.refuse("mkdir", dir)
}

func (f *roFS) Lock(name string) (io.Closer, error) {
	if vfs.Root(f.FS) == vfs.Default {
		return sharedLock(name)
	}
	return io.NopCloser(nil), nil
}

// Unwrap returns the wrapped file system.
func (f *roFS) Unwrap() vfs.FS { return f.FS }
