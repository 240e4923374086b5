package clustertest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/stratadb/strata/config"
	"github.com/stratadb/strata/engine"
)

// The value the corruption tests write and then change on one member's
// disk (same length, so the record still decodes).
const (
	corruptKey      = "corrupt/me"
	corruptOriginal = "original-value-0123"
	corruptTampered = "tampered-value-0123"
)

// setServerOptions rewrites m's config with opts in its [server] section.
func setServerOptions(t *testing.T, m *member, opts string) {
	t.Helper()
	b, err := os.ReadFile(m.cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	if i := strings.Index(s, "\n#corruptcheck\n"); i >= 0 {
		j := strings.Index(s, "\n#end\n")
		s = s[:i+1] + s[j+len("\n#end\n"):]
	}
	s = strings.Replace(s, "[server]\n", "[server]\n#corruptcheck\n"+opts+"\n#end\n", 1)
	if err := os.WriteFile(m.cfgPath, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

// tamper changes, in m's store while m is stopped, the record of
// corruptKey's value: the engine's revision record (key 'r' + revision)
// gets corruptTampered where it held corruptOriginal. The member's store
// then differs from its peers' at the same revisions, as after a bit flip
// the block checksums did not catch or a bug in one member's apply.
func tamper(t *testing.T, m *member) {
	t.Helper()
	cfg, err := config.LoadServe(m.cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	db, err := engine.Open(cfg, engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
	}()
	it, err := db.NewIter(&engine.IterOptions{LowerBound: []byte("r"), UpperBound: []byte("s")})
	if err != nil {
		t.Fatal(err)
	}
	var keys, values [][]byte
	for ok := it.First(); ok; ok = it.Next() {
		if len(it.Key()) == 17 && bytes.Contains(it.Value(), []byte(corruptOriginal)) {
			keys = append(keys, bytes.Clone(it.Key()))
			values = append(values, bytes.ReplaceAll(it.Value(), []byte(corruptOriginal), []byte(corruptTampered)))
		}
	}
	if err := errors.Join(it.Error(), it.Close()); err != nil {
		t.Fatal(err)
	}
	if len(keys) != 1 {
		t.Fatalf("found %d records holding %q in %s's store, want 1", len(keys), corruptOriginal, m.name)
	}
	if err := db.Put(keys[0], values[0]); err != nil {
		t.Fatal(err)
	}
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
}

// memberIDOf returns the member ID m reports.
func memberIDOf(t *testing.T, cli *clientv3.Client, m *member) uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := cli.Status(ctx, m.clientAddr)
	if err != nil {
		t.Fatal(err)
	}
	return st.Header.MemberId
}

// TestCorruptionChecks makes one member of three differ from the others
// (tamper: one record's value changed on its disk while it is stopped,
// the revisions unchanged) and shows etcd's checks finding it:
//
//   - the initial check (server.initial_corrupt_check) refuses the
//     member's start with etcd's error, "<id> found data inconsistency
//     with peers", after logging the peer whose hash differs;
//   - started without it, the member serves its divergent value; after a
//     compaction the leader's compact hash check (server.compact_hash_check)
//     raises the CORRUPT alarm naming that member, `etcdctl alarm list`
//     shows it on every member, and writes are refused with etcd's
//     "etcdserver: corrupt cluster".
func TestCorruptionChecks(t *testing.T) {
	const checks = "initial_corrupt_check = true\ncompact_hash_check = true\ncompact_hash_check_interval_ms = 200"
	c := newPreparedCluster(t, 3, 10000, func(m *member) { setServerOptions(t, m, checks) })
	c.leader()
	cli := c.client(c.members...)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for i := range 20 {
		if _, err := cli.Put(ctx, fmt.Sprintf("k/%d", i%5), fmt.Sprintf("v%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := cli.Put(ctx, corruptKey, corruptOriginal); err != nil {
		t.Fatal(err)
	}
	victim := c.members[2]
	victimID := memberIDOf(t, cli, victim)
	// The victim has applied every write (a linearizable read on it).
	if _, err := c.client(victim).Get(ctx, corruptKey); err != nil {
		t.Fatal(err)
	}
	c.stop(victim)
	tamper(t, victim)

	// 1. The initial check refuses the start.
	err := c.tryStart(victim)
	if err == nil {
		t.Fatalf("%s started with a store that differs from its peers' (initial_corrupt_check = true)", victim.name)
	}
	want := fmt.Sprintf("%x found data inconsistency with peers", victimID)
	if !victim.logHas(want) || !victim.logHas("found different hash values from remote peer") {
		t.Fatalf("%s's start failed without etcd's %q and the peer's hash logged: %v", victim.name, want, err)
	}
	t.Logf("initial check: %s refused to start: %q", victim.name, want)

	// 2. Without it the member starts and serves its divergent value.
	setServerOptions(t, victim, "compact_hash_check = true\ncompact_hash_check_interval_ms = 200")
	c.start(victim)
	c.leader()
	vcli := c.client(victim)
	resp, err := vcli.Get(ctx, corruptKey, clientv3.WithSerializable())
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != corruptTampered {
		t.Fatalf("%s serves %v for %s, want the tampered value", victim.name, resp.Kvs, corruptKey)
	}
	rev := resp.Header.Revision
	if _, err := cli.Compact(ctx, rev, clientv3.WithCompactPhysical()); err != nil {
		t.Fatal(err)
	}
	wantAlarm := waitOnlyCorruptAlarm(t, cli, c.members[0].clientAddr, victim.name, victimID, fmt.Sprintf(" of the compaction at %d", rev))
	logged := false
	for _, m := range c.members {
		logged = logged || m.logHas(fmt.Sprintf("peer-ids=%x quorum-exist=true", victimID))
	}
	if !logged {
		t.Errorf("no leader logged the compaction hash mismatch naming %x", victimID)
	}
	for _, m := range c.members {
		if list := alarmList(t, c.client(m), m.clientAddr); !strings.Contains(list, wantAlarm) {
			t.Errorf("%s lists alarms %q, want %q", m.name, list, wantAlarm)
		}
	}
	if _, err := cli.Put(ctx, "after", "x"); !errors.Is(err, rpctypes.ErrCorrupt) {
		t.Errorf("a put with the CORRUPT alarm raised = %v, want %v", err, rpctypes.ErrCorrupt)
	}
	t.Logf("compact hash check: %s raised on every member (`etcdctl alarm list`)", wantAlarm)
}

// TestPeriodicCorruptCheck: with server.corrupt_check_interval_ms, the
// leader compares its hash at its revision with its followers' and raises
// the CORRUPT alarm for the follower whose store differs (tamper). As in
// etcd, the leader takes its own hash as the right one, so the divergent
// member runs without the check and is moved off the leadership.
func TestPeriodicCorruptCheck(t *testing.T) {
	c := newPreparedCluster(t, 3, 10000, func(m *member) { setServerOptions(t, m, "corrupt_check_interval_ms = 200") })
	c.leader()
	cli := c.client(c.members...)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := cli.Put(ctx, corruptKey, corruptOriginal); err != nil {
		t.Fatal(err)
	}
	victim := c.members[2]
	victimID := memberIDOf(t, cli, victim)
	if _, err := c.client(victim).Get(ctx, corruptKey); err != nil {
		t.Fatal(err)
	}
	if list := alarmList(t, cli, c.members[0].clientAddr); strings.Contains(list, "CORRUPT") {
		t.Fatalf("alarms before any divergence: %q", list)
	}
	c.stop(victim)
	tamper(t, victim)
	setServerOptions(t, victim, "")
	c.start(victim)
	if lead := c.leader(); lead == victim {
		other := c.members[0]
		if _, err := c.client(victim).MoveLeader(ctx, memberIDOf(t, cli, other)); err != nil {
			t.Fatal(err)
		}
	}
	wantAlarm := waitOnlyCorruptAlarm(t, cli, c.members[0].clientAddr, victim.name, victimID, "")
	t.Logf("periodic check: %s raised", wantAlarm)
}

// waitOnlyCorruptAlarm waits up to 20 s until `alarm list` through addr
// shows the CORRUPT alarm of the member victimID (named name), and fails
// if any other alarm is listed with it; after names what the 20 s follow.
// It returns the alarm as `alarm list` prints it.
func waitOnlyCorruptAlarm(t *testing.T, cli *clientv3.Client, addr, name string, victimID uint64, after string) string {
	t.Helper()
	wantAlarm := fmt.Sprintf("memberID:%d alarm:CORRUPT", victimID)
	deadline := time.Now().Add(20 * time.Second)
	for {
		list := alarmList(t, cli, addr)
		if strings.Contains(list, wantAlarm) {
			if strings.Count(list, "alarm:") != 1 {
				t.Fatalf("alarm list %q, want only %q", list, wantAlarm)
			}
			return wantAlarm
		}
		if time.Now().After(deadline) {
			t.Fatalf("no CORRUPT alarm for %s (%x) within 20s%s; alarm list %q", name, victimID, after, list)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
