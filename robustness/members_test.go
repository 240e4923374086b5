package robustness

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/storage/datadir"
	"go.etcd.io/etcd/server/v3/storage/wal"
	"go.etcd.io/etcd/tests/v3/framework/e2e"
	"go.etcd.io/etcd/tests/v3/robustness/identity"
	"go.etcd.io/etcd/tests/v3/robustness/model"
	"go.etcd.io/etcd/tests/v3/robustness/report"
	"go.etcd.io/etcd/tests/v3/robustness/traffic"
	"go.uber.org/zap"

	"github.com/stratadb/strata/cluster"
	"github.com/stratadb/strata/internal/memberproc"
)

// The environment that chooses the servers and the length of a run.
const (
	// serverEnv names the servers: strata (the default) or etcd37.
	serverEnv = "STRATA_ROBUSTNESS_SERVER"
	// killsEnv is the number of SIGKILLs in a run (3 by default).
	killsEnv = "STRATA_ROBUSTNESS_KILLS"
	// killEveryEnv is the traffic time before each kill (a Go duration,
	// 5s by default): a run's traffic lasts about kills × (this + the
	// restart) seconds.
	killEveryEnv = "STRATA_ROBUSTNESS_KILL_EVERY"
)

// progressNotify is the watch progress notification interval of the
// members, etcd's robustness scenarios' (WithWatchProcessNotifyInterval).
const progressNotify = 100 * time.Millisecond

// startMembers starts three members of the server serverEnv names. Strata
// keeps its whole raft log (a snapshot would truncate it) so that the
// history can be read back from every member after the run, as etcd's WAL
// is.
func startMembers(t *testing.T) (*memberproc.Cluster, string) {
	t.Helper()
	var c *memberproc.Cluster
	var err error
	switch kind := os.Getenv(serverEnv); kind {
	case "", "strata":
		kind = "strata"
		c, err = memberproc.StartStrata("..", memberproc.StrataOptions{Members: 3, ProgressNotify: progressNotify,
			ClusterTOML: "snapshot_entries = 100000000\n"})
		if err != nil {
			t.Fatal(err)
		}
		return c, kind
	case "etcd37":
		c, err = memberproc.StartEtcd37("..", memberproc.Etcd37Options{Members: 3, ProgressNotify: progressNotify})
		if err != nil {
			t.Fatal(err)
		}
		return c, kind
	default:
		t.Fatalf("%s=%q: allowed are strata and etcd37", serverEnv, kind)
		return nil, ""
	}
}

// envInt and envDuration read a positive setting, or return def.
func envInt(t *testing.T, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("%s=%q: want a positive whole number", name, v)
	}
	return n
}

func envDuration(t *testing.T, name string, def time.Duration) time.Duration {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		t.Fatalf("%s=%q: want a positive Go duration such as 5s", name, v)
	}
	return d
}

// process presents a member to etcd's framework as the e2e.EtcdProcess
// its robustness packages take (traffic.SimulateTraffic,
// failpoint.Inject, client.CheckEndOfTestHashKV, report.ServerDataPaths).
// Those call only the methods defined here: endpoints, name and data
// directory, running, kill and start. The embedded interface is nil:
// the framework's own launcher, etcdctl, proxies and gofail have no
// counterpart for a process started by memberproc.
type process struct {
	e2e.EtcdProcess
	m   *memberproc.Member
	cfg *e2e.EtcdServerProcessConfig
}

func newProcess(m *memberproc.Member) *process {
	return &process{m: m, cfg: &e2e.EtcdServerProcessConfig{Name: m.Name, DataDirPath: m.Dir, ClientURL: "http://" + m.Client}}
}

func (p *process) EndpointsGRPC() []string              { return []string{p.cfg.ClientURL} }
func (p *process) Config() *e2e.EtcdServerProcessConfig { return p.cfg }
func (p *process) LazyFS() *e2e.LazyFS                  { return nil }
func (p *process) IsRunning() bool                      { return p.m.Running() }
func (p *process) Kill() error                          { p.m.Kill(); return nil }
func (p *process) Start(context.Context) error          { return p.m.Start() }

// frameworkCluster is c as etcd's framework sees a cluster.
func frameworkCluster(c *memberproc.Cluster) *e2e.EtcdProcessCluster {
	fc := &e2e.EtcdProcessCluster{Cfg: &e2e.EtcdProcessClusterConfig{}}
	for _, m := range c.Members {
		fc.Procs = append(fc.Procs, newProcess(m))
	}
	return fc
}

// kill is one SIGKILL of a run.
type kill struct {
	Member   string
	Leader   bool
	Down, At time.Duration
}

// sigkillFailpoint is the fault of a run, injected through etcd's
// failpoint.Inject: kills SIGKILLs, each after `every` of traffic, of the
// leader (the first, third, ...) or of a follower, each member restarted
// on its data a second later. etcd's own Kill failpoint kills one member
// once; a run here kills several, the leader included.
type sigkillFailpoint struct {
	c      *memberproc.Cluster
	kills  int
	every  time.Duration
	killed []kill
}

func (f *sigkillFailpoint) Name() string { return fmt.Sprintf("SIGKILLx%d", f.kills) }

func (f *sigkillFailpoint) Available(e2e.EtcdProcessClusterConfig, e2e.EtcdProcess, traffic.Profile) bool {
	return true
}

// Timeout bounds the whole injection (failpoint.TimeoutInterface).
func (f *sigkillFailpoint) Timeout() time.Duration {
	return time.Duration(f.kills) * (f.every + 2*time.Minute)
}

func (f *sigkillFailpoint) Inject(ctx context.Context, _ *testing.T, lg *zap.Logger, _ *e2e.EtcdProcessCluster, baseTime time.Time, _ identity.Provider) ([]report.ClientReport, error) {
	for i := range f.kills {
		select {
		case <-time.After(f.every):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		lead := f.c.Leader()
		if lead == nil {
			return nil, errors.New("no member leads the cluster")
		}
		victim := lead
		if i%2 == 1 {
			var followers []*memberproc.Member
			for _, m := range f.c.Members {
				if m != lead {
					followers = append(followers, m)
				}
			}
			victim = followers[rand.IntN(len(followers))]
		}
		at := time.Since(baseTime)
		lg.Info("SIGKILL", zap.String("member", victim.Name), zap.Bool("leader", victim == lead))
		victim.Kill()
		select {
		case <-time.After(time.Second):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if err := victim.Start(); err != nil {
			return nil, fmt.Errorf("restarting %s: %w", victim.Name, err)
		}
		f.killed = append(f.killed, kill{Member: victim.Name, Leader: victim == lead, At: at, Down: time.Since(baseTime) - at})
		lg.Info("restarted", zap.String("member", victim.Name))
	}
	return nil, nil
}

// warmUp waits until every member answers a linearizable read, at most a
// minute: a member that has just started may take longer than the
// traffic's 200 ms request timeout for its first, and the traffic must be
// running before the first kill.
func warmUp(ctx context.Context, c *memberproc.Cluster) error {
	for _, m := range c.Members {
		cli, err := clientv3.New(clientv3.Config{Endpoints: []string{m.Client}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
		if err != nil {
			return err
		}
		deadline := time.Now().Add(time.Minute)
		for {
			rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			_, err = cli.Get(rctx, "warm-up")
			cancel()
			if err == nil || time.Now().After(deadline) {
				break
			}
		}
		cli.Close()
		if err != nil {
			return fmt.Errorf("%s: no linearizable read within a minute: %w", m.Name, err)
		}
	}
	return nil
}

// persistedRequests reads the history every member persisted, after they
// were stopped, with etcd's report.PersistedRequests, which merges the
// members' raft logs as etcd's robustness test does. etcd's members' WALs
// are read where they are; a Strata member's raft log (cluster.ReadLog) is
// first written as an etcd WAL under its directory, entry by entry: the
// same indexes, terms, conf changes and InternalRaftRequest commands.
func persistedRequests(lg *zap.Logger, c *memberproc.Cluster, kind string) ([]model.EtcdRequest, error) {
	var dirs []string
	for _, m := range c.Members {
		if kind != "strata" {
			dirs = append(dirs, m.Dir)
			continue
		}
		hs, snapIndex, ents, err := cluster.ReadLog(m.RaftDir)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", m.Name, err)
		}
		if snapIndex > 0 {
			return nil, fmt.Errorf("%s: the raft log was truncated at a snapshot (index %d): the history before it is lost; raise cluster.snapshot_entries", m.Name, snapIndex)
		}
		dir := filepath.Join(m.Dir, "etcd-wal")
		if err := os.RemoveAll(dir); err != nil {
			return nil, err
		}
		if err := os.MkdirAll(filepath.Dir(datadir.ToWALDir(dir)), 0o755); err != nil {
			return nil, err
		}
		w, err := wal.Create(lg, datadir.ToWALDir(dir), nil)
		if err != nil {
			return nil, err
		}
		err = w.Save(hs, ents)
		if cerr := w.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return nil, fmt.Errorf("%s: writing its log as an etcd WAL: %w", m.Name, err)
		}
		dirs = append(dirs, dir)
	}
	return report.PersistedRequests(lg, dirs)
}
