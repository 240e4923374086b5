package config

import (
	"fmt"
	"net/url"
	"path/filepath"
)

// ClusterConfig is the [cluster] section: with it, `strata serve` runs as
// one member of a replicated cluster on go.etcd.io/raft/v3 (see
// docs/cluster.md); without it (no name and no members), as a single
// member. Every member's file lists the same members; each names itself in
// name.
//
//	[cluster]
//	name = "s1"
//	listen_peer = "10.0.0.1:2380"
//	[[cluster.members]]
//	name = "s1"
//	peer_url = "http://10.0.0.1:2380"
//	client_url = "http://10.0.0.1:2379"
//	# ... one [[cluster.members]] per member
type ClusterConfig struct {
	// Name is this member's name: one of the members. Empty (with no
	// members) means no cluster. The default value is "".
	Name string `toml:"name" yaml:"name" json:"name"`

	// ListenPeer is the host:port this member serves peer (raft) traffic
	// on, which its peer_url must reach. The default value is "".
	ListenPeer string `toml:"listen_peer" yaml:"listen_peer" json:"listen_peer"`

	// Members are the cluster's members. For a new cluster, every member's
	// file must list the same members (the cluster ID is derived from
	// them); a member whose list disagrees with the cluster's refuses to
	// start. The default value is empty.
	Members []ClusterMember `toml:"members" yaml:"members" json:"members"`

	// Token tells apart clusters started from the same member list
	// (etcd's --initial-cluster-token). Empty means "strata". The default
	// value is "".
	Token string `toml:"token" yaml:"token" json:"token"`

	// Join starts a member added at run time (etcdctl member add) with an
	// empty raft directory: it learns the cluster from the running
	// members (etcd's --initial-cluster-state existing). Ignored once the
	// member has a raft log. The default value is false.
	Join bool `toml:"join" yaml:"join" json:"join"`

	// RaftDir is where the member keeps its raft log and the snapshots it
	// receives. Empty means db_path with ".raft" appended. The default
	// value is "".
	RaftDir string `toml:"raft_dir" yaml:"raft_dir" json:"raft_dir"`

	// HeartbeatIntervalMS is the leader's heartbeat interval, in
	// milliseconds (etcd's --heartbeat-interval); it is raft's tick.
	// 1..10000. The default value is 100.
	HeartbeatIntervalMS int64 `toml:"heartbeat_interval_ms" yaml:"heartbeat_interval_ms" json:"heartbeat_interval_ms"`

	// ElectionTimeoutMS is how long a follower waits without hearing from
	// a leader before it stands for election, in milliseconds (etcd's
	// --election-timeout). At least 5 heartbeat intervals, at most 100000.
	// The default value is 1000.
	ElectionTimeoutMS int64 `toml:"election_timeout_ms" yaml:"election_timeout_ms" json:"election_timeout_ms"`

	// SnapshotEntries is the number of log entries applied between
	// snapshots; each snapshot truncates the raft log, keeping the last
	// 5000 entries (or half of snapshot_entries, if smaller) for followers
	// slightly behind (etcd's --snapshot-count). 1..100000000. The default
	// value is 10000.
	SnapshotEntries int64 `toml:"snapshot_entries" yaml:"snapshot_entries" json:"snapshot_entries"`

	// PeerCertFile and PeerKeyFile are this member's PEM certificate and
	// key for peer traffic: with both set, it serves its peer port over
	// TLS and presents the certificate to the peers it dials (etcd's
	// --peer-cert-file, --peer-key-file). Peer URLs are then https://.
	// Both or neither. The default value is "" (plain HTTP).
	PeerCertFile string `toml:"peer_cert_file" yaml:"peer_cert_file" json:"peer_cert_file"`
	// PeerKeyFile: see PeerCertFile. The default value is "".
	PeerKeyFile string `toml:"peer_key_file" yaml:"peer_key_file" json:"peer_key_file"`
	// PeerTrustedCAFile is a PEM bundle of the CAs that sign the members'
	// peer certificates: peers' certificates are verified against it, and
	// a peer connecting must present one (etcd's --peer-trusted-ca-file
	// with --peer-client-cert-auth). Requires peer_cert_file. The default
	// value is "" (the system's roots; no client certificates asked).
	PeerTrustedCAFile string `toml:"peer_trusted_ca_file" yaml:"peer_trusted_ca_file" json:"peer_trusted_ca_file"`
	// PeerInsecureSkipVerify makes this member accept any certificate
	// from the peers it dials: peer traffic is encrypted but the peers
	// are not authenticated. It is what etcd's --peer-auto-tls does, whose
	// self-signed member certificates chain to no CA (`strata etcd
	// --peer-auto-tls` sets it). Requires peer_cert_file; not with
	// peer_trusted_ca_file, which verifies the peers. The default value
	// is false.
	PeerInsecureSkipVerify bool `toml:"peer_insecure_skip_verify" yaml:"peer_insecure_skip_verify" json:"peer_insecure_skip_verify"`
}

// ClusterMember is one [[cluster.members]] entry.
type ClusterMember struct {
	// Name is the member's name, unique in the cluster.
	Name string `toml:"name" yaml:"name" json:"name"`
	// PeerURL is where the other members reach it (http:// or https://
	// host:port).
	PeerURL string `toml:"peer_url" yaml:"peer_url" json:"peer_url"`
	// ClientURL is where clients reach it, as reported by MemberList.
	ClientURL string `toml:"client_url" yaml:"client_url" json:"client_url"`
}

// defaultCluster returns the [cluster] defaults: no cluster.
func defaultCluster() ClusterConfig {
	return ClusterConfig{HeartbeatIntervalMS: 100, ElectionTimeoutMS: 1000, SnapshotEntries: 10000}
}

// Enabled reports whether the section configures a cluster.
func (c *ClusterConfig) Enabled() bool { return c.Name != "" || len(c.Members) > 0 }

// RaftDirFor returns the raft directory of a member whose store is in
// dbPath: raft_dir, or dbPath + ".raft".
func (c *ClusterConfig) RaftDirFor(dbPath string) string {
	if c.RaftDir != "" {
		return c.RaftDir
	}
	return filepath.Clean(dbPath) + ".raft"
}

// validate adds the problems of the [cluster] section to v.
func (c *ClusterConfig) validate(v *validator) {
	v.between("cluster.heartbeat_interval_ms", c.HeartbeatIntervalMS, 1, 10000)
	if c.ElectionTimeoutMS < 5*c.HeartbeatIntervalMS || c.ElectionTimeoutMS > 100000 {
		v.add("cluster.election_timeout_ms", c.ElectionTimeoutMS, fmt.Sprintf("must be from 5 heartbeat intervals (%d) to 100000", 5*c.HeartbeatIntervalMS))
	}
	v.between("cluster.snapshot_entries", c.SnapshotEntries, 1, 100000000)
	if (c.PeerCertFile == "") != (c.PeerKeyFile == "") {
		if c.PeerCertFile == "" {
			v.add("cluster.peer_cert_file", c.PeerCertFile, "must be set when cluster.peer_key_file is set (TLS needs both)")
		} else {
			v.add("cluster.peer_key_file", c.PeerKeyFile, "must be set when cluster.peer_cert_file is set (TLS needs both)")
		}
	}
	if c.PeerTrustedCAFile != "" && c.PeerCertFile == "" {
		v.add("cluster.peer_trusted_ca_file", c.PeerTrustedCAFile, "requires cluster.peer_cert_file and cluster.peer_key_file: peers are verified over TLS")
	}
	switch {
	case c.PeerInsecureSkipVerify && c.PeerCertFile == "":
		v.add("cluster.peer_insecure_skip_verify", c.PeerInsecureSkipVerify, "requires cluster.peer_cert_file and cluster.peer_key_file: it applies to TLS peer connections")
	case c.PeerInsecureSkipVerify && c.PeerTrustedCAFile != "":
		v.add("cluster.peer_insecure_skip_verify", c.PeerInsecureSkipVerify, "conflicts with cluster.peer_trusted_ca_file, which verifies the peers' certificates: give one")
	}
	if !c.Enabled() {
		return
	}
	if c.Name == "" {
		v.add("cluster.name", c.Name, "must name this member (one of cluster.members)")
	}
	if err := checkListen(c.ListenPeer); err != nil {
		v.add("cluster.listen_peer", c.ListenPeer, err.Error())
	}
	if len(c.Members) == 0 {
		v.add("cluster.members", "[]", "must list every member ([[cluster.members]] with name, peer_url, client_url)")
	}
	names := map[string]bool{}
	peers := map[string]string{}
	found := false
	for i, m := range c.Members {
		key := fmt.Sprintf("cluster.members[%d].", i)
		switch {
		case m.Name == "":
			v.add(key+"name", m.Name, "must not be empty")
		case names[m.Name]:
			v.add(key+"name", m.Name, "two members have this name")
		}
		names[m.Name] = true
		found = found || m.Name == c.Name
		if err := checkMemberURL(m.PeerURL); err != nil {
			v.add(key+"peer_url", m.PeerURL, err.Error())
		} else if other, dup := peers[m.PeerURL]; dup {
			v.add(key+"peer_url", m.PeerURL, "also the peer_url of member "+other)
		}
		peers[m.PeerURL] = m.Name
		if err := checkMemberURL(m.ClientURL); err != nil {
			v.add(key+"client_url", m.ClientURL, err.Error())
		}
	}
	if c.Name != "" && len(c.Members) > 0 && !found {
		v.add("cluster.name", c.Name, "must be the name of one of cluster.members")
	}
}

// checkMemberURL requires scheme://host:port with http or https.
func checkMemberURL(u string) error {
	p, err := url.Parse(u)
	if err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" || p.Port() == "" ||
		(p.Path != "" && p.Path != "/") || p.RawQuery != "" || p.User != nil {
		return fmt.Errorf("must be http://host:port or https://host:port")
	}
	return nil
}
