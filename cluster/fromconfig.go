package cluster

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"time"

	"github.com/stratadb/strata/config"
)

// StartFromConfig starts the raft member that cfg's [cluster] section
// describes over sm (the server calls it when cfg.Cluster.Enabled()). The
// raft directory is cluster.raft_dir, or db_path with ".raft" appended.
func StartFromConfig(cfg *config.Config, sm StateMachine, logger Logger) (Node, error) {
	rc, err := RaftConfigFrom(cfg)
	if err != nil {
		return nil, err
	}
	rc.Logger = logger
	return StartRaft(rc, sm)
}

// RaftConfigFrom converts a validated config's [cluster] section.
func RaftConfigFrom(cfg *config.Config) (RaftConfig, error) {
	c := cfg.Cluster
	rc := RaftConfig{
		Name:            c.Name,
		Dir:             c.RaftDirFor(cfg.DBPath),
		DataDir:         cfg.DBPath,
		ListenPeer:      c.ListenPeer,
		Token:           c.Token,
		Join:            c.Join,
		TickInterval:    time.Duration(c.HeartbeatIntervalMS) * time.Millisecond,
		ElectionTicks:   int(max(1, c.ElectionTimeoutMS/max(1, c.HeartbeatIntervalMS))),
		HeartbeatTicks:  1,
		SnapshotEntries: uint64(c.SnapshotEntries),
		// etcd keeps 5000 entries behind a snapshot for slow followers;
		// a small snapshot_entries keeps proportionally fewer.
		CatchUpEntries: uint64(max(1, min(5000, c.SnapshotEntries/2))),
	}
	if c.PeerCertFile != "" {
		var err error
		if rc.PeerServerTLS, rc.PeerClientTLS, err = PeerTLSFrom(&c); err != nil {
			return rc, err
		}
	}
	for _, m := range c.Members {
		mc := MemberConfig{Name: m.Name, PeerURLs: []string{m.PeerURL}}
		if m.ClientURL != "" {
			mc.ClientURLs = []string{m.ClientURL}
		}
		rc.Members = append(rc.Members, mc)
	}
	return rc, rc.validate()
}

// PeerTLSFrom is PeerTLS for a [cluster] section with peer_cert_file set:
// with peer_insecure_skip_verify, the client side accepts any peer
// certificate, as etcd's transport.TLSInfo.ClientConfig does for the
// self-signed certificates of --peer-auto-tls (the server side then asks
// for none, as there is no peer_trusted_ca_file).
func PeerTLSFrom(c *config.ClusterConfig) (server, client *tls.Config, err error) {
	server, client, err = PeerTLS(c.PeerCertFile, c.PeerKeyFile, c.PeerTrustedCAFile)
	if err != nil {
		return nil, nil, err
	}
	client.InsecureSkipVerify = c.PeerInsecureSkipVerify
	return server, client, nil
}

// PeerTLS loads a member's peer certificate and key and, if caFile is set,
// the CAs of its peers: the server side then requires and verifies the
// connecting member's certificate, and the client side verifies the
// peer's against them (etcd's --peer-client-cert-auth).
func PeerTLS(certFile, keyFile, caFile string) (server, client *tls.Config, err error) {
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, nil, fmt.Errorf("cluster: peer_cert_file = %q, peer_key_file = %q: %w", certFile, keyFile, err)
	}
	server = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	client = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, nil, fmt.Errorf("cluster: peer_trusted_ca_file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, nil, fmt.Errorf("cluster: peer_trusted_ca_file = %q: no PEM certificate in it", caFile)
		}
		server.ClientCAs, server.ClientAuth = pool, tls.RequireAndVerifyClientCert
		client.RootCAs = pool
	}
	return server, client, nil
}
