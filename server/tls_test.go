package server

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// testPKI is a CA with a server and a client certificate, in PEM files.
type testPKI struct {
	dir                   string
	caPool                *x509.CertPool
	client                tls.Certificate
	caFile, certFile, key string
}

func newTestPKI(t *testing.T) *testPKI {
	t.Helper()
	p := &testPKI{dir: t.TempDir()}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "strata test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	p.caPool = x509.NewCertPool()
	p.caPool.AddCert(caCert)
	p.caFile = p.write(t, "ca.pem", "CERTIFICATE", caDER)

	issue := func(serial int64, usage x509.ExtKeyUsage) ([]byte, *ecdsa.PrivateKey) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "strata test"},
			NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour), ExtKeyUsage: []x509.ExtKeyUsage{usage},
			KeyUsage: x509.KeyUsageDigitalSignature, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		return der, key
	}
	srvDER, srvKey := issue(2, x509.ExtKeyUsageServerAuth)
	p.certFile = p.write(t, "server.pem", "CERTIFICATE", srvDER)
	keyDER, err := x509.MarshalECPrivateKey(srvKey)
	if err != nil {
		t.Fatal(err)
	}
	p.key = p.write(t, "server-key.pem", "EC PRIVATE KEY", keyDER)
	cliDER, cliKey := issue(3, x509.ExtKeyUsageClientAuth)
	p.client = tls.Certificate{Certificate: [][]byte{cliDER}, PrivateKey: cliKey}
	return p
}

func (p *testPKI) write(t *testing.T, name, typ string, der []byte) string {
	path := filepath.Join(p.dir, name)
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestMutualTLS serves both APIs over TLS with client certificates
// required: clientv3 and net/http with a client certificate work, a
// client without one and a plain-text client are refused.
func TestMutualTLS(t *testing.T) {
	p := newTestPKI(t)
	cfg := testConfig(t)
	cfg.Server.CertFile, cfg.Server.KeyFile, cfg.Server.ClientCAFile = p.certFile, p.key, p.caFile
	s := startServer(t, cfg)
	withCert := &tls.Config{RootCAs: p.caPool, Certificates: []tls.Certificate{p.client}}

	c := newClient(t, s, withCert)
	ctx := testCtx(t)
	if _, err := c.Put(ctx, "/secure", "yes"); err != nil {
		t.Fatalf("clientv3 put over mutual TLS: %v", err)
	}
	ml, err := c.MemberList(ctx)
	if err != nil || !strings.HasPrefix(ml.Members[0].ClientURLs[0], "https://") {
		t.Errorf("member list over TLS: %+v, %v", ml, err)
	}

	base := "https://" + s.Addr().String()
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: withCert}, Timeout: 10 * time.Second}
	resp, err := hc.Get(base + "/v2/keys/secure")
	if err != nil {
		t.Fatalf("v2 GET over mutual TLS: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"value":"yes"`) {
		t.Errorf("v2 GET over TLS: %d %s", resp.StatusCode, body)
	}
	resp, err = hc.PostForm(base+"/v2/keys/x", url.Values{"value": {"1"}})
	if err == nil {
		resp.Body.Close()
	}

	noCert := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: p.caPool}}, Timeout: 10 * time.Second}
	if resp, err := noCert.Get(base + "/health"); err == nil {
		resp.Body.Close()
		t.Errorf("a client without a certificate got %d", resp.StatusCode)
	}
	plain := &http.Client{Timeout: 10 * time.Second}
	if resp, err := plain.Get("http://" + s.Addr().String() + "/health"); err == nil {
		if resp.StatusCode == 200 {
			t.Errorf("a plain-text client got 200 from the TLS port")
		}
		resp.Body.Close()
	}
}

func TestTLSConfigErrors(t *testing.T) {
	p := newTestPKI(t)
	cfg := testConfig(t)
	cfg.Server.CertFile, cfg.Server.KeyFile = p.certFile, filepath.Join(p.dir, "missing.pem")
	if _, err := Start(cfg, Options{}); err == nil || !strings.Contains(err.Error(), "key_file") {
		t.Errorf("missing key file: %v", err)
	}
	cfg.Server.KeyFile, cfg.Server.ClientCAFile = p.key, p.certFile+"x"
	if _, err := Start(cfg, Options{}); err == nil || !strings.Contains(err.Error(), "client_ca_file") {
		t.Errorf("missing CA file: %v", err)
	}
}
