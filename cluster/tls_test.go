package cluster

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// writeCert writes a PEM certificate for 127.0.0.1 and its key, signed
// by the CA (ca nil: self-signed, a CA itself), and returns the paths.
func writeCert(t *testing.T, dir, name string, ca *x509.Certificate, caKey *ecdsa.PrivateKey) (certFile, keyFile string, cert *x509.Certificate, key *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: name},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	parent, signer := tmpl, key
	if ca == nil {
		tmpl.IsCA, tmpl.BasicConstraintsValid = true, true
	} else {
		parent, signer = ca, caKey
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, signer)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ = x509.ParseCertificate(der)
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, name+".pem"), filepath.Join(dir, name+"-key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile, cert, key
}

// TestRaftPeerTLS: members talk over mutual TLS (https peer URLs,
// certificates signed by the trusted CA); a client without a certificate
// is refused at the handshake.
func TestRaftPeerTLS(t *testing.T) {
	dir := t.TempDir()
	caFile, _, ca, caKey := writeCert(t, dir, "ca", nil, nil)
	certFile, keyFile, _, _ := writeCert(t, dir, "member", ca, caKey)
	server, client, err := PeerTLS(certFile, keyFile, caFile)
	if err != nil {
		t.Fatal(err)
	}
	c := newTestClusterScheme(t, 3, func(cfg *RaftConfig) {
		cfg.PeerServerTLS, cfg.PeerClientTLS = server, client
	}, "https")
	c.leader()
	for i := range 10 {
		if _, err := c.put(i%3, fmt.Sprintf("k%d", i), "v"); err != nil {
			t.Fatal(err)
		}
	}
	c.converge()
	// A client that trusts the CA but has no certificate is refused.
	noCert := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: client.RootCAs}}}
	if resp, err := noCert.Get(c.members[0].PeerURLs[0] + pathMembers); err == nil {
		resp.Body.Close()
		t.Fatal("a client without a certificate reached the peer port")
	}
	if _, _, err := PeerTLS(certFile, caFile, ""); err == nil {
		t.Fatal("PeerTLS accepted a certificate with the wrong key")
	}
}
