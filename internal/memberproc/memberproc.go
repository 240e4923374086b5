// Package memberproc runs servers under test as processes of their own:
// `strata serve` members (one, or a raft cluster), `strata etcd` members
// started from kubeadm's etcd command line (kubeadm.go) and etcd 3.7.3
// members (internal/bench/etcd37, embed), built from this repository, on
// loopback ports, each killed with SIGKILL and restarted on its data when
// a test says so. It is the launcher of the test modules that drive
// etcd's own tests against real processes (robustness/, kubetest/):
//
//	c, err := memberproc.StartStrata(repoRoot, memberproc.StrataOptions{Members: 3})
//	defer c.Stop(false)
//	lead := c.Leader()
//	lead.Kill()
//	err = lead.Start()
//
// Members die with the test binary (Pdeathsig), whatever kills it.
package memberproc

import (
	"context"
	"crypto/tls"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/stratadb/strata/internal/testport"
)

// Member is one server process under test.
type Member struct {
	// Name is the member's name in its cluster (s1, e1, ...).
	Name string
	// Client is the member's client address, 127.0.0.1:PORT.
	Client string
	// Dir is the member's directory: its data (and, for Strata, its raft
	// log) are under it.
	Dir string
	// RaftDir is a Strata member's raft log directory ("" for etcd).
	RaftDir string
	// TLS is the client TLS of a member whose client URLs are https
	// (nil: plain text).
	TLS *tls.Config
	// MetricsURL is the member's first metrics URL ("" without one).
	MetricsURL string

	args    []string
	logPath string

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
}

// Cluster is the members a Start function started.
type Cluster struct {
	// Dir holds every member's directory, config and log.
	Dir     string
	Members []*Member
}

// Endpoints returns the members' client addresses.
func (c *Cluster) Endpoints() []string {
	eps := make([]string, len(c.Members))
	for i, m := range c.Members {
		eps[i] = m.Client
	}
	return eps
}

// StrataOptions configures the `strata serve` members of StartStrata.
type StrataOptions struct {
	// Members is the number of members: 1 is a server alone, more a raft
	// cluster ([cluster] with every member listed).
	Members int
	// NoSync sets sync = false (Kubernetes' tests run etcd without
	// fsync); the raft log fsyncs anyway.
	NoSync bool
	// ProgressNotify is server.watch_progress_notify_interval_ms; 0 leaves
	// Strata's default.
	ProgressNotify time.Duration
	// ClusterTOML is added to every member's [cluster] section, e.g.
	// "snapshot_entries = 1000000\n".
	ClusterTOML string
}

// StartStrata builds `strata` from the repository at repoRoot and starts
// opts.Members members of it in a new directory under the system's
// temporary directory.
func StartStrata(repoRoot string, opts StrataOptions) (*Cluster, error) {
	c, bin, err := newCluster(repoRoot, "./cmd/strata", "strata", opts.Members)
	if err != nil {
		return nil, err
	}
	type addrs struct{ client, peer string }
	as := make([]addrs, opts.Members)
	for i := range as {
		if as[i].client, err = freeAddr(); err == nil {
			as[i].peer, err = freeAddr()
		}
		if err != nil {
			return nil, c.failStart(err)
		}
	}
	for i, a := range as {
		name := fmt.Sprintf("s%d", i+1)
		m := &Member{Name: name, Client: a.client, Dir: filepath.Join(c.Dir, name)}
		data := filepath.Join(m.Dir, "data")
		var b strings.Builder
		fmt.Fprintf(&b, "db_path = %q\nsync = %v\n[server]\nlisten = %q\n", data, !opts.NoSync, a.client)
		if opts.ProgressNotify > 0 {
			fmt.Fprintf(&b, "watch_progress_notify_interval_ms = %d\n", opts.ProgressNotify.Milliseconds())
		}
		if opts.Members > 1 {
			m.RaftDir = filepath.Join(m.Dir, "raft")
			fmt.Fprintf(&b, "[cluster]\nname = %q\nlisten_peer = %q\nraft_dir = %q\n%s", name, a.peer, m.RaftDir, opts.ClusterTOML)
			for j, o := range as {
				fmt.Fprintf(&b, "[[cluster.members]]\nname = \"s%d\"\npeer_url = \"http://%s\"\nclient_url = \"http://%s\"\n", j+1, o.peer, o.client)
			}
		}
		conf := filepath.Join(c.Dir, name+".toml")
		if err := os.WriteFile(conf, []byte(b.String()), 0o644); err != nil {
			return nil, c.failStart(err)
		}
		m.args = []string{bin, "serve", "--config", conf}
		c.Members = append(c.Members, m)
	}
	if err := c.startAll(); err != nil {
		return nil, err
	}
	return c, nil
}

// Etcd37Options configures the etcd 3.7.3 members of StartEtcd37.
type Etcd37Options struct {
	// Members is the number of members, one process each.
	Members int
	// NoFsync is etcd's --unsafe-no-fsync.
	NoFsync bool
	// ProgressNotify is etcd's --watch-progress-notify-interval; 0 leaves
	// etcd's default.
	ProgressNotify time.Duration
}

// StartEtcd37 builds internal/bench/etcd37 (etcd 3.7.3, embed) from the
// repository at repoRoot and starts opts.Members members of one cluster.
func StartEtcd37(repoRoot string, opts Etcd37Options) (*Cluster, error) {
	c, bin, err := newCluster(repoRoot, "./internal/bench/etcd37", "etcd37", opts.Members)
	if err != nil {
		return nil, err
	}
	peers := make([]string, opts.Members)
	var initial []string
	for i := range peers {
		if peers[i], err = freeAddr(); err != nil {
			return nil, c.failStart(err)
		}
		initial = append(initial, fmt.Sprintf("e%d=http://%s", i+1, peers[i]))
	}
	for i, peer := range peers {
		client, err := freeAddr()
		if err != nil {
			return nil, c.failStart(err)
		}
		m := &Member{Name: fmt.Sprintf("e%d", i+1), Client: client}
		m.Dir = filepath.Join(c.Dir, m.Name)
		m.args = []string{bin, "--name", m.Name, "--initial-cluster", strings.Join(initial, ","),
			"--data-dir", m.Dir, "--listen-client", client, "--listen-peer", peer, "--log-level", "error"}
		if opts.NoFsync {
			m.args = append(m.args, "--unsafe-no-fsync")
		}
		if opts.ProgressNotify > 0 {
			m.args = append(m.args, "--watch-progress-notify-interval", opts.ProgressNotify.String())
		}
		c.Members = append(c.Members, m)
	}
	if err := c.startAll(); err != nil {
		return nil, err
	}
	return c, nil
}

// newCluster makes the directory of a cluster of members members and
// builds the main package pkg of the module at repoRoot into it.
func newCluster(repoRoot, pkg, name string, members int) (*Cluster, string, error) {
	if members < 1 {
		return nil, "", fmt.Errorf("memberproc: Members = %d: must be 1 or more", members)
	}
	dir, err := os.MkdirTemp("", "memberproc-")
	if err != nil {
		return nil, "", err
	}
	c := &Cluster{Dir: dir}
	bin := filepath.Join(dir, name)
	cmd := exec.Command("go", "build", "-o", bin, pkg)
	cmd.Dir = repoRoot
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, "", c.failStart(fmt.Errorf("memberproc: go build %s in %s: %v\n%s", pkg, repoRoot, err, out))
	}
	return c, bin, nil
}

func (c *Cluster) failStart(err error) error {
	c.Stop(false)
	return err
}

// startAll starts every member at once (the members of a new cluster wait
// for each other) and waits until each serves. If one does not, it stops
// them all, keeping their directory and logs.
func (c *Cluster) startAll() error {
	errs := make([]error, len(c.Members))
	var wg sync.WaitGroup
	for i, m := range c.Members {
		wg.Go(func() { errs[i] = m.Start() })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			c.Stop(true)
			return err
		}
	}
	return nil
}

// freeAddr returns 127.0.0.1:PORT with a port free a moment ago.
func freeAddr() (string, error) {
	l, err := testport.Listen()
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// Start starts m (again, on its data after a kill) and waits until its
// client port answers a Status call, at most a minute.
func (m *Member) Start() error {
	m.logPath = filepath.Join(filepath.Dir(m.Dir), m.Name+".log")
	logf, err := os.OpenFile(m.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(m.args[0], m.args[1:]...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return err
	}
	exited := make(chan struct{})
	m.mu.Lock()
	m.cmd, m.exited = cmd, exited
	m.mu.Unlock()
	go func() {
		_ = cmd.Wait()
		logf.Close()
		close(exited)
	}()
	cli, err := m.client()
	if err != nil {
		return err
	}
	defer cli.Close()
	deadline := time.Now().Add(time.Minute)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := cli.Status(ctx, m.Client)
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("memberproc: %s exited before serving; its log:\n%s", m.Name, m.LogTail(30))
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("memberproc: %s did not serve within a minute (%v); its log:\n%s", m.Name, err, m.LogTail(30))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (m *Member) client() (*clientv3.Client, error) {
	return clientv3.New(clientv3.Config{Endpoints: []string{m.Client}, DialTimeout: 5 * time.Second, TLS: m.TLS, Logger: zap.NewNop()})
}

// Kill sends SIGKILL to m, if it runs, and waits until it exited.
func (m *Member) Kill() {
	m.mu.Lock()
	cmd, exited := m.cmd, m.exited
	m.cmd = nil
	m.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	<-exited
}

// Running reports whether m was started and not killed since.
func (m *Member) Running() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.cmd != nil
}

// LogTail returns the last n lines of m's log (stdout and stderr).
func (m *Member) LogTail(n int) string {
	b, _ := os.ReadFile(m.logPath)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// IsLeader reports whether m answers a Status call naming itself leader.
func (m *Member) IsLeader() bool {
	if !m.Running() {
		return false
	}
	cli, err := m.client()
	if err != nil {
		return false
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	st, err := cli.Status(ctx, m.Client)
	return err == nil && st.Leader != 0 && st.Leader == st.Header.MemberId
}

// Leader waits, at most 20 seconds, until a running member says it leads
// and returns it; nil if none did.
func (c *Cluster) Leader() *Member {
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		for _, m := range c.Members {
			if m.IsLeader() {
				return m
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return nil
}

// Stop kills every member and removes the cluster's directory, or keeps
// it (data and logs) when keep, saying where on stderr.
func (c *Cluster) Stop(keep bool) {
	for _, m := range c.Members {
		m.Kill()
	}
	if keep {
		fmt.Fprintf(os.Stderr, "memberproc: the members' data and logs are in %s\n", c.Dir)
		return
	}
	os.RemoveAll(c.Dir)
}
