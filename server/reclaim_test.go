package server

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// TestReclaimHistoryGivesSpaceBack checks server.reclaim_history through a
// real client: four generations of 4 KB values put with clientv3, then a
// compaction to the last; within 30 s the blob files reference only the
// live generation.
func TestReclaimHistoryGivesSpaceBack(t *testing.T) {
	cfg := testConfig(t)
	cfg.Server.ReclaimHistory = true
	s := startServer(t, cfg)
	c := newClient(t, s, nil)
	ctx := testCtx(t)
	const keys, size = 200, 4 << 10
	rng := rand.New(rand.NewPCG(7, 8))
	value := make([]byte, size)
	var rev int64
	for range 4 {
		for i := range keys {
			for j := range value {
				value[j] = byte(rng.Uint32())
			}
			resp, err := c.Put(ctx, fmt.Sprintf("/registry/configmaps/ns/cm-%03d", i), string(value))
			if err != nil {
				t.Fatal(err)
			}
			rev = resp.Header.Revision
		}
	}
	if err := s.db.Flush(); err != nil {
		t.Fatal(err)
	}
	live := uint64(keys * size)
	m, err := s.db.Metrics()
	if err != nil {
		t.Fatal(err)
	}
	if ref := m.BlobFiles.ReferencedValueBytes; ref < 3*live {
		t.Fatalf("before the compaction the blob files reference %d value bytes, want the four generations (at least %d)", ref, 3*live)
	}
	if _, err := c.Compact(ctx, rev); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		m, err := s.db.Metrics()
		if err != nil {
			t.Fatal(err)
		}
		ref := m.BlobFiles.ReferencedValueBytes
		if ref <= live+live/10 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("30 s after compacting, the blob files still reference %d value bytes, want at most %d (the live generation)", ref, live+live/10)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
