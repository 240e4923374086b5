package server

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc/metadata"
)

// authClient returns a clientv3 client of s with a user and password.
func authClient(t testing.TB, s *Server, user, password string) (*clientv3.Client, error) {
	t.Helper()
	c, err := clientv3.New(clientv3.Config{
		Endpoints:   []string{s.Addr().String()},
		DialTimeout: 5 * time.Second,
		Username:    user,
		Password:    password,
		Logger:      zap.NewNop(),
	})
	if err == nil {
		t.Cleanup(func() { _ = c.Close() })
	}
	return c, err
}

// TestAuthDisabledCredentials: with auth disabled (the default), a client
// configured with a user and password connects and works, as with etcd,
// which answers its Authenticate with "authentication is not enabled".
func TestAuthDisabledCredentials(t *testing.T) {
	s := startServer(t, testConfig(t))
	ctx := testCtx(t)
	c, err := authClient(t, s, "root", "pw")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Put(ctx, "foo", "bar"); err != nil {
		t.Fatal(err)
	}
	got, err := c.Get(ctx, "foo")
	if err != nil || len(got.Kvs) != 1 || string(got.Kvs[0].Value) != "bar" {
		t.Fatalf("get: %+v, %v", got, err)
	}
	if _, err := c.Authenticate(ctx, "root", "pw"); !errors.Is(err, rpctypes.ErrAuthNotEnabled) {
		t.Errorf("authenticate: %v, want %v", err, rpctypes.ErrAuthNotEnabled)
	}
	st, err := c.AuthStatus(ctx)
	if err != nil || st.Enabled || st.AuthRevision != 1 || st.Header.MemberId == 0 {
		t.Errorf("auth status: %+v, %v; want disabled at auth revision 1", st, err)
	}
}

// TestAuthClientv3 enables auth and checks, with clientv3, who may do
// what: the checks of every service, the errors etcd gives, and that
// users, roles and the enabled flag survive a restart.
func TestAuthClientv3(t *testing.T) {
	cfg := testConfig(t)
	cfg.Server.BcryptCost = 4 // the test's speed; the cost is checked in the auth package
	s := startServer(t, cfg)
	ctx := testCtx(t)
	admin := newClient(t, s, nil)
	setupAuth(t, admin, "alice")
	if root, err := authClient(t, s, "root", "rootpw"); err != nil {
		t.Fatal(err)
	} else if _, err := root.RoleGrantPermission(ctx, "reader", "/rw", "", clientv3.PermissionType(clientv3.PermReadWrite)); err != nil {
		t.Fatal(err)
	}

	// No user, a wrong password.
	if _, err := admin.Get(ctx, "/pub/a"); !errors.Is(err, rpctypes.ErrUserEmpty) {
		t.Errorf("get without a user: %v, want %v", err, rpctypes.ErrUserEmpty)
	}
	if _, err := authClient(t, s, "alice", "wrong"); !errors.Is(err, rpctypes.ErrAuthFailed) {
		t.Errorf("wrong password: %v, want %v", err, rpctypes.ErrAuthFailed)
	}
	alice, err := authClient(t, s, "alice", "alicepw")
	if err != nil {
		t.Fatal(err)
	}
	root, err := authClient(t, s, "root", "rootpw")
	if err != nil {
		t.Fatal(err)
	}
	denied := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, rpctypes.ErrPermissionDenied) {
			t.Errorf("%s: %v, want %v", what, err, rpctypes.ErrPermissionDenied)
		}
	}
	if got, err := alice.Get(ctx, "/pub/", clientv3.WithPrefix()); err != nil || len(got.Kvs) != 1 {
		t.Errorf("alice reads /pub/: %+v, %v", got, err)
	}
	_, err = alice.Get(ctx, "/secret")
	denied("alice reads /secret", err)
	_, err = streamChunks(ctx, alice, "/secret")
	denied("alice streams /secret (RangeStream)", err)
	if chunks, err := streamChunks(ctx, alice, "/pub/", clientv3.WithPrefix()); err != nil || len(chunks) == 0 {
		t.Errorf("alice streams /pub/: %d chunks, %v", len(chunks), err)
	}
	_, err = alice.Put(ctx, "/pub/a", "2")
	denied("alice writes /pub/a", err)
	if _, err := alice.Put(ctx, "/rw", "x"); err != nil {
		t.Errorf("alice writes /rw: %v", err)
	}
	_, err = alice.Delete(ctx, "/secret")
	denied("alice deletes /secret", err)
	// A txn is refused when any branch could do what the user may not,
	// whichever branch would run.
	_, err = alice.Txn(ctx).If(clientv3.Compare(clientv3.Value("/rw"), "=", "x")).
		Then(clientv3.OpPut("/rw", "y")).Else(clientv3.OpPut("/secret", "z")).Commit()
	denied("alice's txn with a forbidden else branch", err)
	_, err = alice.Txn(ctx).Then(clientv3.OpGet("/secret")).Commit()
	denied("alice's read-only txn of /secret", err)
	_, err = alice.Txn(ctx).Then(clientv3.OpTxn(nil, []clientv3.Op{clientv3.OpPut("/rw", "n")}, []clientv3.Op{clientv3.OpPut("/secret", "n")})).Commit()
	denied("alice's nested txn with a forbidden branch", err)
	if resp, err := alice.Txn(ctx).If(clientv3.Compare(clientv3.Value("/rw"), "=", "x")).Then(clientv3.OpPut("/rw", "y")).Commit(); err != nil || !resp.Succeeded {
		t.Errorf("alice's permitted txn: %+v, %v", resp, err)
	}
	// A watch of a range the user may not read is canceled at once.
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	wr := <-alice.Watch(wctx, "/secret")
	cancel()
	if !wr.Canceled || !strings.Contains(wr.Err().Error(), "permission denied") {
		t.Errorf("alice watches /secret: %+v (%v), want canceled with permission denied", wr, wr.Err())
	}
	// Leases: a lease holding a key alice may not write is not hers to
	// revoke; admin calls are root's.
	l, err := root.Grant(ctx, 60)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := root.Put(ctx, "/secret2", "v", clientv3.WithLease(l.ID)); err != nil {
		t.Fatal(err)
	}
	_, err = alice.Revoke(ctx, l.ID)
	denied("alice revokes root's lease", err)
	_, err = alice.TimeToLive(ctx, l.ID, clientv3.WithAttachedKeys())
	denied("alice reads the keys of root's lease", err)
	_, err = alice.Compact(ctx, 2)
	denied("alice compacts", err)
	_, err = alice.UserList(ctx)
	denied("alice lists users", err)
	if u, err := alice.UserGet(ctx, "alice"); err != nil || len(u.Roles) != 1 {
		t.Errorf("alice reads herself: %+v, %v", u, err)
	}
	if _, err := root.TimeToLive(ctx, l.ID, clientv3.WithAttachedKeys()); err != nil {
		t.Errorf("root reads its lease: %v", err)
	}
	// A token whose user lost a role no longer grants it.
	if _, err := root.UserRevokeRole(ctx, "alice", "reader"); err != nil {
		t.Fatal(err)
	}
	_, err = alice.Get(ctx, "/pub/a")
	denied("alice reads /pub/a after losing reader", err)
	// An invalid token.
	kv := pb.NewKVClient(admin.ActiveConnection())
	bad := metadata.AppendToOutgoingContext(ctx, rpctypes.TokenFieldNameGRPC, "not-a-token.7")
	if _, err := kv.Range(bad, &pb.RangeRequest{Key: []byte("/pub/a")}); !errors.Is(rpctypes.Error(err), rpctypes.ErrInvalidAuthToken) {
		t.Errorf("a bad token: %v, want %v", err, rpctypes.ErrInvalidAuthToken)
	}
	// The v2 keys are the v3 keys, and a v2 request carries no v3 token:
	// refused while auth is enabled.
	if resp, err := http.Get("http://" + s.Addr().String() + "/v2/keys/secret"); err != nil {
		t.Fatal(err)
	} else {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized || string(body) != `{"message":"Insufficient credentials"}`+"\n" {
			t.Errorf("v2 GET with auth enabled: %d %s, want 401 and etcd's v2 refusal", resp.StatusCode, body)
		}
	}
	// Restart: users, roles and the enabled flag are kept.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = startServer(t, cfg)
	if _, err := newClient(t, s, nil).Get(ctx, "/pub/a"); !errors.Is(err, rpctypes.ErrUserEmpty) {
		t.Errorf("after restart, a get without a user: %v, want %v", err, rpctypes.ErrUserEmpty)
	}
	root, err = authClient(t, s, "root", "rootpw")
	if err != nil {
		t.Fatal(err)
	}
	if r, err := root.RoleGet(ctx, "reader"); err != nil || len(r.Perm) != 2 {
		t.Errorf("after restart, role reader: %+v, %v", r, err)
	}
	if u, err := root.UserList(ctx); err != nil || strings.Join(u.Users, ",") != "alice,root" {
		t.Errorf("after restart, users: %+v, %v", u, err)
	}
	if _, err := root.AuthDisable(ctx); err != nil {
		t.Fatal(err)
	}
	if got, err := newClient(t, s, nil).Get(ctx, "/secret"); err != nil || len(got.Kvs) != 1 {
		t.Errorf("after auth disable, a get without a user: %+v, %v", got, err)
	}
}
