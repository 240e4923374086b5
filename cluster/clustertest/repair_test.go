package clustertest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/stratadb/strata/internal/damage"
)

// The keys the repair tests write: values above the server's
// min_blob_size (config.ServeMinBlobSize), so they live in blob files of
// several blocks.
const (
	repairKeys   = 2000
	repairPrefix = "key/"
)

func repairValue(i int) string {
	return fmt.Sprintf("value %06d %s", i, strings.Repeat("v", 1100))
}

// damageFile flips 64 bytes in the middle of the largest file of m's
// store named *.ext (same length, so the file still opens and only the
// block there fails its checksum) while m is stopped, and returns its
// path.
//
// Damage in a blob file ("blob") is met first by a client's read of the
// values there (a compaction moves references to them, not the values),
// so TestRepairFromLeader chooses when the member meets it; damage in a
// table ("sst") may be met first by a compaction just after the start
// (the same repair follows). A member killed, which wrote no key index
// checkpoint, rebuilds the index at start by reading every revision key
// of its tables, so its start meets a table's damage (TestRepairAtStart).
func damageFile(t *testing.T, m *member, ext string) string {
	t.Helper()
	return damage.LargestFile(t, m.dir, ext)
}

// TestRepairFromLeader damages one member's store (64 bytes flipped
// inside a block of a blob file, where the values are, while it is
// stopped) and shows the member
// repairing itself without an operator:
//
//   - a read through it meets the damage: it fails with "etcdserver:
//     corrupt cluster" and the member raises its CORRUPT alarm through
//     the log (every member logs it);
//   - the member fetches the leader's state, puts it in place of its
//     store, logs "repaired from leader snapshot at index L" and disarms
//     its alarm: `etcdctl alarm list` is empty on every member;
//   - `etcdctl endpoint hashkv` is equal on the three members, every key
//     reads back on the repaired member alone, and writes work again.
//
// The victim is a follower, then (subtest leader) the leader, which moves
// the leadership away before it asks the new leader for its state.
func TestRepairFromLeader(t *testing.T) {
	for _, tc := range []struct {
		name   string
		leader bool
	}{{"follower", false}, {"leader", true}} {
		t.Run(tc.name, func(t *testing.T) { testRepair(t, tc.leader) })
	}
}

// writeRepairKeys writes the keys of the repair tests through cli.
func writeRepairKeys(t *testing.T, ctx context.Context, cli *clientv3.Client) {
	t.Helper()
	for i := 0; i < repairKeys; i += 100 {
		var ops []clientv3.Op
		for j := i; j < i+100; j++ {
			ops = append(ops, clientv3.OpPut(fmt.Sprintf("%s%06d", repairPrefix, j), repairValue(j)))
		}
		if _, err := cli.Txn(ctx).Then(ops...).Commit(); err != nil {
			t.Fatal(err)
		}
	}
}

// repairVictim is a member of a new 3-member cluster holding the repair
// keys (writeRepairKeys), stopped with every key in its tables, a file of
// its store damaged; the caller starts it again.
type repairVictim struct {
	c       *procCluster
	victim  *member
	id      uint64
	cli     *clientv3.Client // every member's
	vcli    *clientv3.Client // the victim's
	damaged string           // the damaged file
}

// damageVictim makes a repairVictim of the leader (leads) or a follower:
// stopped, or SIGKILLed with kill (no key index checkpoint then), its
// file of kind ext ("blob", "sst") damaged.
func damageVictim(t *testing.T, ctx context.Context, leads, kill bool, ext string) repairVictim {
	t.Helper()
	c := newPreparedCluster(t, 3, 10000, nil)
	lead := c.leader()
	v := repairVictim{c: c, cli: c.client(c.members...), victim: c.others(lead)[0]}
	writeRepairKeys(t, ctx, v.cli)
	if leads {
		v.victim = lead
	}
	v.id = memberIDOf(t, v.cli, v.victim)
	v.vcli = c.client(v.victim)
	// The victim applied every put (a linearizable read on it), and holds
	// them all in tables.
	if _, err := v.vcli.Get(ctx, repairPrefix, clientv3.WithPrefix(), clientv3.WithCountOnly()); err != nil {
		t.Fatal(err)
	}
	if _, err := v.vcli.Defragment(ctx, v.victim.clientAddr); err != nil {
		t.Fatal(err)
	}
	if kill {
		c.kill(v.victim)
	} else {
		c.stop(v.victim)
	}
	v.damaged = damageFile(t, v.victim, ext)
	return v
}

// leadAgain makes the victim, started again, the leader, as it was.
func (v repairVictim) leadAgain(t *testing.T, ctx context.Context) {
	t.Helper()
	if l := v.c.leader(); l != v.victim {
		if _, err := v.c.client(l).MoveLeader(ctx, v.id); err != nil {
			t.Fatal(err)
		}
	}
	if l := v.c.leader(); l != v.victim {
		t.Fatalf("%s leads, want the damaged %s", l.name, v.victim.name)
	}
}

func testRepair(t *testing.T, victimLeads bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	v := damageVictim(t, ctx, victimLeads, false, "blob")
	c, victim, victimID, vcli, table := v.c, v.victim, v.id, v.vcli, v.damaged
	c.start(victim)
	if victimLeads {
		v.leadAgain(t, ctx)
	}

	// Whether the alarm list (etcdctl's AlarmList) of a sound member shows
	// the alarm while it is up: looked at, not asserted, as the repair may
	// clear it between two looks.
	seen := make(chan bool, 1)
	stopLooking := make(chan struct{})
	go func() {
		ocli := c.client(c.others(victim)[0])
		for {
			lctx, lcancel := context.WithTimeout(ctx, time.Second)
			resp, err := ocli.AlarmList(lctx)
			lcancel()
			if err == nil && len(resp.Alarms) > 0 && resp.Alarms[0].MemberID == victimID {
				seen <- true
				return
			}
			select {
			case <-stopLooking:
				seen <- false
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	// A read through the victim meets the damage: etcd's error for
	// damaged data.
	_, err := vcli.Get(ctx, repairPrefix, clientv3.WithPrefix(), clientv3.WithSerializable())
	if !errors.Is(err, rpctypes.ErrCorrupt) {
		t.Fatalf("a read of every key through %s with a damaged file: %v, want %v", victim.name, err, rpctypes.ErrCorrupt)
	}
	t.Logf("a read of every key through %s: %v", victim.name, err)
	// The alarm goes up, then (the repair) down again: its raise and its
	// disarm are applied on every member.
	raised := fmt.Sprintf("alarm CORRUPT raised by member %x", victimID)
	cleared := fmt.Sprintf("alarm CORRUPT of member %x cleared", victimID)
	deadline := time.Now().Add(20 * time.Second)
	for {
		done := true
		for _, m := range c.members {
			done = done && m.logHas(raised) && m.logHas(cleared)
		}
		if done {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("within 20s of the damaged read, not every member logged %q and then %q", raised, cleared)
		}
		time.Sleep(50 * time.Millisecond)
	}
	close(stopLooking)
	t.Logf("alarm list showed the CORRUPT alarm of %x while it was up: %v", victimID, <-seen)
	if !victim.logHas("repaired from leader snapshot at index ") {
		t.Fatalf("%s's alarm was cleared but it logged no repair", victim.name)
	}
	for _, m := range c.members {
		if list := alarmList(t, c.client(m), m.clientAddr); strings.TrimSpace(list) != "" {
			t.Fatalf("%s lists alarms %q after the repair, want none", m.name, list)
		}
	}
	if victimLeads && !victim.logHas("repair: this member leads; moving the leadership to") {
		t.Errorf("%s led but did not move the leadership before its repair", victim.name)
	}
	if _, err := os.Stat(table); !errors.Is(err, os.ErrNotExist) {
		t.Logf("the damaged file %s is still on disk (%v): Pebble removes it once no reader holds it", table, err)
	}

	checkRepaired(t, ctx, c, victim)
}

// checkRepaired checks that the repaired victim holds what its peers
// hold: equal hashes, every key read on the victim alone, and that writes
// work again; then logs the victim's repair lines.
func checkRepaired(t *testing.T, ctx context.Context, c *procCluster, victim *member) {
	t.Helper()
	cli, vcli := c.client(c.members...), c.client(victim)
	checkHashKVEqual(t, c)
	resp, err := vcli.Get(ctx, repairPrefix, clientv3.WithPrefix(), clientv3.WithSerializable())
	if err != nil {
		t.Fatalf("a read of every key through the repaired %s: %v", victim.name, err)
	}
	if len(resp.Kvs) != repairKeys {
		t.Fatalf("the repaired %s has %d keys, want %d", victim.name, len(resp.Kvs), repairKeys)
	}
	for i, kv := range resp.Kvs {
		if string(kv.Key) != fmt.Sprintf("%s%06d", repairPrefix, i) || string(kv.Value) != repairValue(i) {
			t.Fatalf("the repaired %s: key %d is %q = %.30q", victim.name, i, kv.Key, kv.Value)
		}
	}
	if _, err := vcli.Put(ctx, "after-repair", "v"); err != nil {
		t.Fatalf("a put through the repaired %s: %v", victim.name, err)
	}
	if r, err := cli.Get(ctx, "after-repair"); err != nil || len(r.Kvs) != 1 {
		t.Fatalf("reading the put back: %v, %v", r, err)
	}
	log, err := os.ReadFile(victim.logPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(log), "\n") {
		if strings.Contains(l, "repair") {
			t.Log(strings.TrimSpace(l))
		}
	}
}

// checkHashKVEqual compares the members' `etcdctl endpoint hashkv` at
// the lowest revision they report (clientv3 without etcdctl).
func checkHashKVEqual(t *testing.T, c *procCluster) {
	t.Helper()
	cli := c.client(c.members...)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var rev int64
	for _, m := range c.members {
		st, err := cli.Status(ctx, m.clientAddr)
		if err != nil {
			t.Fatal(err)
		}
		if rev == 0 || st.Header.Revision < rev {
			rev = st.Header.Revision
		}
	}
	var eps []string
	for _, m := range c.members {
		eps = append(eps, m.clientAddr)
	}
	hashes := map[string]uint32{}
	if out, ok := etcdctl(t, strings.Join(eps, ","), "endpoint", "hashkv", "--rev="+strconv.FormatInt(rev, 10), "-w", "json"); ok {
		var hs []struct {
			Endpoint string
			HashKV   struct{ Hash uint32 }
		}
		if err := json.Unmarshal([]byte(out), &hs); err != nil {
			t.Fatalf("etcdctl endpoint hashkv -w json: %v\n%s", err, out)
		}
		for _, h := range hs {
			hashes[h.Endpoint] = h.HashKV.Hash
		}
	} else {
		for _, ep := range eps {
			h, err := cli.HashKV(ctx, ep, rev)
			if err != nil {
				t.Fatal(err)
			}
			hashes[ep] = h.Hash
		}
	}
	if len(hashes) != len(eps) {
		t.Fatalf("endpoint hashkv answered for %d endpoints, want %d: %v", len(hashes), len(eps), hashes)
	}
	for _, ep := range eps {
		if hashes[ep] != hashes[eps[0]] {
			t.Fatalf("endpoint hashkv --rev=%d differs: %v", rev, hashes)
		}
	}
	t.Logf("endpoint hashkv --rev=%d: %d on all %d members", rev, hashes[eps[0]], len(eps))
}

// TestRepairAtStart damages a table of a killed member's store (64
// bytes flipped inside a data block): its start, which rebuilds the key
// index from every revision (no checkpoint after a kill), meets the
// damage, and instead of refusing to
// start the member replaces its store with the leader's state
// (cluster.FetchLeaderState), then starts and follows the log: `etcdctl
// endpoint hashkv` is equal on the three members, every key reads back on
// it alone, writes work.
func TestRepairAtStart(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// Killed, the member writes no key index checkpoint: its start
	// rebuilds the index from every revision and meets the damage.
	v := damageVictim(t, ctx, false, true, "sst")
	c, victim, vcli := v.c, v.victim, v.vcli
	// Written while the victim is down: it catches up from the log after
	// its repair. Through the others only: a client of every member may
	// still send it on the killed member's connection, and a put that
	// meets the connection's end has an unknown outcome (not retried).
	if _, err := c.client(c.others(victim)...).Put(ctx, "while-down", "v"); err != nil {
		t.Fatal(err)
	}
	c.start(victim)
	if !victim.logHas("server: repair: the store does not open: ") || !victim.logHas("checksum mismatch") {
		t.Fatalf("%s started without meeting the damaged table", victim.name)
	}
	if !victim.logHas(" at start: ") {
		t.Fatalf("%s started without a repair at start", victim.name)
	}
	waitFor(t, 10*time.Second, victim.name+" reads the put made while it was down", func() bool {
		r, err := vcli.Get(ctx, "while-down", clientv3.WithSerializable())
		return err == nil && len(r.Kvs) == 1
	})
	checkRepaired(t, ctx, c, victim)
}

// waitFor polls cond until it holds, failing the test after d.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(d); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", d, what)
		}
	}
}
