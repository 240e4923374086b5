package keyindex

import (
	"cmp"
	"math"
	"slices"
	"testing"
)

// TestDueLog checks the log's order, its one entry per key, and the merge
// of the keys a compaction puts back, across chunks and across a revision
// too far from its chunk's base for a 32-bit delta.
func TestDueLog(t *testing.T) {
	var l dueLog
	var want []dueRev // the log's model
	rev := int64(1)
	for i := range 3*dueChunkLen + 10 {
		if i == dueChunkLen+5 {
			rev += math.MaxUint32 + 7 // forces a chunk before this one is full
		}
		rev += int64(i % 3)
		l.add(rev, uint32(i))
		l.add(rev+1, uint32(i)) // in the log already: ignored
		want = append(want, dueRev{rev, uint32(i)})
	}
	check := func(when string) { // before any putBack: the order is exact
		t.Helper()
		var got []dueRev
		l.each(func(rev int64, id uint32) bool {
			got = append(got, dueRev{rev, id})
			return true
		})
		if !slices.Equal(got, want) {
			t.Fatalf("%s: %d entries, want %d (first %v, want %v)", when, len(got), len(want), got[:min(3, len(got))], want[:min(3, len(want))])
		}
		for _, w := range want {
			if !l.has(w.id) {
				t.Fatalf("%s: key %d not marked", when, w.id)
			}
		}
	}
	check("after adds")
	// Equal revisions may come in any order: compare sorted by id too.
	byRevID := func(a, b dueRev) int { return cmp.Or(byDueRev(a, b), cmp.Compare(a.id, b.id)) }
	for n, at := range []int64{0, want[10].rev, want[dueChunkLen+4].rev, want[dueChunkLen+5].rev, want[2*dueChunkLen].rev, rev} {
		var due []uint32
		for {
			id, ok := l.pop(at)
			if !ok {
				break
			}
			if l.has(id) {
				t.Fatalf("pop(%d): key %d still marked", at, id)
			}
			due = append(due, id)
		}
		var expect []uint32
		var left []dueRev
		for _, w := range want {
			if w.rev <= at {
				expect = append(expect, w.id)
			} else {
				left = append(left, w)
			}
		}
		slices.Sort(due) // equal revisions come in any order
		if !slices.Equal(due, slices.Sorted(slices.Values(expect))) {
			t.Fatalf("pop(%d): %d keys, want %d", at, len(due), len(expect))
		}
		// Every third key due goes back, due later, in no order.
		var again []dueRev
		for i := len(expect) - 1; i >= 0; i -= 3 {
			again = append(again, dueRev{at + int64(i%50), expect[i]})
		}
		l.putBack(slices.Clone(again))
		for _, id := range expect {
			if l.has(id) != slices.ContainsFunc(again, func(a dueRev) bool { return a.id == id }) {
				t.Fatalf("putBack after %d: key %d marked %v", at, id, l.has(id))
			}
		}
		want = append(left, again...)
		var got []dueRev
		l.each(func(rev int64, id uint32) bool { got = append(got, dueRev{rev, id}); return true })
		if !slices.IsSortedFunc(got, byDueRev) {
			t.Fatalf("putBack after %d: log out of revision order", at)
		}
		slices.SortFunc(got, byRevID)
		slices.SortFunc(want, byRevID)
		if !slices.Equal(got, want) {
			t.Fatalf("step %d, putBack after %d: %d entries, want %d", n, at, len(got), len(want))
		}
		if l.len() != len(want) {
			t.Fatalf("putBack after %d: len %d, want %d", at, l.len(), len(want))
		}
	}
	for {
		if _, ok := l.pop(math.MaxInt64); !ok {
			break
		}
	}
	if l.len() != 0 || len(l.chunks) > 1 {
		t.Fatalf("after everything was taken: len %d, %d chunks", l.len(), len(l.chunks))
	}
}
