package server

import (
	"context"
	"errors"
	"io"
	"sync"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/stratadb/strata/mvcc"
)

// minLeaseTTL is the shortest TTL granted, in seconds: etcd's
// ⌈1.5 × election timeout⌉ with its default 1 s election timeout, so
// Grant(1) gives 2 as in etcd.
const minLeaseTTL = 2

// leaseCheckInterval is how often the leader looks for expired leases
// (etcd's lessor checks every 500 ms).
const leaseCheckInterval = 500 * time.Millisecond

// lessor keeps the clock side of leases: when each one expires. The store
// keeps which leases exist and their keys (deterministic state, applied
// from the log); the lessor only decides when a lease has expired, and
// only on the leader, which then revokes it through the log, as etcd's
// lessor does. A member that becomes leader (or starts) gives every lease
// a full TTL again.
type lessor struct {
	s *Server

	// mu guards expiry: when each lease expires, kept only while this
	// member leads (emptied otherwise, so a new leader starts afresh).
	mu     sync.Mutex
	expiry map[int64]time.Time

	stopped chan struct{}
	done    chan struct{}
	once    sync.Once
}

func newLessor(s *Server) *lessor {
	return &lessor{s: s, expiry: map[int64]time.Time{}, stopped: make(chan struct{}), done: make(chan struct{})}
}

func (l *lessor) start() { go l.run() }

func (l *lessor) stop() {
	l.once.Do(func() {
		close(l.stopped)
	})
	select {
	case <-l.done:
	case <-time.After(ShutdownTimeout):
	}
}

func (l *lessor) run() {
	defer close(l.done)
	t := time.NewTicker(leaseCheckInterval)
	defer t.Stop()
	for {
		select {
		case <-l.stopped:
			return
		case <-l.s.node.LeaderChanged():
			l.mu.Lock()
			l.expiry = map[int64]time.Time{} // re-armed at the next check
			l.mu.Unlock()
		case <-t.C:
			for _, id := range l.expired(time.Now()) {
				ctx, cancel := context.WithTimeout(l.s.auth.WithRoot(context.Background()), 5*time.Second)
				_, err := l.s.propose(ctx, &pb.InternalRaftRequest{LeaseRevoke: &pb.LeaseRevokeRequest{ID: id}})
				cancel()
				if err == nil || errors.Is(err, mvcc.ErrLeaseNotFound) {
					l.forget(id)
				}
			}
		}
	}
}

// expired returns the leases past their expiry, if this member leads;
// leases it has not seen yet get a full TTL from now.
func (l *lessor) expired(now time.Time) []int64 {
	if !l.s.node.Status().IsLeader {
		l.mu.Lock()
		l.expiry = map[int64]time.Time{}
		l.mu.Unlock()
		return nil
	}
	leases := l.s.store.Leases()
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []int64
	live := make(map[int64]bool, len(leases))
	for _, ls := range leases {
		live[ls.ID] = true
		exp, ok := l.expiry[ls.ID]
		if !ok {
			l.expiry[ls.ID] = now.Add(time.Duration(ls.TTL) * time.Second)
			continue
		}
		if now.After(exp) {
			out = append(out, ls.ID)
		}
	}
	for id := range l.expiry {
		if !live[id] {
			delete(l.expiry, id)
		}
	}
	return out
}

// renew restarts the lease's TTL; it returns the TTL, or 0 for a lease
// that does not exist (etcd's keep-alive answer).
func (l *lessor) renew(id int64) (int64, error) {
	if !l.s.node.Status().IsLeader {
		return 0, errNotLeader
	}
	ls, err := l.s.store.Lease(id)
	if errors.Is(err, mvcc.ErrLeaseNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	l.mu.Lock()
	l.expiry[id] = time.Now().Add(time.Duration(ls.TTL) * time.Second)
	l.mu.Unlock()
	return ls.TTL, nil
}

// granted starts the clock of a lease just granted.
func (l *lessor) granted(id, ttl int64) {
	l.mu.Lock()
	l.expiry[id] = time.Now().Add(time.Duration(ttl) * time.Second)
	l.mu.Unlock()
}

func (l *lessor) forget(id int64) {
	l.mu.Lock()
	delete(l.expiry, id)
	l.mu.Unlock()
}

// remaining is the seconds left of a lease (its TTL if not yet armed).
func (l *lessor) remaining(id, ttl int64) int64 {
	l.mu.Lock()
	exp, ok := l.expiry[id]
	l.mu.Unlock()
	if !ok {
		return ttl
	}
	left := time.Until(exp)
	if left <= 0 {
		return 0
	}
	return int64((left + time.Second - 1) / time.Second)
}

// errNotLeader answers a keep-alive on a member that does not lead.
var errNotLeader = status.Error(codes.FailedPrecondition, "etcdserver: not leader")

// leaseServer is etcd's Lease service.
type leaseServer struct {
	pb.UnimplementedLeaseServer
	s *Server
}

func (ls *leaseServer) LeaseGrant(ctx context.Context, r *pb.LeaseGrantRequest) (*pb.LeaseGrantResponse, error) {
	s := ls.s
	req := &pb.LeaseGrantRequest{ID: r.ID, TTL: max(r.TTL, minLeaseTTL)}
	if req.ID == 0 {
		// As etcd, the ID is chosen before proposing, so every member
		// applies the same one (see Server.leaseIDs).
		req.ID = int64(s.leaseIDs.Add(1) & (1<<63 - 1))
	}
	if req.ID < 0 {
		return nil, status.Errorf(codes.InvalidArgument, "etcdserver: lease ID %d is negative", req.ID)
	}
	if err := s.auth.RequireUser(ctx); err != nil {
		return nil, toGRPC(err)
	}
	resp, err := s.propose(ctx, &pb.InternalRaftRequest{LeaseGrant: req})
	if err != nil {
		return nil, toGRPC(err)
	}
	out := resp.(*pb.LeaseGrantResponse)
	s.lease.granted(out.ID, out.TTL)
	s.fill(out.Header)
	return out, nil
}

func (ls *leaseServer) LeaseRevoke(ctx context.Context, r *pb.LeaseRevokeRequest) (*pb.LeaseRevokeResponse, error) {
	if err := ls.s.auth.RequireUser(ctx); err != nil {
		return nil, toGRPC(err)
	}
	resp, err := ls.s.propose(ctx, &pb.InternalRaftRequest{LeaseRevoke: &pb.LeaseRevokeRequest{ID: r.ID}})
	if err != nil {
		return nil, toGRPC(err)
	}
	ls.s.lease.forget(r.ID)
	out := resp.(*pb.LeaseRevokeResponse)
	ls.s.fill(out.Header)
	return out, nil
}

func (ls *leaseServer) LeaseTimeToLive(ctx context.Context, r *pb.LeaseTimeToLiveRequest) (*pb.LeaseTimeToLiveResponse, error) {
	s := ls.s
	if err := s.auth.RequireUser(ctx); err != nil {
		return nil, toGRPC(err)
	}
	if err := s.readBarrier(ctx); err != nil {
		return nil, toGRPC(err)
	}
	if r.Keys {
		// Only the keys need a permission (etcd's checkLeaseTimeToLive).
		if err := s.auth.CheckLeaseRead(ctx, s.leaseKeys(r.ID)); err != nil {
			return nil, toGRPC(err)
		}
	}
	out := &pb.LeaseTimeToLiveResponse{Header: s.fill(nil), ID: r.ID, TTL: -1}
	l, err := s.store.Lease(r.ID)
	if errors.Is(err, mvcc.ErrLeaseNotFound) {
		return out, nil
	}
	if err != nil {
		return nil, toGRPC(err)
	}
	out.GrantedTTL, out.TTL = l.TTL, s.lease.remaining(l.ID, l.TTL)
	if r.Keys {
		out.Keys = l.Keys
	}
	return out, nil
}

func (ls *leaseServer) LeaseLeases(ctx context.Context, r *pb.LeaseLeasesRequest) (*pb.LeaseLeasesResponse, error) {
	s := ls.s
	if err := s.readBarrier(ctx); err != nil {
		return nil, toGRPC(err)
	}
	out := &pb.LeaseLeasesResponse{Header: s.fill(nil)}
	var keys [][]byte
	for _, l := range s.store.Leases() {
		out.Leases = append(out.Leases, &pb.LeaseStatus{ID: l.ID})
		keys = append(keys, l.Keys...)
	}
	if err := s.auth.CheckLeaseRead(ctx, keys); err != nil {
		return nil, toGRPC(err)
	}
	return out, nil
}

// LeaseKeepAlive renews leases for as long as the client streams
// requests; it ends when the client does or the server shuts down.
func (ls *leaseServer) LeaseKeepAlive(stream pb.Lease_LeaseKeepAliveServer) error {
	s := ls.s
	errc := make(chan error, 1)
	go func() {
		for {
			req, err := stream.Recv()
			if err != nil {
				if err == io.EOF {
					err = nil
				}
				errc <- err
				return
			}
			if err := s.auth.CheckLeaseRenew(stream.Context(), s.leaseKeys(req.ID)); err != nil {
				errc <- toGRPC(err)
				return
			}
			ttl, err := s.lease.renew(req.ID)
			if err != nil {
				errc <- toGRPC(err)
				return
			}
			if err := stream.Send(&pb.LeaseKeepAliveResponse{Header: s.fill(nil), ID: req.ID, TTL: ttl}); err != nil {
				errc <- err
				return
			}
		}
	}()
	select {
	case err := <-errc:
		return err
	case <-s.streams.Done():
		return rpctypes.ErrGRPCStopped
	}
}
