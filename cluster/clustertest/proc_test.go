package clustertest

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/stratadb/strata/internal/admin"
	"github.com/stratadb/strata/internal/testport"
)

// childEnv makes the test binary run `strata` with the arguments in it
// (separated by newlines) instead of the tests: the members are this
// binary, started as `strata serve` processes.
const childEnv = "STRATA_CLUSTER_CHILD_ARGS"

func TestMain(m *testing.M) {
	if args := os.Getenv(childEnv); args != "" {
		root := admin.NewRootCommand()
		root.SetArgs(strings.Split(args, "\n"))
		if err := root.Execute(); err != nil {
			fmt.Fprintln(os.Stderr, "strata:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// member is one `strata serve` process of a test cluster.
type member struct {
	name       string
	peerAddr   string
	clientAddr string
	dir        string
	cfgPath    string
	logPath    string

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
}

// procCluster is a cluster of member processes on loopback ports.
type procCluster struct {
	t       *testing.T
	dir     string
	members []*member
	// snapshotEntries is every member's cluster.snapshot_entries.
	snapshotEntries int
}

// freeAddr returns a loopback address with a port free right now.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := testport.Listen()
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// newProcCluster writes the configs of n members and starts them.
func newProcCluster(t *testing.T, n, snapshotEntries int) *procCluster {
	return newPreparedCluster(t, n, snapshotEntries, nil)
}

// newPreparedCluster is newProcCluster that runs prepare, if not nil, on
// each member between writing its config and starting it.
func newPreparedCluster(t *testing.T, n, snapshotEntries int, prepare func(*member)) *procCluster {
	c := &procCluster{t: t, dir: t.TempDir(), snapshotEntries: snapshotEntries}
	for i := range n {
		c.members = append(c.members, c.newMember(fmt.Sprintf("s%d", i+1)))
	}
	for _, m := range c.members {
		c.writeConfig(m, false)
		if prepare != nil {
			prepare(m)
		}
	}
	t.Cleanup(func() {
		for _, m := range c.members {
			c.kill(m)
		}
		if t.Failed() {
			c.dumpLogs()
		}
	})
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i, m := range c.members {
		wg.Go(func() { errs[i] = c.tryStart(m) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	return c
}

func (c *procCluster) newMember(name string) *member {
	m := &member{name: name, peerAddr: freeAddr(c.t), clientAddr: freeAddr(c.t), dir: filepath.Join(c.dir, name)}
	m.cfgPath = filepath.Join(c.dir, name+".toml")
	m.logPath = filepath.Join(c.dir, name+".log")
	return m
}

// writeConfig writes m's config file: every member of the cluster, this
// one named; join for a member added at run time.
func (c *procCluster) writeConfig(m *member, join bool) {
	var b strings.Builder
	fmt.Fprintf(&b, "db_path = %q\n[server]\nlisten = %q\nmemory_budget_mb = 16\n", m.dir, m.clientAddr)
	fmt.Fprintf(&b, "[cluster]\nname = %q\nlisten_peer = %q\njoin = %v\n", m.name, m.peerAddr, join)
	fmt.Fprintf(&b, "heartbeat_interval_ms = 50\nelection_timeout_ms = 500\nsnapshot_entries = %d\n", c.snapshotEntries)
	for _, o := range c.members {
		fmt.Fprintf(&b, "[[cluster.members]]\nname = %q\npeer_url = \"http://%s\"\nclient_url = \"http://%s\"\n", o.name, o.peerAddr, o.clientAddr)
	}
	if err := os.WriteFile(m.cfgPath, []byte(b.String()), 0o644); err != nil {
		c.t.Fatal(err)
	}
}

var servingLine = regexp.MustCompile(`serving etcd v2 and v3 APIs on https?://(\S+) `)

// start starts m's process and waits until it serves.
func (c *procCluster) start(m *member) {
	c.t.Helper()
	if err := c.tryStart(m); err != nil {
		c.t.Fatal(err)
	}
}

func (c *procCluster) tryStart(m *member) error {
	logf, err := os.OpenFile(m.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"=serve\n--verbose\n--config\n"+m.cfgPath)
	cmd.Stderr = logf
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		logf.Close()
		return err
	}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return err
	}
	exited := make(chan struct{})
	m.mu.Lock()
	m.cmd, m.exited = cmd, exited
	m.mu.Unlock()
	served := make(chan string, 1)
	go func() {
		defer logf.Close()
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintln(logf, "stdout: "+line)
			if servingLine.MatchString(line) {
				served <- line
			}
		}
		_ = cmd.Wait()
		close(exited)
	}()
	select {
	case <-served:
		return nil
	case <-exited:
		return fmt.Errorf("%s exited before serving; log:\n%s", m.name, tail(m.logPath, 30))
	case <-time.After(30 * time.Second):
		return fmt.Errorf("%s did not serve within 30s", m.name)
	}
}

// kill sends SIGKILL to m (if running) and waits for it to exit.
func (c *procCluster) kill(m *member) {
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

func (m *member) running() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.cmd != nil
}

// client returns a clientv3 client of the given members, closed with the
// test.
func (c *procCluster) client(ms ...*member) *clientv3.Client {
	c.t.Helper()
	var eps []string
	for _, m := range ms {
		eps = append(eps, m.clientAddr)
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: eps, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() { _ = cli.Close() })
	return cli
}

// leader waits until every running member names the same leader and
// returns it.
func (c *procCluster) leader() *member {
	c.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		var lead uint64
		agree := true
		ids := map[uint64]*member{}
		for _, m := range c.members {
			if !m.running() {
				continue
			}
			cli := c.client(m)
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			st, err := cli.Status(ctx, m.clientAddr)
			cancel()
			_ = cli.Close()
			if err != nil || st.Leader == 0 || (lead != 0 && st.Leader != lead) {
				agree = false
				break
			}
			lead = st.Leader
			ids[st.Header.MemberId] = m
		}
		if agree && ids[lead] != nil {
			return ids[lead]
		}
		time.Sleep(50 * time.Millisecond)
	}
	c.t.Fatal("the running members did not agree on a leader within 20s")
	return nil
}

// others returns the members other than m.
func (c *procCluster) others(m *member) []*member {
	var out []*member
	for _, o := range c.members {
		if o != m {
			out = append(out, o)
		}
	}
	return out
}

// dumpLogs logs the end of every member's log, and copies the logs to
// $STRATA_CLUSTER_KEEP_LOGS/<test>/ when that is set.
func (c *procCluster) dumpLogs() {
	keep := os.Getenv("STRATA_CLUSTER_KEEP_LOGS")
	for _, m := range c.members {
		c.t.Logf("---- %s (%s) ----\n%s", m.name, m.logPath, tail(m.logPath, 40))
		if keep != "" {
			dir := filepath.Join(keep, c.t.Name())
			if b, err := os.ReadFile(m.logPath); err == nil && os.MkdirAll(dir, 0o755) == nil {
				_ = os.WriteFile(filepath.Join(dir, m.name+".log"), b, 0o644)
			}
		}
	}
}

// tail returns the last n lines of the file at path that are not raft's
// per-message chatter.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	var keep []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, "MsgPreVote") || strings.Contains(l, "MsgVote") {
			continue
		}
		keep = append(keep, l)
	}
	if len(keep) > n {
		keep = keep[len(keep)-n:]
	}
	return strings.Join(keep, "\n")
}

// logHas reports whether m's log has a line containing s.
func (m *member) logHas(s string) bool {
	b, err := os.ReadFile(m.logPath)
	return err == nil && strings.Contains(string(b), s)
}
