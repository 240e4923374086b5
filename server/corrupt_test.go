package server

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/stratadb/strata/internal/damage"
)

// TestCorruptTable damages a table of a real server's database (64 bytes
// flipped in the middle of its largest table, between two runs) and
// reads it with clientv3: the reads that meet the damage fail with
// etcd's "etcdserver: corrupt cluster" (DataLoss, rpctypes.ErrCorrupt),
// as do HashKV and a snapshot; the member raises CORRUPT, listed by
// alarm list, logs the damaged file once however often it is read,
// fails /readyz's data_corruption and /health, refuses writes as etcd's
// corrupt applier does, still serves the sound keys, and after `alarm
// disarm` raises the alarm again at the next damaged read.
func TestCorruptTable(t *testing.T) {
	cfg := testConfig(t)
	s, err := Start(cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	c := newClient(t, s, nil)
	ctx := testCtx(t)
	const n = 3000
	for i := range n {
		if _, err := c.Put(ctx, fmt.Sprintf("key/%06d", i), fmt.Sprintf("value %06d %s", i, strings.Repeat("v", 150))); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Defragment(ctx, s.Addr().String()); err != nil { // every key into tables
		t.Fatal(err)
	}
	_ = c.Close()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	largest := damage.LargestFile(t, cfg.DBPath, "sst")
	file := strings.TrimSuffix(filepath.Base(largest), ".sst")

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
	wantCorrupt := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, rpctypes.ErrCorrupt) {
			t.Fatalf("%s: %v, want %v", what, err, rpctypes.ErrCorrupt)
		}
	}

	_, err = c.Get(ctx, "key/", clientv3.WithPrefix())
	wantCorrupt("range of every key", err)
	waitAlarms(t, c, corrupt)
	// Which keys are damaged: each read alone.
	var sound, damaged []string
	for i := range n {
		k := fmt.Sprintf("key/%06d", i)
		r, err := c.Get(ctx, k, clientv3.WithSerializable())
		switch {
		case err == nil && len(r.Kvs) == 1:
			sound = append(sound, k)
		case errors.Is(err, rpctypes.ErrCorrupt):
			damaged = append(damaged, k)
		default:
			t.Fatalf("get %s: %v, %v", k, r, err)
		}
	}
	if len(damaged) == 0 || len(sound) == 0 {
		t.Fatalf("%d keys damaged, %d sound: want some of each", len(damaged), len(sound))
	}
	t.Logf("%d keys damaged, %d sound", len(damaged), len(sound))
	_, err = c.Txn(ctx).Then(clientv3.OpGet(damaged[0])).Commit()
	wantCorrupt("read-only txn", err)
	_, err = c.HashKV(ctx, s.Addr().String(), 0)
	wantCorrupt("hashkv", err)
	rc, err := c.Snapshot(ctx)
	if err == nil {
		_, err = io.Copy(io.Discard, rc)
		_ = rc.Close()
	}
	if err == nil || !strings.Contains(err.Error(), "corrupt cluster") {
		t.Fatalf("snapshot: %v, want etcdserver: corrupt cluster", err)
	}

	// One line for the file, however many reads met it; one for the alarm.
	if got, named := log.count("data corruption: file "), log.count(file); got != 1 || named != 2 {
		t.Errorf("%d damage lines, %d naming the damaged file %s (with the alarm's), want 1 and 2:\n%s", got, named, file, strings.Join(log.lines, "\n"))
	}
	if got := log.count("alarm CORRUPT raised"); got != 1 {
		t.Errorf("%d alarm lines, want 1", got)
	}
	checkProbes(t, s, []probe{
		{"/readyz/data_corruption", 503, "[-]data_corruption failed: alarm activated: CORRUPT\n\n"},
		{"/health", 503, `{"health":"false","reason":"ALARM CORRUPT"}` + "\n"},
	})
	// etcd's corrupt applier: writes refused, reads served.
	_, err = c.Put(ctx, "new", "v")
	wantCorrupt("put", err)
	_, err = c.Delete(ctx, sound[0])
	wantCorrupt("delete", err)
	if r, err := c.Get(ctx, sound[0]); err != nil || len(r.Kvs) != 1 {
		t.Fatalf("get %s: %v, %v", sound[0], r, err)
	}

	// Disarmed, writes go on until a read meets the damage again.
	if _, err := c.AlarmDisarm(ctx, &clientv3.AlarmMember{MemberID: corrupt.MemberID, Alarm: corrupt.Alarm}); err != nil {
		t.Fatal(err)
	}
	waitAlarms(t, c)
	if _, err := c.Put(ctx, "new", "v"); err != nil {
		t.Fatal(err)
	}
	_, err = c.Get(ctx, damaged[len(damaged)-1])
	wantCorrupt("get after disarm", err)
	waitAlarms(t, c, corrupt)
}
