package cluster

import (
	"fmt"
	"os"
	"path/filepath"

	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// ReadLog returns the raft log that a stopped member left in raftDir (its
// RaftConfig.Dir, config's cluster.RaftDirFor): the hard state, the index
// the log starts after (its last snapshot) and every entry kept after it,
// in index order. It is for tools that check a cluster's history from
// outside, as etcd's robustness tests read each member's WAL; the member
// must not be running.
//
// Each normal entry's Data is what the state machine applies: for a
// command, the command itself (Strata's server puts etcd's
// InternalRaftRequest there, as etcd does in its WAL), and nothing for the
// entries of the cluster's own bookkeeping (a member's attributes, a new
// leader's empty entry). Conf change entries are as raft wrote them.
func ReadLog(raftDir string) (hs *pb.HardState, snapIndex uint64, entries []*pb.Entry, err error) {
	dir := filepath.Join(raftDir, "log")
	if _, err := os.Stat(dir); err != nil {
		return nil, 0, nil, fmt.Errorf("cluster: raft log: %w", err)
	}
	s, err := openLogStore(dir, nil)
	if err != nil {
		return nil, 0, nil, err
	}
	defer s.close()
	l, err := s.load()
	if err != nil {
		return nil, 0, nil, err
	}
	for _, e := range l.entries {
		if e.GetType() != pb.EntryNormal {
			entries = append(entries, e)
			continue
		}
		e = proto.Clone(e).(*pb.Entry)
		if data := e.GetData(); isCommand(data) {
			_, _, cmd := proposal(data)
			e.Data = cmd
		} else {
			e.Data = nil
		}
		entries = append(entries, e)
	}
	return l.hs, l.snapshot.GetMetadata().GetIndex(), entries, nil
}
