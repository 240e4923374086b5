package clustertest

import (
	"context"
	"errors"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc/metadata"
)

// authClient is c.client with a user and password; Authenticate is
// retried while the member elects or catches up.
func (c *procCluster) authClient(user, password string, ms ...*member) *clientv3.Client {
	c.t.Helper()
	var eps []string
	for _, m := range ms {
		eps = append(eps, m.clientAddr)
	}
	var err error
	for range 20 {
		var cli *clientv3.Client
		cli, err = clientv3.New(clientv3.Config{Endpoints: eps, DialTimeout: 5 * time.Second, Username: user, Password: password, Logger: zap.NewNop()})
		if err == nil {
			c.t.Cleanup(func() { _ = cli.Close() })
			return cli
		}
		time.Sleep(250 * time.Millisecond)
	}
	c.t.Fatalf("authenticate %s on %v: %v", user, eps, err)
	return nil
}

// TestAuthReplicatedThroughRaft: users, roles, permissions and the
// enabled flag set through the leader reach every member through the
// log, and a member that was down catches up with them from a snapshot
// (the log it missed was truncated); on it, the same refusals hold.
func TestAuthReplicatedThroughRaft(t *testing.T) {
	c := newProcCluster(t, 3, 100)
	lead := c.leader()
	f := c.others(lead)[0]
	c.kill(f)
	admin := c.client(lead)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, step := range []func() error{
		func() error { _, err := admin.UserAdd(ctx, "root", "rootpw"); return err },
		func() error { _, err := admin.UserGrantRole(ctx, "root", "root"); return err },
		func() error { _, err := admin.RoleAdd(ctx, "reader"); return err },
		func() error {
			_, err := admin.RoleGrantPermission(ctx, "reader", "pub/", clientv3.GetPrefixRangeEnd("pub/"), clientv3.PermissionType(clientv3.PermRead))
			return err
		},
		func() error { _, err := admin.UserAdd(ctx, "alice", "alicepw"); return err },
		func() error { _, err := admin.UserGrantRole(ctx, "alice", "reader"); return err },
		func() error { _, err := admin.Put(ctx, "pub/a", "1"); return err },
		func() error { _, err := admin.AuthEnable(ctx); return err },
	} {
		if err := step(); err != nil {
			t.Fatal(err)
		}
	}
	// More writes than the log keeps, as root: f will need a snapshot.
	w := startWriters(c.authClient("root", "rootpw", lead), 8, "s")
	w.waitFor(t, 300, 60*time.Second)
	w.finish()

	c.start(f)
	alice := c.authClient("alice", "alicepw", f)
	var err error
	for range 40 { // f may still be restoring
		_, err = alice.Get(ctx, "pub/a")
		if err == nil {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("alice reads pub/a on %s: %v", f.name, err)
	}
	if !f.logHas("restored snapshot") {
		t.Fatalf("%s caught up without restoring a snapshot", f.name)
	}
	if _, err := alice.Get(ctx, "s00/000000"); !errors.Is(err, rpctypes.ErrPermissionDenied) {
		t.Errorf("alice reads s00/000000 on %s: %v, want %v", f.name, err, rpctypes.ErrPermissionDenied)
	}
	if _, err := alice.Put(ctx, "pub/a", "2"); !errors.Is(err, rpctypes.ErrPermissionDenied) {
		t.Errorf("alice writes pub/a through %s: %v, want %v", f.name, err, rpctypes.ErrPermissionDenied)
	}
	if _, err := c.client(f).Get(ctx, "pub/a"); !errors.Is(err, rpctypes.ErrUserEmpty) {
		t.Errorf("a read without a user on %s: %v, want %v", f.name, err, rpctypes.ErrUserEmpty)
	}
	// A simple token is assigned through the log, so every member knows
	// it: a token alice got from f works on the leader.
	tok, err := alice.Authenticate(ctx, "alice", "alicepw")
	if err != nil {
		t.Fatal(err)
	}
	kv := pb.NewKVClient(c.client(lead).ActiveConnection())
	withToken := metadata.AppendToOutgoingContext(ctx, rpctypes.TokenFieldNameGRPC, tok.Token)
	if resp, err := kv.Range(withToken, &pb.RangeRequest{Key: []byte("pub/a")}); err != nil || len(resp.Kvs) != 1 {
		t.Errorf("alice's token from %s on the leader %s: %+v, %v", f.name, lead.name, resp, err)
	}
}
