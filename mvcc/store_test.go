package mvcc

import (
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// TestStoreAgainstModel runs random Puts, Deletes, DeleteRanges, Txns and
// Compacts against the store and a model, reading every retained revision
// after each step, and reopens the store (rebuilding its index) now and
// then. Replay a failure with -seed.
func TestStoreAgainstModel(t *testing.T) {
	seed := testSeed(t)
	r := rand.New(rand.NewPCG(seed, 0))
	fs := vfs.NewMem()
	db := openEngine(t, fs, false)
	defer func() { _ = db.Close() }()
	opts := Options{CompactionBatchSize: 1 + r.IntN(5)}
	s := openStore(t, db, opts)
	m := newModel()
	g := newOpGen(r, 16)
	steps := 1500
	if testing.Short() {
		steps = 400
	}
	var last []string
	for i := range steps {
		what := g.step(t, s, m, 4)
		last = append(last, what)
		if len(last) > 5 {
			last = last[1:]
		}
		// Keep the retained window short so that reading every revision
		// stays cheap.
		if m.rev-m.compacted > 40 {
			rev := m.rev - 10 - r.Int64N(10)
			if err := s.Compact(rev); err != nil {
				t.Fatalf("step %d: Compact(%d): %v", i, rev, err)
			}
			m.compacted = rev
		}
		checkAgainstModel(t, s, m, "step "+itoa(i)+" after "+last[len(last)-1])
		if r.IntN(100) == 0 {
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			if r.IntN(2) == 0 {
				if err := db.Flush(); err != nil {
					t.Fatal(err)
				}
			}
			s = openStore(t, db, opts)
			checkAgainstModel(t, s, m, "reopened at step "+itoa(i))
		}
	}
	_ = s.Close()
}

func itoa(i int) string { return strconv.Itoa(i) }
