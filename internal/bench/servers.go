package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/stratadb/strata/internal/procfs"
)

// Kind names a server under test.
type Kind string

// The servers the benchmark compares.
const (
	// KindStrata is `strata serve`.
	KindStrata Kind = "strata"
	// KindEtcd34 is the etcd binary, 3.4.23 in Debian: the last etcd with
	// the v2 keys API (--enable-v2).
	KindEtcd34 Kind = "etcd34"
	// KindEtcd37 is etcd 3.7 from Strata's go.mod, run by the etcd37
	// program (internal/bench/etcd37) in a process of its own.
	KindEtcd37 Kind = "etcd37"
	// KindFloor is the transport floor (internal/bench/floor): etcd's v3
	// Range and Put and the v2 GET and PUT answered from a map, the
	// transport's own cost per request. A baseline of the QPS table only.
	KindFloor Kind = "floor"
)

// Kinds lists every Kind, in the order tables show them.
var Kinds = []Kind{KindStrata, KindEtcd34, KindEtcd37, KindFloor}

// ParseKind parses a server name of Kinds.
func ParseKind(s string) (Kind, error) {
	for _, k := range Kinds {
		if string(k) == strings.TrimSpace(s) {
			return k, nil
		}
	}
	return "", fmt.Errorf("%w %q: allowed are strata, etcd34, etcd37, floor", ErrUnknownServer, s)
}

// ErrUnknownServer is returned for a server name that is not a Kind.
var ErrUnknownServer = errors.New("bench: unknown server")

// Programs says how to run each server.
type Programs struct {
	// Strata is the strata executable; the server runs as
	// `Strata serve --config FILE`.
	Strata string
	// StrataEnv is added to the environment of the strata process (tests
	// run their own binary as strata).
	StrataEnv []string
	// StrataTOML is appended to the server's generated config file, whose
	// own keys are db_path and server.listen: settings to try, as
	// top-level or dotted keys, such as "server.memory_budget_mb = 32".
	StrataTOML string
	// Etcd is the etcd 3.4 binary.
	Etcd string
	// Etcd37 is the binary of internal/bench/etcd37.
	Etcd37 string
	// Floor is the binary of internal/bench/floor, and FloorEnv is added
	// to its environment (tests run their own binary as the floor).
	Floor    string
	FloorEnv []string
}

// Server is one server process under test, on loopback ports, with a data
// directory of its own that Stop removes.
type Server struct {
	// Kind is which server this is.
	Kind Kind
	// Name is the server and its version as it reports them on /version,
	// such as "etcd 3.4.23".
	Name string
	// Endpoint is the client address, 127.0.0.1:PORT, for clientv3.
	Endpoint string
	// URL is http://Endpoint, for the v2 API.
	URL string
	// Member is the server's name in its cluster (StartCluster), "" for
	// a server alone.
	Member string
	// Started is when the server's process was started.
	Started time.Time

	cmd     *exec.Cmd
	dir     string
	logPath string
	done    chan struct{}
	waitErr error

	// mu guards pid and priorCPU, which a kill and restart during a load
	// (Cluster.KillLeader) change while the load's sampler reads them.
	mu  sync.Mutex
	pid int
	// priorCPU is the CPU time of the server's processes before a kill.
	priorCPU float64
}

// StartOptions are the per-start settings of StartServer.
type StartOptions struct {
	// QuotaBytes raises etcd's backend quota (2 GiB by default) and
	// Strata's (server.quota_backend_bytes, 512 MiB) for the loads that
	// need more; 0 keeps the defaults.
	QuotaBytes int64
	// Pin runs the server on Pin.ServerCPUs; the zero Pinning leaves it
	// unpinned.
	Pin Pinning
	// SnapshotEntries is a cluster member's entries applied between raft
	// snapshots (Strata's cluster.snapshot_entries, etcd's
	// --snapshot-count), with min(5000, SnapshotEntries/2) entries kept
	// behind each for slow followers, as Strata keeps them; 0 leaves each
	// server's default (10000 entries, 5000 kept).
	SnapshotEntries uint64

	// members, set by StartCluster, make the server member self of a
	// cluster of them, on the addresses they list.
	members []memberAddrs
	self    int
	// join, set by Cluster.AddMember, starts member self as one added to
	// the running cluster (Strata's join = true, etcd's
	// --initial-cluster-state existing), logging what it receives
	// (Strata's --verbose, etcd's info level).
	join bool
}

// memberAddrs are one cluster member's name and loopback addresses.
type memberAddrs struct{ name, client, peer string }

// readyTimeout bounds how long a server may take to start answering.
const readyTimeout = 60 * time.Second

// StartServer starts server kind on free loopback ports with a new data
// directory under parent, and returns once it answers /health.
func StartServer(ctx context.Context, kind Kind, p Programs, parent string, so StartOptions) (*Server, error) {
	s, err := launchServer(kind, p, parent, so)
	if err != nil {
		return nil, err
	}
	if err := s.waitReady(ctx); err != nil {
		s.Stop()
		return nil, err
	}
	return s, nil
}

// launchServer starts the process of StartServer and returns at once,
// without waiting for it to answer.
func launchServer(kind Kind, p Programs, parent string, so StartOptions) (*Server, error) {
	dir, err := os.MkdirTemp(parent, string(kind)+"-")
	if err != nil {
		return nil, fmt.Errorf("bench: %s: data directory: %w", kind, err)
	}
	var me memberAddrs
	if len(so.members) > 0 {
		me = so.members[so.self]
	} else if ports, err := freePorts(2); err != nil {
		os.RemoveAll(dir)
		return nil, err
	} else {
		me = memberAddrs{client: fmt.Sprintf("127.0.0.1:%d", ports[0]), peer: fmt.Sprintf("127.0.0.1:%d", ports[1])}
	}
	s := &Server{
		Kind:     kind,
		Endpoint: me.client,
		Member:   me.name,
		dir:      dir,
		logPath:  filepath.Join(dir, "server.log"),
	}
	s.URL = "http://" + s.Endpoint
	peer := me.peer
	var env []string
	switch kind {
	case KindStrata:
		if p.Strata == "" {
			return nil, s.fail(errors.New("no strata executable given"))
		}
		conf := filepath.Join(dir, "strata.toml")
		quota := ""
		if so.QuotaBytes > 0 && !strings.Contains(p.StrataTOML, "quota_backend_bytes") {
			// The same quota as etcd's: a load sized for one fits the other.
			quota = fmt.Sprintf("server.quota_backend_bytes = %d\n", so.QuotaBytes)
		}
		text := fmt.Sprintf("db_path = %q\nserver.listen = %q\n%s%s\n%s", filepath.Join(dir, "db"), s.Endpoint, quota, p.StrataTOML, strataClusterTOML(so, filepath.Join(dir, strataRaftDir)))
		if err := os.WriteFile(conf, []byte(text), 0o644); err != nil {
			return nil, s.fail(err)
		}
		args := []string{"serve", "--config", conf}
		if so.join {
			args = append(args, "--verbose")
		}
		s.cmd = so.Pin.Command(so.Pin.ServerCPUs, p.Strata, args...)
		env = p.StrataEnv
	case KindEtcd34:
		if len(so.members) > 0 {
			return nil, s.fail(errors.New("clusters are started of strata and etcd37 only"))
		}
		if p.Etcd == "" {
			return nil, s.fail(errors.New("no etcd executable given"))
		}
		args := []string{
			"--name", "s1", "--data-dir", filepath.Join(dir, "data"), "--enable-v2=true",
			"--listen-client-urls", s.URL, "--advertise-client-urls", s.URL,
			"--listen-peer-urls", "http://" + peer, "--initial-advertise-peer-urls", "http://" + peer,
			"--initial-cluster", "s1=http://" + peer,
		}
		if so.QuotaBytes > 0 {
			args = append(args, fmt.Sprintf("--quota-backend-bytes=%d", so.QuotaBytes))
		}
		s.cmd = so.Pin.Command(so.Pin.ServerCPUs, p.Etcd, args...)
	case KindEtcd37:
		if p.Etcd37 == "" {
			return nil, s.fail(errors.New("no etcd37 executable given"))
		}
		args := []string{"--data-dir", filepath.Join(dir, "data"), "--listen-client", s.Endpoint, "--listen-peer", peer}
		if len(so.members) > 0 {
			args = append(args, "--name", me.name, "--initial-cluster", etcdInitialCluster(so.members))
		}
		if so.SnapshotEntries > 0 {
			args = append(args, fmt.Sprintf("--snapshot-count=%d", so.SnapshotEntries), fmt.Sprintf("--snapshot-catchup-entries=%d", catchUpEntries(so.SnapshotEntries)))
		}
		if so.join {
			// A joining member catches up before it is ready, for as long
			// as the benchmark allows.
			args = append(args, "--initial-cluster-state", "existing", "--log-level", "info", "--ready-timeout", "0s")
		}
		if so.QuotaBytes > 0 {
			args = append(args, fmt.Sprintf("--quota-backend-bytes=%d", so.QuotaBytes))
		}
		s.cmd = so.Pin.Command(so.Pin.ServerCPUs, p.Etcd37, args...)
	case KindFloor:
		if len(so.members) > 0 {
			return nil, s.fail(errors.New("the transport floor runs alone, not in a cluster"))
		}
		if p.Floor == "" {
			return nil, s.fail(errors.New("no floor executable given"))
		}
		s.cmd = so.Pin.Command(so.Pin.ServerCPUs, p.Floor, "--listen-client", s.Endpoint)
		env = p.FloorEnv
	default:
		return nil, s.fail(fmt.Errorf("%w %q", ErrUnknownServer, kind))
	}
	if err := s.start(env); err != nil {
		return nil, s.fail(err)
	}
	return s, nil
}

// strataRaftDir is where, under its data directory, a Strata member
// keeps its raft log and the snapshots it receives (in snap/).
const strataRaftDir = "raft"

// catchUpEntries is the entries kept behind a snapshot of every
// snapshotEntries entries: Strata's rule (cluster/fromconfig.go), given
// to etcd too when a benchmark sets the snapshot interval.
func catchUpEntries(snapshotEntries uint64) uint64 {
	return max(1, min(5000, snapshotEntries/2))
}

// strataClusterTOML is the [cluster] section of member so.self of
// so.members, with its raft log in raftDir, or "" for a server alone.
// Every setting it leaves out is Strata's default, which is etcd's: 100
// ms heartbeats, 1 s election timeout, a snapshot every 10,000 entries.
func strataClusterTOML(so StartOptions, raftDir string) string {
	if len(so.members) == 0 {
		return ""
	}
	me := so.members[so.self]
	var b strings.Builder
	fmt.Fprintf(&b, "[cluster]\nname = %q\nlisten_peer = %q\nraft_dir = %q\njoin = %v\n", me.name, me.peer, raftDir, so.join)
	if so.SnapshotEntries > 0 {
		fmt.Fprintf(&b, "snapshot_entries = %d\n", so.SnapshotEntries)
	}
	for _, m := range so.members {
		fmt.Fprintf(&b, "[[cluster.members]]\nname = %q\npeer_url = \"http://%s\"\nclient_url = \"http://%s\"\n", m.name, m.peer, m.client)
	}
	return b.String()
}

// etcdInitialCluster is etcd's --initial-cluster of members.
func etcdInitialCluster(members []memberAddrs) string {
	parts := make([]string, len(members))
	for i, m := range members {
		parts[i] = m.name + "=http://" + m.peer
	}
	return strings.Join(parts, ",")
}

// launch starts s.cmd with its output going to log, dying with the
// benchmark whatever kills it, and watches for its exit (s.done,
// s.waitErr). StartServer and a restart in place share it.
// start starts s.cmd with env added to this process's environment and
// its output in s.logPath.
func (s *Server) start(env []string) error {
	log, err := os.Create(s.logPath)
	if err != nil {
		return err
	}
	defer log.Close()
	s.cmd.Env = append(os.Environ(), env...)
	return s.launch(log)
}

func (s *Server) launch(log *os.File) error {
	s.cmd.Stdout, s.cmd.Stderr = log, log
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	s.done, s.waitErr = make(chan struct{}), nil
	s.Started = time.Now()
	if err := s.cmd.Start(); err != nil {
		close(s.done)
		return err
	}
	s.mu.Lock()
	s.pid = s.cmd.Process.Pid
	s.mu.Unlock()
	go func(cmd *exec.Cmd, done chan struct{}) {
		s.waitErr = cmd.Wait()
		close(done)
	}(s.cmd, s.done)
	return nil
}

// fail removes the data directory of a server that did not start and
// names the server in err.
func (s *Server) fail(err error) error {
	os.RemoveAll(s.dir)
	return fmt.Errorf("bench: starting %s: %w", s.Kind, err)
}

// waitReady polls /health until the server reports healthy, then reads its
// name from /version.
func (s *Server) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	client := &http.Client{Timeout: 2 * time.Second}
	var last error
	for {
		select {
		case <-s.done:
			return fmt.Errorf("bench: %s exited before it was ready (%v); its log:\n%s", s.Kind, s.waitErr, s.LogTail())
		case <-ctx.Done():
			return fmt.Errorf("bench: %s not healthy on %s/health after %s (last: %v); its log:\n%s", s.Kind, s.URL, readyTimeout, last, s.LogTail())
		case <-time.After(100 * time.Millisecond):
		}
		var health struct{ Health string }
		if last = getJSON(ctx, client, s.URL+"/health", &health); last != nil {
			continue
		}
		if health.Health != "true" {
			last = fmt.Errorf("health %q", health.Health)
			continue
		}
		break
	}
	var v struct {
		Etcd   string `json:"etcdserver"`
		Strata string `json:"strata"`
		Floor  string `json:"floor"`
	}
	if err := getJSON(ctx, client, s.URL+"/version", &v); err != nil {
		return fmt.Errorf("bench: %s: %w", s.Kind, err)
	}
	switch {
	case s.Kind == KindStrata && v.Strata != "":
		s.Name = "Strata " + v.Strata
	case s.Kind == KindStrata:
		s.Name = "Strata"
	case s.Kind == KindFloor:
		s.Name = v.Floor
	default:
		s.Name = "etcd " + v.Etcd
	}
	return nil
}

func getJSON(ctx context.Context, client *http.Client, url string, into any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s: %q", url, resp.Status, body)
	}
	if err := json.Unmarshal(body, into); err != nil {
		return fmt.Errorf("GET %s: %w in %q", url, err, body)
	}
	return nil
}

// PID is the server's process id.
func (s *Server) PID() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pid
}

// CPU is the CPU time in seconds the server has used so far, that of the
// processes a kill ended included.
func (s *Server) CPU() (float64, error) {
	s.mu.Lock()
	pid, prior := s.pid, s.priorCPU
	s.mu.Unlock()
	cpu, err := procfs.CPU(pid)
	return prior + cpu, err
}

// RSS is the server's resident set size in bytes, and its anonymous part
// (see procfs.RSS).
func (s *Server) RSS() (rss, anon int64, err error) { return procfs.RSS(s.PID()) }

// stopTimeout is how long Stop waits after SIGTERM before SIGKILL.
const stopTimeout = 20 * time.Second

// Stop ends the server, SIGTERM first, and removes its data directory. An
// error says the server had already exited or did not stop in time.
func (s *Server) Stop() error {
	var err error
	select {
	case <-s.done:
		err = fmt.Errorf("bench: %s had exited (%v); its log:\n%s", s.Kind, s.waitErr, s.LogTail())
	default:
		if !s.terminate() {
			err = fmt.Errorf("bench: %s did not stop within %s of SIGTERM: killed", s.Kind, stopTimeout)
		}
	}
	os.RemoveAll(s.dir)
	return err
}

// terminate sends SIGTERM and waits for the process to exit, killing it
// after stopTimeout; it reports whether the process stopped by itself.
func (s *Server) terminate() bool {
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
		return true
	case <-time.After(stopTimeout):
		_ = s.cmd.Process.Kill()
		<-s.done
		return false
	}
}

// kill ends the server with SIGKILL, as a crash would, and waits for its
// exit; the CPU time its process used until then stays in CPU.
func (s *Server) kill() {
	if cpu, err := procfs.CPU(s.PID()); err == nil {
		s.mu.Lock()
		s.priorCPU += cpu
		s.mu.Unlock()
	}
	_ = s.cmd.Process.Kill()
	<-s.done
}

// relaunch starts the stopped server's command again on its data
// directory (under the same taskset, when pinned), appending to its log,
// and returns without waiting for it to answer.
func (s *Server) relaunch() error {
	log, err := os.OpenFile(s.logPath, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return fmt.Errorf("bench: restarting %s: %w", s.Kind, err)
	}
	defer log.Close()
	old := s.cmd
	s.cmd = exec.Command(old.Path, old.Args[1:]...)
	s.cmd.Env = old.Env
	if err := s.launch(log); err != nil {
		return fmt.Errorf("bench: restarting %s: %w", s.Kind, err)
	}
	return nil
}

// LogTail returns the last lines of the server's output.
func (s *Server) LogTail() string {
	b, err := os.ReadFile(s.logPath)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	const n = 3000
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}
