package robustness

import (
	"context"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	"golang.org/x/sync/errgroup"

	"go.etcd.io/etcd/tests/v3/robustness/client"
	"go.etcd.io/etcd/tests/v3/robustness/failpoint"
	"go.etcd.io/etcd/tests/v3/robustness/identity"
	"go.etcd.io/etcd/tests/v3/robustness/model"
	"go.etcd.io/etcd/tests/v3/robustness/report"
	"go.etcd.io/etcd/tests/v3/robustness/traffic"
	"go.etcd.io/etcd/tests/v3/robustness/validate"

	"github.com/stratadb/strata/internal/memberproc"
)

// profiles are the traffic of etcd's robustness scenarios run here:
// Kubernetes' (an apiserver's reads, creates, updates and deletes with
// optimistic concurrency, list and watch) and etcd's key-value traffic
// with leases (puts, deletes, multi-op txns, lease grant, revoke and
// puts with a lease), each with etcd's watch and compaction traffic.
var profiles = []struct {
	name    string
	traffic traffic.Traffic
	profile traffic.Profile
}{
	{"Kubernetes", traffic.Kubernetes, traffic.Profile{KeyValue: &traffic.KeyValueMedium, Watch: &traffic.WatchDefault, Compaction: &traffic.CompactionDefault}},
	{"EtcdDeleteLeases", traffic.EtcdPutDeleteLease, traffic.Profile{KeyValue: &traffic.KeyValueMedium, Watch: &traffic.WatchDefault, Compaction: &traffic.CompactionDefault}},
}

// TestRobustness drives etcd's robustness framework against three members
// (serverEnv) killed and restarted during the traffic, and fails unless
// every validator passes: linearizability against etcd's model, the watch
// guarantees (ordered, unique, atomic, reliable, resumable, bookmarkable,
// prevKV, IsCreate, filter), serializable reads, and equal hashes of every
// member's store at the end.
func TestRobustness(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three servers and runs about a minute of traffic")
	}
	kills := envInt(t, killsEnv, 3)
	every := envDuration(t, killEveryEnv, 5*time.Second)
	for _, p := range profiles {
		t.Run(p.name, func(t *testing.T) {
			c, kind := startMembers(t)
			defer func() { c.Stop(t.Failed()) }()
			lg := zaptest.NewLogger(t, zaptest.Level(zap.InfoLevel))
			fp := &sigkillFailpoint{c: c, kills: kills, every: every}
			s := run(t, lg, kind, c, fp, p.traffic, p.profile)
			t.Logf("%s, %s traffic: %s", kind, p.name, s)
			for _, k := range fp.killed {
				t.Logf("SIGKILL %s (leader %v) at %v, serving again %v later", k.Member, k.Leader, k.At.Round(time.Millisecond), k.Down.Round(time.Millisecond))
			}
			if len(fp.killed) != kills {
				t.Errorf("%d of %d kills done", len(fp.killed), kills)
			}
		})
	}
}

// summary is what a run did, for the log and docs/robustness.md.
type summary struct {
	ops, failed, watchEvents, watches int
	maxRevision                       int64
	persisted                         int
}

func (s summary) String() string {
	return fmt.Sprintf("%d KV operations (%d failed or unknown), %d watch requests with %d events, last revision %d, %d requests in the merged raft log",
		s.ops, s.failed, s.watches, s.watchEvents, s.maxRevision, s.persisted)
}

// run is etcd's testRobustness and runScenario (tests/v3/robustness
// main_test.go) with the cluster started by memberproc and the fault
// injected by fp.
func run(t *testing.T, lg *zap.Logger, kind string, c *memberproc.Cluster, fp *sigkillFailpoint, tf traffic.Traffic, profile traffic.Profile) (s summary) {
	clus := frameworkCluster(c)
	dir := resultsDir(t)
	r, err := report.NewTestReport(lg, dir, report.ServerDataPaths(clus), &report.TrafficDetail{ExpectUniqueRevision: tf.ExpectUniqueRevision()})
	if err != nil {
		t.Fatal(err)
	}
	panicked := true
	defer func() {
		if err := r.Finalize(t.Failed(), panicked); err != nil {
			t.Error(err)
		}
	}()

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	if err := warmUp(ctx, c); err != nil {
		t.Fatal(err)
	}
	var g errgroup.Group
	var failpointReports []report.ClientReport
	failpointInjected := make(chan report.FailpointInjection, 1)
	baseTime := time.Now()
	ids := identity.NewIDProvider()
	g.Go(func() error {
		defer close(failpointInjected)
		time.Sleep(randomize(time.Second, 200*time.Millisecond))
		fr, err := failpoint.Inject(ctx, t, lg, clus, fp, baseTime, ids)
		if err != nil {
			t.Error(err)
			cancel()
		}
		time.Sleep(randomize(time.Second, 200*time.Millisecond))
		if fr != nil {
			failpointInjected <- fr.FailpointInjection
			failpointReports = fr.Client
		}
		return nil
	})
	trafficSet := client.NewSet(ids, baseTime)
	defer trafficSet.Close()
	maxRevisionChan := make(chan int64, 1)
	g.Go(func() error {
		defer close(maxRevisionChan)
		ops := traffic.SimulateTraffic(ctx, t, lg, clus, profile, tf, failpointInjected, trafficSet)
		maxRevisionChan <- report.OperationsMaxRevision(ops)
		return nil
	})
	watchSet := client.NewSet(ids, baseTime)
	defer watchSet.Close()
	g.Go(func() error {
		return client.CollectClusterWatchEvents(ctx, client.CollectClusterWatchEventsParam{
			Lg: lg, Endpoints: clus.EndpointsGRPC(), MaxRevisionChan: maxRevisionChan, ClientSet: watchSet,
		})
	})
	if err := g.Wait(); err != nil {
		t.Error(err)
	}
	if err := client.CheckEndOfTestHashKV(ctx, clus); err != nil {
		t.Error(err)
	}
	reports := slices.Concat(trafficSet.Reports(), watchSet.Reports(), failpointReports)
	r.SetClientReports(reports)

	// The members stop before their logs are read, as after a crash.
	for _, m := range c.Members {
		m.Kill()
	}
	if err := r.SaveEtcdData(); err != nil {
		t.Error(err)
	}
	persisted, err := persistedRequests(lg, c, kind)
	if err != nil {
		t.Error(err)
	}
	if len(persisted) == 0 {
		t.Error("no persisted requests: the watch and serializable validators would be skipped")
	}
	result := validate.ValidateAndReturnVisualize(lg, validate.Config{ExpectRevisionUnique: tf.ExpectUniqueRevision()}, reports, persisted, 5*time.Minute)
	if err := result.Error(); err != nil {
		t.Error(err)
		if result.Linearization.Model.Step != nil {
			// etcd's Visualize draws only a linearizable history; the one
			// that is not is the one to look at.
			path := filepath.Join(dir, "history.html")
			if err := porcupine.VisualizePath(result.Linearization.Model, result.Linearization.Info, path); err != nil {
				t.Error(err)
			} else {
				t.Logf("porcupine's visualization of the history: %s", path)
			}
		}
	} else {
		r.SetVisualizer(result.Linearization.Visualize)
	}
	for name, res := range map[string]validate.Result{"assumptions": result.Assumptions, "linearization": result.Linearization.Result, "watch": result.Watch, "serializable": result.Serializable} {
		if res.Status != validate.Success {
			t.Errorf("validator %s: %s, want Success", name, res)
		}
	}
	panicked = false

	s.persisted = len(persisted)
	s.maxRevision = report.OperationsMaxRevision(reports)
	for _, cr := range reports {
		for _, op := range cr.KeyValue {
			s.ops++
			if op.Output.(model.MaybeEtcdResponse).Error != "" {
				s.failed++
			}
		}
		for _, w := range cr.Watch {
			s.watches++
			for _, resp := range w.Responses {
				s.watchEvents += len(resp.Events)
			}
		}
	}
	return s
}

func randomize(base, jitter time.Duration) time.Duration {
	return base - jitter + time.Duration(rand.Int63n(int64(jitter)*2))
}

// resultsDir is where the run's report goes: RESULTS_DIR as etcd's
// robustness tests take it, or the system's temporary directory. It is
// kept when the run fails (or PERSIST_RESULTS is set): client histories,
// the members' data, and history.html, porcupine's visualization.
func resultsDir(t *testing.T) string {
	base := os.Getenv("RESULTS_DIR")
	if base == "" {
		base = filepath.Join(os.TempDir(), "strata-robustness")
	}
	dir := filepath.Join(base, strings.ReplaceAll(t.Name(), "/", "_"), fmt.Sprint(time.Now().UnixNano()))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	return dir
}
