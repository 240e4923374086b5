// Package cmalloc tunes the C allocator of a long-running server. Built
// with cgo, Pebble allocates its memtables (and its block cache) with C's
// malloc, outside the Go heap. glibc's defaults suit short programs, not
// a server: every thread that allocates may get an arena of its own (up
// to eight per core), and its mmap threshold rises to the size of the
// largest block freed, so after the first memtable is recycled the next
// ones come from an arena, whose pages the process keeps. Both show up as
// resident memory that no budget accounts for.
//
// Tune caps the arenas and fixes the threshold, so that blocks as large as
// a memtable are mapped and unmapped on their own: measured with `strata
// bench memory` (100,000 keys of 64 B, 256 B values), 6 MB less RSS
// (60.6 -> 54.6 MB) at the same load time; docs/server.md has the figures.
//
// ExecWithHugePages (hugepages.go) makes those mapped blocks cheap to
// fill: glibc's tunable for transparent huge pages, which only a program's
// environment at its start can set.
package cmalloc

import (
	"fmt"
	"os"
	"strings"
)

// Settings are the allocator parameters Tune sets.
type Settings struct {
	// ArenaMax caps glibc's malloc arenas (M_ARENA_MAX); 0 leaves it.
	ArenaMax int
	// MmapThreshold is the size from which a block gets a mapping of its
	// own (M_MMAP_THRESHOLD); setting it also stops glibc from raising it
	// as large blocks are freed. 0 leaves it.
	MmapThreshold int
}

// ServerSettings are what `strata serve` sets: two arenas (the memtables
// are allocated by few threads, and the Go runtime's own allocations do
// not go through malloc) and a fixed 128 KiB threshold, glibc's initial
// one.
var ServerSettings = Settings{ArenaMax: 2, MmapThreshold: 128 << 10}

// envArenaMax and envMmapThreshold are the environment variables through
// which glibc users set the same parameters; a value there is the
// operator's and wins over Tune.
const (
	envArenaMax      = "MALLOC_ARENA_MAX"
	envMmapThreshold = "MALLOC_MMAP_THRESHOLD_"
)

// Tune applies s, except parameters set in the environment, and says what
// it set, for the server's startup line. Without glibc (another C
// library, or a build without cgo) it sets nothing and says so.
func Tune(s Settings) string {
	if !available {
		return "C allocator unchanged (not glibc)"
	}
	var done []string
	if s.ArenaMax > 0 {
		if os.Getenv(envArenaMax) != "" {
			done = append(done, envArenaMax+" from the environment")
		} else if setArenaMax(s.ArenaMax) {
			done = append(done, fmt.Sprintf("%d arenas", s.ArenaMax))
		}
	}
	if s.MmapThreshold > 0 {
		if os.Getenv(envMmapThreshold) != "" {
			done = append(done, envMmapThreshold+" from the environment")
		} else if setMmapThreshold(s.MmapThreshold) {
			done = append(done, fmt.Sprintf("mmap threshold %d KiB", s.MmapThreshold>>10))
		}
	}
	if len(done) == 0 {
		return "malloc unchanged"
	}
	return "malloc " + strings.Join(done, ", ")
}
