package server

import (
	"context"
	"errors"
	"io"
	"sync"
	"sync/atomic"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/stratadb/strata/auth"
	"github.com/stratadb/strata/mvcc"
)

// minLeaseTTL is the shortest TTL granted, in seconds: etcd's
// ⌈1.5 × election timeout⌉ with its default 1 s election timeout, so
// Grant(1) gives 2 as in etcd.
const minLeaseTTL = 2

// leaseCheckInterval is how often the leader looks for expired leases
// (etcd's lessor checks every 500 ms).
const leaseCheckInterval = 500 * time.Millisecond

// leaseRevokeRetry is how long the lessor waits before proposing the
// revocation of an expired lease again (etcd's expiredLeaseRetryInterval).
const leaseRevokeRetry = 3 * time.Second

// lessor keeps the clock side of leases: when each one expires. The store
// keeps which leases exist and their keys (deterministic state, applied
// from the log); the lessor only decides when a lease has expired, and
// only on the leader, which then revokes it through the log, as etcd's
// lessor does. A member that becomes leader (or starts) gives every lease
// a full TTL again.
//
// As in etcd, expiries wait in a heap (expiryQueue): a check pops the
// leases due and touches nothing else, and the lessor learns of leases
// granted and revoked as they are applied (mvcc's OnLeaseChange). It lists
// the store's leases (IDs and TTLs, not their keys) only when this member
// becomes leader or a snapshot replaced them.
type lessor struct {
	s *Server

	// mu guards the fields below. It is never held while calling into the
	// store's write path.
	mu sync.Mutex
	// queue holds when each lease expires, kept only while this member
	// leads (emptied otherwise, so a new leader starts afresh).
	queue expiryQueue
	// listed: queue has every lease of the store; false after a
	// leadership change or a snapshot, until the next check lists them.
	listed bool

	stopped chan struct{}
	done    chan struct{}
	once    sync.Once
}

func newLessor(s *Server) *lessor {
	return &lessor{s: s, queue: newExpiryQueue(), stopped: make(chan struct{}), done: make(chan struct{})}
}

func (l *lessor) start() {
	l.s.store.OnLeaseChange(l.changed)
	go l.run()
}

func (l *lessor) stop() {
	l.once.Do(func() {
		close(l.stopped)
	})
	select {
	case <-l.done:
	case <-time.After(ShutdownTimeout):
	}
	l.s.store.OnLeaseChange(nil)
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
			l.reset() // re-armed at the next check
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

// reset forgets every expiry.
func (l *lessor) reset() {
	l.mu.Lock()
	l.queue, l.listed = newExpiryQueue(), false
	l.mu.Unlock()
}

// changed follows the store's leases (mvcc.Store.OnLeaseChange).
func (l *lessor) changed(c mvcc.LeaseChange) {
	switch {
	case c.ID == 0:
		l.mu.Lock()
		l.listed = false
		l.mu.Unlock()
	case c.Revoked:
		l.forget(c.ID)
	default:
		l.granted(c.ID, c.TTL)
	}
}

// expired returns the leases past their expiry, if this member leads.
// Leases it has not seen yet get a full TTL from now. Each lease returned
// is due again leaseRevokeRetry later, in case its revocation fails.
func (l *lessor) expired(now time.Time) []int64 {
	if !l.s.node.Status().IsLeader {
		l.reset()
		return nil
	}
	l.mu.Lock()
	listed := l.listed
	l.mu.Unlock()
	if !listed {
		ttls := l.s.store.LeaseTTLs()
		l.mu.Lock()
		for id, ttl := range ttls {
			if _, ok := l.queue.when(id); !ok {
				l.queue.set(id, now.Add(time.Duration(ttl)*time.Second))
			}
		}
		l.listed = true
		l.mu.Unlock()
	}
	var out []int64
	l.mu.Lock()
	defer l.mu.Unlock()
	for {
		id, ok := l.queue.due(now)
		if !ok {
			return out
		}
		if _, live := l.s.store.LeaseTTL(id); !live {
			l.queue.remove(id) // revoked meanwhile
			continue
		}
		out = append(out, id)
		l.queue.set(id, now.Add(leaseRevokeRetry))
	}
}

// renew restarts the lease's TTL; it returns the TTL, or 0 for a lease
// that does not exist (etcd's keep-alive answer).
func (l *lessor) renew(id int64) (int64, error) {
	if !l.s.node.Status().IsLeader {
		return 0, errNotLeader
	}
	ttl, ok := l.s.store.LeaseTTL(id)
	if !ok {
		return 0, nil
	}
	l.granted(id, ttl)
	return ttl, nil
}

// granted starts the clock of a lease (again), if this member leads.
func (l *lessor) granted(id, ttl int64) {
	if !l.s.node.Status().IsLeader {
		return
	}
	l.mu.Lock()
	l.queue.set(id, time.Now().Add(time.Duration(ttl)*time.Second))
	l.mu.Unlock()
}

func (l *lessor) forget(id int64) {
	l.mu.Lock()
	l.queue.remove(id)
	l.mu.Unlock()
}

// remaining is the seconds left of a lease (its TTL if not yet armed).
func (l *lessor) remaining(id, ttl int64) int64 {
	l.mu.Lock()
	exp, ok := l.queue.when(id)
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

// leaseServer is etcd's Lease service. As etcd's v3rpc LeaseServer, it
// holds only what it uses.
type leaseServer struct {
	pb.UnimplementedLeaseServer
	raft   leaseRaft
	auth   *auth.Store
	hdr    memberHeader
	lessor *lessor
	store  *mvcc.Store
	// ids chooses the IDs of leases granted without one (Server.leaseIDs).
	ids *atomic.Uint64
	// streams ends keep-alive streams when the server stops.
	streams context.Context
}

// leaseRaft is the apply path as the Lease service uses it; *Server
// implements it.
type leaseRaft interface {
	proposer
	// leaseKeys returns the keys of a lease, for the auth checks.
	leaseKeys(id int64) [][]byte
	// checkSpace refuses a grant when space is short, as etcd's
	// quotaLeaseServer (spaceGuard.check).
	checkSpace(cost int64) error
}

func (ls *leaseServer) LeaseGrant(ctx context.Context, r *pb.LeaseGrantRequest) (*pb.LeaseGrantResponse, error) {
	if err := ls.raft.checkSpace(leaseOverhead); err != nil {
		return nil, toGRPC(err)
	}
	req := &pb.LeaseGrantRequest{ID: r.ID, TTL: max(r.TTL, minLeaseTTL)}
	if req.ID == 0 {
		// As etcd, the ID is chosen before proposing, so every member
		// applies the same one (see Server.leaseIDs).
		req.ID = int64(ls.ids.Add(1) & (1<<63 - 1))
	}
	if req.ID < 0 {
		return nil, status.Errorf(codes.InvalidArgument, "etcdserver: lease ID %d is negative", req.ID)
	}
	if err := ls.auth.RequireUser(ctx); err != nil {
		return nil, toGRPC(err)
	}
	resp, err := ls.raft.propose(ctx, &pb.InternalRaftRequest{LeaseGrant: req})
	if err != nil {
		return nil, toGRPC(err)
	}
	out := resp.(*pb.LeaseGrantResponse) // the lessor armed it as it was applied
	ls.hdr.fill(out.Header)
	return out, nil
}

func (ls *leaseServer) LeaseRevoke(ctx context.Context, r *pb.LeaseRevokeRequest) (*pb.LeaseRevokeResponse, error) {
	if err := ls.auth.RequireUser(ctx); err != nil {
		return nil, toGRPC(err)
	}
	resp, err := ls.raft.propose(ctx, &pb.InternalRaftRequest{LeaseRevoke: &pb.LeaseRevokeRequest{ID: r.ID}})
	if err != nil {
		return nil, toGRPC(err)
	}
	ls.lessor.forget(r.ID)
	out := resp.(*pb.LeaseRevokeResponse)
	ls.hdr.fill(out.Header)
	return out, nil
}

func (ls *leaseServer) LeaseTimeToLive(ctx context.Context, r *pb.LeaseTimeToLiveRequest) (*pb.LeaseTimeToLiveResponse, error) {
	if err := ls.auth.RequireUser(ctx); err != nil {
		return nil, toGRPC(err)
	}
	if err := ls.raft.readBarrier(ctx); err != nil {
		return nil, toGRPC(err)
	}
	if r.Keys {
		// Only the keys need a permission (etcd's checkLeaseTimeToLive).
		if err := ls.auth.CheckLeaseRead(ctx, ls.raft.leaseKeys(r.ID)); err != nil {
			return nil, toGRPC(err)
		}
	}
	out := &pb.LeaseTimeToLiveResponse{Header: ls.hdr.fill(nil), ID: r.ID, TTL: -1}
	l, err := ls.store.Lease(r.ID)
	if errors.Is(err, mvcc.ErrLeaseNotFound) {
		return out, nil
	}
	if err != nil {
		return nil, toGRPC(err)
	}
	out.GrantedTTL, out.TTL = l.TTL, ls.lessor.remaining(l.ID, l.TTL)
	if r.Keys {
		out.Keys = l.Keys
	}
	return out, nil
}

func (ls *leaseServer) LeaseLeases(ctx context.Context, r *pb.LeaseLeasesRequest) (*pb.LeaseLeasesResponse, error) {
	if err := ls.raft.readBarrier(ctx); err != nil {
		return nil, toGRPC(err)
	}
	out := &pb.LeaseLeasesResponse{Header: ls.hdr.fill(nil)}
	var keys [][]byte
	for _, l := range ls.store.Leases() {
		out.Leases = append(out.Leases, &pb.LeaseStatus{ID: l.ID})
		keys = append(keys, l.Keys...)
	}
	if err := ls.auth.CheckLeaseRead(ctx, keys); err != nil {
		return nil, toGRPC(err)
	}
	return out, nil
}

// LeaseKeepAlive renews leases for as long as the client streams
// requests; it ends when the client does or the server shuts down.
func (ls *leaseServer) LeaseKeepAlive(stream pb.Lease_LeaseKeepAliveServer) error {
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
			if err := ls.auth.CheckLeaseRenew(stream.Context(), ls.raft.leaseKeys(req.ID)); err != nil {
				errc <- toGRPC(err)
				return
			}
			ttl, err := ls.lessor.renew(req.ID)
			if err != nil {
				errc <- toGRPC(err)
				return
			}
			if err := stream.Send(&pb.LeaseKeepAliveResponse{Header: ls.hdr.fill(nil), ID: req.ID, TTL: ttl}); err != nil {
				errc <- err
				return
			}
		}
	}()
	select {
	case err := <-errc:
		return err
	case <-ls.streams.Done():
		return rpctypes.ErrGRPCStopped
	}
}
