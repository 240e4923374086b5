package server

import (
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/membershippb"
	"google.golang.org/protobuf/proto"

	"github.com/stratadb/strata/mvcc"
)

// FuzzApply applies arbitrary bytes as a log entry, as a follower gets
// one from the raft log (the command is decoded by Stage, as there), to
// two state machines fed the same log: no command may panic or stop the
// node (an error from Stage or Commit), both must give the same result
// (apply is deterministic), and afterwards each still applies a put and
// serves the key. CI runs the seed corpus (testdata/fuzz/FuzzApply).
func FuzzApply(f *testing.F) {
	for _, cmd := range applyCommands(f) {
		f.Add(cmd)
	}
	for _, r := range []*pb.InternalRaftRequest{
		{AuthUserAdd: &pb.AuthUserAddRequest{Name: "root", HashedPassword: "$2a$04$x", Options: nil}},
		{AuthUserGrantRole: &pb.AuthUserGrantRoleRequest{User: "root", Role: "root"}},
		{AuthEnable: &pb.AuthEnableRequest{}},
		{Authenticate: &pb.InternalAuthenticateRequest{Name: "root", SimpleToken: "t.1"}},
		{AuthRoleGrantPermission: &pb.AuthRoleGrantPermissionRequest{Name: "nope"}},
		{Header: &pb.RequestHeader{Username: "ghost", AuthRevision: 99}, Put: &pb.PutRequest{Key: []byte("k")}},
		{LeaseGrant: &pb.LeaseGrantRequest{ID: 5, TTL: mvcc.MaxLeaseTTL + 1}},
		{LeaseGrant: &pb.LeaseGrantRequest{ID: -1, TTL: -1}},
		{LeaseCheckpoint: &pb.LeaseCheckpointRequest{Checkpoints: []*pb.LeaseCheckpoint{{ID: 5, Remaining_TTL: -1}}}},
		{Alarm: &pb.AlarmRequest{Action: pb.AlarmRequest_ACTIVATE, Alarm: pb.AlarmType_NOSPACE, MemberID: 3}},
		{Alarm: &pb.AlarmRequest{Action: pb.AlarmRequest_DEACTIVATE, Alarm: pb.AlarmType_NOSPACE, MemberID: 3}},
		{Compaction: &pb.CompactionRequest{Revision: -1}},
		{Range: &pb.RangeRequest{Key: []byte("a")}},
		{ClusterVersionSet: &membershippb.ClusterVersionSetRequest{Ver: "9.9.9"}},
		{Txn: &pb.TxnRequest{Success: []*pb.RequestOp{{}, {Request: &pb.RequestOp_RequestTxn{}}}}},
		{Put: &pb.PutRequest{Key: make([]byte, mvcc.MaxKeySize+1)}},
	} {
		f.Add(fuzzSeed(f, r))
	}
	a1, _ := openApplier(f)
	a2, _ := openApplier(f)
	var index uint64
	sentinel := fuzzSeed(f, &pb.InternalRaftRequest{Put: &pb.PutRequest{Key: []byte("fuzz/sentinel"), Value: []byte("v")}})
	f.Fuzz(func(t *testing.T, cmd []byte) {
		index++
		r1 := fuzzStage(t, a1, index, cmd)
		r2 := fuzzStage(t, a2, index, cmd)
		if !proto.Equal(r1.resp, r2.resp) || errString(r1.err) != errString(r2.err) {
			t.Fatalf("command %x applied twice: %v, %v and %v, %v", cmd, r1.resp, r1.err, r2.resp, r2.err)
		}
		index++
		for _, a := range []*applier{a1, a2} {
			res := fuzzStage(t, a, index, sentinel)
			got, err := a.store.Range([]byte("fuzz/sentinel"), nil, mvcc.RangeOptions{})
			if err != nil {
				t.Fatalf("range after command %x: %v", cmd, err)
			}
			if res.err == nil && got.Count != 1 {
				t.Fatalf("put after command %x applied, but the range has %d keys", cmd, got.Count)
			}
		}
	})
}

// fuzzStage applies cmd at index in a batch of its own and returns its
// result; an error that stops the node fails the test.
func fuzzStage(t *testing.T, a *applier, index uint64, cmd []byte) *applyResult {
	t.Helper()
	b := a.NewBatch()
	res, err := b.Stage(index, cmd)
	if cerr := b.Commit(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatalf("command %x at %d stops the node: %v", cmd, index, err)
	}
	return res.(*applyResult)
}

// errString is err's message, "" for nil.
func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
