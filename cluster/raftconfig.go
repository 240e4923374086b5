package cluster

import (
	"github.com/cockroachdb/pebble/v2/vfs"

	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"slices"
	"time"
)

// RaftConfig configures one member of a raft cluster (StartRaft).
type RaftConfig struct {
	// Name is this member's name; it must be one of Members.
	Name string
	// Dir holds the member's raft state: the raft log store (Dir/log) and
	// received snapshots (Dir/snap). The state machine's data lives
	// elsewhere (the mvcc store).
	Dir string
	// DataDir is where the state machine keeps its data (the server's
	// db_path), named with Dir in the messages that tell an operator what
	// to wipe: a removed member rejoins only with both empty. Empty when
	// the state machine keeps nothing on disk.
	DataDir string
	// ListenPeer is the host:port peer traffic is served on. Ignored when
	// PeerListener is set.
	ListenPeer string
	// PeerListener, if set, is used instead of listening on ListenPeer
	// (tests pass a listener on port 0).
	PeerListener net.Listener
	// Members are the members of the cluster: when the cluster is new, its
	// initial members, from which every member derives the same member IDs
	// and cluster ID; when Join is set, members to ask for the current list.
	Members []MemberConfig
	// Token distinguishes clusters started from the same member list (etcd's
	// initial-cluster-token). The default value is "strata".
	Token string
	// Join starts a member that was added at run time (AddMember, etcdctl
	// member add) with an empty Dir: it learns the cluster ID, its member ID
	// and the member list from the running members, then receives the log
	// or a snapshot from the leader. Ignored once Dir holds a raft log.
	Join bool

	// TickInterval is raft's clock. The default value is 100ms (etcd's
	// heartbeat interval).
	TickInterval time.Duration
	// ElectionTicks is the election timeout in ticks. The default value is
	// 10 (1 s with the default tick, etcd's).
	ElectionTicks int
	// HeartbeatTicks is the leader's heartbeat interval in ticks. The
	// default value is 1.
	HeartbeatTicks int
	// SnapshotEntries is how many entries are applied between snapshots;
	// each snapshot truncates the log. The default value is 10000.
	SnapshotEntries uint64
	// CatchUpEntries is how many entries before a snapshot are kept for
	// followers that are slightly behind, so that they catch up by log
	// rather than by snapshot. The default value is 5000.
	CatchUpEntries uint64
	// RequestTimeout bounds how long Propose, ReadBarrier and member
	// changes wait, whatever the caller's context. The default value is
	// etcd's request timeout: 5 s plus twice the election timeout
	// (TickInterval x ElectionTicks), 7 s with the default ticks, which
	// is also the server's bound on a request without a deadline.
	RequestTimeout time.Duration

	// PeerServerTLS, if set, serves peer traffic over TLS; PeerClientTLS is
	// used to reach peers with https:// URLs.
	PeerServerTLS *tls.Config
	PeerClientTLS *tls.Config

	// Logger receives the member's log lines (elections, snapshots,
	// unreachable peers); nil means silent.
	Logger Logger

	// logFS, if set, holds the raft log instead of the OS file system:
	// tests crash it (vfs.NewCrashableMem) to drop what was not fsynced.
	logFS vfs.FS
}

// MemberConfig is one [[cluster.members]] entry.
type MemberConfig struct {
	Name       string
	PeerURLs   []string
	ClientURLs []string
}

// Logger receives log lines.
type Logger interface {
	Infof(format string, args ...any)
}

const defaultToken = "strata"

func (c *RaftConfig) withDefaults() RaftConfig {
	out := *c
	if out.Token == "" {
		out.Token = defaultToken
	}
	if out.TickInterval <= 0 {
		out.TickInterval = 100 * time.Millisecond
	}
	if out.ElectionTicks <= 0 {
		out.ElectionTicks = 10
	}
	if out.HeartbeatTicks <= 0 {
		out.HeartbeatTicks = 1
	}
	if out.SnapshotEntries == 0 {
		out.SnapshotEntries = 10000
	}
	if out.CatchUpEntries == 0 {
		out.CatchUpEntries = 5000
	}
	if out.RequestTimeout <= 0 {
		out.RequestTimeout = 5*time.Second + 2*time.Duration(out.ElectionTicks)*out.TickInterval
	}
	return out
}

// validate reports every problem of the config at once, each naming the
// setting.
func (c *RaftConfig) validate() error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf("cluster: "+format, args...)) }
	if c.Name == "" {
		add("name is empty: it must name this member, one of the members")
	}
	if c.Dir == "" {
		add("raft directory is empty")
	}
	if c.PeerListener == nil {
		if _, _, err := net.SplitHostPort(c.ListenPeer); err != nil {
			add("listen_peer = %q: must be host:port (%v)", c.ListenPeer, err)
		}
	}
	if len(c.Members) == 0 {
		add("members is empty: list every member (name, peer_url, client_url)")
	}
	names := map[string]bool{}
	urls := map[string]string{}
	found := false
	for i, m := range c.Members {
		if m.Name == "" {
			add("members[%d].name is empty", i)
		}
		if names[m.Name] {
			add("members[%d].name = %q: two members have this name", i, m.Name)
		}
		names[m.Name] = true
		if m.Name == c.Name {
			found = true
		}
		if len(m.PeerURLs) == 0 {
			add("members[%d].peer_url is empty (member %q)", i, m.Name)
		}
		for _, u := range m.PeerURLs {
			if err := checkPeerURL(u); err != nil {
				add("members[%d].peer_url = %q: %v", i, u, err)
			}
			if other, ok := urls[u]; ok {
				add("members[%d].peer_url = %q: also the peer URL of member %q", i, u, other)
			}
			urls[u] = m.Name
		}
		for _, u := range m.ClientURLs {
			if err := checkPeerURL(u); err != nil {
				add("members[%d].client_url = %q: %v", i, u, err)
			}
		}
	}
	if c.Name != "" && len(c.Members) > 0 && !found {
		add("name = %q: not one of the members (%s)", c.Name, memberNames(c.Members))
	}
	return errors.Join(errs...)
}

func memberNames(ms []MemberConfig) string {
	var names []string
	for _, m := range ms {
		names = append(names, m.Name)
	}
	slices.Sort(names)
	return fmt.Sprint(names)
}

// self returns this member's entry of Members.
func (c *RaftConfig) self() MemberConfig {
	for _, m := range c.Members {
		if m.Name == c.Name {
			return m
		}
	}
	return MemberConfig{}
}

// wipeDirs names the directories a member must empty to join again.
func (c *RaftConfig) wipeDirs() string {
	if c.DataDir == "" {
		return c.Dir
	}
	return fmt.Sprintf("both %s (raft) and %s (db_path)", c.Dir, c.DataDir)
}
