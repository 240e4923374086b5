package mvcc

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"testing"
	"time"
)

// TestSnapshotRestore: a store restored from another's snapshot reads the
// same at every retained revision, keeps its applied index, compaction and
// leases, and its watchers carry on from the new history.
func TestSnapshotRestore(t *testing.T) {
	seed := testSeed(t)
	r := rand.New(rand.NewPCG(seed, 0))
	src, _ := newMemStore(t, Options{})
	m := newModel()
	g := newOpGen(r, 16)
	for range 200 {
		g.step(t, src, m, 0) // no random compaction: the one below must be above it
	}
	rev := m.rev - 20
	if err := src.Compact(rev); err != nil {
		t.Fatal(err)
	}
	m.compacted = rev
	if err := src.Entry(7).GrantLease(42, 100); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	index, err := src.WriteSnapshot(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if index != 7 {
		t.Fatalf("snapshot at applied index %d, want 7", index)
	}

	dst, _ := newMemStore(t, Options{})
	for i := range 50 {
		if _, err := dst.Put([]byte("old"), []byte{byte(i)}); err != nil {
			t.Fatal(err)
		}
	}
	w, err := dst.Watch(context.Background(), []byte("\x00"), []byte("\x00"), 1)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()

	// A truncated snapshot is refused and changes nothing.
	if err := dst.RestoreSnapshot(bytes.NewReader(buf.Bytes()[:buf.Len()/2])); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("truncated snapshot: %v, want ErrCorrupt", err)
	}
	if res, err := dst.Range([]byte("old"), nil, RangeOptions{}); err != nil || len(res.KVs) != 1 {
		t.Fatalf("after a refused restore: %v %v", res, err)
	}

	if err := dst.RestoreSnapshot(bytes.NewReader(buf.Bytes())); err != nil {
		t.Fatal(err)
	}
	checkAgainstModel(t, dst, m, "restored")
	if dst.AppliedIndex() != 7 || dst.Rev() != src.Rev() || dst.CompactRev() != src.CompactRev() {
		t.Fatalf("restored: applied %d rev %d compacted %d, source %d %d %d", dst.AppliedIndex(), dst.Rev(), dst.CompactRev(), src.AppliedIndex(), src.Rev(), src.CompactRev())
	}
	if l, err := dst.Lease(42); err != nil || l.TTL != 100 {
		t.Fatalf("lease 42 after restore: %+v %v", l, err)
	}
	// The watcher had read the old history (revisions 2..51); it stops
	// with ErrCompacted if the snapshot compacted past it, or it reads the
	// new history on; either way it then sees new writes or says why not.
	if _, err := dst.Put([]byte("new"), []byte("v")); err != nil {
		t.Fatal(err)
	}
	deadline := time.After(5 * time.Second)
	for {
		select {
		case evs, ok := <-w.C:
			if !ok {
				if !errors.Is(w.Err(), ErrCompacted) {
					t.Fatalf("watcher stopped with %v", w.Err())
				}
				return
			}
			for _, ev := range evs {
				if string(ev.KV.Key) == "new" {
					return
				}
			}
		case <-deadline:
			t.Fatal("the watcher saw neither the new write nor a compaction")
		}
	}
}
