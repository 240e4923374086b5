package server

import (
	"context"
	"errors"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/stratadb/strata/auth"
	"github.com/stratadb/strata/config"
	"github.com/stratadb/strata/mvcc"
)

// authStorage keeps the auth state in the mvcc store's aux key space, so
// it goes through the apply path with its log index and travels in
// snapshots.
type authStorage struct{ store *mvcc.Store }

func (a authStorage) ReadAux(prefix []byte) ([]mvcc.AuxWrite, error) { return a.store.ReadAux(prefix) }
func (a authStorage) WriteAux(index uint64, w []mvcc.AuxWrite) error {
	return a.store.Entry(index).WriteAux(w)
}

// openAuth opens the member's auth store with the [server] settings.
func openAuth(cfg *config.Config, store *mvcc.Store) (*auth.Store, error) {
	return auth.Open(auth.Config{
		Token:          cfg.Server.AuthToken,
		TokenTTL:       time.Duration(cfg.Server.AuthTokenTTL) * time.Second,
		BcryptCost:     int(cfg.Server.BcryptCost),
		ClientCertAuth: cfg.Server.ClientCAFile != "",
		Logger:         zap.NewNop(),
	}, authStorage{store})
}

// newApplier returns the state machine over store, with the auth state
// and the alarms the store keeps.
func newApplier(cfg *config.Config, store *mvcc.Store) (*applier, error) {
	as, err := openAuth(cfg, store)
	if err != nil {
		return nil, err
	}
	alarms, err := newAlarmStore(store, nil)
	if err != nil {
		_ = as.Close()
		return nil, err
	}
	return &applier{store: store, auth: as, alarms: alarms, leaseKeys: storeLeaseKeys(store)}, nil
}

// storeLeaseKeys is the store's view of a lease's keys for the auth
// checks: nil if there is no such lease.
func storeLeaseKeys(store *mvcc.Store) auth.LeaseKeys {
	return func(id int64) [][]byte {
		l, err := store.Lease(id)
		if err != nil {
			return nil
		}
		if l.Keys == nil {
			return [][]byte{}
		}
		return l.Keys
	}
}

// leaseKeys returns the keys of lease id, nil if there is no such lease.
func (s *Server) leaseKeys(id int64) [][]byte { return s.apply.leaseKeys(id) }

// authServer is etcd's Auth service: each call goes through the apply
// path (as in etcd, reads of users and roles too, so they are
// linearizable and checked against the replicated state).
//
// It holds only what it uses: the apply path (raft), the auth store (for
// the password checks made before proposing) and the header.
type authServer struct {
	pb.UnimplementedAuthServer
	raft proposer
	auth *auth.Store
	hdr  memberHeader
}

// proposer is the apply path as the Auth and KV services use it; *Server
// implements it.
type proposer interface {
	// propose sends a write through the apply path (Server.propose).
	propose(ctx context.Context, r *pb.InternalRaftRequest) (proto.Message, error)
	// readBarrier waits until a linearizable read may be served here.
	readBarrier(ctx context.Context) error
}

// call proposes r and returns its response with the member's header.
func authCall[T interface {
	proto.Message
	GetHeader() *pb.ResponseHeader
}](ctx context.Context, a *authServer, r *pb.InternalRaftRequest) (T, error) {
	var zero T
	resp, err := a.raft.propose(ctx, r)
	if err != nil {
		return zero, toGRPC(err)
	}
	out := resp.(T)
	if h := out.GetHeader(); h != nil {
		a.hdr.fill(h)
	} else {
		// Every auth response has a header field (etcd's newHeader).
		m := out.ProtoReflect()
		m.Set(m.Descriptor().Fields().ByName("header"), protoreflect.ValueOfMessage(a.hdr.fill(nil).ProtoReflect()))
	}
	return out, nil
}

func (a *authServer) AuthEnable(ctx context.Context, r *pb.AuthEnableRequest) (*pb.AuthEnableResponse, error) {
	return authCall[*pb.AuthEnableResponse](ctx, a, &pb.InternalRaftRequest{AuthEnable: r})
}

func (a *authServer) AuthDisable(ctx context.Context, r *pb.AuthDisableRequest) (*pb.AuthDisableResponse, error) {
	return authCall[*pb.AuthDisableResponse](ctx, a, &pb.InternalRaftRequest{AuthDisable: r})
}

func (a *authServer) AuthStatus(ctx context.Context, r *pb.AuthStatusRequest) (*pb.AuthStatusResponse, error) {
	return authCall[*pb.AuthStatusResponse](ctx, a, &pb.InternalRaftRequest{AuthStatus: r})
}

// Authenticate checks the password here (bcrypt, once), then assigns the
// token through the log, and checks again if auth changed meanwhile, as
// etcd does. With auth disabled it answers etcd's "authentication is not
// enabled", which clients configured with credentials accept.
func (a *authServer) Authenticate(ctx context.Context, r *pb.AuthenticateRequest) (*pb.AuthenticateResponse, error) {
	if err := a.raft.readBarrier(ctx); err != nil {
		return nil, toGRPC(err)
	}
	for {
		req, checked, err := a.auth.Authenticate(r)
		if err != nil {
			return nil, toGRPC(err)
		}
		resp, err := authCall[*pb.AuthenticateResponse](ctx, a, &pb.InternalRaftRequest{Authenticate: req})
		if err != nil || checked == a.auth.Revision() {
			return resp, err
		}
	}
}

func (a *authServer) UserAdd(ctx context.Context, r *pb.AuthUserAddRequest) (*pb.AuthUserAddResponse, error) {
	if r.Options == nil || !r.Options.NoPassword {
		req := proto.Clone(r).(*pb.AuthUserAddRequest)
		if err := a.auth.HashPassword(&req.Password, &req.HashedPassword); err != nil {
			return nil, toGRPC(err)
		}
		r = req
	}
	return authCall[*pb.AuthUserAddResponse](ctx, a, &pb.InternalRaftRequest{AuthUserAdd: r})
}

func (a *authServer) UserDelete(ctx context.Context, r *pb.AuthUserDeleteRequest) (*pb.AuthUserDeleteResponse, error) {
	return authCall[*pb.AuthUserDeleteResponse](ctx, a, &pb.InternalRaftRequest{AuthUserDelete: r})
}

func (a *authServer) UserChangePassword(ctx context.Context, r *pb.AuthUserChangePasswordRequest) (*pb.AuthUserChangePasswordResponse, error) {
	req := proto.Clone(r).(*pb.AuthUserChangePasswordRequest)
	if err := a.auth.HashPassword(&req.Password, &req.HashedPassword); err != nil {
		return nil, toGRPC(err)
	}
	return authCall[*pb.AuthUserChangePasswordResponse](ctx, a, &pb.InternalRaftRequest{AuthUserChangePassword: req})
}

func (a *authServer) UserGrantRole(ctx context.Context, r *pb.AuthUserGrantRoleRequest) (*pb.AuthUserGrantRoleResponse, error) {
	return authCall[*pb.AuthUserGrantRoleResponse](ctx, a, &pb.InternalRaftRequest{AuthUserGrantRole: r})
}

func (a *authServer) UserRevokeRole(ctx context.Context, r *pb.AuthUserRevokeRoleRequest) (*pb.AuthUserRevokeRoleResponse, error) {
	return authCall[*pb.AuthUserRevokeRoleResponse](ctx, a, &pb.InternalRaftRequest{AuthUserRevokeRole: r})
}

func (a *authServer) UserGet(ctx context.Context, r *pb.AuthUserGetRequest) (*pb.AuthUserGetResponse, error) {
	return authCall[*pb.AuthUserGetResponse](ctx, a, &pb.InternalRaftRequest{AuthUserGet: r})
}

func (a *authServer) UserList(ctx context.Context, r *pb.AuthUserListRequest) (*pb.AuthUserListResponse, error) {
	return authCall[*pb.AuthUserListResponse](ctx, a, &pb.InternalRaftRequest{AuthUserList: r})
}

func (a *authServer) RoleAdd(ctx context.Context, r *pb.AuthRoleAddRequest) (*pb.AuthRoleAddResponse, error) {
	return authCall[*pb.AuthRoleAddResponse](ctx, a, &pb.InternalRaftRequest{AuthRoleAdd: r})
}

func (a *authServer) RoleDelete(ctx context.Context, r *pb.AuthRoleDeleteRequest) (*pb.AuthRoleDeleteResponse, error) {
	return authCall[*pb.AuthRoleDeleteResponse](ctx, a, &pb.InternalRaftRequest{AuthRoleDelete: r})
}

func (a *authServer) RoleGet(ctx context.Context, r *pb.AuthRoleGetRequest) (*pb.AuthRoleGetResponse, error) {
	return authCall[*pb.AuthRoleGetResponse](ctx, a, &pb.InternalRaftRequest{AuthRoleGet: r})
}

func (a *authServer) RoleList(ctx context.Context, r *pb.AuthRoleListRequest) (*pb.AuthRoleListResponse, error) {
	return authCall[*pb.AuthRoleListResponse](ctx, a, &pb.InternalRaftRequest{AuthRoleList: r})
}

func (a *authServer) RoleGrantPermission(ctx context.Context, r *pb.AuthRoleGrantPermissionRequest) (*pb.AuthRoleGrantPermissionResponse, error) {
	return authCall[*pb.AuthRoleGrantPermissionResponse](ctx, a, &pb.InternalRaftRequest{AuthRoleGrantPermission: r})
}

func (a *authServer) RoleRevokePermission(ctx context.Context, r *pb.AuthRoleRevokePermissionRequest) (*pb.AuthRoleRevokePermissionResponse, error) {
	return authCall[*pb.AuthRoleRevokePermissionResponse](ctx, a, &pb.InternalRaftRequest{AuthRoleRevokePermission: r})
}

// watchDenied is the cancel reason etcd gives a watch its user may not
// create.
func watchDenied(err error) string {
	switch {
	case errors.Is(err, auth.ErrInvalidAuthToken):
		return rpctypes.ErrGRPCInvalidAuthToken.Error()
	case errors.Is(err, auth.ErrAuthOldRevision):
		return rpctypes.ErrGRPCAuthOldRevision.Error()
	case errors.Is(err, auth.ErrUserEmpty):
		return rpctypes.ErrGRPCUserEmpty.Error()
	}
	return rpctypes.ErrGRPCPermissionDenied.Error()
}

// checkWatch is etcd's check of a watch's range at its creation.
func checkWatch(ctx context.Context, a *auth.Store, r *pb.WatchCreateRequest) error {
	key := r.Key
	if len(key) == 0 {
		key = []byte{0} // etcd's: the smallest key
	}
	return a.Serve(ctx, func(ai *auth.Info) error { return a.CheckRange(ai, key, r.RangeEnd) }, nil)
}
