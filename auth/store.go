package auth

import (
	"context"
	"encoding/base64"
	"fmt"
	"sync"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/pkg/v3/wait"
	etcdauth "go.etcd.io/etcd/server/v3/auth"
	"go.uber.org/zap"
	"golang.org/x/crypto/bcrypt"
	"google.golang.org/protobuf/proto"
)

// Defaults, etcd's.
const (
	// DefaultToken is etcd's --auth-token default.
	DefaultToken = "simple"
	// DefaultTokenTTL is etcd's --auth-token-ttl default, for simple
	// tokens.
	DefaultTokenTTL = 300 * time.Second
	// DefaultBcryptCost is etcd's --bcrypt-cost default.
	DefaultBcryptCost = bcrypt.DefaultCost
)

// Config configures a Store. The zero value means etcd's defaults.
type Config struct {
	// Token is etcd's --auth-token: "simple", or
	// "jwt,pub-key=PATH,priv-key=PATH,sign-method=RS256,ttl=5m" (etcd's
	// options; pub-key alone verifies tokens another member signed).
	Token string
	// TokenTTL is how long a simple token stays valid after its last use.
	TokenTTL time.Duration
	// BcryptCost is the cost of the password hashes UserAdd and
	// UserChangePassword store.
	BcryptCost int
	// ClientCertAuth: the common name of a verified client certificate
	// names the user of a request without a token (etcd's
	// --client-cert-auth).
	ClientCertAuth bool
	// Logger receives etcd's auth log lines; nil is silent.
	Logger *zap.Logger
}

// Info is who a request comes from: etcd's AuthInfo, the user and the
// auth revision their token carries.
type Info = etcdauth.AuthInfo

// Store is the auth state of a member (etcd's auth.AuthStore over
// Storage) and the checks every request goes through.
type Store struct {
	cfg   Config
	st    Storage
	be    *backend
	etcd  etcdauth.AuthStore
	index wait.WaitTime
	// applyMu makes each auth command's change and its commit one step,
	// in apply order (the single member applies concurrently).
	applyMu sync.Mutex
}

// Open loads the auth state from st and starts its token provider. Bad
// configuration is named: the token option and what is allowed.
func Open(cfg Config, st Storage) (*Store, error) {
	if cfg.Token == "" {
		cfg.Token = DefaultToken
	}
	if cfg.TokenTTL == 0 {
		cfg.TokenTTL = DefaultTokenTTL
	}
	if cfg.BcryptCost == 0 {
		cfg.BcryptCost = DefaultBcryptCost
	}
	if cfg.BcryptCost < bcrypt.MinCost || cfg.BcryptCost > bcrypt.MaxCost {
		return nil, fmt.Errorf("auth: bcrypt cost %d: must be in [%d, %d]", cfg.BcryptCost, bcrypt.MinCost, bcrypt.MaxCost)
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	be, err := load(st)
	if err != nil {
		return nil, err
	}
	s := &Store{cfg: cfg, st: st, be: be, index: wait.NewTimeList()}
	if err := checkTokenOptions(cfg.Token); err != nil {
		return nil, fmt.Errorf("auth: auth_token = %q: %w", cfg.Token, err)
	}
	tp, err := etcdauth.NewTokenProvider(cfg.Logger, cfg.Token, s.index.Wait, cfg.TokenTTL)
	if err != nil {
		return nil, fmt.Errorf("auth: auth_token = %q: %w (want \"simple\" or \"jwt,pub-key=PATH,priv-key=PATH,sign-method=RS256,ttl=5m\")", cfg.Token, err)
	}
	s.etcd = etcdauth.NewAuthStore(cfg.Logger, be, tp, cfg.BcryptCost)
	// A store without auth state gets revision 1 (etcd's start): keep it,
	// outside the log, as every member does the same.
	if err := s.commit(0); err != nil {
		_ = s.etcd.Close()
		return nil, err
	}
	return s, nil
}

// Close stops the token provider.
func (s *Store) Close() error { return s.etcd.Close() }

// Reload reads the auth state again after Storage was replaced (a raft
// snapshot restored), as etcd's Recover.
func (s *Store) Reload() error {
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	fresh, err := load(s.st)
	if err != nil {
		return err
	}
	s.be.mu.Lock()
	s.be.enabled, s.be.revision, s.be.users, s.be.roles = fresh.enabled, fresh.revision, fresh.users, fresh.roles
	clear(s.be.staged)
	s.be.mu.Unlock()
	s.etcd.Recover(s.be)
	return nil
}

// Applied tells the store the member applied the log up to index: a
// simple token names the index of its Authenticate command, and a member
// checks it only once it applied that far (etcd's index waiter).
func (s *Store) Applied(index uint64) { s.index.Trigger(index) }

// Enabled reports whether auth is enabled.
func (s *Store) Enabled() bool { return s.etcd.IsAuthEnabled() }

// Revision is the auth revision: it grows with every change of users,
// roles or permissions, and every AuthDisable.
func (s *Store) Revision() uint64 { return s.etcd.Revision() }

// commit writes what the last command staged, with its log index.
func (s *Store) commit(index uint64) error {
	writes, err := s.be.takeStaged()
	if err != nil {
		return err
	}
	if len(writes) == 0 && index == 0 {
		return nil
	}
	return s.st.WriteAux(index, writes)
}

// IsCommand reports whether r is an auth command, which Apply applies.
func IsCommand(r *pb.InternalRaftRequest) bool {
	return r.Authenticate != nil || r.AuthEnable != nil || r.AuthDisable != nil || r.AuthStatus != nil ||
		r.AuthUserAdd != nil || r.AuthUserDelete != nil || r.AuthUserChangePassword != nil ||
		r.AuthUserGrantRole != nil || r.AuthUserGet != nil || r.AuthUserRevokeRole != nil ||
		r.AuthRoleAdd != nil || r.AuthRoleGrantPermission != nil || r.AuthRoleGet != nil ||
		r.AuthRoleRevokePermission != nil || r.AuthRoleDelete != nil || r.AuthUserList != nil ||
		r.AuthRoleList != nil
}

// Apply applies the auth command r (IsCommand) at log position index, as
// etcd's applier: the user of r.Header must be root for the commands that
// change auth or list it, and may read only themselves or their roles.
// It returns the command's response or its own error (cmdErr, for the
// client), or err when the state could not be stored (the node stops).
// The index is recorded in either case.
func (s *Store) Apply(index uint64, r *pb.InternalRaftRequest) (resp proto.Message, cmdErr, err error) {
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	resp, cmdErr = s.applyLocked(index, r)
	if err := s.commit(index); err != nil {
		return nil, nil, err
	}
	if index != 0 {
		s.index.Trigger(index)
	}
	return resp, cmdErr, nil
}

func (s *Store) applyLocked(index uint64, r *pb.InternalRaftRequest) (proto.Message, error) {
	ai := headerInfo(r.Header)
	if needAdmin(r) {
		if err := s.etcd.IsAdminPermitted(ai); err != nil {
			return nil, err
		}
	}
	as := s.etcd
	switch {
	case r.Authenticate != nil:
		ctx := context.WithValue(context.Background(), etcdauth.AuthenticateParamIndex{}, index)
		ctx = context.WithValue(ctx, etcdauth.AuthenticateParamSimpleTokenPrefix{}, r.Authenticate.SimpleToken)
		return nilIfErr(as.Authenticate(ctx, r.Authenticate.Name, r.Authenticate.Password))
	case r.AuthEnable != nil:
		if err := as.AuthEnable(); err != nil {
			return nil, err
		}
		return &pb.AuthEnableResponse{}, nil
	case r.AuthDisable != nil:
		as.AuthDisable()
		return &pb.AuthDisableResponse{}, nil
	case r.AuthStatus != nil:
		return &pb.AuthStatusResponse{Enabled: as.IsAuthEnabled(), AuthRevision: as.Revision()}, nil
	case r.AuthUserAdd != nil:
		return nilIfErr(as.UserAdd(r.AuthUserAdd))
	case r.AuthUserDelete != nil:
		return nilIfErr(as.UserDelete(r.AuthUserDelete))
	case r.AuthUserChangePassword != nil:
		return nilIfErr(as.UserChangePassword(r.AuthUserChangePassword))
	case r.AuthUserGrantRole != nil:
		return nilIfErr(as.UserGrantRole(r.AuthUserGrantRole))
	case r.AuthUserRevokeRole != nil:
		return nilIfErr(as.UserRevokeRole(r.AuthUserRevokeRole))
	case r.AuthUserGet != nil:
		if err := as.IsAdminPermitted(ai); err != nil && r.AuthUserGet.Name != ai.Username {
			return nil, err
		}
		return nilIfErr(as.UserGet(r.AuthUserGet))
	case r.AuthUserList != nil:
		return nilIfErr(as.UserList(r.AuthUserList))
	case r.AuthRoleAdd != nil:
		return nilIfErr(as.RoleAdd(r.AuthRoleAdd))
	case r.AuthRoleDelete != nil:
		return nilIfErr(as.RoleDelete(r.AuthRoleDelete))
	case r.AuthRoleGrantPermission != nil:
		return nilIfErr(as.RoleGrantPermission(r.AuthRoleGrantPermission))
	case r.AuthRoleRevokePermission != nil:
		return nilIfErr(as.RoleRevokePermission(r.AuthRoleRevokePermission))
	case r.AuthRoleGet != nil:
		if err := as.IsAdminPermitted(ai); err != nil && !as.HasRole(ai.Username, r.AuthRoleGet.Role) {
			return nil, err
		}
		return nilIfErr(as.RoleGet(r.AuthRoleGet))
	case r.AuthRoleList != nil:
		return nilIfErr(as.RoleList(r.AuthRoleList))
	}
	return nil, fmt.Errorf("auth: not an auth command: %v", r)
}

// nilIfErr turns a typed nil response with an error into an untyped nil.
func nilIfErr[T proto.Message](resp T, err error) (proto.Message, error) {
	if err != nil {
		return nil, err
	}
	return resp, nil
}

// needAdmin reports whether only root may run r (etcd's
// needAdminPermission).
func needAdmin(r *pb.InternalRaftRequest) bool {
	return r.AuthEnable != nil || r.AuthDisable != nil || r.AuthUserAdd != nil || r.AuthUserDelete != nil ||
		r.AuthUserChangePassword != nil || r.AuthUserGrantRole != nil || r.AuthUserRevokeRole != nil ||
		r.AuthRoleAdd != nil || r.AuthRoleGrantPermission != nil || r.AuthRoleRevokePermission != nil ||
		r.AuthRoleDelete != nil || r.AuthUserList != nil || r.AuthRoleList != nil
}

// headerInfo is the user a command was proposed for.
func headerInfo(h *pb.RequestHeader) *Info {
	if h == nil {
		return &Info{}
	}
	return &Info{Username: h.Username, Revision: h.AuthRevision}
}

// The API side: what a member does before it proposes or serves a
// request.

// InfoFromContext returns the user of a gRPC request: the one its token
// names (an invalid or expired token is ErrInvalidAuthToken), else, with
// ClientCertAuth, its verified client certificate's common name; nil if
// none or auth is disabled.
func (s *Store) InfoFromContext(ctx context.Context) (*Info, error) {
	ai, err := s.etcd.AuthInfoFromCtx(ctx)
	if ai != nil || err != nil || !s.cfg.ClientCertAuth {
		return ai, err
	}
	return s.etcd.AuthInfoFromTLS(ctx), nil
}

// SetUser records the request's user in r's header, which the applier
// checks (every command but Authenticate, as etcd).
func (s *Store) SetUser(ctx context.Context, r *pb.InternalRaftRequest) error {
	if r.Authenticate != nil {
		return nil
	}
	ai, err := s.InfoFromContext(ctx)
	if err != nil || ai == nil {
		return err
	}
	if r.Header == nil {
		r.Header = &pb.RequestHeader{}
	}
	r.Header.Username, r.Header.AuthRevision = ai.Username, ai.Revision
	return nil
}

// Authenticate checks a password (the bcrypt cost is paid here, once per
// Authenticate, never per request) and returns the command that assigns
// the token through the log, without the password, and the auth revision
// the password was checked at: if the revision moved by the time the
// command applied, check again (etcd's loop). With auth disabled it fails
// with ErrAuthNotEnabled, which clients take as "no token needed".
func (s *Store) Authenticate(r *pb.AuthenticateRequest) (*pb.InternalAuthenticateRequest, uint64, error) {
	rev, err := s.etcd.CheckPassword(r.Name, r.Password)
	if err != nil {
		return nil, 0, err
	}
	prefix, err := s.etcd.GenTokenPrefix()
	if err != nil {
		return nil, 0, err
	}
	return &pb.InternalAuthenticateRequest{Name: r.Name, SimpleToken: prefix}, rev, nil
}

// HashPassword replaces a password by its bcrypt hash before the request
// is proposed, so the log and the store never hold it (etcd's UserAdd and
// UserChangePassword).
func (s *Store) HashPassword(password *string, hashed *string) error {
	if *password == "" {
		return nil
	}
	h, err := bcrypt.GenerateFromPassword([]byte(*password), s.cfg.BcryptCost)
	if err != nil {
		return err
	}
	*hashed, *password = base64.StdEncoding.EncodeToString(h), ""
	return nil
}

// RequireUser fails with ErrUserEmpty when auth is enabled and the request
// names no user (etcd's requireAuthInfo).
func (s *Store) RequireUser(ctx context.Context) error {
	_, err := s.requireInfo(ctx)
	return err
}

// requireInfo returns the request's user, ErrUserEmpty if it names none
// while auth is enabled, and nil, nil while auth is disabled.
func (s *Store) requireInfo(ctx context.Context) (*Info, error) {
	if !s.etcd.IsAuthEnabled() {
		return nil, nil
	}
	ai, err := s.InfoFromContext(ctx)
	if err != nil {
		return nil, err
	}
	if ai == nil {
		return nil, ErrUserEmpty
	}
	return ai, nil
}

// RequireAdmin fails unless auth is disabled or the request's user has
// the root role (etcd's AuthAdmin: compaction, defragment, snapshot,
// hash, move-leader, alarm changes).
func (s *Store) RequireAdmin(ctx context.Context) error {
	ai, err := s.InfoFromContext(ctx)
	if err != nil {
		return err
	}
	return s.etcd.IsAdminPermitted(ai)
}

// Serve runs a read that does not go through the log (etcd's
// doSerialize): check decides with the request's user, then read runs
// (nil: none, a check alone), and the result is refused with
// ErrAuthOldRevision if auth changed meanwhile.
func (s *Store) Serve(ctx context.Context, check func(*Info) error, read func() error) error {
	ai, err := s.InfoFromContext(ctx)
	if err != nil {
		return err
	}
	if ai == nil {
		ai = &Info{}
	}
	if err := check(ai); err != nil {
		return err
	}
	if read == nil {
		return nil
	}
	if err := read(); err != nil {
		return err
	}
	if ai.Revision != 0 && ai.Revision != s.etcd.Revision() {
		return ErrAuthOldRevision
	}
	return nil
}

// CheckRange is etcd's IsRangePermitted: the user may read [key, end).
func (s *Store) CheckRange(ai *Info, key, end []byte) error {
	return s.etcd.IsRangePermitted(ai, key, end)
}

// Errors, etcd's own (the server maps them onto rpctypes with GRPCError).
var (
	ErrUserEmpty        = etcdauth.ErrUserEmpty
	ErrAuthNotEnabled   = etcdauth.ErrAuthNotEnabled
	ErrAuthOldRevision  = etcdauth.ErrAuthOldRevision
	ErrPermissionDenied = etcdauth.ErrPermissionDenied
	ErrInvalidAuthToken = etcdauth.ErrInvalidAuthToken
)

// WithRoot returns ctx carrying a root token, for the requests the member
// makes by itself (revoking an expired lease), as etcd's WithRoot.
func (s *Store) WithRoot(ctx context.Context) context.Context { return s.etcd.WithRoot(ctx) }
