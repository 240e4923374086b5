package server

import (
	"fmt"
	"slices"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"github.com/stratadb/strata/mvcc"
)

// TestCheckPeerHashes holds the compact hash check's decision to etcd's
// (checkPeerHashes in etcd's corrupt.go): which members get the CORRUPT
// alarm, and whether the older compactions still need a check. The
// leader is member 1 with hash 10 at compaction revision 5.
func TestCheckPeerHashes(t *testing.T) {
	peer := func(id uint64, hash uint32, compact int64) *peerHash {
		return &peerHash{id: id, resp: &pb.HashKVResponse{Hash: hash, CompactRevision: compact}}
	}
	silent := func(id uint64) *peerHash { return &peerHash{id: id, err: fmt.Errorf("no answer")} }
	tests := []struct {
		name    string
		peers   []*peerHash
		alarms  []uint64
		done    bool
		checked int64 // the latest revision checked on the whole cluster after
	}{
		{"all equal", []*peerHash{peer(2, 10, 5), peer(3, 10, 5)}, nil, true, 5},
		{"one follower differs", []*peerHash{peer(2, 10, 5), peer(3, 11, 5)}, []uint64{3}, true, 0},
		{"the leader differs", []*peerHash{peer(2, 11, 5), peer(3, 11, 5)}, []uint64{1}, true, 0},
		{"no majority", []*peerHash{peer(2, 11, 5), peer(3, 12, 5)}, []uint64{0}, true, 0},
		{"five members, two differ", []*peerHash{peer(2, 10, 5), peer(3, 10, 5), peer(4, 11, 5), peer(5, 12, 5)}, []uint64{4, 5}, true, 0},
		{"a follower silent", []*peerHash{peer(2, 10, 5), silent(3)}, nil, false, 0},
		{"a follower at another compaction", []*peerHash{peer(2, 10, 5), peer(3, 99, 4)}, nil, false, 0},
		{"silent, the other differs", []*peerHash{peer(2, 11, 5), silent(3)}, []uint64{0}, true, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var raised []uint64
			c := &corruptChecker{alarm: func(id uint64) { raised = append(raised, id) }}
			done := c.checkPeerHashes(1, mvcc.CompactionHash{Hash: 10, Revision: 5, CompactRevision: 5}, tc.peers)
			slices.Sort(raised)
			if done != tc.done || !slices.Equal(raised, tc.alarms) || c.latestChecked != tc.checked {
				t.Errorf("done %v, alarms %v, latest checked %d; want %v, %v, %d", done, raised, c.latestChecked, tc.done, tc.alarms, tc.checked)
			}
		})
	}
}
