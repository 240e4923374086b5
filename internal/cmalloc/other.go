//go:build !(cgo && linux)

package cmalloc

const (
	available    = false
	hugeTLBKnown = false
)

func setArenaMax(int) bool      { return false }
func setMmapThreshold(int) bool { return false }
func mappedDuring(int) int      { return 0 }
func touchedBlock(int) func()   { return func() {} }
