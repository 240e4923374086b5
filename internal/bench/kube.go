package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stratadb/strata/internal/report"
	"github.com/stratadb/strata/internal/workload"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// KubeLoad drives a store the way a Kubernetes apiserver does with pods:
// creates as a txn on create_revision = 0, updates as a txn on the
// object's last mod_revision (the apiserver's GuaranteedUpdate, retried on
// conflict), events under /registry/events/ on a lease renewed each
// minute, one watch on the pods' prefix with prevKV, a compaction every
// CompactEvery to the revision of the previous tick (the apiserver's
// compactor), and at the end a full list in pages of 500 with
// continuation. Objects come from workload.Pods. The run is bounded by
// its counts and by Timeout.
type KubeLoad struct {
	// Endpoints are the server's HOST:PORT, or every member's of a
	// cluster. Each connection is one clientv3 client of them all, which
	// sends its requests round-robin over the members, as Kubernetes'
	// apiserver is given every etcd member (--etcd-servers).
	Endpoints []string
	// ListEndpoint, if set, is the one member the final list goes to (a
	// follower of a cluster); "" lists over Endpoints.
	ListEndpoint string
	// Pods is the number of pods created; Updates the number of updates
	// that follow, to pods picked at random.
	Pods, Updates int
	// Clients share Conns gRPC connections (client c uses c mod Conns).
	Clients, Conns int
	// EventEvery: every EventEvery-th write also puts an event of about
	// 1 KB on the current lease; 0 writes none.
	EventEvery int
	// CompactEvery is the compactor's period; 0 never compacts.
	CompactEvery time.Duration
	// Seed picks the pods and the order of updates.
	Seed int64
	// Timeout bounds the whole load.
	Timeout time.Duration
	// Progress receives a line every 10 s; nil discards them.
	Progress io.Writer
	// Sample is called once a second while the load runs (for the
	// server's RSS and disk); nil skips it.
	Sample func(t time.Duration) KubeGauge
	// CPU returns the server's CPU seconds so far (a cluster's summed
	// over its members), read around the list; nil skips it.
	CPU func() (float64, error)
	// Disrupt, if set, runs beside the load from its start, such as a
	// leader's kill and restart; it returns when it disrupted, as an
	// offset from the load's start, or 0 if the load ended (ctx) first.
	Disrupt func(ctx context.Context, start time.Time) (time.Duration, error)
	// Retry makes a write that failed (its member killed, or no leader
	// for a while) be tried again, every 50 ms for up to 30 s, as the
	// apiserver's client retries: a create that then finds its pod, or
	// an update whose conflict shows the value it had tried, committed
	// before the failure and counts once. The watch is reopened after
	// the last event it received. Set it with Disrupt.
	Retry bool
}

// KubeGauge is what a sampler reads off the server each second.
type KubeGauge struct {
	RSSBytes  int64
	DiskBytes int64
}

// KubeSecond is one second of a KubeLoad.
type KubeSecond struct {
	// At is the second's offset from the start of the load.
	At int `json:"at"`
	// Phase is "create" or "update".
	Phase string `json:"phase"`
	// Puts is the number of pod writes completed in the second.
	Puts int `json:"puts"`
	// P99 is the 99th percentile latency of the pod writes completed in
	// the second (0 with none).
	P99 time.Duration `json:"p99_ns"`
	// Compacting says a compaction was requested in this second or the
	// nine before it; CompactRequested that one was requested in it.
	Compacting       bool `json:"compacting"`
	CompactRequested bool `json:"compact_requested"`
	KubeGauge
}

// KubeResult is what a KubeLoad measured.
type KubeResult struct {
	// CreatesPerSec and UpdatesPerSec are completed pod writes per second
	// of each phase's wall time.
	CreatesPerSec, UpdatesPerSec float64
	// PutP50, PutP99 are the latencies of every pod write; the P99 is
	// also split by whether a compaction was under way (the ten seconds
	// after one was requested).
	PutP50, PutP99, P99Compacting, P99Quiet time.Duration
	// StalledSeconds counts whole seconds of the load with no completed
	// pod write.
	StalledSeconds int
	// LongestGap is the longest time between two pod writes completed one
	// after the other (or between the load's start and the first).
	LongestGap time.Duration
	// DisruptedAt is when KubeLoad.Disrupt disrupted, from the load's
	// start (0: it did not); GapAfterDisrupt the longest time without a
	// completed pod write from then to the load's end (LongestGap counted
	// from the disruption on). A write in flight may complete just after
	// a kill: the time from the kill to the next write says little.
	DisruptedAt, GapAfterDisrupt time.Duration
	// Retries counts the writes tried again after an error (KubeLoad.Retry).
	Retries int
	// Conflicts counts updates retried after a mod_revision conflict.
	Conflicts int
	// Events counts the watch events received on the pods' prefix; every
	// acknowledged pod write must arrive exactly once.
	Events int
	// Compactions counts compactions made.
	Compactions int
	// ListSeconds is the time of a full paginated list of the pods, and
	// ListKeys the keys it returned.
	ListSeconds float64
	ListKeys    int
	// ListCPUSeconds is the server's CPU time over the list (0 without
	// KubeLoad.CPU).
	ListCPUSeconds float64
	// P99ByKind is the 99th percentile latency of each kind of request
	// the apiserver sends, one by one: "create" and "update" (each txn,
	// a conflict's retry included), "event" (a put on the event lease),
	// "list page" (a Range of 500 of the final list).
	P99ByKind map[string]time.Duration
	// LastRevision is the store's revision at the end.
	LastRevision int64
	// Seconds is the load's time line.
	Seconds []KubeSecond
}

// ErrKubeLoad reports a load that failed: a write that errored, a lost
// or repeated watch event, or a list that missed pods.
var ErrKubeLoad = errors.New("bench: kube load")

// Run runs the load and checks what it can check on the way: every write
// acknowledged, every event delivered once, the list complete.
func (l KubeLoad) Run(ctx context.Context) (*KubeResult, error) {
	if err := l.validate(); err != nil {
		return nil, err
	}
	progress := l.Progress
	if progress == nil {
		progress = io.Discard
	}
	ctx, cancel := context.WithTimeout(ctx, l.Timeout)
	defer cancel()
	conns, err := l.dial(l.Conns + 1) // the last one watches, compacts and lists
	defer closeAll(conns)
	if err != nil {
		return nil, err
	}
	admin := conns[l.Conns]
	first, err := admin.Get(ctx, "/registry/pods/", clientv3.WithCountOnly())
	if err != nil {
		return nil, fmt.Errorf("%w: first read: %w", ErrKubeLoad, err)
	}
	k := l.newRun(admin)

	// The watch on the pods' prefix, from the revision before any write.
	watchCtx, stopWatch := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer stopWatch()
	openWatch := func(rev int64) clientv3.WatchChan {
		return admin.Watch(watchCtx, "/registry/pods/", clientv3.WithPrefix(), clientv3.WithPrevKV(), clientv3.WithRev(rev), clientv3.WithCreatedNotify())
	}
	watchDone := make(chan error, 1)
	go func() { watchDone <- k.watch(watchCtx, openWatch, first.Header.Revision+1) }()
	// The writes start once the server has the watch: a server without
	// history (the transport floor) cannot start it at a revision the
	// writes have passed.
	select {
	case <-k.watching:
	case err := <-watchDone:
		watchDone <- err
	case <-ctx.Done():
	}

	var bg sync.WaitGroup
	bgCtx, stopBG := context.WithCancel(ctx)
	defer stopBG()
	bg.Add(2)
	go func() { defer bg.Done(); k.compactor(bgCtx, admin) }()
	go func() { defer bg.Done(); k.sampler(bgCtx) }()
	go k.report(bgCtx, progress)
	var (
		disruptedAt time.Duration
		disruptErr  error
	)
	if l.Disrupt != nil {
		bg.Add(1)
		go func() { defer bg.Done(); disruptedAt, disruptErr = l.Disrupt(bgCtx, k.start) }()
	}

	res := &KubeResult{}
	phaseEnd, err := k.phase(ctx, conns[:l.Conns], "create", l.Pods, k.create)
	res.CreatesPerSec = float64(l.Pods) / phaseEnd.Seconds()
	if err == nil && l.Updates > 0 {
		var upd time.Duration
		upd, err = k.phase(ctx, conns[:l.Conns], "update", l.Updates, k.update)
		res.UpdatesPerSec = float64(l.Updates) / (upd - phaseEnd).Seconds()
		phaseEnd = upd
	}
	stopBG()
	bg.Wait()
	res.DisruptedAt = disruptedAt
	if err == nil && disruptErr != nil {
		err = fmt.Errorf("%w: disrupting the load: %w", ErrKubeLoad, disruptErr)
	}
	if err != nil {
		return res, err
	}

	// Every acknowledged write arrives on the watch, once.
	last, err := admin.Get(ctx, "/registry/pods/", clientv3.WithCountOnly())
	if err != nil {
		return res, fmt.Errorf("%w: last read: %w", ErrKubeLoad, err)
	}
	res.LastRevision = last.Header.Revision
	k.watchUntil.Store(res.LastRevision)
	if err := k.awaitWatch(watchCtx, admin, watchDone); err != nil {
		return res, err
	}
	res.Events = int(k.events.Load())
	if want := l.Pods + l.Updates; res.Events != want {
		return res, fmt.Errorf("%w: the watch delivered %d pod events, want %d", ErrKubeLoad, res.Events, want)
	}

	lister := admin
	if l.ListEndpoint != "" {
		lc, err := l.dialOne([]string{l.ListEndpoint})
		if err != nil {
			return res, err
		}
		defer lc.Close()
		// The connection is made before the list's clock starts, as the
		// admin connection's was.
		if _, err := lc.Get(ctx, "compact_rev_key", clientv3.WithCountOnly(), clientv3.WithSerializable()); err != nil {
			return res, fmt.Errorf("%w: first read through %s: %w", ErrKubeLoad, l.ListEndpoint, err)
		}
		lister = lc
	}
	cpu := l.CPU
	if cpu == nil {
		cpu = func() (float64, error) { return 0, nil }
	}
	cpu0, err := cpu()
	if err != nil {
		return res, err
	}
	t0 := time.Now()
	res.ListKeys, err = ListAll(ctx, lister, "/registry/pods/", 500, k.timed)
	res.ListSeconds = time.Since(t0).Seconds()
	if err != nil {
		return res, err
	}
	cpu1, err := cpu()
	if err != nil {
		return res, err
	}
	res.ListCPUSeconds = cpu1 - cpu0
	res.P99ByKind = k.p99ByKind()
	if res.ListKeys != l.Pods {
		return res, fmt.Errorf("%w: the list returned %d pods, want %d", ErrKubeLoad, res.ListKeys, l.Pods)
	}
	if err := k.verify(ctx, admin); err != nil {
		return res, err
	}
	k.summarize(res, phaseEnd)
	return res, nil
}

// Fill writes the pods as Run does, creates then updates through the
// same requests, without Run's watch, compactions, events, list and
// read-back: the data of a benchmark that measures something else (a new
// member's catch-up). It returns the logical bytes the pods hold at the
// end (each pod's key and last acknowledged value), the revision of the
// last write and the number of creates retried after a timeout (a
// create whose outcome was unknown is tried again, as the apiserver's
// client does; Run fails on it instead).
func (l KubeLoad) Fill(ctx context.Context) (logical, rev int64, retried int, err error) {
	if err := l.validate(); err != nil {
		return 0, 0, 0, err
	}
	l.EventEvery = 0
	ctx, cancel := context.WithTimeout(ctx, l.Timeout)
	defer cancel()
	conns, err := l.dial(l.Conns)
	defer closeAll(conns)
	if err != nil {
		return 0, 0, 0, err
	}
	k := l.newRun(nil)
	if l.Progress != nil {
		rctx, stop := context.WithCancel(ctx)
		defer stop()
		go k.report(rctx, l.Progress)
	}
	if _, err := k.phase(ctx, conns, "create", l.Pods, k.createRetried); err != nil {
		return 0, 0, int(k.retries.Load()), err
	}
	if l.Updates > 0 {
		if _, err := k.phase(ctx, conns, "update", l.Updates, k.update); err != nil {
			return 0, 0, int(k.retries.Load()), err
		}
	}
	for i := range l.Pods {
		logical += int64(len(k.pods.Key(i)) + len(k.pods.Pod(i, int(k.stored[i].Load()))))
		rev = max(rev, k.modRev[i].Load())
	}
	return logical, rev, int(k.retries.Load()), nil
}

// validate checks the load's counts.
func (l KubeLoad) validate() error {
	if l.Pods < 1 || l.Updates < 0 || l.Clients < 1 || l.Conns < 1 || l.Conns > l.Clients || l.Timeout <= 0 {
		return fmt.Errorf("%w: need pods (%d) >= 1, updates (%d) >= 0, 1 <= conns (%d) <= clients (%d), timeout (%s) > 0", ErrKubeLoad, l.Pods, l.Updates, l.Conns, l.Clients, l.Timeout)
	}
	return nil
}

// dial opens n client connections, each to all of the load's endpoints;
// the caller closes those returned, with an error too.
func (l KubeLoad) dial(n int) ([]*clientv3.Client, error) {
	conns := make([]*clientv3.Client, 0, n)
	for range n {
		c, err := l.dialOne(l.Endpoints)
		if err != nil {
			return conns, err
		}
		conns = append(conns, c)
	}
	return conns, nil
}

// dialOne opens a client of endpoints.
func (l KubeLoad) dialOne(endpoints []string) (*clientv3.Client, error) {
	if len(endpoints) == 0 {
		return nil, fmt.Errorf("%w: no endpoint given", ErrKubeLoad)
	}
	c, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second, Logger: nopLogger})
	if err != nil {
		return nil, fmt.Errorf("%w: connecting to %s: %w", ErrKubeLoad, strings.Join(endpoints, ","), err)
	}
	return c, nil
}

func closeAll(conns []*clientv3.Client) {
	for _, c := range conns {
		c.Close()
	}
}

// newRun is the state of a run of l starting now; admin grants the event
// leases.
func (l KubeLoad) newRun(admin *clientv3.Client) *kubeRun {
	k := &kubeRun{KubeLoad: l, pods: workload.NewPods(l.Seed), start: time.Now(), watching: make(chan struct{})}
	k.modRev = make([]atomic.Int64, l.Pods)
	k.gen = make([]atomic.Int32, l.Pods)
	k.stored = make([]atomic.Int32, l.Pods)
	k.perSecond = make([]atomic.Int32, int(l.Timeout/time.Second)+2)
	k.compactAt = make([]atomic.Bool, len(k.perSecond))
	k.lease.c = admin
	return k
}

// verify reads every pod back: its value and mod_revision are the last
// acknowledged write's. Then the history: a read at the last compaction's
// revision is answered, one below it is refused as compacted.
func (k *kubeRun) verify(ctx context.Context, c *clientv3.Client) error {
	for i := range k.Pods {
		key := k.pods.Key(i)
		resp, err := c.Get(ctx, key)
		if err != nil {
			return fmt.Errorf("%w: reading %s back: %w", ErrKubeLoad, key, err)
		}
		if len(resp.Kvs) != 1 || resp.Kvs[0].ModRevision != k.modRev[i].Load() || string(resp.Kvs[0].Value) != string(k.pods.Pod(i, int(k.stored[i].Load()))) {
			return fmt.Errorf("%w: %s is not its last acknowledged write (mod_revision %d)", ErrKubeLoad, key, k.modRev[i].Load())
		}
	}
	k.mu.Lock()
	compactedTo := k.compactedTo
	k.mu.Unlock()
	if compactedTo == 0 {
		return nil
	}
	if _, err := c.Get(ctx, "/registry/pods/", clientv3.WithPrefix(), clientv3.WithRev(compactedTo), clientv3.WithCountOnly()); err != nil {
		return fmt.Errorf("%w: reading at the compacted revision %d: %w", ErrKubeLoad, compactedTo, err)
	}
	if _, err := c.Get(ctx, "/registry/pods/", clientv3.WithPrefix(), clientv3.WithRev(compactedTo-1), clientv3.WithCountOnly()); err == nil {
		return fmt.Errorf("%w: a read below the compacted revision %d was answered", ErrKubeLoad, compactedTo)
	}
	return nil
}

// kubeRun is the state of one KubeLoad while it runs.
type kubeRun struct {
	KubeLoad
	pods  *workload.Pods
	start time.Time
	// watching is closed once the server has created the pods' watch.
	watching     chan struct{}
	watchingOnce sync.Once

	modRev    []atomic.Int64 // each pod's last mod_revision
	gen       []atomic.Int32 // each pod's last generation tried
	stored    []atomic.Int32 // each pod's last generation acknowledged
	perSecond []atomic.Int32 // pod writes completed in each second
	compactAt []atomic.Bool  // seconds in which a compaction was requested

	mu          sync.Mutex
	latencies   []kubeLatency
	byKind      map[string][]time.Duration // each request's latency, by kind (requestKinds)
	compacted   []time.Duration            // offsets of compaction requests
	compactedTo int64                      // the revision of the last compaction
	phases      []phaseMark
	gauges      []KubeGauge

	conflicts  atomic.Int64
	retries    atomic.Int64 // creates retried after a timeout (Fill)
	events     atomic.Int64
	watchUntil atomic.Int64
	// compactAsked is the revision of the last compaction requested.
	compactAsked atomic.Int64
	compactions  atomic.Int64
	done         atomic.Int64
	lease        kubeLease
}

// requestKinds are the kinds of request KubeResult.P99ByKind reports,
// in the order of the table.
var requestKinds = []string{"create", "update", "event", "list page"}

// timed runs one request of kind and records its latency.
func (k *kubeRun) timed(kind string, req func() error) error {
	t0 := time.Now()
	err := req()
	took := time.Since(t0)
	k.mu.Lock()
	if k.byKind == nil {
		k.byKind = map[string][]time.Duration{}
	}
	k.byKind[kind] = append(k.byKind[kind], took)
	k.mu.Unlock()
	return err
}

// p99ByKind is the 99th percentile of each kind's recorded latencies.
func (k *kubeRun) p99ByKind() map[string]time.Duration {
	k.mu.Lock()
	defer k.mu.Unlock()
	out := make(map[string]time.Duration, len(k.byKind))
	for kind, d := range k.byKind {
		slices.Sort(d)
		out[kind] = percentile(d, 99)
	}
	return out
}

// kubeLatency is one completed write: when it completed and how long it took.
type kubeLatency struct{ end, took time.Duration }

type phaseMark struct {
	name  string
	start time.Duration
}

// phase runs n operations over the clients and returns its end offset.
func (k *kubeRun) phase(ctx context.Context, conns []*clientv3.Client, name string, n int, op func(context.Context, *clientv3.Client, int, int) error) (time.Duration, error) {
	k.mu.Lock()
	k.phases = append(k.phases, phaseMark{name, time.Since(k.start)})
	k.mu.Unlock()
	var (
		wg    sync.WaitGroup
		next  atomic.Int64
		first error
		once  sync.Once
	)
	for w := range k.Clients {
		c := conns[w%len(conns)]
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				t0 := time.Now()
				rctx, rcancel := context.WithTimeout(ctx, 30*time.Second)
				err := op(rctx, c, w, i)
				rcancel()
				if err != nil {
					once.Do(func() { first = fmt.Errorf("%w: %s %d: %w", ErrKubeLoad, name, i, err) })
					return
				}
				end := time.Since(k.start)
				k.perSecond[min(int(end/time.Second), len(k.perSecond)-1)].Add(1)
				k.done.Add(1)
				k.mu.Lock()
				k.latencies = append(k.latencies, kubeLatency{end, end - t0.Sub(k.start)})
				k.mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if first == nil && ctx.Err() != nil {
		first = fmt.Errorf("%w: %s phase not done in %s: %w", ErrKubeLoad, name, k.Timeout, ctx.Err())
	}
	return time.Since(k.start), first
}

// create writes pod i as the apiserver creates an object. With Retry, a
// create that failed is tried again; if the retry finds the pod holding
// the value it wrote, the attempt that failed had committed.
func (k *kubeRun) create(ctx context.Context, c *clientv3.Client, _, i int) error {
	key := k.pods.Key(i)
	for failed := false; ; failed = true {
		var resp *clientv3.TxnResponse
		err := k.timed("create", func() (err error) {
			resp, err = c.Txn(ctx).
				If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
				Then(clientv3.OpPut(key, string(k.pods.Pod(i, 0)))).
				Commit()
			return err
		})
		if err != nil {
			if k.retryAfter(ctx, err) {
				continue
			}
			return err
		}
		if resp.Succeeded {
			k.modRev[i].Store(resp.Header.Revision)
			break
		}
		if !failed {
			return fmt.Errorf("pod %s %w", key, errPodExists)
		}
		got, err := c.Get(ctx, key)
		if err != nil || len(got.Kvs) != 1 || string(got.Kvs[0].Value) != string(k.pods.Pod(i, 0)) {
			return fmt.Errorf("reading back pod %s after a create retried: %v (%w)", key, err, errPodExists)
		}
		k.modRev[i].Store(got.Kvs[0].ModRevision)
		break
	}
	return k.maybeEvent(ctx, c, i)
}

// retryAfter says whether a request that failed with err is to be tried
// again (KubeLoad.Retry, and time left in ctx), after a pause of 50 ms.
func (k *kubeRun) retryAfter(ctx context.Context, err error) bool {
	if !k.Retry || err == nil || ctx.Err() != nil {
		return false
	}
	k.retries.Add(1)
	select {
	case <-ctx.Done():
		return false
	case <-time.After(50 * time.Millisecond):
		return true
	}
}

// errPodExists is a create that found its pod.
var errPodExists = errors.New("already exists")

// createRetried is create, tried again up to twice after a write whose
// outcome is unknown (etcd's "request timed out"), as the apiserver's
// client retries; a retry that finds the pod means the attempt that timed
// out committed, and the pod's revision is read back.
func (k *kubeRun) createRetried(ctx context.Context, c *clientv3.Client, w, i int) error {
	err := k.create(ctx, c, w, i)
	for tries := 0; tries < 2 && errors.Is(err, rpctypes.ErrTimeout); tries++ {
		k.retries.Add(1)
		if err = k.create(ctx, c, w, i); errors.Is(err, errPodExists) {
			resp, gerr := c.Get(ctx, k.pods.Key(i))
			if gerr != nil || len(resp.Kvs) != 1 {
				return fmt.Errorf("reading back pod %d after a retried create: %v (%w)", i, gerr, err)
			}
			k.modRev[i].Store(resp.Kvs[0].ModRevision)
			return nil
		}
	}
	return err
}

// update rewrites a pod picked at random, as GuaranteedUpdate does: a txn
// on the mod_revision the writer last saw, and on a conflict the current
// object read in the same txn and the update tried again. Client w
// updates only pods i with i mod Clients = w, so conflicts come only from
// a stale revision, as in an apiserver with a warm watch cache.
func (k *kubeRun) update(ctx context.Context, c *clientv3.Client, w, n int) error {
	r := rand.New(rand.NewPCG(uint64(k.Seed), uint64(n)))
	per := (k.Pods - w + k.Clients - 1) / k.Clients
	if per == 0 {
		return k.create(ctx, c, w, n) // fewer pods than clients: nothing of its own
	}
	i := w + k.Clients*r.IntN(per)
	key := k.pods.Key(i)
	var failed []int // generations tried whose outcome is unknown (Retry)
	for {
		gen := int(k.gen[i].Add(1))
		rev := k.modRev[i].Load()
		var resp *clientv3.TxnResponse
		err := k.timed("update", func() (err error) {
			resp, err = c.Txn(ctx).
				If(clientv3.Compare(clientv3.ModRevision(key), "=", rev)).
				Then(clientv3.OpPut(key, string(k.pods.Pod(i, gen)))).
				Else(clientv3.OpGet(key)).
				Commit()
			return err
		})
		if err != nil {
			if k.retryAfter(ctx, err) {
				failed = append(failed, gen)
				continue
			}
			return err
		}
		if resp.Succeeded {
			k.modRev[i].Store(resp.Header.Revision)
			k.stored[i].Store(int32(gen))
			return k.maybeEvent(ctx, c, i)
		}
		kvs := resp.Responses[0].GetResponseRange().Kvs
		if len(kvs) == 0 {
			return fmt.Errorf("pod %s vanished", key)
		}
		k.modRev[i].Store(kvs[0].ModRevision)
		// An attempt that failed had committed: that is the update.
		for _, g := range failed {
			if string(kvs[0].Value) == string(k.pods.Pod(i, g)) {
				k.stored[i].Store(int32(g))
				return k.maybeEvent(ctx, c, i)
			}
		}
		k.conflicts.Add(1)
	}
}

// maybeEvent puts an event for pod i every EventEvery writes.
func (k *kubeRun) maybeEvent(ctx context.Context, c *clientv3.Client, i int) error {
	if k.EventEvery <= 0 || k.done.Load()%int64(k.EventEvery) != 0 {
		return nil
	}
	ns, name := k.pods.Name(i)
	key := fmt.Sprintf("/registry/events/%s/%s.%x", ns, name, time.Now().UnixNano())
	val := fmt.Sprintf(`{"kind":"Event","apiVersion":"v1","metadata":{"name":%q,"namespace":%q},"involvedObject":{"kind":"Pod","namespace":%q,"name":%q,"apiVersion":"v1"},"reason":"Pulled","message":"Container image already present on machine and can be accessed by the pod","source":{"component":"kubelet","host":"node"},"count":1,"type":"Normal","reportingComponent":"kubelet"}`, name, ns, ns, name)
	for {
		id, err := k.lease.current(ctx)
		if err == nil {
			err = k.timed("event", func() error {
				_, err := c.Put(ctx, key, val, clientv3.WithLease(id))
				return err
			})
		}
		if err == nil || !k.retryAfter(ctx, err) {
			return err
		}
	}
}

// kubeLease is the apiserver's event lease: one lease of an hour, reused
// for a minute of events, then a new one.
type kubeLease struct {
	c    *clientv3.Client
	mu   sync.Mutex
	id   clientv3.LeaseID
	made time.Time
}

func (l *kubeLease) current(ctx context.Context) (clientv3.LeaseID, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.id != 0 && time.Since(l.made) < time.Minute {
		return l.id, nil
	}
	resp, err := l.c.Grant(ctx, 3600)
	if err != nil {
		return 0, err
	}
	l.id, l.made = resp.ID, time.Now()
	return l.id, nil
}

// watch counts the events on the pods' prefix from revision from, on the
// watch open opens, checking that revisions only go up, until watchUntil
// is reached. With Retry a watch that fails (its member killed, or no
// leader) is opened again after the last event received, as a
// Kubernetes reflector does; a compacted revision still fails it.
func (k *kubeRun) watch(ctx context.Context, open func(rev int64) clientv3.WatchChan, from int64) error {
	last := from - 1
	for {
		err := k.watchFrom(open(last+1), &last)
		if !errors.Is(err, errWatchBroken) || errors.Is(err, rpctypes.ErrCompacted) || !k.retryAfter(ctx, err) {
			return err
		}
	}
}

// errWatchBroken is a watch the server ended or failed, as opposed to
// one whose events broke a guarantee.
var errWatchBroken = errors.New("watch broken")

// watchFrom is one watch of watch: it returns nil once watchUntil is
// reached, or an error, wrapping errWatchBroken where the watch itself
// failed or ended.
func (k *kubeRun) watchFrom(wch clientv3.WatchChan, lastp *int64) error {
	last := *lastp
	defer func() { *lastp = last }()
	for resp := range wch {
		if err := resp.Err(); err != nil {
			return fmt.Errorf("%w: watch: %w (%w)", ErrKubeLoad, err, errWatchBroken)
		}
		if resp.Created {
			k.watchingOnce.Do(func() { close(k.watching) })
		}
		for _, ev := range resp.Events {
			if ev.Kv.ModRevision <= last {
				return fmt.Errorf("%w: watch: event at revision %d after %d", ErrKubeLoad, ev.Kv.ModRevision, last)
			}
			last = ev.Kv.ModRevision
			// As in etcd, an event the watch sends after a compaction
			// at or past its revision has no previous value: that
			// compaction dropped it.
			if ev.IsModify() && ev.PrevKv == nil && ev.Kv.ModRevision > k.compactAsked.Load() {
				return fmt.Errorf("%w: watch: update of %s at %d without its previous value", ErrKubeLoad, ev.Kv.Key, last)
			}
			k.events.Add(1)
		}
		// A progress notification at or past the last revision says every
		// event up to it has been sent.
		if until := k.watchUntil.Load(); until > 0 && (last >= until || resp.IsProgressNotify() && resp.Header.Revision >= until) {
			return nil
		}
	}
	return fmt.Errorf("%w: watch ended after %d events (%w)", ErrKubeLoad, k.events.Load(), errWatchBroken)
}

// awaitWatch waits for the watch to reach watchUntil, asking for progress
// notifications so that it learns it has once the last pod event is out.
func (k *kubeRun) awaitWatch(ctx context.Context, c *clientv3.Client, done <-chan error) error {
	deadline := time.After(2 * time.Minute)
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		if err := c.RequestProgress(ctx); err != nil {
			return fmt.Errorf("%w: watch progress request: %w", ErrKubeLoad, err)
		}
		select {
		case err := <-done:
			return err
		case <-deadline:
			return fmt.Errorf("%w: the watch delivered %d of %d pod events in 2 minutes", ErrKubeLoad, k.events.Load(), k.Pods+k.Updates)
		case <-tick.C:
		}
	}
}

// compactor compacts every CompactEvery to the revision it saw at the
// tick before, as the apiserver's compactor does.
func (k *kubeRun) compactor(ctx context.Context, c *clientv3.Client) {
	if k.CompactEvery <= 0 {
		return
	}
	t := time.NewTicker(k.CompactEvery)
	defer t.Stop()
	var prev int64
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		resp, err := c.Get(ctx, "compact_rev_key", clientv3.WithCountOnly())
		if err != nil {
			continue
		}
		if prev > 0 {
			at := time.Since(k.start)
			// Not cancelled with the load's end: a compaction the server
			// applies is always recorded, so verify reads at the revision
			// compacted last.
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
			k.compactAsked.Store(prev)
			_, err := c.Compact(cctx, prev)
			cancel()
			if err == nil {
				k.compactions.Add(1)
				k.mu.Lock()
				k.compacted = append(k.compacted, at)
				k.compactedTo = prev
				k.mu.Unlock()
			}
		}
		prev = resp.Header.Revision
	}
}

// sampler reads the gauges once a second.
func (k *kubeRun) sampler(ctx context.Context) {
	if k.Sample == nil {
		return
	}
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		g := k.Sample(time.Since(k.start))
		k.mu.Lock()
		k.gauges = append(k.gauges, g)
		k.mu.Unlock()
	}
}

func (k *kubeRun) report(ctx context.Context, w io.Writer) {
	t := time.NewTicker(10 * time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			fmt.Fprintf(w, "  %3.0f s: %d/%d writes, %d compactions\n", time.Since(k.start).Seconds(), k.done.Load(), k.Pods+k.Updates, k.compactions.Load())
		}
	}
}

// compactWindow is how long after a compaction request its effects (the
// store's compaction work) count as "during compaction".
const compactWindow = 10 * time.Second

func (k *kubeRun) summarize(res *KubeResult, end time.Duration) {
	k.mu.Lock()
	defer k.mu.Unlock()
	res.Conflicts = int(k.conflicts.Load())
	res.Compactions = int(k.compactions.Load())
	seconds := int(end/time.Second) + 1
	compacting := make([]bool, seconds)
	requested := make([]bool, seconds)
	for _, at := range k.compacted {
		if s := int(at / time.Second); s < seconds {
			requested[s] = true
		}
		for s := int(at / time.Second); s < seconds && time.Duration(s)*time.Second < at+compactWindow; s++ {
			compacting[s] = true
		}
	}
	res.Retries = int(k.retries.Load())
	var all, in, out, ends []time.Duration
	perSecond := make([][]time.Duration, seconds)
	for _, l := range k.latencies {
		all = append(all, l.took)
		ends = append(ends, l.end)
		s := min(int(l.end/time.Second), seconds-1)
		perSecond[s] = append(perSecond[s], l.took)
		if compacting[min(int(l.end/time.Second), seconds-1)] {
			in = append(in, l.took)
		} else {
			out = append(out, l.took)
		}
	}
	for _, d := range [][]time.Duration{all, in, out, ends} {
		slices.Sort(d)
	}
	prev := time.Duration(0)
	for _, e := range ends {
		res.LongestGap = max(res.LongestGap, e-prev)
		if res.DisruptedAt > 0 && e > res.DisruptedAt {
			res.GapAfterDisrupt = max(res.GapAfterDisrupt, e-max(prev, res.DisruptedAt))
		}
		prev = e
	}
	res.PutP50, res.PutP99 = percentile(all, 50), percentile(all, 99)
	res.P99Compacting, res.P99Quiet = percentile(in, 99), percentile(out, 99)
	for s := range seconds {
		slices.Sort(perSecond[s])
		sec := KubeSecond{At: s, Puts: int(k.perSecond[min(s, len(k.perSecond)-1)].Load()), P99: percentile(perSecond[s], 99),
			Compacting: compacting[s], CompactRequested: requested[s], Phase: k.phaseAt(time.Duration(s) * time.Second)}
		if s < len(k.gauges) {
			sec.KubeGauge = k.gauges[s]
		}
		if sec.Puts == 0 && s < seconds-1 {
			res.StalledSeconds++
		}
		res.Seconds = append(res.Seconds, sec)
	}
}

func (k *kubeRun) phaseAt(t time.Duration) string {
	name := ""
	for _, p := range k.phases {
		if t >= p.start {
			name = p.name
		}
	}
	return name
}

// ListAll lists prefix in pages of limit with continuation, as the
// apiserver's paginated list does, and returns the number of keys. timed
// runs each page's request (to time it).
func ListAll(ctx context.Context, c *clientv3.Client, prefix string, limit int64, timed func(kind string, req func() error) error) (int, error) {
	end := clientv3.GetPrefixRangeEnd(prefix)
	key := prefix
	var rev int64
	n := 0
	for {
		opts := []clientv3.OpOption{clientv3.WithRange(end), clientv3.WithLimit(limit)}
		if rev > 0 {
			opts = append(opts, clientv3.WithRev(rev))
		}
		var resp *clientv3.GetResponse
		err := timed("list page", func() (err error) {
			resp, err = c.Get(ctx, key, opts...)
			return err
		})
		if err != nil {
			return n, fmt.Errorf("%w: list from %q: %w", ErrKubeLoad, key, err)
		}
		if rev == 0 {
			rev = resp.Header.Revision
		}
		n += len(resp.Kvs)
		if !resp.More || len(resp.Kvs) == 0 {
			return n, nil
		}
		key = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
}

// dirBytes is the size of the files under dir.
func dirBytes(dir string) int64 {
	var n int64
	filepath.WalkDir(dir, func(_ string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if info, err := d.Info(); err == nil {
				n += info.Size()
			}
		}
		return nil
	})
	return n
}

// KubeOptions are the settings of RunKube: the servers and the load.
type KubeOptions struct {
	Programs Programs
	// Servers are the servers to load, one after the other in each pass,
	// the first alternating from pass to pass.
	Servers []Kind
	// Passes is the number of passes over the servers.
	Passes int
	// Dir holds the servers' data directories ("" is the system's
	// temporary directory).
	Dir string
	// Load is the load; its Endpoints, Sample and CPU are set per server.
	Load KubeLoad
	// Members is the number of members of each server: 0 or 1 runs each
	// server alone; 3, 5 or 7 runs a raft cluster of Strata and one of
	// etcd 3.7 (StartCluster), every member on Pin.ServerCPUs, the load's
	// connections each to every member (round-robin, as the apiserver's
	// client), the full list through a follower, the members' CPU, RSS
	// and disk summed.
	Members int
	// KillLeaderAt, if > 0, is when, from the start of the load, the
	// leader (a server alone: the server) is killed with SIGKILL and
	// started again at once; the load retries its writes meanwhile
	// (KubeLoad.Retry).
	KillLeaderAt time.Duration
	// QuotaBytes is etcd's backend quota, raised to fit the load.
	QuotaBytes int64
	// Pin runs each server (and its restart) on Pin.ServerCPUs and the
	// load, which runs in this process, on Pin.LoadCPUs; the zero
	// Pinning leaves everything unpinned. See DefaultPinning.
	Pin Pinning
	// Settle, if > 0, is how long to wait after the load and a compaction
	// to its last revision before reading the disk again
	// (KubeAfter.SettledDiskBytes).
	Settle time.Duration
	// Progress receives progress lines.
	Progress io.Writer
}

// KubeSample is one server's pass.
type KubeSample struct {
	Kind Kind
	Name string
	*KubeResult
	// DiskBytes and RSSBytes are read after the load and the list, summed
	// over the members of a cluster.
	DiskBytes, RSSBytes int64
	// CPUSeconds is the server's CPU time over the load, summed over the
	// members of a cluster.
	CPUSeconds float64
	// Members are a cluster's members, each with its share of the
	// figures above; empty for a server alone.
	Members []KubeMember
	// LeaderChanges is the number of leader changes over the load, the
	// most that any member counted (etcd_server_leader_changes_seen_total);
	// 0 for a server alone.
	LeaderChanges int
	// ListVia is the member the full list went through, "" for a server
	// alone.
	ListVia string
	// Killed is the member killed at KubeOptions.KillLeaderAt, "" if none
	// was.
	Killed string
	// KubeAfter is measured after the load: a snapshot and a restart.
	KubeAfter
}

// KubeMember is one member's share of a cluster's pass.
type KubeMember struct {
	// Name is the member's name (s1, s2, ...).
	Name string
	// Leader says the member was the leader after the load.
	Leader bool
	// CPUSeconds is its CPU time over the load; DiskBytes and RSSBytes
	// are read after the load and the list.
	CPUSeconds          float64
	DiskBytes, RSSBytes int64
}

// KubeRun is the result of RunKube.
type KubeRun struct {
	Options KubeOptions
	Samples []KubeSample
}

// Validate reports every bad option at once.
func (o KubeOptions) Validate() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrOptions}, args...)...))
	}
	if o.Passes < 1 {
		bad("passes %d: must be >= 1", o.Passes)
	}
	if len(o.Servers) == 0 {
		bad("servers: empty: name at least one")
	}
	if o.Members < 0 || o.Members > 7 || o.Members > 1 && o.Members%2 == 0 {
		bad("members %d: allowed are 1 (servers alone), 3, 5 and 7 (raft clusters)", o.Members)
	}
	if o.Members > 1 {
		for _, k := range o.Servers {
			if k != KindStrata && k != KindEtcd37 {
				bad("server %s with members %d: clusters are of strata and etcd37 only", k, o.Members)
			}
		}
	}
	if o.KillLeaderAt < 0 {
		bad("kill leader at %s: must be >= 0 (0: no kill)", o.KillLeaderAt)
	}
	if o.KillLeaderAt > 0 && slices.Contains(o.Servers, KindFloor) {
		bad("kill leader with server floor: the transport floor keeps nothing to restart on")
	}
	return errors.Join(errs...)
}

// RunKube runs the load against each server in turn, each started afresh.
func RunKube(ctx context.Context, o KubeOptions) (*KubeRun, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	if err := o.Pin.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrKubeLoad, err)
	}
	fmt.Fprintf(o.Progress, "%s\n", o.Pin)
	unpin, err := o.Pin.PinSelf()
	if err != nil {
		return nil, fmt.Errorf("%w: pinning the load: %w", ErrKubeLoad, err)
	}
	defer unpin()
	res := &KubeRun{Options: o}
	for pass := range o.Passes {
		for _, k := range rotate(o.Servers, pass) {
			fmt.Fprintf(o.Progress, "pass %d/%d: %s\n", pass+1, o.Passes, k)
			smp, err := runKubeOne(ctx, o, k)
			if err != nil {
				return res, fmt.Errorf("pass %d, %s: %w", pass+1, k, err)
			}
			res.Samples = append(res.Samples, smp)
			settled := ""
			if o.Settle > 0 {
				settled = fmt.Sprintf(" (%.0f MB settled)", mb(smp.SettledDiskBytes))
			}
			cluster := ""
			if len(smp.Members) > 0 {
				cluster = fmt.Sprintf(", %d leader changes, list via %s", smp.LeaderChanges, smp.ListVia)
			}
			if smp.Killed != "" {
				cluster += fmt.Sprintf(", %s killed at %.1f s, longest gap after it %.2f s", smp.Killed, smp.DisruptedAt.Seconds(), smp.GapAfterDisrupt.Seconds())
			}
			fmt.Fprintf(o.Progress, "pass %d/%d: %s: creates %.0f/s, updates %.0f/s, p99 %.0f ms, %d stalled s, longest gap %.2f s, CPU %.1f s, disk %.0f MB%s, RSS %.0f MB%s\n",
				pass+1, o.Passes, smp.Name, smp.CreatesPerSec, smp.UpdatesPerSec, ms(smp.PutP99), smp.StalledSeconds, smp.LongestGap.Seconds(), smp.CPUSeconds, mb(smp.DiskBytes), settled, mb(smp.RSSBytes), cluster)
		}
	}
	return res, nil
}

func runKubeOne(ctx context.Context, o KubeOptions, k Kind) (smp KubeSample, err error) {
	c, err := StartCluster(ctx, k, max(1, o.Members), o.Programs, o.Dir, StartOptions{QuotaBytes: o.QuotaBytes, Pin: o.Pin})
	if err != nil {
		return smp, err
	}
	defer func() {
		// A load that failed because a server died needs the server's
		// log most: Stop's error carries it.
		err = errors.Join(err, c.Stop())
	}()
	smp = KubeSample{Kind: k, Name: c.Name}
	clustered := len(c.Members) > 1
	load := o.Load
	load.Endpoints = c.Endpoints()
	load.Progress = o.Progress
	if clustered {
		f, _, err := c.Target(ctx, ViaFollower)
		if err != nil {
			return smp, err
		}
		load.ListEndpoint, smp.ListVia = f.Endpoint, f.Member
	}
	load.Sample = func(time.Duration) KubeGauge {
		return KubeGauge{RSSBytes: c.rssBytes(), DiskBytes: c.diskBytes()}
	}
	load.CPU = c.CPU
	if o.KillLeaderAt > 0 {
		load.Retry = true
		load.Disrupt = func(ctx context.Context, start time.Time) (time.Duration, error) {
			select {
			case <-ctx.Done():
				return 0, nil
			case <-time.After(time.Until(start.Add(o.KillLeaderAt))):
			}
			at := time.Since(start)
			fmt.Fprintf(o.Progress, "  %3.0f s: killing the leader of %s\n", at.Seconds(), c.Name)
			// Started, the restart outlives the load's end.
			i, err := c.KillLeader(context.WithoutCancel(ctx))
			smp.Killed = c.Members[i].Member
			if smp.Killed == "" {
				smp.Killed = c.Members[i].Name
			}
			return at, err
		}
	}
	var changes0 []int
	if clustered {
		if changes0, err = c.LeaderChanges(ctx); err != nil {
			return smp, err
		}
	}
	cpu0, err := c.MemberCPU()
	if err != nil {
		return smp, err
	}
	smp.KubeResult, err = load.Run(ctx)
	if err != nil {
		return smp, err
	}
	cpu1, err := c.MemberCPU()
	if err != nil {
		return smp, err
	}
	leader := 0
	if clustered {
		changes1, err := c.LeaderChanges(ctx)
		if err != nil {
			return smp, err
		}
		smp.LeaderChanges = leaderChangesOver(changes0, changes1)
		if leader, err = c.Leader(ctx); err != nil {
			return smp, err
		}
	}
	for i, s := range c.Members {
		m := KubeMember{Name: s.Member, Leader: i == leader, CPUSeconds: cpu1[i] - cpu0[i], DiskBytes: dirBytes(s.dir)}
		if m.RSSBytes, _, err = s.RSS(); err != nil {
			return smp, err
		}
		smp.CPUSeconds += m.CPUSeconds
		smp.DiskBytes += m.DiskBytes
		smp.RSSBytes += m.RSSBytes
		if clustered {
			smp.Members = append(smp.Members, m)
		}
	}
	if k == KindFloor {
		// The transport floor keeps nothing to snapshot or restart on.
		return smp, nil
	}
	smp.KubeAfter, err = measureAfter(ctx, c, o.Dir, o.Load.Pods, o.Settle)
	return smp, err
}

// Tables are the load's table, the p99 of each kind of request and the
// after-load table, one row per server and pass in each; with Members > 1
// a fourth, one row per member of each server and pass.
func (r *KubeRun) Tables() []*report.Table {
	clustered := r.Options.Members > 1
	killed := r.Options.KillLeaderAt > 0
	load := &report.Table{Columns: []report.Column{
		{Name: "Server"},
		{Name: "Creates", Unit: "/s", Format: "%.0f"},
		{Name: "Updates", Unit: "/s", Format: "%.0f"},
		{Name: "Put p99", Unit: "ms", Format: "%.1f"},
		{Name: "p99 compacting", Unit: "ms", Format: "%.1f"},
		{Name: "Stalled", Unit: "s"},
		{Name: "Longest gap", Unit: "s", Format: "%.2f"},
		{Name: "CPU", Unit: "s", Format: "%.1f"},
	}}
	if clustered {
		load.Columns = append(load.Columns, report.Column{Name: "Leader changes"})
	}
	if killed {
		load.Columns = append(load.Columns, report.Column{Name: "Killed"}, report.Column{Name: "Killed at", Unit: "s", Format: "%.1f"},
			report.Column{Name: "Longest gap after kill", Unit: "s", Format: "%.2f"}, report.Column{Name: "Retries"})
	}
	after := &report.Table{Columns: []report.Column{
		{Name: "Server"},
		{Name: "Disk", Unit: "MB", Format: "%.0f"},
		{Name: "Disk settled", Unit: "MB", Format: "%.0f"},
		{Name: "RSS", Unit: "MB", Format: "%.0f"},
		{Name: "List", Unit: "s", Format: "%.2f"},
		{Name: "List CPU", Unit: "s", Format: "%.2f"},
		{Name: "Snapshot", Unit: "s", Format: "%.2f"},
		{Name: "Snapshot", Unit: "MB", Format: "%.0f"},
		{Name: "Restart", Unit: "s", Format: "%.2f"},
	}}
	if clustered {
		after.Columns = append(after.Columns, report.Column{Name: "List via"})
	}
	members := &report.Table{Columns: []report.Column{
		{Name: "Server"},
		{Name: "Pass"},
		{Name: "Member"},
		{Name: "Role"},
		{Name: "CPU", Unit: "s", Format: "%.1f"},
		{Name: "RSS", Unit: "MB", Format: "%.0f"},
		{Name: "Disk", Unit: "MB", Format: "%.0f"},
	}}
	byKind := &report.Table{Columns: []report.Column{{Name: "Server"}}}
	for _, kind := range requestKinds {
		byKind.Columns = append(byKind.Columns, report.Column{Name: kind + " p99", Unit: "ms", Format: "%.1f"})
	}
	passes := map[Kind]int{}
	for _, s := range r.Samples {
		if s.KubeResult == nil {
			continue
		}
		passes[s.Kind]++
		row := []any{s.Name}
		for _, kind := range requestKinds {
			row = append(row, ms(s.P99ByKind[kind]))
		}
		byKind.Rows = append(byKind.Rows, row)
		row = []any{s.Name, s.CreatesPerSec, s.UpdatesPerSec, ms(s.PutP99), ms(s.P99Compacting), s.StalledSeconds, s.LongestGap.Seconds(), s.CPUSeconds}
		if clustered {
			row = append(row, s.LeaderChanges)
		}
		if killed {
			if s.Killed == "" { // the load ended first
				row = append(row, nil, nil, nil, s.Retries)
			} else {
				row = append(row, s.Killed, s.DisruptedAt.Seconds(), s.GapAfterDisrupt.Seconds(), s.Retries)
			}
		}
		load.Rows = append(load.Rows, row)
		row = []any{s.Name, mb(s.DiskBytes), mb(s.SettledDiskBytes), mb(s.RSSBytes), s.ListSeconds, s.ListCPUSeconds, s.SnapshotSeconds, mb(s.SnapshotBytes), s.RestartSeconds}
		if s.Kind == KindFloor {
			// Nothing on disk, nothing to snapshot or restart: empty
			// cells, not zeros.
			row[1], row[2], row[6], row[7], row[8] = nil, nil, nil, nil, nil
		}
		if r.Options.Settle <= 0 {
			row[2] = nil // not measured
		}
		if clustered {
			row = append(row, s.ListVia)
		}
		after.Rows = append(after.Rows, row)
		for _, m := range s.Members {
			role := "follower"
			if m.Leader {
				role = "leader"
			}
			if m.Name == s.Killed {
				role += ", killed"
			}
			members.Rows = append(members.Rows, []any{s.Name, passes[s.Kind], m.Name, role, m.CPUSeconds, mb(m.RSSBytes), mb(m.DiskBytes)})
		}
	}
	l := r.Options.Load
	clients := fmt.Sprintf("%d clients over %d connections", l.Clients, l.Conns)
	if clustered {
		clients = fmt.Sprintf("%d members each, %d clients over %d connections, each connection to every member (round-robin, as the apiserver's client)", r.Options.Members, l.Clients, l.Conns)
	}
	load.Notes = []string{
		fmt.Sprintf("%d pod creates then %d updates (txns as the apiserver sends them), %s, an event on a 1 h lease every %d writes, a compaction every %s to the revision of the tick before; every write fsynced.", l.Pods, l.Updates, clients, l.EventEvery, l.CompactEvery),
		"Put p99 covers every pod write; 'p99 compacting' those completed within 10 s of a compaction request. Stalled: whole seconds with no completed pod write; Longest gap: the longest time between two pod writes completed one after the other. CPU: the server's user+system time over the load.",
	}
	if clustered {
		load.Notes = append(load.Notes, "On a cluster, CPU is every member's summed; Leader changes: the most any member counted over the load (etcd_server_leader_changes_seen_total).")
	}
	if killed {
		load.Notes = append(load.Notes, fmt.Sprintf("At %s into the load the leader was killed (SIGKILL) and started again at once; writes that failed were tried again every 50 ms (Retries, the watch's reopenings included). Longest gap after kill: the longest time without a completed pod write from the kill to the load's end.", r.Options.KillLeaderAt))
	}
	after.Notes = []string{
		"After the load: disk and RSS; Disk settled (with --settle): the disk after a compaction to the load's last revision and the wait; List: all pods in pages of 500, its time and the server's CPU time; Snapshot: the maintenance API's snapshot (etcdctl snapshot save) streamed to a file and fsynced, its time and size; Restart: from starting the stopped server to its first answered linearizable read.",
	}
	if clustered {
		after.Notes = append(after.Notes, "On a cluster: disk, RSS and List CPU are every member's summed; the list goes through a follower (List via); the snapshot through the leader; Restart stops every member together and starts them again, to the first linearizable read at any of them.")
	}
	byKind.Notes = []string{
		"The 99th percentile latency of each kind of request, one by one: a create txn (create_revision = 0), an update txn (mod_revision compare; a conflict's retry is another), a put of an event on its lease, a page of 500 of the final list.",
	}
	ts := []*report.Table{load, byKind, after}
	if clustered {
		members.Notes = []string{"Each member's share: its CPU time over the load, its RSS and disk after the load and the list; Role: as the load ended."}
		ts = append(ts, members)
	}
	return ts
}

// WriteTables writes Tables in format f, a blank line between them.
func (r *KubeRun) WriteTables(w io.Writer, f report.Format) error {
	return writeTables(w, f, r.Tables())
}

// writeTables writes ts in format f, a blank line between them.
func writeTables(w io.Writer, f report.Format, ts []*report.Table) error {
	for i, t := range ts {
		if i > 0 {
			if _, err := io.WriteString(w, "\n"); err != nil {
				return err
			}
		}
		if err := t.Write(w, f); err != nil {
			return err
		}
	}
	return nil
}
