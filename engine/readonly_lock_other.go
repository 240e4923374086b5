//go:build !unix

package engine

import (
	"io"
	"os"
)

// sharedLock holds the lock file open if there is one; without fcntl locks
// a read-only open takes no lock, as RocksDB's OpenForReadOnly.
func sharedLock(name string) (io.Closer, error) {
	f, err := os.Open(name)
	if err != nil {
		return io.NopCloser(nil), nil
	}
	return f, nil
}

// isLockConflict reports whether err is a lock held by another process;
// without fcntl locks there is none to tell.
func isLockConflict(error) bool { return false }
