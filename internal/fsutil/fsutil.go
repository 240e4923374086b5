// Package fsutil holds the file-system helpers Strata's packages share, so
// that each rule is written once: the absolute form of a configured path,
// whether one directory lies inside another, and the atomic replacement of
// a small file (a temporary file, its fsync, a rename, the directory's
// fsync) that config, engine and tiering use for the files they record
// beside the database.
//
// The file functions take a Pebble vfs.FS, as the engine does, so that a
// test can run them on vfs.NewCrashableMem and check what survives a crash,
// and so that they go through the same file system as the database (the
// read-only engine's, a tiered one, an error-injecting one).
package fsutil

import (
	"path/filepath"
	"strings"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// Abs returns the cleaned absolute form of p, or its cleaned form when the
// working directory is unknown. Two configured paths name the same
// directory when their Abs forms are equal, whatever their spelling
// ("data", "./data/", "/srv/x/data").
func Abs(p string) string {
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return filepath.Clean(p)
}

// SamePath reports whether a and b name the same directory once made
// absolute and cleaned (Abs).
func SamePath(a, b string) bool {
	return Abs(a) == Abs(b)
}

// Contains reports whether path lies strictly inside dir: below it, not dir
// itself. Both must be cleaned and absolute (Abs), so that "/a/b" contains
// "/a/b/c" but not "/a/bc", and "/" contains every other absolute path.
func Contains(dir, path string) bool {
	if path == dir {
		return false
	}
	prefix := dir
	if !strings.HasSuffix(prefix, string(filepath.Separator)) {
		prefix += string(filepath.Separator)
	}
	return strings.HasPrefix(path, prefix)
}

// WriteFileAtomic replaces dir/name with data so that after a crash the
// file holds either its old content or all of data, never a mix or
// nothing: data goes to dir/name.tmp, which is synced, closed and renamed
// over dir/name; then dir is synced, so that the rename itself survives.
// Errors are the file system's, which name the file; a name.tmp left by a
// failed write is replaced by the next one.
func WriteFileAtomic(fs vfs.FS, dir, name string, data []byte) error {
	final := fs.PathJoin(dir, name)
	tmp := final + ".tmp"
	f, err := fs.Create(tmp, vfs.WriteCategoryUnspecified)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if err := fs.Rename(tmp, final); err != nil {
		return err
	}
	return SyncDir(fs, dir)
}

// SyncDir fsyncs directory dir, making the creation, removal or renaming
// of the entries in it durable.
func SyncDir(fs vfs.FS, dir string) error {
	d, err := fs.OpenDir(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}
