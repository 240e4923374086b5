package cluster

import (
	"fmt"
	"testing"

	pb "go.etcd.io/raft/v3/raftpb"
)

// TestReadLogCommands: a stopped member's log, read from outside, holds
// the bootstrap conf changes and then exactly the commands proposed, in
// order, with the cluster's own entries (attributes, a leader's empty
// entry) carrying no data.
func TestReadLogCommands(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	c.leader()
	var want []string
	for i := range 20 {
		cmd := fmt.Sprintf("k%d v%d", i%3, i)
		if _, err := c.put(i%3, fmt.Sprintf("k%d", i%3), fmt.Sprintf("v%d", i)); err != nil {
			t.Fatal(err)
		}
		want = append(want, "put "+cmd)
	}
	c.converge()
	c.stop(1)
	hs, snapIndex, ents, err := ReadLog(c.config(1, false).Dir)
	if err != nil {
		t.Fatal(err)
	}
	if snapIndex != 0 || len(ents) == 0 || ents[0].GetIndex() != 1 {
		t.Fatalf("log starts after %d with %d entries (first %v): want every entry from index 1", snapIndex, len(ents), ents[0])
	}
	var got []string
	confChanges := 0
	for i, e := range ents {
		if e.GetIndex() != uint64(i+1) {
			t.Fatalf("entry %d has index %d", i, e.GetIndex())
		}
		switch {
		case e.GetType() == pb.EntryConfChange:
			confChanges++
		case len(e.GetData()) > 0:
			got = append(got, string(e.GetData()))
		}
	}
	if confChanges != 3 {
		t.Errorf("%d conf change entries, want the 3 of the bootstrap", confChanges)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("commands read back:\n%q\nwant:\n%q", got, want)
	}
	if hs.GetCommit() < ents[len(ents)-1].GetIndex()-1 || hs.GetTerm() == 0 {
		t.Errorf("hard state %v after %d entries", hs, len(ents))
	}
	if _, _, _, err := ReadLog(t.TempDir()); err == nil {
		t.Error("ReadLog of a directory without a raft log: no error")
	}
}
