//go:build unix

package engine

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"golang.org/x/sys/unix"
)

// sharedLock takes a shared (read) lock on the existing lock file name
// without modifying it (Pebble's own Lock truncates it, which changes its
// mtime). Pebble's writers hold an exclusive fcntl lock on the same file,
// so a read-only open fails while a writer has the database open, and a
// writer cannot open it while a reader holds it.
func sharedLock(name string) (io.Closer, error) {
	f, err := os.Open(name)
	if errors.Is(err, fs.ErrNotExist) {
		// No writer ever opened this copy (a checkpoint): nothing to lock
		// against, and creating the file would change the directory.
		return io.NopCloser(nil), nil
	}
	if err != nil {
		return nil, err
	}
	spec := unix.Flock_t{Type: unix.F_RDLCK, Whence: io.SeekStart}
	if err := unix.FcntlFlock(f.Fd(), unix.F_SETLK, &spec); err != nil {
		_ = f.Close()
		if isLockConflict(err) {
			return nil, fmt.Errorf("engine: read-only open: lock %s: %w: %w", name, ErrLocked, err)
		}
		return nil, fmt.Errorf("engine: read-only open: lock %s: %w", name, err)
	}
	return f, nil
}

// isLockConflict reports whether err is a lock held by another process:
// fcntl's F_SETLK fails with EAGAIN or EACCES then.
func isLockConflict(err error) bool {
	return errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EACCES)
}
