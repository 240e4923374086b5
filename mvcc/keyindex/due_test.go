package keyindex

import (
	"math"
	"slices"
	"testing"
)

// TestDueLog checks the log's order and bounds across chunks, including
// a revision too far from its chunk's base for a 32-bit delta.
func TestDueLog(t *testing.T) {
	var l dueLog
	var want []dueRev
	rev := int64(1)
	for i := range 3*dueChunkLen + 10 {
		if i == dueChunkLen+5 {
			rev += math.MaxUint32 + 7 // forces a chunk before this one is full
		}
		rev += int64(i % 3)
		l.add(rev, uint32(i))
		want = append(want, dueRev{rev, uint32(i)})
	}
	due := func(atRev int64) []uint32 {
		var ids []uint32
		l.due(atRev, func(id uint32) { ids = append(ids, id) })
		return ids
	}
	for _, at := range []int64{0, want[10].rev, want[dueChunkLen+4].rev, want[dueChunkLen+5].rev, want[2*dueChunkLen].rev, rev} {
		var expect []uint32
		for _, w := range want {
			if w.rev <= at {
				expect = append(expect, w.id)
			}
		}
		if got := due(at); !slices.Equal(got, expect) {
			t.Fatalf("due(%d): %d ids, want %d", at, len(got), len(expect))
		}
		l.take(at)
		for len(want) > 0 && want[0].rev <= at {
			want = want[1:]
		}
		if l.len() != len(want) {
			t.Fatalf("after take(%d): len %d, want %d", at, l.len(), len(want))
		}
	}
	if len(l.chunks) > 1 {
		t.Fatalf("%d chunks left after everything was taken", len(l.chunks))
	}
	l.carry(7)
	if got := due(0); !slices.Equal(got, []uint32{7}) {
		t.Fatalf("due(0) with 7 carried = %v", got)
	}
	l.take(0)
	if l.len() != 0 {
		t.Fatalf("carried key left after take: len %d", l.len())
	}
}
