//go:build unix

package pebbleconf

import "syscall"

// openFileLimit is the process's soft limit on open files (RLIMIT_NOFILE);
// Pebble's default (1000) when it cannot be read.
func openFileLimit() uint64 {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		return 1000
	}
	return l.Cur
}
