package server

import (
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/stratadb/strata/internal/testport"
)

// TestListenClientURLs: with cert_file set, listen serves TLS and an http
// URL of server.listen_client_urls serves the same store without TLS, the
// v3 API (clientv3) and HTTP (/health, the gateway) alike, as etcd serves
// "https://IP:2379,http://127.0.0.1:4001"; an https extra URL serves TLS.
func TestListenClientURLs(t *testing.T) {
	cfg := testConfig(t)
	p := newTestPKI(t)
	cfg.Server.CertFile, cfg.Server.KeyFile = p.certFile, p.key
	withCA := &tls.Config{RootCAs: p.caPool}
	plain, secure := "http://"+testport.Addr(t), "https://"+testport.Addr(t)
	cfg.Server.ListenClientURLs = []string{plain, secure}
	s := startServer(t, cfg)
	if got := s.ClientURLs(); len(got) != 2 || got[0] != plain || got[1] != secure {
		t.Fatalf("ClientURLs() = %v, want [%s %s]", got, plain, secure)
	}
	tlsCli := newClient(t, s, withCA)
	ctx := testCtx(t)
	if _, err := tlsCli.Put(ctx, "k", "v"); err != nil {
		t.Fatal(err)
	}
	for _, u := range []string{plain, secure} {
		ccfg := clientv3.Config{Endpoints: []string{u}, DialTimeout: 5 * time.Second}
		if strings.HasPrefix(u, "https") {
			ccfg.TLS = withCA
		}
		c, err := clientv3.New(ccfg)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := c.Get(ctx, "k")
		c.Close()
		if err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "v" {
			t.Fatalf("get through %s: %v, %v", u, resp, err)
		}
	}
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: withCA}}
	for _, u := range []string{plain, secure} {
		resp, err := hc.Post(u+"/v3/kv/range", "application/json", strings.NewReader(`{"key":"aw=="}`))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"value":"dg=="`) {
			t.Fatalf("gateway range through %s: %s %s", u, resp.Status, body)
		}
	}
	// The plain URL speaks no TLS, the https one nothing else.
	ctx2, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx2, http.MethodGet, strings.Replace(secure, "https:", "http:", 1)+"/health", nil)
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Fatalf("plain HTTP to the https URL answered %s", resp.Status)
		}
	}
}
