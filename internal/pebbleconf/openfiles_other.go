//go:build !unix

package pebbleconf

// openFileLimit is Pebble's default where the process has no RLIMIT_NOFILE.
func openFileLimit() uint64 { return 1000 }
