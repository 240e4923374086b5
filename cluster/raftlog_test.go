package cluster

import (
	"encoding/json"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stratadb/strata/cluster/raftwal"
	"github.com/stratadb/strata/config"
	"github.com/stratadb/strata/engine"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// TestLegacyRaftLogMoved: a member whose raft log is in the engine
// database of an earlier Strata (raft_dir/log) finds it moved into
// raft_dir/wal at start, whole: its identity, member list, hard state,
// snapshot and the entries after it; the old database is gone, and a
// crash right after the move loses nothing of it.
func TestLegacyRaftLogMoved(t *testing.T) {
	fs := vfs.NewCrashableMem()
	if err := raftwal.MkdirAllSynced(fs, "/raft"); err != nil {
		t.Fatal(err)
	}
	cfg := config.Default()
	cfg.DBPath = "/raft/log"
	cfg.Sync = true
	db, err := engine.Open(cfg, engine.Options{FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	meta := logMeta{ClusterID: 7, MemberID: 9, Name: "s1", Token: "t"}
	members := newMemberSet()
	members.Members[9] = &Member{ID: 9, Name: "s1", PeerURLs: []string{"http://127.0.0.1:2380"}}
	members.Applied = 12
	mb, _ := json.Marshal(meta)
	hs := &pb.HardState{Term: new(uint64(3)), Vote: new(uint64(9)), Commit: new(uint64(14))}
	snap := &pb.Snapshot{Data: members.marshal(), Metadata: &pb.SnapshotMetadata{Index: new(uint64(10)), Term: new(uint64(2)), ConfState: &pb.ConfState{Voters: []uint64{9}}}}
	put := func(k []byte, m proto.Message) {
		b, err := proto.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		if err := db.Put(k, b); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Put(keyMeta, mb); err != nil {
		t.Fatal(err)
	}
	if err := db.Put(keyMembers, members.marshal()); err != nil {
		t.Fatal(err)
	}
	put(keyHardState, hs)
	put(keySnapshot, snap)
	for i := uint64(8); i <= 15; i++ { // 8-10 are behind the snapshot
		put(entryKey(i), &pb.Entry{Term: new(uint64(3)), Index: new(i), Type: new(pb.EntryNormal), Data: []byte{byte(i)}})
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	s, err := openLogStore("/raft", fs)
	if err != nil {
		t.Fatal(err)
	}
	crashed := fs.CrashClone(vfs.CrashCloneCfg{})
	_ = s.close()
	for _, fs := range []vfs.FS{fs, crashed} {
		s, err := openLogStore("/raft", fs)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := fs.Stat("/raft/log"); err == nil {
			t.Error("the legacy raft log is still there after the move")
		}
		m, ok, err := s.meta()
		if err != nil || !ok || m != meta {
			t.Fatalf("meta %+v %v %v, want %+v", m, ok, err, meta)
		}
		l, err := s.load()
		if err != nil {
			t.Fatal(err)
		}
		if !proto.Equal(l.hs, hs) || l.snapshot.GetMetadata().GetIndex() != 10 || l.members.Applied != 12 || l.members.Members[9].Name != "s1" {
			t.Fatalf("moved state: hs %v, snapshot %v, members %+v", l.hs, l.snapshot.GetMetadata(), l.members)
		}
		first, _ := s.wal.FirstIndex()
		last, _ := s.wal.LastIndex()
		ents, err := s.wal.Entries(first, last+1, 1<<30)
		if err != nil || first != 11 || last != 15 || len(ents) != 5 || ents[4].GetData()[0] != 15 {
			t.Fatalf("moved entries %d..%d: %v (%v)", first, last, ents, err)
		}
		if term, _ := s.wal.Term(10); term != 2 {
			t.Fatalf("term of the snapshot's index %d, want 2", term)
		}
		_ = s.close()
	}
}
