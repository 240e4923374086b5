package admin

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/stratadb/strata/internal/testport"
)

// strataEtcdProc is a `strata etcd` child process (the test binary, see
// TestMain) whose stdout and stderr go to log.
type strataEtcdProc struct {
	name   string
	cmd    *exec.Cmd
	log    string
	served chan struct{}
	exited chan struct{}
}

// startStrataEtcd starts `strata etcd args...` in dir, logging to
// dir/name.log; it is killed when the test ends, its log shown if the
// test failed.
func startStrataEtcd(t *testing.T, dir, name string, args []string) *strataEtcdProc {
	t.Helper()
	p := &strataEtcdProc{name: name, log: filepath.Join(dir, name+".log"), served: make(chan struct{}), exited: make(chan struct{})}
	logf, err := os.Create(p.log)
	if err != nil {
		t.Fatal(err)
	}
	p.cmd = exec.Command(os.Args[0], "-test.run=^$")
	p.cmd.Env = append(os.Environ(), etcdChildEnv+"="+strings.Join(append([]string{"etcd"}, args...), "\n"))
	p.cmd.Stderr = logf
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer logf.Close()
		sc := bufio.NewScanner(stdout)
		once := false
		for sc.Scan() {
			fmt.Fprintln(logf, "stdout: "+sc.Text())
			if !once && etcdServingLine.MatchString(sc.Text()) {
				once = true
				close(p.served)
			}
		}
		_ = p.cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		_ = p.cmd.Process.Signal(syscall.SIGKILL)
		<-p.exited
		if t.Failed() {
			b, _ := os.ReadFile(p.log)
			t.Logf("%s log:\n%s", name, b)
		}
	})
	return p
}

// waitServed waits until p serves, failing the test if it exits first
// or does not within a minute.
func (p *strataEtcdProc) waitServed(t *testing.T) {
	t.Helper()
	select {
	case <-p.served:
	case <-p.exited:
		t.Fatalf("%s exited before serving", p.name)
	case <-time.After(60 * time.Second):
		t.Fatalf("%s did not serve within 60s", p.name)
	}
}

// readPEMCert parses the certificate in a PEM file.
func readPEMCert(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	blk, _ := pem.Decode(b)
	if blk == nil {
		t.Fatalf("%s: no PEM block", path)
	}
	c, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestEtcdAutoTLS starts `strata etcd --auto-tls` on an https client URL
// and checks what etcd does: the self-signed certificate lands in
// <data-dir>/fixtures/client (for 127.0.0.1, valid for
// --self-signed-cert-validity years), stock etcdctl with
// --insecure-skip-tls-verify puts and gets, and etcdctl without it fails
// on verifying the certificate. A restart keeps the certificate.
func TestEtcdAutoTLS(t *testing.T) {
	etcdctl, err := exec.LookPath("etcdctl")
	if err != nil {
		t.Skip("etcdctl not installed")
	}
	dir := t.TempDir()
	data := filepath.Join(dir, "s1")
	client := testport.Addr(t)
	args := []string{"--name=s1", "--data-dir=" + data, "--listen-client-urls=https://" + client,
		"--advertise-client-urls=https://" + client, "--auto-tls", "--self-signed-cert-validity=3"}
	p := startStrataEtcd(t, dir, "s1", args)
	p.waitServed(t)

	certFile := filepath.Join(data, "fixtures", "client", "cert.pem")
	if _, err := os.Stat(filepath.Join(data, "fixtures", "client", "key.pem")); err != nil {
		t.Fatal(err)
	}
	cert := readPEMCert(t, certFile)
	if len(cert.IPAddresses) != 1 || !cert.IPAddresses[0].Equal(net.ParseIP("127.0.0.1")) || !cert.IsCA {
		t.Errorf("certificate for %v (CA %v), want 127.0.0.1, a CA", cert.IPAddresses, cert.IsCA)
	}
	// transport.SelfCert counts a year as 365 days; the certificate's
	// times are whole seconds.
	if days := math.Round(cert.NotAfter.Sub(cert.NotBefore).Hours() / 24); days != 3*365 {
		t.Errorf("certificate valid %v days (%v to %v), want 3 years of 365", days, cert.NotBefore, cert.NotAfter)
	}

	ctl := func(extra ...string) (string, error) {
		a := append([]string{"--endpoints=https://" + client, "--dial-timeout=3s", "--command-timeout=5s"}, extra...)
		out, err := exec.Command(etcdctl, a...).CombinedOutput()
		return string(out), err
	}
	// etcdctl 3.4 skips verifying only with --insecure-transport=false
	// too (so against etcd 3.4's --auto-tls as well).
	skip := []string{"--insecure-skip-tls-verify", "--insecure-transport=false"}
	if out, err := ctl(append(skip, "put", "k", "v1")...); err != nil || strings.TrimSpace(out) != "OK" {
		t.Fatalf("etcdctl --insecure-skip-tls-verify put: %v %q", err, out)
	}
	if out, err := ctl(append(skip, "get", "k", "--print-value-only")...); err != nil || strings.TrimSpace(out) != "v1" {
		t.Fatalf("etcdctl --insecure-skip-tls-verify get: %v %q", err, out)
	}
	if out, err := ctl("get", "k"); err == nil {
		t.Errorf("etcdctl without --insecure-skip-tls-verify: %q, want a failure", out)
	}
	// It fails on verifying: the certificate chains to no CA the client
	// knows; given as the CA, it verifies for 127.0.0.1.
	var unknown x509.UnknownAuthorityError
	if conn, err := tls.Dial("tcp", client, &tls.Config{}); !errors.As(err, &unknown) {
		if err == nil {
			conn.Close()
		}
		t.Errorf("TLS with the system's roots: %v, want x509.UnknownAuthorityError", err)
	}
	if out, err := ctl("--cacert="+certFile, "get", "k", "--print-value-only"); err != nil || strings.TrimSpace(out) != "v1" {
		t.Errorf("etcdctl --cacert fixtures/client/cert.pem get: %v %q", err, out)
	}

	// A restart keeps the certificate (etcd reuses fixtures/client).
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-p.exited
	p2 := startStrataEtcd(t, dir, "s1-again", args)
	p2.waitServed(t)
	if again := readPEMCert(t, certFile); !again.Equal(cert) {
		t.Error("the restart made a new certificate")
	}
	if out, err := ctl(append(skip, "get", "k", "--print-value-only")...); err != nil || strings.TrimSpace(out) != "v1" {
		t.Fatalf("etcdctl get after the restart: %v %q", err, out)
	}
	b, _ := os.ReadFile(p2.log)
	if !strings.Contains(string(b), "kept from an earlier start") {
		t.Errorf("the restart's log does not say the certificate was kept:\n%s", b)
	}
}

// TestEtcdPeerAutoTLS starts three `strata etcd --peer-auto-tls` members
// on https peer URLs: each makes its own certificate in
// <data-dir>/fixtures/peer and serves it on its peer port, the members
// (which cannot verify each other's certificates) form the cluster, and a
// put on one is read on every member.
func TestEtcdPeerAutoTLS(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three processes")
	}
	dir := t.TempDir()
	names := []string{"p1", "p2", "p3"}
	peers, clients := make([]string, 3), make([]string, 3)
	var initial []string
	for i, n := range names {
		peers[i], clients[i] = testport.Addr(t), testport.Addr(t)
		initial = append(initial, n+"=https://"+peers[i])
	}
	procs := make([]*strataEtcdProc, 3)
	for i, n := range names {
		procs[i] = startStrataEtcd(t, dir, n, []string{
			"--name=" + n,
			"--data-dir=" + filepath.Join(dir, n),
			"--listen-client-urls=http://" + clients[i],
			"--advertise-client-urls=http://" + clients[i],
			"--listen-peer-urls=https://" + peers[i],
			"--initial-advertise-peer-urls=https://" + peers[i],
			"--initial-cluster=" + strings.Join(initial, ","),
			"--initial-cluster-state=new",
			"--heartbeat-interval=50",
			"--election-timeout=500",
			"--peer-auto-tls",
			"--peer-client-cert-auth", // no effect with --peer-auto-tls, as in etcd
		})
	}
	for _, p := range procs {
		p.waitServed(t)
	}
	// Each member serves its own certificate on its peer port.
	for i, n := range names {
		cert := readPEMCert(t, filepath.Join(dir, n, "fixtures", "peer", "cert.pem"))
		conn, err := tls.Dial("tcp", peers[i], &tls.Config{InsecureSkipVerify: true})
		if err != nil {
			t.Fatalf("%s: TLS to the peer port: %v", n, err)
		}
		got := conn.ConnectionState().PeerCertificates
		_ = conn.Close()
		if len(got) == 0 || !got[0].Equal(cert) {
			t.Errorf("%s: the peer port does not serve fixtures/peer/cert.pem", n)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cli, err := clientv3.New(clientv3.Config{Endpoints: clients[:1], DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	if _, err := cli.Put(ctx, "k", "over peer auto TLS"); err != nil {
		t.Fatal(err)
	}
	for i, ep := range clients {
		one, err := clientv3.New(clientv3.Config{Endpoints: []string{ep}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
		if err != nil {
			t.Fatal(err)
		}
		got, err := one.Get(ctx, "k")
		_ = one.Close()
		if err != nil || len(got.Kvs) != 1 || string(got.Kvs[0].Value) != "over peer auto TLS" {
			t.Fatalf("get on %s: %v %v", names[i], got, err)
		}
	}
	ml, err := cli.MemberList(ctx)
	if err != nil || len(ml.Members) != 3 {
		t.Fatalf("member list: %v %v", ml, err)
	}
	for _, m := range ml.Members {
		if len(m.PeerURLs) != 1 || !strings.HasPrefix(m.PeerURLs[0], "https://") {
			t.Errorf("member %s peer URLs %v, want one https URL", m.Name, m.PeerURLs)
		}
	}
}
