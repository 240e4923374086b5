package server

import (
	"context"
	"errors"
	"io"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/version"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/stratadb/strata/auth"
	"github.com/stratadb/strata/cluster"
	"github.com/stratadb/strata/engine"
	"github.com/stratadb/strata/mvcc"
)

// maintenanceServer is etcd's Maintenance service: Status and Alarm, what
// `etcdctl endpoint status` and `endpoint health` call, Defragment,
// Snapshot, HashKV and MoveLeader. Hash and Downgrade answer
// codes.Unimplemented.
//
// It holds only what it uses: the member's node (status, leadership), its
// engine and store (sizes, defragmentation, backups, hashes), auth, the
// header, and the apply path and alarm set for Alarm.
type maintenanceServer struct {
	pb.UnimplementedMaintenanceServer
	node  cluster.Node
	db    *engine.DB
	store *mvcc.Store
	auth  *auth.Store
	hdr   memberHeader
	// raft proposes alarm changes; alarms are the applied ones.
	raft   proposer
	alarms *alarmStore
	// quota is quota_backend_bytes as etcd reports it (DbSizeQuota).
	quota int64
	// spaceChanged takes a new sample of the space guard (quota.go): after
	// a defragmentation or an alarm disarmed, a write must not be refused
	// on a sample from before, however recent.
	spaceChanged func()
}

// Status reports the member: etcd API version, database size on disk and
// in use (dbSizes) and its quota, leader, raft index and term, and (as
// etcd's errors) no leader and the alarms raised. etcdctl shows "is leader" when leader
// equals the header's member_id.
func (m *maintenanceServer) Status(ctx context.Context, r *pb.StatusRequest) (*pb.StatusResponse, error) {
	if err := m.auth.RequireUser(ctx); err != nil {
		return nil, toGRPC(err)
	}
	st := m.node.Status()
	size, inUse := dbSizes(m.db)
	resp := &pb.StatusResponse{
		Header:           m.hdr.fill(nil),
		Version:          version.Version,
		DbSize:           size,
		DbSizeInUse:      inUse,
		Leader:           st.Leader,
		RaftIndex:        st.CommitIndex,
		RaftTerm:         st.Term,
		RaftAppliedIndex: st.AppliedIndex,
		StorageVersion:   version.Cluster(version.Version),
		DbSizeQuota:      m.quota,
	}
	// As etcd's: no leader and every alarm raised are the member's errors.
	if st.Leader == 0 {
		resp.Errors = append(resp.Errors, "etcdserver: no leader")
	}
	for _, a := range m.alarms.get(pb.AlarmType_NONE) {
		resp.Errors = append(resp.Errors, a.String())
	}
	return resp, nil
}

// dbSizes returns the database's size on disk (tables, live WAL files
// and metadata; etcd's dbSize, its file's size) and in use (the live
// tables, the referenced part of the blob files and the WAL; etcd's
// dbSizeInUse), at least 1 each, as etcd's are.
// The WAL files Pebble keeps for reuse are left out of the size: they
// hold no data, and counting them made a new, nearly empty database
// report as much as its memtables hold (several MB per recycled file).
func dbSizes(db *engine.DB) (size, inUse int64) {
	size, inUse = 1, 1
	if em, err := db.Metrics(); err == nil && em.DiskUsageBytes > em.WAL.RecycledBytes {
		size, inUse = int64(em.DiskUsageBytes-em.WAL.RecycledBytes), int64(em.WAL.LiveBytes)
		for _, l := range em.Levels {
			inUse += l.Bytes
		}
		inUse += blobBytesInUse(em.BlobFiles)
		inUse = max(1, min(inUse, size))
	}
	return size, inUse
}

// blobBytesInUse is the share of the blob files' bytes on disk that keys
// still refer to: the rest is garbage that a blob rewrite or a full
// compaction (Defragment) gives back, as etcd's free pages.
func blobBytesInUse(b engine.BlobMetrics) int64 {
	if b.ValueBytes == 0 {
		return 0
	}
	return int64(float64(b.Bytes) * float64(b.ReferencedValueBytes) / float64(b.ValueBytes))
}

// Defragment is what etcd's defragmentation is for, giving the space of
// deleted and compacted versions back to the file system, done the LSM's
// way: a full compaction of the member's engine (engine.CompactAll),
// which drops what mvcc's Compact deleted and rewrites every table with
// its level's codec. As in etcd it concerns the member asked only (it is
// not replicated); unlike etcd's, reads and writes go on meanwhile, since
// CompactAll holds no global lock.
func (m *maintenanceServer) Defragment(ctx context.Context, r *pb.DefragmentRequest) (*pb.DefragmentResponse, error) {
	if err := m.auth.RequireAdmin(ctx); err != nil {
		return nil, toGRPC(err)
	}
	if err := m.db.CompactAll(); err != nil {
		return nil, status.Errorf(codes.Internal, "etcdserver: defragment: %v", err)
	}
	if m.spaceChanged != nil {
		m.spaceChanged()
	}
	return &pb.DefragmentResponse{Header: m.hdr.fill(nil)}, nil
}

// snapshotChunkBytes is the size of Snapshot's messages, etcd's.
const snapshotChunkBytes = 32 << 10

// Snapshot streams a backup of the member's store (mvcc.WriteBackup: the
// store as of one point, then its SHA-256, as etcd's stream ends with the
// SHA-256 of its file), what `etcdctl snapshot save FILE` saves; `strata
// restore FILE` checks it and loads it into a new database. Reads and
// writes go on meanwhile.
func (m *maintenanceServer) Snapshot(r *pb.SnapshotRequest, stream pb.Maintenance_SnapshotServer) error {
	if err := m.auth.RequireAdmin(stream.Context()); err != nil {
		return toGRPC(err)
	}
	pr, pw := io.Pipe()
	defer pr.Close() // a client gone away ends the writer too
	go func() { pw.CloseWithError(m.store.WriteBackup(pw)) }()
	buf := make([]byte, snapshotChunkBytes)
	first := true
	for {
		n, err := io.ReadFull(pr, buf)
		if n > 0 {
			resp := &pb.SnapshotResponse{Header: m.hdr.fill(nil), Blob: buf[:n]}
			if first {
				resp.Version, first = version.Version, false
			}
			if serr := stream.Send(resp); serr != nil {
				return serr
			}
		}
		switch {
		case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
			return nil
		case errors.Is(err, engine.ErrCorruption):
			return toGRPC(err) // etcd's "corrupt cluster", as a Range's
		case err != nil:
			return status.Errorf(codes.Internal, "etcdserver: snapshot: %v", err)
		}
	}
}

// HashKV reports the hash of the member's store up to a revision
// (mvcc.Store.HashKV), what `etcdctl endpoint hashkv --cluster` compares
// across members. Strata's hash covers its own record encoding, so it is
// comparable between Strata members, not with etcd's.
func (m *maintenanceServer) HashKV(ctx context.Context, r *pb.HashKVRequest) (*pb.HashKVResponse, error) {
	if err := m.auth.RequireAdmin(ctx); err != nil {
		return nil, toGRPC(err)
	}
	h, rev, compacted, err := m.store.HashKV(r.Revision)
	if err != nil {
		return nil, toGRPC(err)
	}
	return &pb.HashKVResponse{Header: m.hdr.fill(nil), Hash: h, HashRevision: rev, CompactRevision: compacted}, nil
}

// MoveLeader hands the leadership to another member (`etcdctl
// move-leader`), when asked of the leader; see cluster.Node. It
// waits up to the request timeout for the transferee to lead.
func (m *maintenanceServer) MoveLeader(ctx context.Context, r *pb.MoveLeaderRequest) (*pb.MoveLeaderResponse, error) {
	if err := m.auth.RequireAdmin(ctx); err != nil {
		return nil, toGRPC(err)
	}
	ctx, cancel := withRequestTimeout(ctx)
	defer cancel()
	if err := m.node.MoveLeader(ctx, r.TargetID); err != nil {
		return nil, toGRPC(err)
	}
	return &pb.MoveLeaderResponse{Header: m.hdr.fill(nil)}, nil
}

// Alarm lists, raises or clears alarms (`etcdctl alarm list`, `alarm
// disarm`), as etcd's: ACTIVATE and DEACTIVATE go through the log, so
// every member applies them (alarmStore.apply); GET lists the member's
// alarms once it applied everything committed before the call (etcd
// proposes the GET; a read barrier orders it the same way without a log
// entry). A disarmed NOSPACE alarm whose cause remains is raised again
// by the next write (spaceGuard).
func (m *maintenanceServer) Alarm(ctx context.Context, r *pb.AlarmRequest) (*pb.AlarmResponse, error) {
	check := m.auth.RequireAdmin
	if r.Action == pb.AlarmRequest_GET {
		check = m.auth.RequireUser
	}
	if err := check(ctx); err != nil {
		return nil, toGRPC(err)
	}
	if r.Action == pb.AlarmRequest_GET {
		if err := awaitReadable(ctx, m.node); err != nil {
			return nil, toGRPC(err)
		}
		return &pb.AlarmResponse{Header: m.hdr.fill(nil), Alarms: m.alarms.get(r.Alarm)}, nil
	}
	resp, err := m.raft.propose(ctx, &pb.InternalRaftRequest{Alarm: r})
	if err != nil {
		return nil, toGRPC(err)
	}
	if r.Action == pb.AlarmRequest_DEACTIVATE && m.spaceChanged != nil {
		m.spaceChanged()
	}
	out := resp.(*pb.AlarmResponse)
	m.hdr.fill(out.Header)
	return out, nil
}

// clusterServer is etcd's Cluster service over the Node's membership: it
// holds the node and the header.
type clusterServer struct {
	pb.UnimplementedClusterServer
	node cluster.Node
	hdr  memberHeader
}

func toPBMembers(node cluster.Node) []*pb.Member {
	var out []*pb.Member
	for _, m := range node.Members() {
		out = append(out, &pb.Member{ID: m.ID, Name: m.Name, PeerURLs: m.PeerURLs, ClientURLs: m.ClientURLs, IsLearner: m.IsLearner})
	}
	return out
}

func (c *clusterServer) MemberList(ctx context.Context, r *pb.MemberListRequest) (*pb.MemberListResponse, error) {
	if r.Linearizable {
		if err := awaitReadable(ctx, c.node); err != nil {
			return nil, toGRPC(err)
		}
	}
	return &pb.MemberListResponse{Header: c.hdr.fill(nil), Members: toPBMembers(c.node)}, nil
}

func (c *clusterServer) MemberAdd(ctx context.Context, r *pb.MemberAddRequest) (*pb.MemberAddResponse, error) {
	m, err := c.node.AddMember(ctx, r.PeerURLs, r.IsLearner)
	if err != nil {
		return nil, toGRPC(err)
	}
	return &pb.MemberAddResponse{Header: c.hdr.fill(nil),
		Member:  &pb.Member{ID: m.ID, Name: m.Name, PeerURLs: m.PeerURLs, ClientURLs: m.ClientURLs, IsLearner: m.IsLearner},
		Members: toPBMembers(c.node)}, nil
}

// MemberPromote makes a learner that has caught up a voting member.
func (c *clusterServer) MemberPromote(ctx context.Context, r *pb.MemberPromoteRequest) (*pb.MemberPromoteResponse, error) {
	if err := c.node.PromoteMember(ctx, r.ID); err != nil {
		return nil, toGRPC(err)
	}
	return &pb.MemberPromoteResponse{Header: c.hdr.fill(nil), Members: toPBMembers(c.node)}, nil
}

// MemberUpdate replaces a member's peer URLs.
func (c *clusterServer) MemberUpdate(ctx context.Context, r *pb.MemberUpdateRequest) (*pb.MemberUpdateResponse, error) {
	if err := c.node.UpdateMember(ctx, r.ID, r.PeerURLs); err != nil {
		return nil, toGRPC(err)
	}
	return &pb.MemberUpdateResponse{Header: c.hdr.fill(nil), Members: toPBMembers(c.node)}, nil
}

func (c *clusterServer) MemberRemove(ctx context.Context, r *pb.MemberRemoveRequest) (*pb.MemberRemoveResponse, error) {
	if err := c.node.RemoveMember(ctx, r.ID); err != nil {
		return nil, toGRPC(err)
	}
	return &pb.MemberRemoveResponse{Header: c.hdr.fill(nil), Members: toPBMembers(c.node)}, nil
}
