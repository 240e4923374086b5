package config

import (
	"strings"
	"testing"
)

// TestPeerInsecureSkipVerify checks cluster.peer_insecure_skip_verify
// loads, and is refused without peer TLS or beside a peer CA, naming the
// key, the value and the rule.
func TestPeerInsecureSkipVerify(t *testing.T) {
	c, err := Parse([]byte(`
[cluster]
name = "s1"
listen_peer = "127.0.0.1:2380"
peer_cert_file = "/p/cert.pem"
peer_key_file = "/p/key.pem"
peer_insecure_skip_verify = true
[[cluster.members]]
name = "s1"
peer_url = "https://127.0.0.1:2380"
client_url = "http://127.0.0.1:2379"
`), "toml")
	if err != nil {
		t.Fatal(err)
	}
	if !c.Cluster.PeerInsecureSkipVerify {
		t.Error("peer_insecure_skip_verify not loaded")
	}
	for _, tc := range []struct {
		name     string
		cert, ca string
		want     string
	}{
		{"without peer TLS", "", "", "cluster.peer_insecure_skip_verify = true: requires cluster.peer_cert_file and cluster.peer_key_file"},
		{"with a peer CA", "/p/cert.pem", "/p/ca.pem", "cluster.peer_insecure_skip_verify = true: conflicts with cluster.peer_trusted_ca_file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bad := c.Clone()
			bad.Cluster.PeerCertFile, bad.Cluster.PeerKeyFile, bad.Cluster.PeerTrustedCAFile = tc.cert, tc.cert, tc.ca
			err := bad.Validate()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}
