package clustertest

import (
	"context"
	"fmt"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// TestRepairOnApply damages a follower's blob file (64 bytes flipped in a
// block of values, while it is stopped) and has the apply of a command
// meet the damage: a txn, sent through another member, whose compare fails
// (the mod_revision of a key is not 1) so that its Else branch reads
// every value, as Kubernetes' GuaranteedUpdate does (If(mod_revision ==
// X).Then(Put).Else(Get)). Every member applies it; the follower's store
// cannot read the values. Replayed from the log after a restart, the
// command would meet the damage again, so the member must not stop: its
// apply goroutine replaces the store with the leader's state and goes on.
// The test checks that:
//
//   - the txn's answer is right: the Else branch
//     with every key and value;
//   - the follower logs the repair of its apply and stays up (its
//     process does not exit; it serves reads of every key);
//   - `etcdctl endpoint hashkv` is equal on the three members, the
//     CORRUPT alarm the damage raised is cleared on every member, and
//     writes work.
//
// The victim is a follower, then (subtest leader) the leader, which moves
// the leadership away before it asks the new leader for its state; the
// txn goes through a member other than the victim.
func TestRepairOnApply(t *testing.T) {
	for _, tc := range []struct {
		name   string
		leader bool
	}{{"follower", false}, {"leader", true}} {
		t.Run(tc.name, func(t *testing.T) { testRepairOnApply(t, tc.leader) })
	}
}

func testRepairOnApply(t *testing.T, victimLeads bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	v := damageVictim(t, ctx, victimLeads, false, "blob")
	c, victim, vcli := v.c, v.victim, v.vcli
	c.start(victim)
	if victimLeads {
		v.leadAgain(t, ctx)
	}
	via := c.others(victim)[0]
	// The victim follows the log again before the txn is proposed (a
	// linearizable read through it waits for its apply).
	if _, err := vcli.Get(ctx, "none"); err != nil {
		t.Fatal(err)
	}

	first := fmt.Sprintf("%s%06d", repairPrefix, 0)
	resp, err := c.client(via).Txn(ctx).
		If(clientv3.Compare(clientv3.ModRevision(first), "=", 1)).
		Then(clientv3.OpPut(first, "not this")).
		Else(clientv3.OpGet(repairPrefix, clientv3.WithPrefix())).
		Commit()
	if err != nil {
		t.Fatalf("txn through %s: %v", via.name, err)
	}
	if resp.Succeeded {
		t.Fatalf("txn: the compare mod_revision(%s) == 1 succeeded", first)
	}
	kvs := resp.Responses[0].GetResponseRange().Kvs
	if len(kvs) != repairKeys {
		t.Fatalf("txn's Else range: %d keys, want %d", len(kvs), repairKeys)
	}
	for i, kv := range kvs {
		if string(kv.Key) != fmt.Sprintf("%s%06d", repairPrefix, i) || string(kv.Value) != repairValue(i) {
			t.Fatalf("txn's Else range: key %d is %q = %.30q", i, kv.Key, kv.Value)
		}
	}

	waitFor(t, 20*time.Second, victim.name+" logs the repair of its apply", func() bool {
		select {
		case <-victim.exited:
			t.Fatalf("%s exited after its apply met the damage; log:\n%s", victim.name, tail(victim.logPath, 30))
		default:
		}
		return victim.logHas("after its apply met damaged data")
	})
	if !victim.logHas("checksum mismatch") {
		t.Fatalf("%s repaired its apply without having met a checksum mismatch", victim.name)
	}
	// The damage the engine met also raised the CORRUPT alarm: cleared
	// once the store is the leader's.
	waitFor(t, 20*time.Second, "no alarm on any member", func() bool {
		for _, m := range c.members {
			r, err := c.client(m).AlarmList(ctx)
			if err != nil || len(r.Alarms) > 0 {
				return false
			}
		}
		return true
	})
	if victimLeads && !victim.logHas("repair: this member leads; moving the leadership to") {
		t.Errorf("%s led but did not move the leadership before its repair", victim.name)
	}
	checkRepaired(t, ctx, c, victim)
	select {
	case <-victim.exited:
		t.Fatalf("%s exited; log:\n%s", victim.name, tail(victim.logPath, 30))
	default:
	}
}
