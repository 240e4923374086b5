//go:build !unix

package tiering

import "github.com/cockroachdb/pebble/v2/vfs"

// retarget makes writes through ph go to real when neither has an OS
// descriptor; otherwise the table stays in path 0 for the mover.
func retarget(ph, real vfs.File) (vfs.File, error) {
	if ph.Fd() == vfs.InvalidFd || real.Fd() == vfs.InvalidFd {
		_ = ph.Close()
		return real, nil
	}
	return nil, errCannotRetarget
}
