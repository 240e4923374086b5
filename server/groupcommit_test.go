package server

import (
	"fmt"
	"sync"
	"testing"
)

// TestConcurrentWritesShareSyncs: writes from many clients are each
// durable (sync = true) yet share WAL syncs, because the single member's
// Node lets them reach mvcc's group commit together.
func TestConcurrentWritesShareSyncs(t *testing.T) {
	s := startServer(t, testConfig(t))
	c := newClient(t, s, nil)
	ctx := testCtx(t)
	syncs := func() int64 {
		m, err := s.db.Metrics()
		if err != nil {
			t.Fatal(err)
		}
		return m.WAL.FS.Syncs
	}
	const writers, each = 64, 20
	before := syncs()
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				if _, err := c.Put(ctx, fmt.Sprintf("w%d/%d", w, i), "v"); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	n := syncs() - before
	t.Logf("%d writes, %d WAL syncs", writers*each, n)
	if n == 0 || n > writers*each/2 {
		t.Errorf("%d writes made %d WAL syncs: want at least one and fewer than one per two writes", writers*each, n)
	}
}
