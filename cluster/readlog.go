package cluster

import (
	"fmt"
	"math"
	"os"
	"path/filepath"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stratadb/strata/cluster/raftwal"

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
	dir := filepath.Join(raftDir, "wal")
	if _, err := os.Stat(dir); err != nil {
		if _, lerr := os.Stat(filepath.Join(raftDir, "log")); lerr == nil {
			return nil, 0, nil, fmt.Errorf("cluster: raft log in %s is in the format of an earlier Strata: start the member once to move it", raftDir)
		}
		return nil, 0, nil, fmt.Errorf("cluster: raft log: %w", err)
	}
	w, err := raftwal.Open(vfs.Default, dir, raftwal.Options{ReadOnly: true})
	if err != nil {
		return nil, 0, nil, fmt.Errorf("cluster: raft log: %w", err)
	}
	defer w.Close()
	snap, err := w.Snapshot()
	if err != nil {
		return nil, 0, nil, err
	}
	first, _ := w.FirstIndex()
	last, _ := w.LastIndex()
	var all []*pb.Entry
	if last >= first {
		if all, err = w.Entries(first, last+1, math.MaxUint64); err != nil {
			return nil, 0, nil, fmt.Errorf("cluster: raft log: %w", err)
		}
	}
	for _, e := range all {
		if e.GetType() != pb.EntryNormal {
			entries = append(entries, e)
			continue
		}
		e = proto.Clone(e).(*pb.Entry)
		if data := e.GetData(); isCommand(data) {
			cmd, err := command(data)
			if err != nil {
				return nil, 0, nil, fmt.Errorf("cluster: raft log entry %d: %w", e.GetIndex(), err)
			}
			e.Data = cmd
		} else {
			e.Data = nil
		}
		entries = append(entries, e)
	}
	return w.HardState(), snap.GetMetadata().GetIndex(), entries, nil
}
