package server

import (
	"context"
	"crypto/tls"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/stratadb/strata/config"
	"github.com/stratadb/strata/internal/testport"
)

// testConfig is a server configuration on a temporary directory and a
// free loopback port, with small memory.
func testConfig(t testing.TB) *config.Config {
	t.Helper()
	cfg := config.ServeDefault()
	cfg.DBPath = t.TempDir()
	cfg.Server.Listen = testport.Addr(t)
	cfg.Server.MemoryBudgetMB = 16
	return cfg
}

// startServer starts a server on cfg and closes it at the end of the test.
func startServer(t testing.TB, cfg *config.Config) *Server {
	t.Helper()
	s, err := Start(cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

// newClient returns a clientv3 client of s, closed at the end of the test.
func newClient(t testing.TB, s *Server, tlsCfg *tls.Config) *clientv3.Client {
	t.Helper()
	c, err := clientv3.New(clientv3.Config{
		Endpoints:   []string{s.Addr().String()},
		DialTimeout: 5 * time.Second,
		TLS:         tlsCfg,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// ctx returns a context that ends with the test, or after a minute.
func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}
