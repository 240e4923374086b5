package cluster

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// snapshotPastState stops member i and returns the index of its raft
// log's snapshot and its state machine's applied index, failing the test
// unless the snapshot lies past the last command applied: the case the
// tests below are about (the last entry before the snapshot is not a
// command, so the state machine never saw its index).
func (c *testCluster) snapshotPastState(i int) (snapIndex, smApplied uint64) {
	c.t.Helper()
	c.stop(i)
	_, snapIndex, _, err := ReadLog(c.config(i, false).Dir)
	if err != nil {
		c.t.Fatal(err)
	}
	smApplied = c.sms[i].AppliedIndex()
	if snapIndex <= smApplied {
		c.t.Fatalf("member %d: raft snapshot at %d, state machine at %d: the snapshot is not past the last command, the test proves nothing", i, snapIndex, smApplied)
	}
	return snapIndex, smApplied
}

// TestRaftRestartSnapshotAfterLastCommand: a member whose raft snapshot
// was taken at an entry that is not a command (here a new leader's empty
// entry, applied last before the snapshot) restarts. Its state machine's
// applied index is that of the last command, below the snapshot's index,
// yet no command is missing: the member must start, keep its data and
// take writes.
func TestRaftRestartSnapshotAfterLastCommand(t *testing.T) {
	c := newTestCluster(t, 1, func(cfg *RaftConfig) {
		cfg.SnapshotEntries = 1 // a snapshot after every apply
		cfg.CatchUpEntries = 1
	})
	c.waitStarted()
	for i := range 3 {
		if _, err := c.put(0, fmt.Sprintf("k%d", i), "v"); err != nil {
			t.Fatal(err)
		}
	}
	c.stop(0)
	c.restart(0)
	// The restarted member leads a new term: its empty entry is applied
	// last, and the snapshot is taken at it.
	before := c.nodes[0].Status().AppliedIndex
	waitFor(t, "the new leader's empty entry applied", func() bool { return c.nodes[0].Status().AppliedIndex > before })
	snapIndex, smApplied := c.snapshotPastState(0)
	t.Logf("raft snapshot at %d, state machine at %d", snapIndex, smApplied)

	c.restart(0)
	if _, err := c.put(0, "after", "1"); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if got := c.sms[0].get(fmt.Sprintf("k%d", i)); got != "v" {
			t.Errorf("k%d = %q after the restart, want v", i, got)
		}
	}
}

// TestRaftRestartReceivedSnapshotAfterLastCommand: a follower that fell
// behind the leader's log receives a raft snapshot at the leader's
// applied index, a new leader's empty entry past the last command, and
// the state machine's data as of that command. Restarted, it must start
// and catch up.
func TestRaftRestartReceivedSnapshotAfterLastCommand(t *testing.T) {
	c := newTestCluster(t, 3, func(cfg *RaftConfig) {
		cfg.SnapshotEntries = 10
		cfg.CatchUpEntries = 5
	})
	c.waitStarted()
	lead := c.leader()
	f, o := (lead+1)%3, (lead+2)%3
	c.stop(f)
	for i := range 40 {
		if _, err := c.put(lead, fmt.Sprintf("k%d", i), "v"); err != nil {
			t.Fatal(err)
		}
	}
	// The new leader's empty entry is the last entry: the snapshot it
	// sends the follower is at that entry.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.nodes[lead].MoveLeader(ctx, c.nodes[o].Status().MemberID); err != nil {
		t.Fatal(err)
	}
	if now := c.leader(); now != o {
		t.Fatalf("member %d leads after the move to member %d", now, o)
	}
	waitFor(t, "the new leader's empty entry applied", func() bool {
		st := c.nodes[o].Status()
		return st.AppliedIndex == st.CommitIndex && st.Term == c.nodes[lead].Status().Term
	})
	target := c.nodes[o].Status().AppliedIndex
	c.restart(f)
	waitFor(t, "the follower caught up", func() bool { return c.nodes[f].Status().AppliedIndex >= target })
	if c.sms[f].restores == 0 {
		t.Fatal("the follower caught up from the log, not from a snapshot: the test proves nothing")
	}
	snapIndex, smApplied := c.snapshotPastState(f)
	t.Logf("follower: raft snapshot at %d, state machine at %d", snapIndex, smApplied)

	c.restart(f)
	if _, err := c.put(o, "after", "1"); err != nil {
		t.Fatal(err)
	}
	c.converge()
}

// TestRaftRestartRefusesMissingCommands: the restart check still refuses
// a state machine that lacks commands the raft log no longer holds (one
// put back from an earlier backup, here an empty one).
func TestRaftRestartRefusesMissingCommands(t *testing.T) {
	c := newTestCluster(t, 1, func(cfg *RaftConfig) {
		cfg.SnapshotEntries = 1
		cfg.CatchUpEntries = 1
	})
	c.waitStarted()
	for i := range 3 {
		if _, err := c.put(0, fmt.Sprintf("k%d", i), "v"); err != nil {
			t.Fatal(err)
		}
	}
	c.stop(0)
	n, err := StartRaft(c.config(0, false), newKVSM())
	if err == nil {
		n.Stop()
		t.Fatal("a member whose state machine lost the commands before its raft snapshot started")
	}
	if !strings.Contains(err.Error(), "entries 1..") {
		t.Errorf("error %q does not name the entries gone", err)
	}
}

// TestRaftRestartAfterSnapshotStop: a member stopped at once after a
// snapshot (one after every apply) restarts, every time. The apply
// goroutine may take the snapshot before the append goroutine has written
// the hard state that records its entries committed.
func TestRaftRestartAfterSnapshotStop(t *testing.T) {
	c := newTestCluster(t, 1, func(cfg *RaftConfig) {
		cfg.SnapshotEntries = 1
		cfg.CatchUpEntries = 1
	})
	c.waitStarted()
	for i := range 10 {
		// A restarted member elects itself within two election timeouts,
		// which is also how long a proposal waits for a leader: on a
		// loaded host the put could come first.
		c.leader()
		if _, err := c.put(0, fmt.Sprintf("k%d", i), "v"); err != nil {
			t.Fatal(err)
		}
		c.stop(0)
		c.restart(0)
	}
	if got := c.sms[0].len(); got != 10 {
		t.Errorf("%d keys after the restarts, want 10", got)
	}
}

func TestSnapshotStateApplied(t *testing.T) {
	s := newMemberSet()
	s.Members[1] = &Member{ID: 1, Name: "s1", PeerURLs: []string{"http://127.0.0.1:2380"}}
	for _, tc := range []struct {
		name     string
		data     []byte
		index    uint64
		recorded bool
	}{
		{"none", nil, 0, false},
		{"before the field", s.marshal(), 0, false},
		{"zero", s.marshalSnapshot(0), 0, true},
		{"recorded", s.marshalSnapshot(42), 42, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			index, recorded, err := snapshotStateApplied(tc.data)
			if err != nil || index != tc.index || recorded != tc.recorded {
				t.Errorf("snapshotStateApplied = %d, %v, %v; want %d, %v, nil", index, recorded, err, tc.index, tc.recorded)
			}
			got, err := unmarshalMemberSet(tc.data)
			if err != nil {
				t.Fatal(err)
			}
			if len(tc.data) > 0 && got.Members[1].Name != "s1" {
				t.Errorf("member list from the snapshot data: %+v", got.Members)
			}
		})
	}
	if _, _, err := snapshotStateApplied([]byte("{")); err == nil {
		t.Error("malformed snapshot data: no error")
	}
}

// randomHex returns n hex digits of random bytes: a command S2 stores at
// about half its size, so that n bytes of them count in the raft log.
func randomHex(rng *rand.Rand, n int) string {
	b := make([]byte, n/2)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return hex.EncodeToString(b)
}

// TestIdleSnapshot: a member whose writes stop takes a snapshot at its
// applied index after idleSnapshotAfter, though neither SnapshotEntries
// nor snapshotBytes was reached, once idleSnapshotBytes of entries came
// since the last one; fewer bytes wait for more writes.
func TestIdleSnapshot(t *testing.T) {
	c := newTestCluster(t, 1, func(cfg *RaftConfig) {
		cfg.SnapshotEntries = 1 << 20
		cfg.CatchUpEntries = 1
	})
	c.leader()
	rng := rand.New(rand.NewPCG(1, 1))
	snapIndexAfterIdle := func(bytes int) (snapIndex, applied uint64) {
		t.Helper()
		for i := 0; i < bytes; i += 64 << 10 {
			if _, err := c.put(0, fmt.Sprintf("k%d", i), randomHex(rng, 64<<10)); err != nil {
				t.Fatal(err)
			}
		}
		applied = c.nodes[0].Status().AppliedIndex
		time.Sleep(idleSnapshotAfter + time.Second)
		c.stop(0)
		_, snapIndex, _, err := ReadLog(c.config(0, false).Dir)
		if err != nil {
			t.Fatal(err)
		}
		c.restart(0)
		return snapIndex, applied
	}
	if snapIndex, applied := snapIndexAfterIdle(idleSnapshotBytes * 2); snapIndex < applied {
		t.Fatalf("after %d bytes of entries and %v idle: snapshot at %d, applied %d: want a snapshot at the applied index", idleSnapshotBytes*2, idleSnapshotAfter+time.Second, snapIndex, applied)
	}
	// A restart's own entries (its term's empty one) are few: under
	// idleSnapshotBytes, they wait.
	c.leader()
	if snapIndex, applied := snapIndexAfterIdle(idleSnapshotBytes / 4); snapIndex >= applied {
		t.Fatalf("after %d bytes of entries: snapshot at %d, applied %d: want no snapshot for so few", idleSnapshotBytes/4, snapIndex, applied)
	}
}

// TestIdleSnapshotFailureKeepsMember: a snapshot after a pause whose
// state machine sync fails (a full disk refusing the store's flush) leaves
// the member up and serving; once the sync succeeds, the pause after the
// next write takes it.
func TestIdleSnapshotFailureKeepsMember(t *testing.T) {
	c := newTestCluster(t, 1, func(cfg *RaftConfig) {
		cfg.SnapshotEntries = 1 << 20
		cfg.CatchUpEntries = 1
	})
	c.leader()
	sm := c.sms[0]
	sm.mu.Lock()
	sm.syncErr = errors.New("no space left on device")
	sm.mu.Unlock()
	rng := rand.New(rand.NewPCG(2, 2))
	for i := range 4 * idleSnapshotBytes / (64 << 10) {
		if _, err := c.put(0, fmt.Sprintf("k%d", i), randomHex(rng, 64<<10)); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(idleSnapshotAfter + time.Second)
	if _, err := c.put(0, "after", "failed-sync"); err != nil {
		t.Fatalf("a put after the failed snapshot: %v: the member must stay up", err)
	}
	sm.mu.Lock()
	sm.syncErr = nil
	sm.mu.Unlock()
	if _, err := c.put(0, "after", "synced"); err != nil { // the next pause starts
		t.Fatal(err)
	}
	applied := c.nodes[0].Status().AppliedIndex
	time.Sleep(idleSnapshotAfter + time.Second)
	c.stop(0)
	_, snapIndex, _, err := ReadLog(c.config(0, false).Dir)
	if err != nil {
		t.Fatal(err)
	}
	if snapIndex < applied {
		t.Fatalf("snapshot at %d after the sync came back and a pause, applied %d", snapIndex, applied)
	}
}
