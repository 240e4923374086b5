package server

import (
	"fmt"
	"net/url"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"

	"github.com/stratadb/strata/internal/testport"
)

// startEtcd37 starts etcd 3.7 (embed, the version in go.mod) in the
// test's process on loopback ports, without fsync, and returns a client
// of it: the reference Strata's answers are compared with. It is closed
// at the end of the test. set, if given, changes the configuration.
func startEtcd37(t testing.TB, set ...func(*embed.Config)) *clientv3.Client {
	t.Helper()
	cfg := embed.NewConfig()
	for _, f := range set {
		f(cfg)
	}
	cfg.Dir = t.TempDir()
	cfg.LogLevel = "panic" // its shutdown logs errors of closed listeners
	cfg.UnsafeNoFsync = true
	cu, pu := loopbackURL(t), loopbackURL(t)
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{cu}, []url.URL{cu}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{pu}, []url.URL{pu}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		t.Fatalf("etcd 3.7: %v", err)
	}
	t.Cleanup(e.Close)
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(60 * time.Second):
		t.Fatal("etcd 3.7 not ready after 60 s")
	}
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{cu.Host}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// loopbackURL returns an http URL on a loopback port free a moment ago.
func loopbackURL(t testing.TB) url.URL {
	t.Helper()
	l, err := testport.Listen()
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	u, err := url.Parse(fmt.Sprintf("http://%s", l.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	return *u
}
