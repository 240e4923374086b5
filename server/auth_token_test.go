package server

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/metadata"
)

// setupAuth creates root, a role reader with read on /pub/ and the given
// users holding it, writes /pub/a and /secret, and enables auth.
func setupAuth(t testing.TB, c *clientv3.Client, users ...string) {
	t.Helper()
	ctx := testCtx(t)
	steps := []func() error{
		func() error { _, err := c.UserAdd(ctx, "root", "rootpw"); return err },
		func() error { _, err := c.UserGrantRole(ctx, "root", "root"); return err },
		func() error { _, err := c.RoleAdd(ctx, "reader"); return err },
		func() error {
			_, err := c.RoleGrantPermission(ctx, "reader", "/pub/", clientv3.GetPrefixRangeEnd("/pub/"), clientv3.PermissionType(clientv3.PermRead))
			return err
		},
		func() error { _, err := c.Put(ctx, "/pub/a", "1"); return err },
		func() error { _, err := c.Put(ctx, "/secret", "s"); return err },
	}
	for _, u := range users {
		steps = append(steps,
			func() error { _, err := c.UserAdd(ctx, u, u+"pw"); return err },
			func() error { _, err := c.UserGrantRole(ctx, u, "reader"); return err })
	}
	for _, step := range append(steps, func() error { _, err := c.AuthEnable(ctx); return err }) {
		if err := step(); err != nil {
			t.Fatal(err)
		}
	}
}

// jwtKeys writes an RSA key pair as PEM files and returns their paths.
func jwtKeys(t *testing.T) (pub, priv string) {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	pubDER, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	pub, priv = filepath.Join(dir, "jwt.pub"), filepath.Join(dir, "jwt.key")
	if err := os.WriteFile(pub, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(priv, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}), 0o600); err != nil {
		t.Fatal(err)
	}
	return pub, priv
}

// TestAuthJWT: with auth_token in etcd's jwt form, Authenticate hands out
// RS256 tokens signed with the configured key that carry the user and the
// auth revision; a token from before an auth change is refused with
// etcd's "revision of auth store is old", and a token survives a restart
// (it is signed, not kept by the member).
func TestAuthJWT(t *testing.T) {
	pub, priv := jwtKeys(t)
	cfg := testConfig(t)
	cfg.Server.BcryptCost = 4
	cfg.Server.AuthToken = "jwt,pub-key=" + pub + ",priv-key=" + priv + ",sign-method=RS256,ttl=1h"
	s := startServer(t, cfg)
	setupAuth(t, newClient(t, s, nil), "alice")
	ctx := testCtx(t)
	a := pb.NewAuthClient(newClient(t, s, nil).ActiveConnection())
	resp, err := a.Authenticate(ctx, &pb.AuthenticateRequest{Name: "alice", Password: "alicepw"})
	if err != nil {
		t.Fatal(err)
	}
	parts := strings.Split(resp.Token, ".")
	if len(parts) != 3 {
		t.Fatalf("token %q is not a JWT", resp.Token)
	}
	var header struct{ Alg string }
	var claims struct {
		Username string
		Revision uint64
	}
	for i, v := range []any{&header, &claims} {
		b, err := base64.RawURLEncoding.DecodeString(parts[i])
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, v); err != nil {
			t.Fatal(err)
		}
	}
	st, err := a.AuthStatus(metadata.AppendToOutgoingContext(ctx, rpctypes.TokenFieldNameGRPC, resp.Token), &pb.AuthStatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if header.Alg != "RS256" || claims.Username != "alice" || claims.Revision != st.AuthRevision {
		t.Errorf("token header %+v claims %+v, want RS256, alice, auth revision %d", header, claims, st.AuthRevision)
	}
	read := func(token string) error {
		kv := pb.NewKVClient(newClient(t, s, nil).ActiveConnection())
		_, err := kv.Range(metadata.AppendToOutgoingContext(ctx, rpctypes.TokenFieldNameGRPC, token), &pb.RangeRequest{Key: []byte("/pub/a")})
		return err
	}
	if err := read(resp.Token); err != nil {
		t.Fatalf("a fresh token: %v", err)
	}
	// Restart: the same token still works.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = startServer(t, cfg)
	if err := read(resp.Token); err != nil {
		t.Fatalf("the token after a restart: %v", err)
	}
	// Any auth change moves the revision: the old token is refused.
	root, err := authClient(t, s, "root", "rootpw")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := root.RoleAdd(ctx, "other"); err != nil {
		t.Fatal(err)
	}
	if err := read(resp.Token); !errors.Is(rpctypes.Error(err), rpctypes.ErrAuthOldRevision) {
		t.Errorf("a token from before an auth change: %v, want %v", err, rpctypes.ErrAuthOldRevision)
	}
	// A clientv3 client re-authenticates by itself.
	alice, err := authClient(t, s, "alice", "alicepw")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := alice.Get(ctx, "/pub/a"); err != nil {
		t.Errorf("alice with a new token: %v", err)
	}
}

// TestAuthTokenConfigErrors: a jwt token whose key file is missing, or an
// unknown sign method, stops the start with an error naming the option.
func TestAuthTokenConfigErrors(t *testing.T) {
	pub, priv := jwtKeys(t)
	for _, tc := range []struct{ token, want string }{
		{"jwt,pub-key=/nonexistent.pub,sign-method=RS256", "auth_token"},
		{"jwt,pub-key=" + pub + ",priv-key=" + priv + ",sign-method=XX999", "auth_token"},
	} {
		cfg := testConfig(t)
		cfg.Server.AuthToken = tc.token
		s, err := Start(cfg, Options{})
		if err == nil {
			_ = s.Close()
			t.Errorf("auth_token = %q: started", tc.token)
			continue
		}
		t.Logf("auth_token = %q: %v", tc.token, err)
		if !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), tc.token) {
			t.Errorf("auth_token = %q: %v, want it to name %s and the value", tc.token, err, tc.want)
		}
	}
}

// TestAuthClientCertCN: over mutual TLS the common name of the client's
// certificate is the user of a request without a token, as in etcd; a
// user without a password cannot Authenticate with one.
func TestAuthClientCertCN(t *testing.T) {
	p := newTestPKI(t) // the client certificate's CN is "strata test"
	cfg := testConfig(t)
	cfg.Server.CertFile, cfg.Server.KeyFile, cfg.Server.ClientCAFile = p.certFile, p.key, p.caFile
	cfg.Server.BcryptCost = 4
	s := startServer(t, cfg)
	c := newClient(t, s, &tls.Config{RootCAs: p.caPool, Certificates: []tls.Certificate{p.client}})
	ctx := testCtx(t)
	if _, err := c.UserAddWithOptions(ctx, "strata test", "", &clientv3.UserAddOptions{NoPassword: true}); err != nil {
		t.Fatal(err)
	}
	setupAuth(t, c)
	// The certificate names a user without the root role: now refused
	// the admin calls, given what reader allows.
	if _, err := c.UserGrantRole(ctx, "strata test", "reader"); !errors.Is(err, rpctypes.ErrPermissionDenied) {
		t.Fatalf("grant by the certificate's user: %v, want %v", err, rpctypes.ErrPermissionDenied)
	}
	if _, err := c.Get(ctx, "/pub/a"); !errors.Is(err, rpctypes.ErrPermissionDenied) {
		t.Errorf("before the grant: %v, want %v", err, rpctypes.ErrPermissionDenied)
	}
	root, err := clientv3.New(clientv3.Config{Endpoints: []string{s.Addr().String()}, Username: "root", Password: "rootpw",
		TLS: &tls.Config{RootCAs: p.caPool, Certificates: []tls.Certificate{p.client}}})
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	if _, err := root.UserGrantRole(ctx, "strata test", "reader"); err != nil {
		t.Fatal(err)
	}
	if got, err := c.Get(ctx, "/pub/a"); err != nil || len(got.Kvs) != 1 {
		t.Errorf("the certificate's user reads /pub/a: %+v, %v", got, err)
	}
	if _, err := c.Get(ctx, "/secret"); !errors.Is(err, rpctypes.ErrPermissionDenied) {
		t.Errorf("the certificate's user reads /secret: %v, want %v", err, rpctypes.ErrPermissionDenied)
	}
	// etcd answers a password for a user without one with its auth
	// package's own message, under codes.Unknown.
	if _, err := c.Authenticate(ctx, "strata test", "guess"); err == nil || !strings.Contains(err.Error(), "password was given for no password user") {
		t.Errorf("a password for a user without one: %v", err)
	}
}
