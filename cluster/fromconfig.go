package cluster

import (
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
	for _, m := range c.Members {
		mc := MemberConfig{Name: m.Name, PeerURLs: []string{m.PeerURL}}
		if m.ClientURL != "" {
			mc.ClientURLs = []string{m.ClientURL}
		}
		rc.Members = append(rc.Members, mc)
	}
	return rc, rc.validate()
}
