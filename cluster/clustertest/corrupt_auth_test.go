package clustertest

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// TestPeriodicCorruptCheckWithAuth is TestPeriodicCorruptCheck with auth
// enabled (a root user, `etcdctl auth enable`). The leader asks its
// followers for their hashes on their peer URLs (/members/hashkv, as
// etcd 3.5+ does, authenticated by the peer transport, with no auth
// token), so the check compares with auth on: before any divergence it
// logs both followers checked, and once one member's stored value is
// changed on its disk (tamper) it raises the CORRUPT alarm naming that
// member, which `etcdctl --user root:... alarm list` shows. Asked at
// their client URLs instead (Maintenance.HashKV, which needs the root
// role), the followers would refuse and nothing would be compared. The
// initial check (initial_corrupt_check), which asks the peers the same
// way before the member starts, refuses the divergent member's start.
func TestPeriodicCorruptCheckWithAuth(t *testing.T) {
	const rootPW = "rootpw"
	c := newPreparedCluster(t, 3, 10000, func(m *member) { setServerOptions(t, m, "corrupt_check_interval_ms = 200") })
	c.leader()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	admin := c.client(c.members...)
	for _, step := range []func() error{
		func() error { _, err := admin.UserAdd(ctx, "root", rootPW); return err },
		func() error { _, err := admin.UserGrantRole(ctx, "root", "root"); return err },
		func() error { _, err := admin.AuthEnable(ctx); return err },
	} {
		if err := step(); err != nil {
			t.Fatal(err)
		}
	}
	root := c.authClient("root", rootPW, c.members...)
	if _, err := root.Put(ctx, corruptKey, corruptOriginal); err != nil {
		t.Fatal(err)
	}
	victim := c.members[2]
	victimID := memberIDOf(t, root, victim)
	// Every member has applied every write, auth enable included (a
	// linearizable read on each).
	for _, m := range c.members {
		if _, err := c.authClient("root", rootPW, m).Get(ctx, corruptKey); err != nil {
			t.Fatal(err)
		}
	}

	// With auth on and the stores equal, the leader's check compares
	// both followers (0 of 2 if it asked their client URLs).
	waitCheckedPeers(t, c, 2, 20*time.Second)
	if list := authAlarmList(t, root, c.members[0].clientAddr, rootPW); strings.Contains(list, "CORRUPT") {
		t.Fatalf("alarms before any divergence: %q", list)
	}

	c.stop(victim)
	tamper(t, victim)
	// The initial check, which asks the peers before the member starts,
	// compares with auth on too, and refuses the start.
	setServerOptions(t, victim, "initial_corrupt_check = true")
	if err := c.tryStart(victim); err == nil || !victim.logHas(fmt.Sprintf("%x found data inconsistency with peers", victimID)) {
		t.Fatalf("%s started with a store that differs from its peers' (initial_corrupt_check = true, auth enabled): %v", victim.name, err)
	}
	setServerOptions(t, victim, "") // the divergent member runs no check
	c.start(victim)
	if lead := authLeader(t, c, rootPW); lead == victim {
		if _, err := c.authClient("root", rootPW, victim).MoveLeader(ctx, memberIDOf(t, root, c.members[0])); err != nil {
			t.Fatal(err)
		}
	}
	wantAlarm := fmt.Sprintf("memberID:%d alarm:CORRUPT", victimID)
	deadline := time.Now().Add(20 * time.Second)
	for {
		list := authAlarmList(t, root, c.members[0].clientAddr, rootPW)
		if strings.Contains(list, wantAlarm) {
			if strings.Count(list, "alarm:") != 1 {
				t.Fatalf("alarm list %q, want only %q", list, wantAlarm)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no CORRUPT alarm for %s (%x) within 20s with auth enabled; alarm list %q", victim.name, victimID, list)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("periodic check with auth enabled: %s raised (`etcdctl --user root:%s alarm list`)", wantAlarm, rootPW)
}

// authAlarmList is alarmList as root (`etcdctl --user root:PW alarm
// list`; root's clientv3 cli without etcdctl).
func authAlarmList(t *testing.T, cli *clientv3.Client, eps, rootPW string) string {
	t.Helper()
	if out, ok := etcdctl(t, eps, "--user=root:"+rootPW, "alarm", "list"); ok {
		return out
	}
	return alarmList(t, cli, eps)
}

// waitCheckedPeers waits up to d until a member logs that its periodic
// check compared n peers, in a check begun from now on: the first
// check's line each member logs after the call is not counted (it may
// have asked its peers before).
func waitCheckedPeers(t *testing.T, c *procCluster, n int, d time.Duration) {
	t.Helper()
	const finished = "finished peer corruption check: number-of-peers-checked="
	since := map[*member]int{}
	for _, m := range c.members {
		b, _ := os.ReadFile(m.logPath)
		since[m] = len(b)
	}
	want := fmt.Sprintf("%s%d\n", finished, n)
	deadline := time.Now().Add(d)
	for {
		var seen []string
		for _, m := range c.members {
			b, _ := os.ReadFile(m.logPath)
			lines := strings.SplitAfter(string(b[min(since[m], len(b)):]), "\n")
			checks := 0
			for _, l := range lines {
				if i := strings.Index(l, finished); i >= 0 && strings.HasSuffix(l, "\n") {
					checks++
					if checks > 1 && strings.HasSuffix(l, want) {
						return
					}
					seen = append(seen, m.name+": "+strings.TrimSpace(l[i:]))
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no member logged %q within %v; logged %q", strings.TrimSpace(want), d, seen[max(0, len(seen)-4):])
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// authLeader is c.leader with auth enabled: the running members agree on
// the leader, asked as root (Status needs a user then).
func authLeader(t *testing.T, c *procCluster, rootPW string) *member {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		var lead uint64
		agree := true
		ids := map[uint64]*member{}
		for _, m := range c.members {
			if !m.running() {
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			cli, err := clientv3.New(clientv3.Config{Endpoints: []string{m.clientAddr}, DialTimeout: 2 * time.Second,
				Username: "root", Password: rootPW, Logger: zap.NewNop(), Context: ctx})
			if err == nil {
				st, serr := cli.Status(ctx, m.clientAddr)
				_ = cli.Close()
				if serr == nil && st.Leader != 0 && (lead == 0 || st.Leader == lead) {
					lead = st.Leader
					ids[st.Header.MemberId] = m
					cancel()
					continue
				}
			}
			cancel()
			agree = false
			break
		}
		if agree && ids[lead] != nil {
			return ids[lead]
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatal("the running members did not agree on a leader within 20s (asked as root)")
	return nil
}
