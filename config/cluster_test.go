package config

import (
	"strings"
	"testing"
)

func TestClusterSectionLoads(t *testing.T) {
	c, err := Parse([]byte(`
[cluster]
name = "s2"
listen_peer = "127.0.0.1:2381"
snapshot_entries = 100
[[cluster.members]]
name = "s1"
peer_url = "http://127.0.0.1:2380"
client_url = "http://127.0.0.1:2379"
[[cluster.members]]
name = "s2"
peer_url = "http://127.0.0.1:2381"
client_url = "http://127.0.0.1:3379"
`), "toml")
	if err != nil {
		t.Fatal(err)
	}
	if !c.Cluster.Enabled() || c.Cluster.Name != "s2" || len(c.Cluster.Members) != 2 || c.Cluster.Members[1].ClientURL != "http://127.0.0.1:3379" ||
		c.Cluster.SnapshotEntries != 100 || c.Cluster.HeartbeatIntervalMS != 100 {
		t.Errorf("cluster = %+v", c.Cluster)
	}
	if got := c.Cluster.RaftDirFor("/var/lib/strata/"); got != "/var/lib/strata.raft" {
		t.Errorf("raft dir = %q", got)
	}
	if Default().Cluster.Enabled() {
		t.Error("the default config has a cluster")
	}
}

func TestClusterSectionErrors(t *testing.T) {
	_, err := Parse([]byte(`
[cluster]
name = "s9"
listen_peer = "nohost"
election_timeout_ms = 200
[[cluster.members]]
name = "s1"
peer_urls = "http://127.0.0.1:2380"
[[cluster.members]]
name = "s1"
peer_url = "ftp://127.0.0.1:2380"
client_url = "http://127.0.0.1"
`), "toml")
	if err == nil {
		t.Fatal("bad [cluster] accepted")
	}
	// Key and type problems are reported first, naming the key.
	if !strings.Contains(err.Error(), "cluster.members[0].peer_urls") || !strings.Contains(err.Error(), "did you mean peer_url") {
		t.Errorf("unknown member key: %v", err)
	}
	c := Default()
	c.Cluster = ClusterConfig{
		Name: "s9", ListenPeer: "nohost", HeartbeatIntervalMS: 100, ElectionTimeoutMS: 200, SnapshotEntries: 0,
		PeerCertFile: "/etc/strata/peer.pem",
		Members: []ClusterMember{
			{Name: "s1", PeerURL: "http://127.0.0.1:2380", ClientURL: "http://127.0.0.1:2379"},
			{Name: "s1", PeerURL: "http://127.0.0.1:2380", ClientURL: "http://127.0.0.1"},
		},
	}
	err = c.Validate()
	if err == nil {
		t.Fatal("bad [cluster] accepted")
	}
	for _, want := range []string{
		"cluster.election_timeout_ms = 200: must be from 5 heartbeat intervals (500)",
		"cluster.snapshot_entries = 0",
		`cluster.listen_peer = "nohost"`,
		`cluster.members[1].name = "s1": two members have this name`,
		`cluster.members[1].peer_url = "http://127.0.0.1:2380": also the peer_url of member s1`,
		`cluster.members[1].client_url = "http://127.0.0.1": must be http://host:port`,
		`cluster.name = "s9": must be the name of one of cluster.members`,
		`cluster.peer_key_file = "": must be set when cluster.peer_cert_file is set`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("missing %q in:\n%v", want, err)
		}
	}
}
