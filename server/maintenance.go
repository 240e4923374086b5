package server

import (
	"context"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/version"
)

// maintenanceServer is etcd's Maintenance service: Status and Alarm, what
// `etcdctl endpoint status` and `endpoint health` call. Defragment,
// Hash, HashKV, Snapshot, MoveLeader and Downgrade answer
// codes.Unimplemented.
type maintenanceServer struct {
	pb.UnimplementedMaintenanceServer
	s *Server
}

// Status reports the member: etcd API version, database size on disk,
// leader, raft index and term. etcdctl shows "is leader" when leader
// equals the header's member_id.
func (m *maintenanceServer) Status(ctx context.Context, r *pb.StatusRequest) (*pb.StatusResponse, error) {
	s := m.s
	st := s.node.Status()
	size := int64(1)
	if em, err := s.db.Metrics(); err == nil && em.DiskUsageBytes > 0 {
		size = int64(em.DiskUsageBytes)
	}
	return &pb.StatusResponse{
		Header:           s.fill(nil),
		Version:          version.Version,
		DbSize:           size,
		DbSizeInUse:      size,
		Leader:           st.Leader,
		RaftIndex:        st.CommitIndex,
		RaftTerm:         st.Term,
		RaftAppliedIndex: st.AppliedIndex,
		StorageVersion:   version.Cluster(version.Version),
	}, nil
}

// Alarm answers that no alarm is raised: Strata raises none (no space
// quota, no corruption check). Activating or deactivating one is a no-op.
func (m *maintenanceServer) Alarm(ctx context.Context, r *pb.AlarmRequest) (*pb.AlarmResponse, error) {
	return &pb.AlarmResponse{Header: m.s.fill(nil)}, nil
}

// clusterServer is etcd's Cluster service over the Node's membership.
type clusterServer struct {
	pb.UnimplementedClusterServer
	s *Server
}

func toPBMembers(s *Server) []*pb.Member {
	var out []*pb.Member
	for _, m := range s.node.Members() {
		out = append(out, &pb.Member{ID: m.ID, Name: m.Name, PeerURLs: m.PeerURLs, ClientURLs: m.ClientURLs, IsLearner: m.IsLearner})
	}
	return out
}

func (c *clusterServer) MemberList(ctx context.Context, r *pb.MemberListRequest) (*pb.MemberListResponse, error) {
	if r.Linearizable {
		if err := c.s.readBarrier(ctx); err != nil {
			return nil, toGRPC(err)
		}
	}
	return &pb.MemberListResponse{Header: c.s.fill(nil), Members: toPBMembers(c.s)}, nil
}

func (c *clusterServer) MemberAdd(ctx context.Context, r *pb.MemberAddRequest) (*pb.MemberAddResponse, error) {
	m, err := c.s.node.AddMember(ctx, r.PeerURLs, r.IsLearner)
	if err != nil {
		return nil, toGRPC(err)
	}
	return &pb.MemberAddResponse{Header: c.s.fill(nil),
		Member:  &pb.Member{ID: m.ID, Name: m.Name, PeerURLs: m.PeerURLs, ClientURLs: m.ClientURLs, IsLearner: m.IsLearner},
		Members: toPBMembers(c.s)}, nil
}

// MemberPromote makes a learner that has caught up a voting member.
func (c *clusterServer) MemberPromote(ctx context.Context, r *pb.MemberPromoteRequest) (*pb.MemberPromoteResponse, error) {
	if err := c.s.node.PromoteMember(ctx, r.ID); err != nil {
		return nil, toGRPC(err)
	}
	return &pb.MemberPromoteResponse{Header: c.s.fill(nil), Members: toPBMembers(c.s)}, nil
}

// MemberUpdate replaces a member's peer URLs.
func (c *clusterServer) MemberUpdate(ctx context.Context, r *pb.MemberUpdateRequest) (*pb.MemberUpdateResponse, error) {
	if err := c.s.node.UpdateMember(ctx, r.ID, r.PeerURLs); err != nil {
		return nil, toGRPC(err)
	}
	return &pb.MemberUpdateResponse{Header: c.s.fill(nil), Members: toPBMembers(c.s)}, nil
}

func (c *clusterServer) MemberRemove(ctx context.Context, r *pb.MemberRemoveRequest) (*pb.MemberRemoveResponse, error) {
	if err := c.s.node.RemoveMember(ctx, r.ID); err != nil {
		return nil, toGRPC(err)
	}
	return &pb.MemberRemoveResponse{Header: c.s.fill(nil), Members: toPBMembers(c.s)}, nil
}
