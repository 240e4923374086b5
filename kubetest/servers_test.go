package kubetest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// The environment that chooses the server under test.
const (
	// serverEnv names the server: strata (the default), etcd37 or cluster.
	serverEnv = "STRATA_KUBETEST_SERVER"
	// endpointsEnv, comma-separated host:port, uses servers already
	// running instead of starting one.
	endpointsEnv = "STRATA_KUBETEST_ENDPOINTS"
	// killAfterEnv is how long into the run the cluster's leader is
	// killed (a Go duration; 20s by default).
	killAfterEnv = "STRATA_KUBETEST_KILL_AFTER"
)

// progressInterval is the watch progress notification interval the
// servers run with: etcd3's ProgressNotify and bookmark tests set 1s.
const progressInterval = time.Second

// process is one server process under test.
type process struct {
	name    string
	args    []string
	dir     string
	client  string
	logPath string

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
}

// servers is what TestMain started.
type servers struct {
	endpoints []string
	procs     []*process
	dir       string
	// killed reports the member killed mid-run (cluster mode).
	killed chan string
}

// freeAddr returns 127.0.0.1:PORT with a port in 20000-32767 that was free
// a moment ago: below the kernel's ephemeral ports (32768 and up), which
// any outgoing connection may take between the check and the bind.
func freeAddr() (string, error) {
	for range 1000 {
		addr := fmt.Sprintf("127.0.0.1:%d", 20000+rand.IntN(32767-20000+1))
		if l, err := net.Listen("tcp", addr); err == nil {
			l.Close()
			return addr, nil
		}
	}
	return "", fmt.Errorf("no free loopback port in 20000-32767 after 1000 tries")
}

// buildFromParent builds the main package pkg of Strata's module (the
// parent directory) into dir.
func buildFromParent(dir, pkg, name string) (string, error) {
	out := filepath.Join(dir, name)
	cmd := exec.Command("go", "build", "-o", out, pkg)
	cmd.Dir = ".."
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build %s: %v\n%s", pkg, err, b)
	}
	return out, nil
}

// startServers starts what serverEnv asks for.
func startServers() (*servers, error) {
	if eps := os.Getenv(endpointsEnv); eps != "" {
		return &servers{endpoints: strings.Split(eps, ",")}, nil
	}
	dir, err := os.MkdirTemp("", "kubetest-")
	if err != nil {
		return nil, err
	}
	s := &servers{dir: dir}
	switch kind := os.Getenv(serverEnv); kind {
	case "", "strata":
		err = s.startStrata(1)
	case "cluster":
		err = s.startStrata(3)
		if err == nil {
			err = s.killLeaderLater()
		}
	case "etcd37":
		err = s.startEtcd37()
	default:
		err = fmt.Errorf("%s=%q: allowed are strata, etcd37 and cluster", serverEnv, kind)
	}
	if err != nil {
		s.stop(true)
		return nil, err
	}
	return s, nil
}

// startStrata starts n `strata serve` members (n > 1: a cluster).
func (s *servers) startStrata(n int) error {
	bin, err := buildFromParent(s.dir, "./cmd/strata", "strata")
	if err != nil {
		return err
	}
	type member struct{ name, client, peer string }
	ms := make([]member, n)
	for i := range ms {
		ms[i].name = fmt.Sprintf("s%d", i+1)
		if ms[i].client, err = freeAddr(); err != nil {
			return err
		}
		if ms[i].peer, err = freeAddr(); err != nil {
			return err
		}
	}
	for _, m := range ms {
		var b strings.Builder
		// Kubernetes' tests run etcd without fsync (embed's UnsafeNoFsync).
		fmt.Fprintf(&b, "db_path = %q\nsync = false\n[server]\nlisten = %q\nwatch_progress_notify_interval_ms = %d\n",
			filepath.Join(s.dir, m.name), m.client, progressInterval.Milliseconds())
		if n > 1 {
			fmt.Fprintf(&b, "[cluster]\nname = %q\nlisten_peer = %q\n", m.name, m.peer)
			for _, o := range ms {
				fmt.Fprintf(&b, "[[cluster.members]]\nname = %q\npeer_url = \"http://%s\"\nclient_url = \"http://%s\"\n", o.name, o.peer, o.client)
			}
		}
		conf := filepath.Join(s.dir, m.name+".toml")
		if err := os.WriteFile(conf, []byte(b.String()), 0o644); err != nil {
			return err
		}
		s.procs = append(s.procs, &process{name: m.name, args: []string{bin, "serve", "--config", conf}, dir: s.dir, client: m.client})
		s.endpoints = append(s.endpoints, m.client)
	}
	return s.startAll()
}

// startEtcd37 starts etcd 3.7.3 (internal/bench/etcd37, embed) configured
// as k8s.io/apiserver's etcd3 tests configure theirs.
func (s *servers) startEtcd37() error {
	bin, err := buildFromParent(s.dir, "./internal/bench/etcd37", "etcd37")
	if err != nil {
		return err
	}
	client, err := freeAddr()
	if err != nil {
		return err
	}
	peer, err := freeAddr()
	if err != nil {
		return err
	}
	s.procs = []*process{{name: "etcd37", dir: s.dir, client: client, args: []string{bin,
		"--data-dir", filepath.Join(s.dir, "etcd37-data"), "--listen-client", client, "--listen-peer", peer,
		"--unsafe-no-fsync", "--watch-progress-notify-interval", progressInterval.String(), "--log-level", "error"}}}
	s.endpoints = []string{client}
	return s.startAll()
}

func (s *servers) startAll() error {
	errs := make([]error, len(s.procs))
	var wg sync.WaitGroup
	for i, p := range s.procs {
		wg.Go(func() { errs[i] = p.start() })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// start starts p and waits until its client port answers a Status call.
func (p *process) start() error {
	p.logPath = filepath.Join(p.dir, p.name+".log")
	logf, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(p.args[0], p.args[1:]...)
	cmd.Stdout, cmd.Stderr = logf, logf
	// The server dies with the tests, whatever kills them.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return err
	}
	exited := make(chan struct{})
	p.mu.Lock()
	p.cmd, p.exited = cmd, exited
	p.mu.Unlock()
	go func() {
		_ = cmd.Wait()
		logf.Close()
		close(exited)
	}()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{p.client}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return err
	}
	defer cli.Close()
	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := cli.Status(ctx, p.client)
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("%s exited before serving; its log:\n%s", p.name, p.logTail())
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not serve within 60s (%v); its log:\n%s", p.name, err, p.logTail())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// kill sends SIGKILL to p and waits until it exited.
func (p *process) kill() {
	p.mu.Lock()
	cmd, exited := p.cmd, p.exited
	p.cmd = nil
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	<-exited
}

func (p *process) logTail() string {
	b, _ := os.ReadFile(p.logPath)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > 30 {
		lines = lines[len(lines)-30:]
	}
	return strings.Join(lines, "\n")
}

// killLeaderLater kills the cluster's leader with SIGKILL some seconds into
// the run (killAfterEnv) and restarts it on its data three seconds later,
// while the tests go on against all three endpoints.
func (s *servers) killLeaderLater() error {
	after := 20 * time.Second
	if v := os.Getenv(killAfterEnv); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return fmt.Errorf("%s=%q: want a positive Go duration such as 20s", killAfterEnv, v)
		}
		after = d
	}
	s.killed = make(chan string, 1)
	go func() {
		time.Sleep(after)
		p := s.leader()
		fmt.Fprintf(os.Stderr, "kubetest: %s: SIGKILL to %s, the leader\n", time.Now().Format(time.TimeOnly), p.name)
		p.kill()
		time.Sleep(3 * time.Second)
		if err := p.start(); err != nil {
			fmt.Fprintf(os.Stderr, "kubetest: restarting %s: %v\n", p.name, err)
		} else {
			fmt.Fprintf(os.Stderr, "kubetest: %s: %s serves again\n", time.Now().Format(time.TimeOnly), p.name)
		}
		s.killed <- p.name
	}()
	return nil
}

// leader returns the member that a majority names leader, or the first.
func (s *servers) leader() *process {
	for range 100 {
		for _, p := range s.procs {
			cli, err := clientv3.New(clientv3.Config{Endpoints: []string{p.client}, DialTimeout: time.Second, Logger: zap.NewNop()})
			if err != nil {
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			st, err := cli.Status(ctx, p.client)
			cancel()
			cli.Close()
			if err == nil && st.Leader != 0 && st.Leader == st.Header.MemberId {
				return p
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return s.procs[0]
}

// stop kills every process and removes their directory (kept, with the
// logs, when keep).
func (s *servers) stop(keep bool) {
	for _, p := range s.procs {
		p.kill()
	}
	if s.dir == "" {
		return
	}
	if keep {
		fmt.Fprintf(os.Stderr, "kubetest: the servers' data and logs are in %s\n", s.dir)
		return
	}
	os.RemoveAll(s.dir)
}
