package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// freeLowPort returns a loopback port below 32768 (outside Linux's
// ephemeral range) that is free right now.
func freeLowPort(t *testing.T) int {
	t.Helper()
	for range 100 {
		p := 20000 + rand.IntN(12000)
		if ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p)); err == nil {
			ln.Close()
			return p
		}
	}
	t.Fatal("no free port below 32768")
	return 0
}

// startEtcd34 runs Debian's etcd (3.4.23) as a single member on loopback
// ports, with args added to its flags, and returns its client address;
// the test skips without it.
func startEtcd34(t *testing.T, args ...string) string {
	t.Helper()
	bin, err := exec.LookPath("etcd")
	if err != nil {
		t.Skip("etcd is not installed (Debian package etcd-server, 3.4.23)")
	}
	client, peer := fmt.Sprintf("127.0.0.1:%d", freeLowPort(t)), fmt.Sprintf("127.0.0.1:%d", freeLowPort(t))
	dir := t.TempDir()
	cmd := exec.Command(bin, append([]string{"--name", "s1", "--data-dir", filepath.Join(dir, "data"),
		"--listen-client-urls", "http://" + client, "--advertise-client-urls", "http://" + client,
		"--listen-peer-urls", "http://" + peer, "--initial-advertise-peer-urls", "http://" + peer,
		"--initial-cluster", "s1=http://" + peer}, args...)...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if resp, err := http.Get("http://" + client + "/health"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return client
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("etcd did not become healthy within 30s")
		}
	}
}

// httpAnswer is what an HTTP endpoint answered.
type httpAnswer struct {
	status      int
	contentType string
	body        string
}

func httpDo(t *testing.T, method, url, body string) httpAnswer {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return httpAnswer{resp.StatusCode, resp.Header.Get("Content-Type"), string(b)}
}

// TestEtcdParitySingleMember compares what a user sees of a single
// Strata member with a single etcd 3.4.23: /version's form, /health's
// status, type and body, member list, move-leader to the member itself
// and to a stranger, and the gateway under /v3beta/.
func TestEtcdParitySingleMember(t *testing.T) {
	s := startServer(t, testConfig(t))
	strata := s.Addr().String()
	etcd := startEtcd34(t)

	// /version: the same fields, the cluster version as X.Y.0.
	for name, addr := range map[string]string{"strata": strata, "etcd": etcd} {
		a := httpDo(t, "GET", "http://"+addr+"/version", "")
		var v map[string]string
		if err := json.Unmarshal([]byte(a.body), &v); err != nil || a.status != 200 || a.contentType != "application/json" {
			t.Fatalf("%s /version: %+v %v", name, a, err)
		}
		if !strings.HasPrefix(v["etcdserver"], strings.TrimSuffix(v["etcdcluster"], "0")) || !strings.HasSuffix(v["etcdcluster"], ".0") {
			t.Errorf("%s /version: %s, want etcdcluster = the server's X.Y.0", name, a.body)
		}
	}
	// /health: etcd 3.4 answers {"health":"true"}, 3.7 adds "reason"
	// (Strata's); the status and the content type are etcd's.
	sh, eh := httpDo(t, "GET", "http://"+strata+"/health", ""), httpDo(t, "GET", "http://"+etcd+"/health", "")
	if sh.status != eh.status || sh.contentType != eh.contentType {
		t.Errorf("/health: strata %+v, etcd %+v", sh, eh)
	}
	if eh.body != `{"health":"true"}` || sh.body != `{"health":"true","reason":""}` {
		t.Errorf("/health bodies: strata %q, etcd %q", sh.body, eh.body)
	}
	if a := httpDo(t, "POST", "http://"+strata+"/health", ""); a.status != http.StatusMethodNotAllowed {
		t.Errorf("POST /health: %+v", a)
	}

	// The gateway under /v3beta/ as under /v3/.
	for name, addr := range map[string]string{"strata": strata, "etcd": etcd} {
		put := httpDo(t, "POST", "http://"+addr+"/v3beta/kv/put", `{"key":"Zm9v","value":"YmFy"}`)
		rng := httpDo(t, "POST", "http://"+addr+"/v3/kv/range", `{"key":"Zm9v"}`)
		betaRng := httpDo(t, "POST", "http://"+addr+"/v3beta/kv/range", `{"key":"Zm9v"}`)
		if put.status != 200 || rng.status != 200 || betaRng.body != rng.body || !strings.Contains(rng.body, `"value":"YmFy"`) {
			t.Errorf("%s gateway: put %+v, range %+v, /v3beta range %+v", name, put, rng, betaRng)
		}
	}

	// member list: one started member with its client URL; move-leader
	// to itself succeeds, to another ID fails with etcd's error.
	ctx := testCtx(t)
	for name, addr := range map[string]string{"strata": strata, "etcd": etcd} {
		c, err := clientv3.New(clientv3.Config{Endpoints: []string{addr}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		ml, err := c.MemberList(ctx)
		if err != nil || len(ml.Members) != 1 || ml.Members[0].Name == "" || len(ml.Members[0].ClientURLs) != 1 ||
			ml.Members[0].ClientURLs[0] != "http://"+addr || ml.Members[0].ID != ml.Header.MemberId {
			t.Errorf("%s member list: %v %v", name, ml, err)
		}
		if _, err := c.MoveLeader(ctx, ml.Header.MemberId); err != nil {
			t.Errorf("%s move-leader to itself: %v", name, err)
		}
		mctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err = c.MoveLeader(mctx, ml.Header.MemberId+1)
		cancel()
		if err == nil || err.Error() != rpctypes.ErrBadLeaderTransferee.Error() {
			t.Errorf("%s move-leader to a stranger: %v, want %v", name, err, rpctypes.ErrBadLeaderTransferee)
		}
	}
}
