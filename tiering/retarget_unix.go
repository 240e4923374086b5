//go:build unix && !linux

package tiering

import (
	"github.com/cockroachdb/pebble/v2/vfs"
	"golang.org/x/sys/unix"
)

// retarget makes writes through ph go to real; see retarget_linux.go.
// dup2 leaves close-on-exec unset on the retargeted descriptor.
func retarget(ph, real vfs.File) (vfs.File, error) {
	pfd, rfd := ph.Fd(), real.Fd()
	if pfd == vfs.InvalidFd || rfd == vfs.InvalidFd {
		_ = ph.Close()
		return real, nil
	}
	if err := unix.Dup2(int(rfd), int(pfd)); err != nil {
		return nil, err
	}
	if err := real.Close(); err != nil {
		return nil, err
	}
	return ph, nil
}
