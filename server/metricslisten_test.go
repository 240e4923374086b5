package server

import (
	"crypto/tls"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"github.com/stratadb/strata/internal/testport"
)

// probePaths are the paths etcd serves on a metrics URL, in the forms
// kubelet and etcd's docs ask them (older kubeadm releases probed
// /health?exclude=NOSPACE&serializable=true, current ones /livez and
// /readyz).
var probePaths = []string{
	"/health", "/health?exclude=NOSPACE", "/health?serializable=true", "/health?exclude=NOSPACE&serializable=true",
	"/livez", "/livez?verbose", "/livez/serializable_read",
	"/readyz", "/readyz?verbose", "/readyz?exclude=non_learner", "/readyz/linearizable_read",
}

// metricsGet is a GET with a timeout (a listener that accepts but does
// not serve must fail the test, not hang it).
func metricsGet(t *testing.T, url string) httpAnswer {
	t.Helper()
	c := &http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get(url)
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

// sameProbes checks that every probe path answers on the metrics URL
// base as on the client URL: the same status and body.
func sameProbes(t *testing.T, s *Server, base string) {
	t.Helper()
	client := "http://" + s.Addr().String()
	for _, p := range probePaths {
		want, got := metricsGet(t, client+p), metricsGet(t, base+p)
		if got != want {
			t.Errorf("GET %s: metrics URL %d %q, client URL %d %q", p, got.status, got.body, want.status, want.body)
		}
	}
}

// TestMetricsListener serves server.listen_metrics_urls (etcd's
// --listen-metrics-urls): each URL answers /health, /livez and /readyz
// as the client URL does, before and after a NOSPACE alarm, serves
// /metrics, and serves nothing else (no v2 keys, no /version).
func TestMetricsListener(t *testing.T) {
	cfg := testConfig(t)
	cfg.Server.ListenMetricsURLs = []string{"http://" + testport.Addr(t), "http://" + testport.Addr(t)}
	s := startServer(t, cfg)
	urls := s.MetricsURLs()
	if len(urls) != 2 || urls[0] != cfg.Server.ListenMetricsURLs[0] || urls[1] != cfg.Server.ListenMetricsURLs[1] {
		t.Fatalf("MetricsURLs() = %q, want %q", urls, cfg.Server.ListenMetricsURLs)
	}
	for _, u := range urls {
		sameProbes(t, s, u)
		if a := metricsGet(t, u+"/readyz"); a.status != 200 || a.body != "ok\n" {
			t.Errorf("GET %s/readyz: %d %q", u, a.status, a.body)
		}
		a := metricsGet(t, u+"/metrics")
		if a.status != 200 || !strings.Contains(a.body, "\netcd_server_has_leader 1\n") {
			t.Errorf("GET %s/metrics: %d, etcd_server_has_leader 1 missing", u, a.status)
		}
		for _, p := range []string{"/version", "/v2/keys/k", "/v2/members", "/v3/kv/range"} {
			if a := metricsGet(t, u+p); a.status != http.StatusNotFound {
				t.Errorf("GET %s%s: %d, want 404 (only metrics and probes are served there)", u, p, a.status)
			}
		}
	}

	c := newClient(t, s, nil)
	st, err := c.Status(testCtx(t), s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	nospace := &pb.AlarmMember{MemberID: st.Header.MemberId, Alarm: pb.AlarmType_NOSPACE}
	if _, err := pb.NewMaintenanceClient(c.ActiveConnection()).Alarm(testCtx(t),
		&pb.AlarmRequest{Action: pb.AlarmRequest_ACTIVATE, MemberID: nospace.MemberID, Alarm: nospace.Alarm}); err != nil {
		t.Fatal(err)
	}
	waitAlarms(t, c, nospace)
	for _, u := range urls {
		if a := metricsGet(t, u+"/health"); a.status != 503 || a.body != `{"health":"false","reason":"ALARM NOSPACE"}`+"\n" {
			t.Errorf("GET %s/health with NOSPACE raised: %d %q, want 503 ALARM NOSPACE", u, a.status, a.body)
		}
		if a := metricsGet(t, u+"/health?exclude=NOSPACE&serializable=true"); a.status != 200 {
			t.Errorf("GET %s/health?exclude=NOSPACE&serializable=true with NOSPACE raised: %d %q, want 200", u, a.status, a.body)
		}
		sameProbes(t, s, u)
	}
}

// TestMetricsListenerTLS serves an https metrics URL with the client
// URL's certificate and, with client_ca_file, client certificates
// required, as etcd's metrics listener uses its client TLS.
func TestMetricsListenerTLS(t *testing.T) {
	p := newTestPKI(t)
	cfg := testConfig(t)
	cfg.Server.CertFile, cfg.Server.KeyFile, cfg.Server.ClientCAFile = p.certFile, p.key, p.caFile
	cfg.Server.ListenMetricsURLs = []string{"https://" + testport.Addr(t), "http://" + testport.Addr(t)}
	s := startServer(t, cfg)
	tlsURL, plainURL := s.MetricsURLs()[0], s.MetricsURLs()[1]
	get := func(c *http.Client, u string) (int, string, error) {
		resp, err := c.Get(u)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), err
	}
	withCert := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: p.caPool,
		Certificates: []tls.Certificate{p.client}}}, Timeout: 10 * time.Second}
	for _, path := range []string{"/readyz", "/livez", "/health"} {
		code, body, err := get(withCert, tlsURL+path)
		if err != nil || code != 200 {
			t.Errorf("GET %s%s with a client certificate: %d %q %v", tlsURL, path, code, body, err)
		}
		// An http metrics URL beside TLS client URLs is plain text, as
		// kubeadm's http://127.0.0.1:2381 beside its https client URLs.
		code, body, err = get(&http.Client{Timeout: 10 * time.Second}, plainURL+path)
		if err != nil || code != 200 {
			t.Errorf("GET %s%s: %d %q %v", plainURL, path, code, body, err)
		}
	}
	noCert := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: p.caPool}}, Timeout: 10 * time.Second}
	if code, _, err := get(noCert, tlsURL+"/readyz"); err == nil {
		t.Errorf("GET %s/readyz without a client certificate: %d, want the handshake refused", tlsURL, code)
	}
}

// TestMetricsListenerInUse fails Start, naming the key, when a metrics
// URL's address is taken, and leaves the client address free again.
func TestMetricsListenerInUse(t *testing.T) {
	ln, err := testport.Listen()
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	cfg := testConfig(t)
	cfg.Server.ListenMetricsURLs = []string{"http://" + ln.Addr().String()}
	s, err := Start(cfg, Options{})
	if err == nil {
		_ = s.Close()
		t.Fatal("Start with a metrics URL in use: no error")
	}
	if want := `server: listen_metrics_urls = "http://` + ln.Addr().String() + `"`; !strings.Contains(err.Error(), want) {
		t.Errorf("Start: %v\nwant it to contain %s", err, want)
	}
	// The store and the client address were released.
	cfg.Server.ListenMetricsURLs = nil
	startServer(t, cfg)
}
