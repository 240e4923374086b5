package server

import (
	"context"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
)

// TestDiskStallRaftLog: on a cluster member the raft log's fsync, which
// no Pebble DiskSlow report covers, fails disk_stall while it has been in
// flight past the bound, is counted once per fsync, and passes once it
// returned.
func TestDiskStallRaftLog(t *testing.T) {
	w := newStallWatch(nil)
	inFlight, running := 2*time.Second, true
	w.raftSync = func() (time.Duration, bool) { return inFlight, running }
	if err := w.check(context.Background()); err != nil {
		t.Fatalf("an fsync in flight for 2s: %v, want none", err)
	}
	inFlight = stallBound + time.Second
	err := w.check(context.Background())
	if err == nil || !strings.Contains(err.Error(), "raft log's fdatasync") {
		t.Fatalf("an fsync in flight past the bound: %v", err)
	}
	inFlight += 3 * time.Second // the same fsync, later
	if err := w.check(context.Background()); err == nil {
		t.Fatal("the stalled fsync passed the check")
	}
	var m dto.Metric
	if err := w.stalls.Write(&m); err != nil {
		t.Fatal(err)
	}
	if n := m.GetCounter().GetValue(); n != 1 {
		t.Fatalf("strata_disk_stalls_total = %v after one stalled fsync, want 1", n)
	}
	running = false
	if err := w.check(context.Background()); err != nil {
		t.Fatalf("after the fsync returned: %v", err)
	}
}
