//go:build !unix

package tune

import "time"

// processCPU is not measured on this platform: MB per CPU-second is then
// reported as 0.
func processCPU() time.Duration { return 0 }
