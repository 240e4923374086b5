package server

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/stratadb/strata/internal/damage"
)

// TestSingleMemberKeepsCorruptAlarm: a single member whose engine meets a
// damaged table has no peer to take a sound state from: it says so, and
// its CORRUPT alarm stays (writes refused) for an operator, who restores
// it from a backup. (A member of a cluster repairs itself instead:
// cluster/clustertest's TestRepairFromLeader.)
func TestSingleMemberKeepsCorruptAlarm(t *testing.T) {
	cfg := testConfig(t)
	s, err := Start(cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	c := newClient(t, s, nil)
	ctx := testCtx(t)
	for i := range 2000 {
		if _, err := c.Put(ctx, fmt.Sprintf("key/%06d", i), fmt.Sprintf("value %06d %s", i, strings.Repeat("v", 150))); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Defragment(ctx, s.Addr().String()); err != nil {
		t.Fatal(err)
	}
	_ = c.Close()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	damage.LargestFile(t, cfg.DBPath, "sst")

	log := &logLines{}
	s, err = Start(cfg, Options{Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	c = newClient(t, s, nil)
	st, err := c.Status(ctx, s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	corrupt := &pb.AlarmMember{MemberID: st.Header.MemberId, Alarm: pb.AlarmType_CORRUPT}
	if _, err := c.Get(ctx, "key/", clientv3.WithPrefix()); !errors.Is(err, rpctypes.ErrCorrupt) {
		t.Fatalf("a read of every key: %v, want %v", err, rpctypes.ErrCorrupt)
	}
	waitAlarms(t, c, corrupt)
	// The repair is tried once the alarm is raised; wait for its answer.
	const noPeer = "server: repair: not possible: cluster: a single member has no peer to repair its state from; the CORRUPT alarm stays"
	for deadline := time.Now().Add(10 * time.Second); log.count(noPeer) != 1; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no line %q within 10s:\n%s", noPeer, strings.Join(log.lines, "\n"))
		}
	}
	waitAlarms(t, c, corrupt)
	if _, err := c.Put(ctx, "new", "v"); !errors.Is(err, rpctypes.ErrCorrupt) {
		t.Fatalf("a put with the alarm kept: %v, want %v", err, rpctypes.ErrCorrupt)
	}
}
