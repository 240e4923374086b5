package kubetest

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	storagetesting "k8s.io/apiserver/pkg/storage/testing"

	"github.com/stratadb/strata/internal/memberproc"
)

// kubeletProbe is one of the probes kubeadm puts in etcd's static pod
// (staticpodutil.LivenessProbe, ReadinessProbe, StartupProbe): an HTTP
// GET of the metrics URL, every period, failed past timeout or on a
// status outside 200-399.
type kubeletProbe struct {
	path    string
	period  time.Duration
	timeout time.Duration
}

// kubeadmProbes are kubeadm v1.37's: liveness /livez every 10 s and
// readiness /readyz every second, each with a 15 s timeout.
var kubeadmProbes = []kubeletProbe{
	{path: "/livez", period: 10 * time.Second, timeout: 15 * time.Second},
	{path: "/readyz", period: time.Second, timeout: 15 * time.Second},
}

// probeOnce GETs url as kubelet's HTTP prober does (its User-Agent and
// Accept headers) and returns the status and body, or the error.
func probeOnce(url string, timeout time.Duration) (int, string, error) {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("User-Agent", "kube-probe/1.37")
	req.Header.Set("Accept", "*/*")
	resp, err := (&http.Client{Timeout: timeout}).Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// kubeletProber runs kubeadm's probes against every member for the
// whole run, as kubelet would, and counts the answers.
type kubeletProber struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex
	ok     map[string]int
	failed map[string][]string
}

func startKubeletProber(c *memberproc.Cluster) *kubeletProber {
	ctx, cancel := context.WithCancel(context.Background())
	p := &kubeletProber{cancel: cancel, ok: map[string]int{}, failed: map[string][]string{}}
	for _, m := range c.Members {
		for _, pr := range kubeadmProbes {
			p.wg.Go(func() {
				tick := time.NewTicker(pr.period)
				defer tick.Stop()
				for {
					select {
					case <-ctx.Done():
						return
					case <-tick.C:
					}
					key := m.Name + " " + pr.path
					code, body, err := probeOnce(m.MetricsURL+pr.path, pr.timeout)
					p.mu.Lock()
					if err == nil && code >= 200 && code < 400 {
						p.ok[key]++
					} else if ctx.Err() == nil {
						p.failed[key] = append(p.failed[key], fmt.Sprintf("%s: %d %q %v", time.Now().Format(time.TimeOnly), code, body, err))
					}
					p.mu.Unlock()
				}
			})
		}
	}
	return p
}

// stop ends the probes, prints their counts to stderr and returns the
// number of failed probes.
func (p *kubeletProber) stop() int {
	p.cancel()
	p.wg.Wait()
	var failed int
	for key, n := range p.ok {
		fmt.Fprintf(os.Stderr, "kubetest: kubelet probe %s: %d passed, %d failed\n", key, n, len(p.failed[key]))
	}
	for key, fs := range p.failed {
		failed += len(fs)
		for _, f := range fs {
			fmt.Fprintf(os.Stderr, "kubetest: kubelet probe %s failed at %s\n", key, f)
		}
	}
	return failed
}

// kubeadmFlags are the flags of kubeadm v1.37's getEtcdCommand for a
// joining stacked member, which StartKubeadm must have passed.
var kubeadmFlags = []string{"advertise-client-urls", "cert-file", "client-cert-auth=true", "data-dir",
	"feature-gates=InitialCorruptCheck=true", "initial-advertise-peer-urls", "initial-cluster", "initial-cluster-state=existing",
	"key-file", "listen-client-urls", "listen-metrics-urls", "listen-peer-urls", "name", "peer-cert-file",
	"peer-client-cert-auth=true", "peer-key-file", "peer-trusted-ca-file", "snapshot-count=10000", "trusted-ca-file",
	"watch-progress-notify-interval=5s"}

// TestKubeadmControlPlane is the fast form of kubeadm mode
// (STRATA_KUBETEST_SERVER=kubeadm runs the whole suite so): three
// `strata etcd` members started from kubeadm's etcd command line, one by
// one as kubeadm init and join do (learner, then promote), answer
// kubelet's probes on the metrics URL, serve clientv3 and a few of
// Kubernetes' storage tests over mutual TLS with the apiserver's client
// certificate, and refuse a client without a certificate or with one
// from another CA.
func TestKubeadmControlPlane(t *testing.T) {
	if os.Getenv(serverEnv) == "kubeadm" || os.Getenv(endpointsEnv) != "" {
		t.Skip("the whole suite runs in kubeadm mode, or on servers already running")
	}
	began := time.Now()
	kc, err := memberproc.StartKubeadm("..", memberproc.KubeadmOptions{Members: 3})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { kc.Stop(t.Failed()) })
	t.Logf("three members started, joined and promoted in %v", time.Since(began).Round(time.Millisecond))

	last := kc.Commands[len(kc.Commands)-1]
	t.Logf("cp3's manifest command:\n  %s", strings.Join(last, "\n    "))
	for _, f := range kubeadmFlags {
		found := false
		for _, a := range last[1:] {
			found = found || a == "--"+f || strings.HasPrefix(a, "--"+f+"=") && !strings.Contains(f, "=")
		}
		if !found {
			t.Errorf("cp3's command line lacks --%s", f)
		}
	}
	if n := len(last) - 1; n != len(kubeadmFlags) {
		t.Errorf("cp3's command line has %d flags, kubeadm's has %d", n, len(kubeadmFlags))
	}

	// kubelet's probes, on each member's metrics URL (http).
	for _, m := range kc.Members {
		for _, path := range []string{"/livez", "/readyz", "/health"} {
			code, body, err := probeOnce(m.MetricsURL+path, 15*time.Second)
			if err != nil || code != http.StatusOK {
				t.Errorf("%s: GET %s%s: %d %q %v", m.Name, m.MetricsURL, path, code, body, err)
			}
		}
		if code, _, err := probeOnce(m.MetricsURL+"/version", 15*time.Second); err != nil || code != http.StatusNotFound {
			t.Errorf("%s: GET %s/version: %d %v, want 404 (metrics and probes only)", m.Name, m.MetricsURL, code, err)
		}
	}

	// clientv3 over mutual TLS: a put through one member, read and
	// watched through the others.
	eps := kc.Endpoints()
	one := func(ep string, tlsCfg *tls.Config) *clientv3.Client {
		c, err := clientv3.New(clientv3.Config{Endpoints: []string{ep}, DialTimeout: 3 * time.Second, TLS: tlsCfg, Logger: zap.NewNop()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	wch := one(eps[1], kc.APIServerTLS).Watch(ctx, "/registry/pods/", clientv3.WithPrefix())
	put, err := one(eps[0], kc.APIServerTLS).Put(ctx, "/registry/pods/default/p1", "v1")
	if err != nil {
		t.Fatalf("put over mutual TLS: %v", err)
	}
	got, err := one(eps[2], kc.APIServerTLS).Get(ctx, "/registry/pods/default/p1")
	if err != nil || len(got.Kvs) != 1 || string(got.Kvs[0].Value) != "v1" {
		t.Fatalf("get on %s over mutual TLS: %v %v", eps[2], got, err)
	}
	select {
	case wr := <-wch:
		if len(wr.Events) != 1 || wr.Events[0].Kv.ModRevision != put.Header.Revision {
			t.Errorf("watch on %s: %+v, want the put at revision %d", eps[1], wr, put.Header.Revision)
		}
	case <-ctx.Done():
		t.Fatal("watch over mutual TLS: no event")
	}
	ml, err := one(eps[0], kc.HealthcheckTLS).MemberList(ctx)
	if err != nil || len(ml.Members) != 3 {
		t.Fatalf("member list with the healthcheck client certificate: %v %v", ml, err)
	}
	for _, m := range ml.Members {
		if m.IsLearner || len(m.ClientURLs) == 0 || !strings.HasPrefix(m.ClientURLs[0], "https://") {
			t.Errorf("member %s: learner %v, client URLs %v (want promoted, https)", m.Name, m.IsLearner, m.ClientURLs)
		}
	}

	// Refused: no client certificate, and a certificate of another CA
	// (the handshake fails, with the server's alert); plain text to the
	// https client URL gets no answer clientv3 can use.
	for name, tc := range map[string]struct {
		cfg  *tls.Config
		want string
	}{
		"no client certificate": {&tls.Config{RootCAs: kc.CAPool}, "certificate required"},
		// Sent whatever CAs the server names (Certificates would send
		// none that does not chain to one of them).
		"another CA's certificate": {&tls.Config{RootCAs: kc.CAPool, GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			c := strangerCert(t)
			return &c, nil
		}}, "unknown certificate authority"},
	} {
		if err := handshake(eps[0], tc.cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want the handshake refused (%s)", name, err, tc.want)
		}
	}
	if err := handshake(eps[0], kc.APIServerTLS); err != nil {
		t.Errorf("handshake with the apiserver's client certificate: %v", err)
	}
	plainCtx, plainCancel := context.WithTimeout(context.Background(), 2*time.Second)
	if _, err := one(eps[0], nil).Get(plainCtx, "/registry/pods/default/p1"); err == nil {
		t.Error("plain text to the https client URL: get succeeded")
	}
	plainCancel()

	t.Logf("probes, clientv3 and refusals checked at %v", time.Since(began).Round(time.Millisecond))
	// A few of Kubernetes' storage tests over the apiserver's client
	// certificate, on all three members.
	on := onServers(&servers{endpoints: eps, tls: kc.APIServerTLS})
	t.Run("Create", func(t *testing.T) {
		ctx, store, _ := testSetup(t, on)
		storagetesting.RunTestCreate(ctx, t, store, checkStorageInvariants(store))
	})
	t.Run("GuaranteedUpdate", func(t *testing.T) {
		ctx, store, _ := testSetup(t, on)
		storagetesting.RunTestGuaranteedUpdate(ctx, t, store, checkStorageInvariants(store))
	})
	t.Run("ListPaging", func(t *testing.T) {
		ctx, store, _ := testSetup(t, on)
		storagetesting.RunTestListPaging(ctx, t, store)
	})
	t.Run("Watch", func(t *testing.T) {
		ctx, store, _ := testSetup(t, on)
		storagetesting.RunTestWatch(ctx, t, store)
	})

	// The probes still pass after the load.
	for _, m := range kc.Members {
		for _, pr := range kubeadmProbes {
			if code, body, err := probeOnce(m.MetricsURL+pr.path, pr.timeout); err != nil || code != http.StatusOK || body != "ok\n" {
				t.Errorf("%s: GET %s%s: %d %q %v", m.Name, m.MetricsURL, pr.path, code, body, err)
			}
		}
	}
}

// handshake connects to addr over TLS with cfg and makes an HTTP/1.1
// request: with TLS 1.3 a client certificate the server refuses shows as
// the server's alert on the first read.
func handshake(addr string, cfg *tls.Config) error {
	d := &net.Dialer{Timeout: 5 * time.Second}
	conn, err := tls.DialWithDialer(d, "tcp", addr, cfg)
	if err != nil {
		return err
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(5 * time.Second)); err != nil {
		return err
	}
	if _, err := io.WriteString(conn, "GET /health HTTP/1.1\r\nHost: "+addr+"\r\nConnection: close\r\n\r\n"); err != nil {
		return err
	}
	b, err := io.ReadAll(conn)
	if err != nil {
		return err
	}
	if !strings.HasPrefix(string(b), "HTTP/1.1 200") {
		return fmt.Errorf("GET /health: %.40q", b)
	}
	return nil
}

// strangerCert is a client certificate of a CA the members do not trust.
func strangerCert(t *testing.T) tls.Certificate {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(7), Subject: pkix.Name{CommonName: "kube-apiserver-etcd-client"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, KeyUsage: x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}
