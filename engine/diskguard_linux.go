package engine

import (
	"github.com/cockroachdb/pebble/v2/vfs"
	"golang.org/x/sys/unix"
)

// allocateFile gives f size bytes of allocated space with fallocate, and
// reports whether it did; false leaves the caller to write zeros.
func allocateFile(f vfs.File, size int64) bool {
	fd := f.Fd()
	if fd == vfs.InvalidFd {
		return false
	}
	return unix.Fallocate(int(fd), 0, 0, size) == nil
}
