package keyindex

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// TestCompactFromInSlicesIsCompact compacts two copies of a random history,
// one with Compact and one with CompactFrom in slices of a few keys, with
// new writes (above the compaction) between the slices, applied to the
// other copy after its Compact: both report the same dropped revisions,
// in the same order, and end with the same history for every key.
func TestCompactFromInSlicesIsCompact(t *testing.T) {
	r := rand.New(rand.NewPCG(testSeed(t), 11))
	for round := range 20 {
		whole, sliced := New(), New()
		both := func(f func(ix *Index) error) {
			t.Helper()
			for _, ix := range []*Index{whole, sliced} {
				if err := f(ix); err != nil {
					t.Fatal(err)
				}
			}
		}
		rev := int64(1)
		write := func(apply func(f func(ix *Index) error)) {
			rev++
			key, at := []byte(fmt.Sprintf("k%03d", r.IntN(200))), Revision{Main: rev}
			if r.IntN(5) == 0 {
				apply(func(ix *Index) error { _, err := ix.Tombstone(key, at); return err })
				return
			}
			apply(func(ix *Index) error { return ix.Put(key, at) })
		}
		for range 1000 {
			write(both)
		}
		atRev := 2 + r.Int64N(rev-1)
		var droppedWhole, droppedSliced []Revision
		whole.Compact(atRev, true, func(r Revision) { droppedWhole = append(droppedWhole, r) })
		var later []func(ix *Index) error
		var next []byte
		slices := 0
		for {
			next = sliced.CompactFrom(atRev, next, 1+r.IntN(8), func(r Revision) { droppedSliced = append(droppedSliced, r) })
			slices++
			if next == nil {
				break
			}
			for range r.IntN(4) {
				write(func(f func(ix *Index) error) {
					if err := f(sliced); err != nil {
						t.Fatal(err)
					}
					later = append(later, f)
				})
			}
		}
		for _, f := range later {
			if err := f(whole); err != nil {
				t.Fatal(err)
			}
		}
		if fmt.Sprint(droppedWhole) != fmt.Sprint(droppedSliced) {
			t.Fatalf("round %d, compaction at %d in %d slices: dropped\n%v\nwant\n%v", round, atRev, slices, droppedSliced, droppedWhole)
		}
		if got, want := dump(t, sliced), dump(t, whole); got != want {
			t.Fatalf("round %d, compaction at %d in %d slices: index\n%s\nwant\n%s", round, atRev, slices, got, want)
		}
		if slices < 10 {
			t.Fatalf("round %d: only %d slices", round, slices)
		}
	}
}

// dump lists every key with its encoded history, deleted keys too.
func dump(t *testing.T, ix *Index) string {
	t.Helper()
	var b strings.Builder
	if err := ix.Export(func(key, list []byte) error {
		fmt.Fprintf(&b, "%s: %x\n", key, list)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(&b, "%d keys\n", ix.Len())
	return b.String()
}
