package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// PatroniLoad is the traffic of Patroni's etcd3 DCS (patroni/dcs/etcd3.py),
// with its loop scaled down: Clusters Patroni clusters of Members members
// each, every member running Patroni's HA loop every Loop:
//
//  1. refresh its lease (LeaseKeepAlive; a new LeaseGrant of TTL when the
//     lease is gone, as after a restart);
//  2. read the cluster from its cache: a Range of the cluster's prefix,
//     then a watch from the next revision that keeps the cache (Patroni's
//     KVCache), rebuilt when the watch ends;
//  3. with no leader key, try to take it: a txn putting /leader with its
//     lease if the key's create_revision is 0 (attempt_to_acquire_leader);
//  4. as the leader: move the leader key to its lease when it changed (a
//     txn comparing its value, with a nested txn on create_revision 0, as
//     update_leader does), write /status (the optime), and every tenth
//     loop /sync and every fiftieth /config with a txn on the key's
//     mod_revision, as set_sync_state_value and set_config_value do;
//  5. put its member key with its lease (touch_member: Patroni's member
//     data changes with the WAL position on every loop).
//
// Every FailoverEvery, the leader of one cluster (in turn) stops as a
// crashed primary would: no writes and no keepalives until its lease has
// expired and another member took the leader key, then it starts again
// with a new lease. One watcher per cluster checks the leader key only
// changes hands through a delete (the lease's expiry): a key put by a new
// holder over a live one is counted as a handover violation.
type PatroniLoad struct {
	// Endpoints are the server's client addresses.
	Endpoints []string
	// Clusters is the number of Patroni clusters (scopes), each under
	// /service/patroni-N/.
	Clusters int
	// Members is the number of members of each cluster.
	Members int
	// Loop is Patroni's loop_wait (10 s by default), scaled down.
	Loop time.Duration
	// TTL is the leader lease's TTL in seconds (Patroni's ttl, 30 by
	// default), scaled down: etcd grants at least 2 s with its default
	// election timeout.
	TTL int64
	// FailoverEvery is how often a leader crashes; 0 never.
	FailoverEvery time.Duration
	// Duration is the length of the load.
	Duration time.Duration
	// Seed seeds the members' start offsets and values.
	Seed int64
}

// PatroniCounts are what a Patroni load did.
type PatroniCounts struct {
	// Writes are the puts and the txns that succeeded.
	Writes int64 `json:"writes"`
	// CompareFailed are the txns whose compare failed (a key taken or
	// changed first), as Patroni meets them.
	CompareFailed int64 `json:"compare_failed"`
	// KeepAlives and Grants are the lease requests.
	KeepAlives int64 `json:"keepalives"`
	Grants     int64 `json:"grants"`
	// WatchEvents are the events the members' caches received.
	WatchEvents int64 `json:"watch_events"`
	// WatchRebuilds are the caches rebuilt after their watch ended,
	// CompactedWatches those ended because their revision was compacted.
	WatchRebuilds    int64 `json:"watch_rebuilds"`
	CompactedWatches int64 `json:"compacted_watches"`
	// Crashes are the leaders stopped, Takeovers the leader keys taken
	// after a delete, Violations the leader keys put by another member
	// over a live holder's (0 in a correct store).
	Crashes    int64 `json:"crashes"`
	Takeovers  int64 `json:"takeovers"`
	Violations int64 `json:"violations"`
	// Errors are the requests that failed; LastError is the last one.
	Errors    int64  `json:"errors"`
	LastError string `json:"last_error,omitempty"`
}

// ErrPatroniLoad wraps what stops a Patroni load.
var ErrPatroniLoad = errors.New("bench: patroni load")

func (l PatroniLoad) validate() error {
	var errs []error
	if len(l.Endpoints) == 0 {
		errs = append(errs, errors.New("no endpoints"))
	}
	for _, f := range []struct {
		name   string
		v, min int
	}{{"Clusters", l.Clusters, 1}, {"Members", l.Members, 1}} {
		if f.v < f.min {
			errs = append(errs, fmt.Errorf("%s = %d: must be >= %d", f.name, f.v, f.min))
		}
	}
	if l.Loop <= 0 {
		errs = append(errs, fmt.Errorf("Loop = %s: must be > 0", l.Loop))
	}
	if l.TTL < 1 {
		errs = append(errs, fmt.Errorf("TTL = %d: must be >= 1 (seconds)", l.TTL))
	}
	if l.Duration <= 0 {
		errs = append(errs, fmt.Errorf("Duration = %s: must be > 0", l.Duration))
	}
	if l.FailoverEvery < 0 {
		errs = append(errs, fmt.Errorf("FailoverEvery = %s: must be >= 0", l.FailoverEvery))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("%w: %w", ErrPatroniLoad, err)
	}
	return nil
}

// patroniRun is one load's state: the counters and each cluster's crash
// request.
type patroniRun struct {
	l     PatroniLoad
	start time.Time

	writes, compareFailed, keepAlives, grants atomic.Int64
	watchEvents, rebuilds, compactedWatches   atomic.Int64
	crashes, takeovers, violations, errs      atomic.Int64

	mu      sync.Mutex
	lastErr string
	// crash[i] asks cluster i's leader to stop.
	crash []atomic.Bool
}

func (r *patroniRun) fail(err error) {
	r.errs.Add(1)
	r.mu.Lock()
	r.lastErr = err.Error()
	r.mu.Unlock()
}

func (r *patroniRun) counts() PatroniCounts {
	r.mu.Lock()
	defer r.mu.Unlock()
	return PatroniCounts{
		Writes: r.writes.Load(), CompareFailed: r.compareFailed.Load(), KeepAlives: r.keepAlives.Load(), Grants: r.grants.Load(),
		WatchEvents: r.watchEvents.Load(), WatchRebuilds: r.rebuilds.Load(), CompactedWatches: r.compactedWatches.Load(),
		Crashes: r.crashes.Load(), Takeovers: r.takeovers.Load(), Violations: r.violations.Load(), Errors: r.errs.Load(), LastError: r.lastErr,
	}
}

// Run runs the load for l.Duration (or until ctx ends) and returns what
// it did. Requests that fail are counted and retried on the next loop,
// as Patroni does; the load stops early only when it cannot connect.
func (l PatroniLoad) Run(ctx context.Context) (PatroniCounts, error) {
	if err := l.validate(); err != nil {
		return PatroniCounts{}, err
	}
	r := &patroniRun{l: l, start: time.Now(), crash: make([]atomic.Bool, l.Clusters)}
	ctx, cancel := context.WithTimeout(ctx, l.Duration)
	defer cancel()
	var clis []*clientv3.Client
	defer func() { closeAll(clis) }()
	rnd := rand.New(rand.NewPCG(uint64(l.Seed), 0x9a7))
	var wg sync.WaitGroup
	for c := range l.Clusters {
		prefix := fmt.Sprintf("/service/patroni-%d/", c)
		for m := range l.Members {
			cli, err := dialPatroni(l.Endpoints)
			if err != nil {
				return r.counts(), fmt.Errorf("%w: %w", ErrPatroniLoad, err)
			}
			clis = append(clis, cli)
			pm := &patroniMember{r: r, cli: cli, cluster: c, name: fmt.Sprintf("pg%d-%d", c, m), prefix: prefix,
				offset: time.Duration(rnd.Int64N(int64(l.Loop))), observer: m == 0}
			wg.Go(func() { pm.watch(ctx) })
			wg.Go(func() { pm.loop(ctx) })
		}
	}
	if l.FailoverEvery > 0 {
		wg.Go(func() {
			t := time.NewTicker(l.FailoverEvery)
			defer t.Stop()
			for i := 0; ; i++ {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
					r.crash[i%l.Clusters].Store(true)
				}
			}
		})
	}
	wg.Wait()
	return r.counts(), nil
}

func dialPatroni(endpoints []string) (*clientv3.Client, error) {
	return clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second, Logger: nopLogger})
}

// patroniMember is one Patroni member: its lease, its cache of the
// cluster's keys and its WAL position.
type patroniMember struct {
	r        *patroniRun
	cli      *clientv3.Client
	cluster  int
	name     string
	prefix   string
	offset   time.Duration
	observer bool

	lease clientv3.LeaseID
	lsn   int64
	loops int

	mu    sync.Mutex
	cache map[string]*mvccpb.KeyValue
	ready bool
}

// patroniRequestTimeout bounds each request, as Patroni's retry_timeout does.
const patroniRequestTimeout = 5 * time.Second

func (m *patroniMember) loop(ctx context.Context) {
	select {
	case <-ctx.Done():
		return
	case <-time.After(m.offset):
	}
	t := time.NewTicker(m.r.l.Loop)
	defer t.Stop()
	for {
		m.once(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// once is one run of Patroni's HA loop.
func (m *patroniMember) once(ctx context.Context) {
	m.loops++
	m.lsn += 1 << 14
	if err := m.refreshLease(ctx); err != nil {
		m.failed(ctx, err)
		return
	}
	leader, ok := m.cached(m.prefix + "leader")
	if !ok {
		return // the cache is being built
	}
	switch {
	case leader == nil:
		ok, err := m.txn(ctx, clientv3.Compare(clientv3.CreateRevision(m.prefix+"leader"), "=", 0),
			clientv3.OpPut(m.prefix+"leader", m.name, clientv3.WithLease(m.lease)))
		if err != nil {
			m.failed(ctx, err)
			return
		}
		if ok {
			m.r.takeovers.Add(1)
		}
	case string(leader.Value) == m.name:
		if m.r.crash[m.cluster].CompareAndSwap(true, false) {
			m.crash(ctx)
			return
		}
		if err := m.lead(ctx, leader); err != nil {
			m.failed(ctx, err)
			return
		}
	}
	if err := m.touch(ctx); err != nil {
		m.failed(ctx, err)
	}
}

func (m *patroniMember) failed(ctx context.Context, err error) {
	if ctx.Err() == nil {
		m.r.fail(fmt.Errorf("%s: %w", m.name, err))
	}
}

// refreshLease keeps the member's lease alive, granting a new one when it
// has none or the server forgot it.
func (m *patroniMember) refreshLease(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, patroniRequestTimeout)
	defer cancel()
	if m.lease != 0 {
		_, err := m.cli.KeepAliveOnce(ctx, m.lease)
		if err == nil {
			m.r.keepAlives.Add(1)
			return nil
		}
		if !errors.Is(err, rpctypes.ErrLeaseNotFound) {
			return err
		}
		m.lease = 0
	}
	g, err := m.cli.Grant(ctx, m.r.l.TTL)
	if err != nil {
		return err
	}
	m.r.grants.Add(1)
	m.lease = g.ID
	return nil
}

// lead is the leader's part of the loop.
func (m *patroniMember) lead(ctx context.Context, leader *mvccpb.KeyValue) error {
	key := m.prefix + "leader"
	if clientv3.LeaseID(leader.Lease) != m.lease {
		// update_leader: keep the key if it is still ours, else create it.
		put := clientv3.OpPut(key, m.name, clientv3.WithLease(m.lease))
		if _, err := m.txnElse(ctx, []clientv3.Cmp{clientv3.Compare(clientv3.Value(key), "=", m.name)}, put,
			clientv3.OpTxn([]clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(key), "=", 0)}, []clientv3.Op{put}, nil)); err != nil {
			return err
		}
	}
	status, _ := json.Marshal(map[string]any{"optime": m.lsn, "slots": map[string]int64{"pg_replica_1": m.lsn - 1<<14, "pg_replica_2": m.lsn - 1<<15}, "retain_slots": []string{"pg1", "pg2"}})
	if err := m.put(ctx, m.prefix+"status", string(status), false); err != nil {
		return err
	}
	for _, cas := range []struct {
		every int
		key   string
		value string
	}{
		{10, "sync", fmt.Sprintf(`{"leader":%q,"sync_standby":"pg%d-1","quorum":0}`, m.name, m.cluster)},
		{50, "config", fmt.Sprintf(`{"ttl":30,"loop_wait":10,"retry_timeout":10,"maximum_lag_on_failover":1048576,"postgresql":{"use_pg_rewind":true,"parameters":{"max_connections":%d}}}`, 100+m.loops%7)},
	} {
		if m.loops%cas.every != 0 {
			continue
		}
		k := m.prefix + cas.key
		kv, _ := m.cached(k)
		var mod int64
		if kv != nil {
			mod = kv.ModRevision
		}
		if _, err := m.txn(ctx, clientv3.Compare(clientv3.ModRevision(k), "=", mod), clientv3.OpPut(k, cas.value)); err != nil {
			return err
		}
	}
	return nil
}

// touch puts the member's key with its lease.
func (m *patroniMember) touch(ctx context.Context) error {
	data, _ := json.Marshal(map[string]any{
		"conn_url": fmt.Sprintf("postgres://10.0.%d.%s:5432/postgres", m.cluster, m.name[len(m.name)-1:]),
		"api_url":  fmt.Sprintf("http://10.0.%d.%s:8008/patroni", m.cluster, m.name[len(m.name)-1:]),
		"state":    "running", "role": "replica", "version": "4.0.4", "xlog_location": m.lsn, "timeline": 1,
	})
	return m.put(ctx, m.prefix+"members/"+m.name, string(data), true)
}

func (m *patroniMember) put(ctx context.Context, key, value string, leased bool) error {
	ctx, cancel := context.WithTimeout(ctx, patroniRequestTimeout)
	defer cancel()
	var opts []clientv3.OpOption
	if leased {
		opts = append(opts, clientv3.WithLease(m.lease))
	}
	if _, err := m.cli.Put(ctx, key, value, opts...); err != nil {
		if errors.Is(err, rpctypes.ErrLeaseNotFound) {
			m.lease = 0
		}
		return err
	}
	m.r.writes.Add(1)
	return nil
}

func (m *patroniMember) txn(ctx context.Context, cmp clientv3.Cmp, then clientv3.Op) (bool, error) {
	return m.txnElse(ctx, []clientv3.Cmp{cmp}, then)
}

// txnElse runs If(cmps).Then(then).Else(els...) and reports whether it
// (or a nested txn in els) succeeded.
func (m *patroniMember) txnElse(ctx context.Context, cmps []clientv3.Cmp, then clientv3.Op, els ...clientv3.Op) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, patroniRequestTimeout)
	defer cancel()
	resp, err := m.cli.Txn(ctx).If(cmps...).Then(then).Else(els...).Commit()
	if err != nil {
		if errors.Is(err, rpctypes.ErrLeaseNotFound) {
			m.lease = 0
		}
		return false, err
	}
	ok := resp.Succeeded
	if !ok && len(resp.Responses) > 0 {
		if nested := resp.Responses[0].GetResponseTxn(); nested != nil {
			ok = nested.Succeeded
		}
	}
	if ok {
		m.r.writes.Add(1)
	} else {
		m.r.compareFailed.Add(1)
	}
	return ok, nil
}

// crash stops the member as a crashed primary: nothing until its lease
// expired (TTL and the leader's check interval), then a restart without
// its lease.
func (m *patroniMember) crash(ctx context.Context) {
	m.r.crashes.Add(1)
	select {
	case <-ctx.Done():
	case <-time.After(time.Duration(m.r.l.TTL)*time.Second + time.Second):
	}
	m.lease = 0
}

// cached returns the cache's copy of key (nil when absent), ok = false
// while the cache is being built.
func (m *patroniMember) cached(key string) (*mvccpb.KeyValue, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.cache[key], m.ready
}

// watch keeps the member's cache: a Range of the prefix, then a watch
// from the next revision, built again whenever the watch ends.
func (m *patroniMember) watch(ctx context.Context) {
	for ctx.Err() == nil {
		if err := m.watchOnce(ctx); err != nil && ctx.Err() == nil {
			m.r.fail(fmt.Errorf("%s: watch: %w", m.name, err))
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
		if ctx.Err() == nil {
			m.r.rebuilds.Add(1)
		}
	}
}

func (m *patroniMember) watchOnce(ctx context.Context) error {
	m.mu.Lock()
	m.ready = false
	m.mu.Unlock()
	rctx, cancel := context.WithTimeout(ctx, patroniRequestTimeout)
	resp, err := m.cli.Get(rctx, m.prefix, clientv3.WithPrefix())
	cancel()
	if err != nil {
		return err
	}
	cache := make(map[string]*mvccpb.KeyValue, len(resp.Kvs))
	holder := ""
	for _, kv := range resp.Kvs {
		cache[string(kv.Key)] = kv
		if string(kv.Key) == m.prefix+"leader" {
			holder = string(kv.Value)
		}
	}
	m.mu.Lock()
	m.cache, m.ready = cache, true
	m.mu.Unlock()
	wctx, wcancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer wcancel()
	for wr := range m.cli.Watch(wctx, m.prefix, clientv3.WithPrefix(), clientv3.WithRev(resp.Header.Revision+1)) {
		if wr.CompactRevision != 0 {
			m.r.compactedWatches.Add(1)
			return nil
		}
		if err := wr.Err(); err != nil {
			return err
		}
		m.mu.Lock()
		for _, ev := range wr.Events {
			k := string(ev.Kv.Key)
			if ev.Type == mvccpb.DELETE {
				delete(m.cache, k)
			} else {
				m.cache[k] = ev.Kv
			}
		}
		m.mu.Unlock()
		m.r.watchEvents.Add(int64(len(wr.Events)))
		if !m.observer {
			continue
		}
		for _, ev := range wr.Events {
			if string(ev.Kv.Key) != m.prefix+"leader" {
				continue
			}
			switch v := string(ev.Kv.Value); {
			case ev.Type == mvccpb.DELETE:
				holder = ""
			case holder != "" && holder != v:
				m.r.violations.Add(1)
				m.r.fail(fmt.Errorf("cluster %d: leader key put by %s at revision %d while %s held it", m.cluster, v, ev.Kv.ModRevision, holder))
				holder = v
			default:
				holder = v
			}
		}
	}
	return ctx.Err()
}

// compactRevision finds the server's compacted revision, the oldest
// revision a Range at a revision can still read, by bisection over
// [1, current] with count-only Ranges: ErrCompacted below it.
func compactRevision(ctx context.Context, c *clientv3.Client, current int64) (int64, error) {
	lo, hi := int64(1), current // the answer is in [lo, hi]
	for lo < hi {
		mid := lo + (hi-lo)/2
		_, err := c.Get(ctx, "/", clientv3.WithRev(mid), clientv3.WithCountOnly(), clientv3.WithSerializable())
		switch {
		case errors.Is(err, rpctypes.ErrCompacted):
			lo = mid + 1
		case err != nil:
			return 0, err
		default:
			hi = mid
		}
	}
	return lo, nil
}

// PatroniSample is one reading of a server's gauges during the load.
type PatroniSample struct {
	// At is the time since the start of the load.
	At time.Duration `json:"at_ns"`
	// DBSize and DBSizeInUse are the server's Status figures.
	DBSize      int64 `json:"db_size"`
	DBSizeInUse int64 `json:"db_size_in_use"`
	// DirBytes is the size of the files in the server's data directory.
	DirBytes int64 `json:"dir_bytes"`
	// RSSBytes is the server's resident set.
	RSSBytes int64 `json:"rss_bytes"`
	// Revision and CompactRevision are the store's revision and the
	// oldest one a Range can still read.
	Revision        int64 `json:"revision"`
	CompactRevision int64 `json:"compact_revision"`
}

// samplePatroni reads s's gauges.
func samplePatroni(ctx context.Context, c *clientv3.Client, s *Server, at time.Duration) (PatroniSample, error) {
	ctx, cancel := context.WithTimeout(ctx, patroniRequestTimeout)
	defer cancel()
	st, err := c.Status(ctx, s.Endpoint)
	if err != nil {
		return PatroniSample{}, err
	}
	smp := PatroniSample{At: at, DBSize: st.DbSize, DBSizeInUse: st.DbSizeInUse, DirBytes: dirBytes(s.dir), Revision: st.Header.Revision}
	if rss, _, err := s.RSS(); err == nil {
		smp.RSSBytes = rss
	}
	if smp.CompactRevision, err = compactRevision(ctx, c, smp.Revision); err != nil {
		return smp, err
	}
	return smp, nil
}

// checkCompacted reads at rev and says what the server answered:
// "ErrCompacted" for a revision compacted away, or what it gave instead.
func checkCompacted(ctx context.Context, c *clientv3.Client, rev int64) string {
	ctx, cancel := context.WithTimeout(ctx, patroniRequestTimeout)
	defer cancel()
	_, err := c.Get(ctx, "/service/", clientv3.WithPrefix(), clientv3.WithRev(rev), clientv3.WithCountOnly())
	switch {
	case errors.Is(err, rpctypes.ErrCompacted):
		return patroniCompacted
	case err != nil:
		return err.Error()
	default:
		return "readable"
	}
}

// patroniCompacted is checkCompacted's answer for a compacted revision.
const patroniCompacted = "ErrCompacted"

// patroniProgress prints a line every interval while the load runs.
func patroniProgress(ctx context.Context, w io.Writer, start time.Time, total time.Duration, line func() string) {
	t := time.NewTicker(10 * time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			fmt.Fprintf(w, "  %3.0f/%.0f s: %s\n", time.Since(start).Seconds(), total.Seconds(), line())
		}
	}
}

// itoa is strconv.Itoa for int64.
func itoa(n int64) string { return strconv.FormatInt(n, 10) }
