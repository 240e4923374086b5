package mvcc

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/stratadb/strata/engine"
)

// openBlobStore returns a store on an in-memory engine that keeps values
// of 1 KB and more in blob files, as `strata serve` does, with
// ReclaimHistory on.
func openBlobStore(t *testing.T) (*Store, *engine.DB) {
	t.Helper()
	cfg := memConfig(false)
	cfg.EnableBlobFiles = true
	cfg.MinBlobSize = 1024
	db, err := engine.Open(cfg, engine.Options{FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	s := openStore(t, db, Options{ReclaimHistory: true})
	t.Cleanup(func() {
		s.Close()
		db.Close()
	})
	return s, db
}

// TestCompactReclaimsHistory checks that the values of compacted history
// stop being referenced soon after Compact returns: the engine's own
// compactions never carry the tombstones down to them (see reclaim.go), so
// without the reclaimer the blob files keep every generation written.
func TestCompactReclaimsHistory(t *testing.T) {
	s, db := openBlobStore(t)
	const keys, size = 400, 4 << 10
	rng := rand.New(rand.NewPCG(1, 2))
	value := make([]byte, size)
	for gen := range 4 {
		for i := range keys {
			for j := range value {
				value[j] = byte(rng.Uint32())
			}
			if _, err := s.Put(fmt.Appendf(nil, "/registry/pods/ns/pod-%04d", i), value); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Compact(s.Rev()); err != nil {
			t.Fatalf("generation %d: Compact: %v", gen, err)
		}
	}
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	// The live values are one generation; allow a tenth more for the
	// values still in the memtable's last flush.
	live := uint64(keys * size)
	deadline := time.Now().Add(30 * time.Second)
	for {
		m, err := db.Metrics()
		if err != nil {
			t.Fatal(err)
		}
		ref := m.BlobFiles.ReferencedValueBytes
		if ref <= live+live/10 {
			break
		}
		if time.Now().After(deadline) {
			ran, rerr := s.reclaim.status()
			t.Fatalf("blob files still reference %d value bytes 30 s after the last Compact, want at most %d (the live generation): %d reclaim compactions, last error %v",
				ref, live+live/10, ran, rerr)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := s.reclaim.status(); err != nil {
		t.Errorf("reclaim compaction: %v", err)
	}
}

// TestReclaimWaitsForDenseSpan checks that a compaction dropping a few
// revisions across a long history leaves them pending rather than
// compacting every table between them, and that the spans add up until
// they are dense enough.
func TestReclaimWaitsForDenseSpan(t *testing.T) {
	s, _ := openBlobStore(t)
	put := func(key string) {
		t.Helper()
		if _, err := s.Put([]byte(key), []byte("v")); err != nil {
			t.Fatal(err)
		}
	}
	pending := func() (lo, hi, dropped int64) {
		s.reclaim.mu.Lock()
		defer s.reclaim.mu.Unlock()
		return s.reclaim.lo, s.reclaim.hi, s.reclaim.dropped
	}
	// Revisions 2-201, then the first and the last key again: the
	// compaction drops revisions 2 and 201, 2 of the 200 its span covers.
	for i := range 200 {
		put(fmt.Sprintf("k%03d", i))
	}
	put("k000")
	put("k199")
	if err := s.Compact(s.Rev()); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	if ran, _ := s.reclaim.status(); ran != 0 {
		t.Fatalf("a sparse span was compacted: %d reclaim compactions, want 0", ran)
	}
	if lo, hi, n := pending(); lo != 2 || hi != 202 || n != 2 {
		t.Fatalf("pending span [%d, %d) with %d dropped, want [2, 202) with 2", lo, hi, n)
	}

	// Every other key again: 198 more drops in the same span, now dense.
	for i := 1; i < 199; i++ {
		put(fmt.Sprintf("k%03d", i))
	}
	if err := s.Compact(s.Rev()); err != nil {
		t.Fatal(err)
	}
	waitReclaims(t, s, 1)
	if lo, hi, n := pending(); lo != hi || n != 0 {
		t.Fatalf("after the reclaim compaction: pending span [%d, %d) with %d dropped, want none", lo, hi, n)
	}
}

// waitReclaims waits until the store's reclaimer has compacted n spans.
func waitReclaims(t *testing.T, s *Store, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ran, err := s.reclaim.status()
		if err != nil {
			t.Fatalf("reclaim compaction: %v", err)
		}
		if ran >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d reclaim compactions after 30 s, want %d", ran, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestReclaimSpreadsSlices checks that a span's slices are spread over
// the time the reclaimer is given, resting between them longer than they
// took, and only as long as they took once that time is up; and that the
// time comes from how often compactions come.
func TestReclaimSpreadsSlices(t *testing.T) {
	s, _ := openBlobStore(t)
	r := s.reclaim
	var rests []time.Duration
	r.rest = func(_ context.Context, d time.Duration) error {
		rests = append(rests, d)
		return nil
	}
	const slices = 3
	lo, hi := int64(1), int64(1+slices*reclaimSliceRevisions)

	const spread = 30 * time.Second
	if err := r.compact(context.Background(), lo, hi, time.Now().Add(spread)); err != nil {
		t.Fatal(err)
	}
	// The rests do not sleep here: the first is about half the time, the
	// second all of it.
	if len(rests) != slices-1 || rests[0] < spread/2-time.Second || rests[1] < spread-time.Second {
		t.Fatalf("rests %v between %d slices spread over %v, want about %v and %v", rests, slices, spread, spread/2, spread)
	}

	rests = nil
	if err := r.compact(context.Background(), lo, hi, time.Now()); err != nil {
		t.Fatal(err)
	}
	for _, d := range rests {
		if d > time.Second {
			t.Fatalf("rests %v with no time to spread over, want each as long as its slice took", rests)
		}
	}

	// Two compactions 40 s apart: three quarters of it.
	r.mu.Lock()
	r.added = time.Now().Add(-40 * time.Second)
	r.mu.Unlock()
	r.add(lo, lo+1, 0)
	r.mu.Lock()
	got := r.spreadLocked()
	r.mu.Unlock()
	if got < 30*time.Second || got > 31*time.Second {
		t.Fatalf("spread %v after compactions 40 s apart, want 30 s", got)
	}
}

func TestReclaimRest(t *testing.T) {
	for _, c := range []struct {
		took, until time.Duration
		left        int64
		want        time.Duration
	}{
		{time.Second, 10 * time.Second, 2, 4 * time.Second},
		{time.Second, 10 * time.Second, 10, time.Second},
		{time.Second, -time.Second, 3, time.Second},
		{100 * time.Millisecond, time.Minute, 1, time.Minute - 100*time.Millisecond},
	} {
		if got := reclaimRest(c.took, c.until, c.left); got != c.want {
			t.Errorf("reclaimRest(%v, %v, %d) = %v, want %v", c.took, c.until, c.left, got, c.want)
		}
	}
}
