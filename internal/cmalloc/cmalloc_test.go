package cmalloc

import "testing"

// TestTuneMapsMemtableSizedBlocks checks the effect Tune is for: a block
// the size of a memtable gets a mapping of its own (so freeing it returns
// its pages) every time, not only until glibc raises its threshold after
// the first free, which is what it does by default.
func TestTuneMapsMemtableSizedBlocks(t *testing.T) {
	if !available {
		t.Skip("not glibc")
	}
	t.Setenv(envArenaMax, "")
	t.Setenv(envMmapThreshold, "")
	got := Tune(ServerSettings)
	if got != "malloc 2 arenas, mmap threshold 128 KiB" {
		t.Errorf("Tune = %q", got)
	}
	const memtable = 4 << 20
	for i := range 3 {
		if m := mappedDuring(memtable); m < memtable {
			t.Fatalf("allocation %d of %d bytes: %d bytes in mappings of their own, want the block's", i, memtable, m)
		}
	}
}

// TestTuneLeavesTheEnvironment checks that a parameter set in glibc's
// environment variable is the operator's: Tune says so and keeps it.
func TestTuneLeavesTheEnvironment(t *testing.T) {
	if !available {
		t.Skip("not glibc")
	}
	t.Setenv(envArenaMax, "4")
	got := Tune(Settings{ArenaMax: 2})
	if got != "malloc MALLOC_ARENA_MAX from the environment" {
		t.Errorf("Tune = %q", got)
	}
}
