package server

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
)

// authSession is an etcdctl session: users, roles, grants, auth enable,
// then reads, writes, a txn and a watch by a user with too few
// permissions, admin calls by root and by that user, auth disable. Each
// step is etcdctl's arguments (with --user when the step has one) and
// its stdin.
var authSession = []struct {
	user, stdin string
	args        []string
}{
	{"", "", []string{"user", "add", "root", "--new-user-password=rootpw"}},
	{"", "", []string{"user", "grant-role", "root", "root"}},
	{"", "", []string{"role", "add", "reader"}},
	{"", "", []string{"role", "grant-permission", "reader", "read", "/pub/", "--prefix"}},
	{"", "", []string{"role", "grant-permission", "reader", "readwrite", "/rw"}},
	{"", "", []string{"role", "grant-permission", "reader", "write", "/w", "/x"}},
	{"", "", []string{"user", "add", "alice", "--new-user-password=alicepw"}},
	{"", "", []string{"user", "grant-role", "alice", "reader"}},
	{"", "", []string{"user", "add", "bob", "--new-user-password=bobpw"}},
	{"", "", []string{"put", "/pub/a", "1"}},
	{"", "", []string{"put", "/secret", "s"}},
	{"", "", []string{"role", "get", "reader"}},
	{"", "", []string{"user", "get", "alice"}},
	{"", "", []string{"auth", "enable"}},
	{"", "", []string{"get", "/pub/a"}},
	{"alice:wrong", "", []string{"get", "/pub/a"}},
	{"nobody:pw", "", []string{"get", "/pub/a"}},
	{"alice:alicepw", "", []string{"get", "/pub/", "--prefix"}},
	{"alice:alicepw", "", []string{"get", "/secret"}},
	{"alice:alicepw", "", []string{"get", "/pub/a", "--rev=2"}},
	{"alice:alicepw", "", []string{"put", "/pub/a", "2"}},
	{"alice:alicepw", "", []string{"put", "/rw", "x"}},
	{"alice:alicepw", "", []string{"put", "/w1", "w"}},
	{"alice:alicepw", "", []string{"get", "/w1"}},
	{"alice:alicepw", "", []string{"del", "/secret"}},
	{"alice:alicepw", "", []string{"del", "/rw", "--prev-kv"}},
	{"alice:alicepw", "value(\"/rw\") = \"x\"\n\nput /rw y\n\nput /secret z\n\n", []string{"txn"}},
	{"alice:alicepw", "value(\"/rw\") = \"x\"\n\nput /rw y\n\nget /pub/a\n\n", []string{"txn"}},
	{"alice:alicepw", "value(\"/secret\") = \"s\"\n\nput /rw y\n\n\n", []string{"txn"}},
	{"alice:alicepw", "", []string{"watch", "/secret"}},
	{"alice:alicepw", "", []string{"user", "list"}},
	{"alice:alicepw", "", []string{"user", "get", "alice"}},
	{"alice:alicepw", "", []string{"user", "get", "root"}},
	{"alice:alicepw", "", []string{"role", "get", "reader"}},
	{"alice:alicepw", "", []string{"role", "get", "root"}},
	{"alice:alicepw", "", []string{"compaction", "2"}}, // etcd 3.5+ (and Strata): root only; etcd 3.4 allows it
	{"alice:alicepw", "", []string{"user", "add", "carol", "--new-user-password=c"}},
	{"alice:alicepw", "", []string{"auth", "disable"}},
	{"bob:bobpw", "", []string{"get", "/pub/a"}},
	{"root:rootpw", "", []string{"get", "/secret"}},
	{"root:rootpw", "", []string{"user", "list"}},
	{"root:rootpw", "", []string{"role", "list"}},
	{"root:rootpw", "", []string{"role", "get", "root"}},
	{"root:rootpw", "", []string{"role", "revoke-permission", "reader", "/rw"}},
	{"alice:alicepw", "", []string{"put", "/rw", "x"}},
	{"root:rootpw", "", []string{"user", "revoke-role", "root", "root"}},
	{"root:rootpw", "", []string{"user", "delete", "root"}},
	{"root:rootpw", "", []string{"role", "delete", "root"}},
	{"root:rootpw", "", []string{"user", "passwd", "alice", "--interactive=false"}},
	{"alice:newpw", "", []string{"get", "/pub/a"}},
	{"root:rootpw", "", []string{"compaction", "3"}},
	{"root:rootpw", "", []string{"auth", "disable"}},
	{"", "", []string{"get", "/secret"}},
	{"", "", []string{"user", "list"}},
	{"", "", []string{"auth", "enable"}},
	{"root:rootpw", "", []string{"auth", "disable"}},
}

// TestAuthEtcdctlMatchesEtcd34 runs authSession with the stock etcdctl
// against Strata and against etcd 3.4, and requires the same output and
// exit status at every step.
func TestAuthEtcdctlMatchesEtcd34(t *testing.T) {
	bin, err := exec.LookPath("etcdctl")
	if err != nil {
		t.Skip("etcdctl not installed (apt-get install etcd-client)")
	}
	etcd := startEtcd34(t, "--bcrypt-cost=4") // each etcdctl call authenticates: keep it cheap on both
	cfg := testConfig(t)
	cfg.Server.BcryptCost = 4
	strata := startServer(t, cfg).Addr().String()
	run := func(ep string, user, stdin string, args []string) string {
		if user != "" {
			args = append([]string{"--user=" + user}, args...)
		}
		if args[len(args)-1] == "--interactive=false" {
			stdin = "newpw\n" // user passwd reads the new password
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, append([]string{"--endpoints=" + ep, "--dial-timeout=5s", "--command-timeout=4s"}, args...)...)
		cmd.Env = append(cmd.Environ(), "ETCDCTL_API=3")
		cmd.Stdin = strings.NewReader(stdin)
		out, err := cmd.CombinedOutput()
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
			if ctx.Err() != nil {
				code = -1 // still running: a watch that was not refused
			}
		}
		// clientv3's own log lines (a time stamp, a client ID) are not
		// the server's answer.
		var lines []string
		for _, l := range strings.SplitAfter(string(out), "\n") {
			if !strings.HasPrefix(l, `{"level":`) {
				lines = append(lines, l)
			}
		}
		return fmt.Sprintf("exit %d\n%s", code, strings.Join(lines, ""))
	}
	var denied int
	for _, st := range authSession {
		step := strings.TrimSpace(st.user + " " + strings.Join(st.args, " "))
		ch := make(chan string, 1)
		go func() { ch <- run(etcd, st.user, st.stdin, st.args) }()
		got := run(strata, st.user, st.stdin, st.args)
		want := <-ch
		if st.user == "alice:alicepw" && st.args[0] == "compaction" {
			// etcd 3.5 made compaction root's (v3rpc's kvServer.Compact
			// checks AuthAdmin); 3.4 let any user compact. Strata is 3.7.
			want = "exit 1\nError: etcdserver: permission denied\n"
		}
		if got != want {
			t.Errorf("etcdctl %s:\nStrata:\n%s\netcd 3.4:\n%s", step, got, want)
		} else {
			t.Logf("etcdctl %s: %s", step, strings.ReplaceAll(strings.TrimSpace(got), "\n", " | "))
		}
		if strings.Contains(want, "permission denied") {
			denied++
		}
	}
	// The session is about refusals: make sure etcd made them.
	if denied < 10 {
		t.Errorf("etcd 3.4 refused %d steps of the session with permission denied, want at least 10", denied)
	}
}

// TestAuthTokenExpiryMatchesEtcd34 authenticates over gRPC against both
// servers with a 1 s simple token TTL, leaves the token unused past it,
// and requires both to refuse it with etcd's "invalid auth token".
func TestAuthTokenExpiryMatchesEtcd34(t *testing.T) {
	etcd := startEtcd34(t, "--auth-token-ttl=1", "--bcrypt-cost=4")
	cfg := testConfig(t)
	cfg.Server.AuthTokenTTL = 1
	cfg.Server.BcryptCost = 4
	strata := startServer(t, cfg).Addr().String()
	ctx := testCtx(t)
	tokens := map[string]string{}
	conns := map[string]*grpc.ClientConn{}
	for name, ep := range map[string]string{"etcd 3.4": etcd, "Strata": strata} {
		conn, err := grpc.NewClient(ep, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		conns[name] = conn
		a := pb.NewAuthClient(conn)
		for _, call := range []func() error{
			func() error {
				_, err := a.UserAdd(ctx, &pb.AuthUserAddRequest{Name: "root", Password: "pw"})
				return err
			},
			func() error {
				_, err := a.UserGrantRole(ctx, &pb.AuthUserGrantRoleRequest{User: "root", Role: "root"})
				return err
			},
			func() error { _, err := a.AuthEnable(ctx, &pb.AuthEnableRequest{}); return err },
		} {
			if err := call(); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
		}
		resp, err := a.Authenticate(ctx, &pb.AuthenticateRequest{Name: "root", Password: "pw"})
		if err != nil {
			t.Fatalf("%s: authenticate: %v", name, err)
		}
		tokens[name] = resp.Token
		withToken := metadata.AppendToOutgoingContext(ctx, rpctypes.TokenFieldNameGRPC, resp.Token)
		if _, err := pb.NewKVClient(conn).Range(withToken, &pb.RangeRequest{Key: []byte("k")}); err != nil {
			t.Fatalf("%s: range with a fresh token: %v", name, err)
		}
	}
	// Expired: unused for more than its TTL (the token keepers check
	// every second).
	time.Sleep(3500 * time.Millisecond)
	errs := map[string]string{}
	for name, conn := range conns {
		withToken := metadata.AppendToOutgoingContext(ctx, rpctypes.TokenFieldNameGRPC, tokens[name])
		_, err := pb.NewKVClient(conn).Range(withToken, &pb.RangeRequest{Key: []byte("k")})
		errs[name] = fmt.Sprint(err)
	}
	if errs["Strata"] != errs["etcd 3.4"] || !strings.Contains(errs["Strata"], rpctypes.ErrGRPCInvalidAuthToken.Error()) {
		t.Errorf("an expired token: Strata %q, etcd 3.4 %q; want both %q", errs["Strata"], errs["etcd 3.4"], rpctypes.ErrGRPCInvalidAuthToken)
	}
}
