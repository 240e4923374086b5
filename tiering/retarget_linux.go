//go:build linux

package tiering

import (
	"github.com/cockroachdb/pebble/v2/vfs"
	"golang.org/x/sys/unix"
)

// retarget makes writes through ph go to real. With OS descriptors it
// dup3s real's descriptor onto ph's, so the number Pebble holds now names
// the real file, closes real's own descriptor and returns ph. Without (an
// in-memory FS) it closes ph and returns real.
func retarget(ph, real vfs.File) (vfs.File, error) {
	pfd, rfd := ph.Fd(), real.Fd()
	if pfd == vfs.InvalidFd || rfd == vfs.InvalidFd {
		_ = ph.Close()
		return real, nil
	}
	if err := unix.Dup3(int(rfd), int(pfd), unix.O_CLOEXEC); err != nil {
		return nil, err
	}
	if err := real.Close(); err != nil {
		return nil, err
	}
	return ph, nil
}
