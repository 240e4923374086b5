//go:build unix

package tune

import (
	"syscall"
	"time"
)

// processCPU returns the CPU time the process has used so far, user and
// system, summed over all its threads (getrusage RUSAGE_SELF): Pebble's
// background flushes and compactions count, as they are work the
// measured phase caused.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
