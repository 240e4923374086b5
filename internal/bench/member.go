package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/stratadb/strata/internal/report"
	"github.com/stratadb/strata/internal/stats"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
)

// A member's catch-up: a 3-member cluster of a server is loaded with
// Kubernetes' pods (KubeLoad.Fill), a last key is written, and a 4th
// member is added as an operator adds one (MemberAdd, then its process,
// joining). From the start of its process two moments are timed: the
// first serializable read through a client of the new member alone that
// sees the last key (it serves the data), and its applied index reaching
// the leader's (Status).

// MemberOptions are the settings of RunMember.
type MemberOptions struct {
	Programs Programs
	// Servers are the servers whose clusters are measured (strata and
	// etcd37), one after the other in each pass, the first alternating
	// from pass to pass.
	Servers []Kind
	// Passes is the number of passes over the servers.
	Passes int
	// Dir holds the members' data directories ("" is the system's
	// temporary directory).
	Dir string
	// Load is the data written through the leader before the add; its
	// Endpoint and Progress are set per cluster.
	Load KubeLoad
	// QuotaBytes is etcd's backend quota, raised to fit the data.
	QuotaBytes int64
	// SnapshotEntries is the members' raft snapshot interval
	// (StartOptions.SnapshotEntries); 0 is each server's default.
	SnapshotEntries uint64
	// CatchUpTimeout bounds the wait for the new member.
	CatchUpTimeout time.Duration
	// Pin runs every member, the new one too, on Pin.ServerCPUs and this
	// process (the load and the probes of the new member) on
	// Pin.LoadCPUs; the zero Pinning pins nothing.
	Pin Pinning
	// Progress receives progress lines.
	Progress io.Writer
}

// ErrMember reports a catch-up that failed: the new member did not serve
// the data in time, exited, or answered without the data.
var ErrMember = errors.New("bench: member catch-up")

// Validate reports every problem of o at once.
func (o MemberOptions) Validate() error {
	var errs []error
	if o.Passes < 1 {
		errs = append(errs, fmt.Errorf("%w: passes %d: must be >= 1", ErrOptions, o.Passes))
	}
	if len(o.Servers) == 0 {
		errs = append(errs, fmt.Errorf("%w: servers: empty: name strata, etcd37 or both", ErrOptions))
	}
	for _, k := range o.Servers {
		if k != KindStrata && k != KindEtcd37 {
			errs = append(errs, fmt.Errorf("%w: server %q: members are added to clusters of strata and etcd37 only", ErrOptions, k))
		}
	}
	if o.CatchUpTimeout <= 0 {
		errs = append(errs, fmt.Errorf("%w: catch-up timeout %s: must be > 0", ErrOptions, o.CatchUpTimeout))
	}
	if err := o.Load.validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(append(errs, o.Pin.Validate())...)
}

// MemberSample is one new member's catch-up.
type MemberSample struct {
	Kind Kind `json:"kind"`
	// Name is the cluster's, before the add: "etcd 3.7.3, 3 members".
	Name string `json:"name"`
	Pass int    `json:"pass"`
	// LogicalBytes is the pods' keys and values in the store when the
	// member is added; LoadSeconds the time it took to write them.
	LogicalBytes int64   `json:"logical_bytes"`
	LoadSeconds  float64 `json:"load_seconds"`
	// RetriedCreates counts the pod creates that timed out ("request
	// timed out": outcome unknown) and were tried again (KubeLoad.Fill).
	RetriedCreates int `json:"retried_creates"`
	// ServeSeconds is the time from the start of the new member's process
	// to its first answered serializable read that sees the last key
	// written before the add, through a client of the new member alone.
	ServeSeconds float64 `json:"serve_seconds"`
	// AppliedSeconds is the time from the start to the new member's
	// applied index reaching the leader's (Status RaftAppliedIndex).
	AppliedSeconds float64 `json:"applied_seconds"`
	// ReceivedSeconds is the time from the start until the new member
	// logged that it had received a whole snapshot (seen within 50 ms, or
	// its serving time if it served before the next look at its log);
	// 0 if it received none. What follows, until it serves, is the
	// restore and the log's tail.
	ReceivedSeconds float64 `json:"received_seconds"`
	// Snapshots is the number of raft snapshots the new member received
	// (from its log: Strata's "received snapshot", etcd's "received and
	// saved database snapshot"); 0 means it replayed the log.
	Snapshots int `json:"snapshots"`
	// SnapshotBytes is the size of what it received as snapshots, as its
	// log states it. 0 when unknown.
	SnapshotBytes int64 `json:"snapshot_bytes"`
	// NewRSSBytes and NewCPUSeconds are the new member's resident set and
	// CPU time (since its start) once it caught up; LeaderCPUSeconds the
	// leader's CPU time over the same span.
	NewRSSBytes      int64   `json:"new_rss_bytes"`
	NewCPUSeconds    float64 `json:"new_cpu_seconds"`
	LeaderCPUSeconds float64 `json:"leader_cpu_seconds"`
	// Pods is how many pods the new member answered, serializably, once it
	// caught up (it must be all of them).
	Pods int `json:"pods"`
}

// MBPerSec is the logical data over the time until the member served it.
func (s MemberSample) MBPerSec() float64 { return ratio(mb(s.LogicalBytes), s.ServeSeconds) }

// Received says how the member caught up: "snapshot" or "log".
func (s MemberSample) Received() string {
	if s.Snapshots > 0 {
		return "snapshot"
	}
	return "log"
}

// MemberRun is the result of RunMember.
type MemberRun struct {
	Options MemberOptions
	Samples []MemberSample
}

// RunMember measures a new member's catch-up on each server's cluster in
// turn, each cluster started afresh.
func RunMember(ctx context.Context, o MemberOptions) (*MemberRun, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	fmt.Fprintf(o.Progress, "%s\n", o.Pin)
	unpin, err := o.Pin.PinSelf()
	if err != nil {
		return nil, fmt.Errorf("%w: pinning the load: %w", ErrMember, err)
	}
	defer unpin()
	res := &MemberRun{Options: o}
	for pass := range o.Passes {
		for _, k := range rotate(o.Servers, pass) {
			fmt.Fprintf(o.Progress, "pass %d/%d: %s: 3 members, %d pods\n", pass+1, o.Passes, k, o.Load.Pods)
			smp, err := runMemberOne(ctx, o, k)
			if err != nil {
				return res, fmt.Errorf("pass %d, %s: %w", pass+1, k, err)
			}
			smp.Pass = pass + 1
			res.Samples = append(res.Samples, smp)
			fmt.Fprintf(o.Progress, "pass %d/%d: %s: %.0f MB, new member serves in %.2f s (%.0f MB/s), applied in %.2f s, by %s (%.0f MB in after %.2f s); new member RSS %.0f MB, CPU %.1f s; leader CPU %.1f s\n",
				pass+1, o.Passes, smp.Name, mb(smp.LogicalBytes), smp.ServeSeconds, smp.MBPerSec(), smp.AppliedSeconds, smp.Received(),
				mb(smp.SnapshotBytes), smp.ReceivedSeconds, mb(smp.NewRSSBytes), smp.NewCPUSeconds, smp.LeaderCPUSeconds)
		}
	}
	return res, nil
}

// lastKey is written after the pods, before the member is added: the new
// member serves the data once it answers it.
const lastKey = "/registry/bench/written-before-member-add"

func runMemberOne(ctx context.Context, o MemberOptions, k Kind) (smp MemberSample, err error) {
	c, err := StartCluster(ctx, k, 3, o.Programs, o.Dir, StartOptions{QuotaBytes: o.QuotaBytes, Pin: o.Pin, SnapshotEntries: o.SnapshotEntries})
	if err != nil {
		return smp, err
	}
	defer func() {
		if serr := c.Stop(); serr != nil && err == nil {
			err = serr
		}
	}()
	smp = MemberSample{Kind: k, Name: c.Name}
	li, err := c.Leader(ctx)
	if err != nil {
		return smp, err
	}
	leader := c.Members[li]
	load := o.Load
	load.Endpoints, load.Progress = []string{leader.Endpoint}, o.Progress
	t0 := time.Now()
	if smp.LogicalBytes, _, smp.RetriedCreates, err = load.Fill(ctx); err != nil {
		return smp, err
	}
	smp.LoadSeconds = time.Since(t0).Seconds()
	rev, err := writeLastKey(ctx, leader.Endpoint)
	if err != nil {
		return smp, err
	}
	fmt.Fprintf(o.Progress, "  loaded %.0f MB in %.0f s (%d creates retried after a timeout); adding member s4\n", mb(smp.LogicalBytes), smp.LoadSeconds, smp.RetriedCreates)
	leaderCPU0, err := leader.CPU()
	if err != nil {
		return smp, err
	}
	nm, err := c.AddMember(ctx, o.Programs, o.Dir)
	if err != nil {
		return smp, err
	}
	cu, err := awaitCatchUp(ctx, leader, nm, rev, o.CatchUpTimeout, o.Progress)
	if err != nil {
		return smp, err
	}
	smp.ServeSeconds, smp.AppliedSeconds, smp.ReceivedSeconds = cu.serve.Seconds(), cu.applied.Seconds(), cu.received.Seconds()
	if smp.NewCPUSeconds, err = nm.CPU(); err != nil {
		return smp, err
	}
	if smp.NewRSSBytes, _, err = nm.RSS(); err != nil {
		return smp, err
	}
	leaderCPU1, err := leader.CPU()
	if err != nil {
		return smp, err
	}
	smp.LeaderCPUSeconds = leaderCPU1 - leaderCPU0
	pods, err := countPods(ctx, nm.Endpoint, time.Minute)
	if err != nil {
		return smp, fmt.Errorf("%w: counting the pods on the new member: %w", ErrMember, err)
	}
	smp.Pods = int(pods)
	if smp.Pods != o.Load.Pods {
		return smp, fmt.Errorf("%w: the new member answers %d pods, want %d", ErrMember, smp.Pods, o.Load.Pods)
	}
	if smp.Snapshots, smp.SnapshotBytes, err = receivedSnapshots(k, nm.logPath); err != nil {
		return smp, err
	}
	return smp, nil
}

// writeLastKey puts lastKey through endpoint and compacts the history to
// its revision, as the apiserver's compactor leaves it; it returns the
// revision.
func writeLastKey(ctx context.Context, endpoint string) (int64, error) {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 5 * time.Second, Logger: nopLogger})
	if err != nil {
		return 0, err
	}
	defer cli.Close()
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	resp, err := cli.Put(wctx, lastKey, time.Now().UTC().Format(time.RFC3339Nano))
	if err != nil {
		return 0, fmt.Errorf("%w: writing %s: %w", ErrMember, lastKey, err)
	}
	if _, err := cli.Compact(wctx, resp.Header.Revision); err != nil {
		return 0, fmt.Errorf("%w: compacting to %d: %w", ErrMember, resp.Header.Revision, err)
	}
	return resp.Header.Revision, nil
}

// probeClient is a client of endpoint alone that retries its connection
// every 50 ms at most, so that a member that starts serving is seen at
// once, not after gRPC's default back-off (up to 2 minutes).
func probeClient(endpoint string) (*clientv3.Client, error) {
	return clientv3.New(clientv3.Config{
		Endpoints: []string{endpoint}, Logger: nopLogger,
		DialOptions: []grpc.DialOption{grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 10 * time.Millisecond, Multiplier: 1.5, MaxDelay: 50 * time.Millisecond},
			MinConnectTimeout: time.Second,
		})},
	})
}

// catchUp is what awaitCatchUp saw.
type catchUp struct {
	serve, applied, received time.Duration
}

// probeEvery is how often the new member is asked.
const probeEvery = 20 * time.Millisecond

// awaitCatchUp waits until the new member nm answers a serializable read
// of lastKey at revision rev and its applied index reaches the leader's,
// timing both from its start, and when it logged a snapshot received.
func awaitCatchUp(ctx context.Context, leader, nm *Server, rev int64, timeout time.Duration, progress io.Writer) (catchUp, error) {
	var cu catchUp
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	nc, err := probeClient(nm.Endpoint)
	if err != nil {
		return cu, err
	}
	defer nc.Close()
	lc, err := probeClient(leader.Endpoint)
	if err != nil {
		return cu, err
	}
	defer lc.Close()

	var wg sync.WaitGroup
	errs := make([]error, 2)
	wg.Go(func() {
		errs[0] = poll(ctx, func(rctx context.Context) (bool, error) {
			resp, err := nc.Get(rctx, lastKey, clientv3.WithSerializable())
			if err != nil || len(resp.Kvs) == 0 || resp.Kvs[0].ModRevision < rev {
				return false, nil
			}
			cu.serve = time.Since(nm.Started)
			return true, nil
		})
	})
	wg.Go(func() {
		errs[1] = poll(ctx, func(rctx context.Context) (bool, error) {
			ls, err := lc.Status(rctx, leader.Endpoint)
			if err != nil {
				return false, nil
			}
			ns, err := nc.Status(rctx, nm.Endpoint)
			if err != nil || ns.RaftAppliedIndex < ls.RaftAppliedIndex {
				return false, nil
			}
			cu.applied = time.Since(nm.Started)
			return true, nil
		})
	})
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	report := time.NewTicker(10 * time.Second)
	defer report.Stop()
	logged := &logFollower{path: nm.logPath}
	for {
		select {
		case <-done:
			if cu.received == 0 && logged.appended(snapshotReceived[nm.Kind]) {
				// Logged since the last look: by the time it served at
				// the latest, since it served the snapshot's data.
				cu.received = min(cu.serve, time.Since(nm.Started))
			}
			if err := errors.Join(errs...); err != nil {
				return cu, fmt.Errorf("%w: new member %s (served after %.1f s, applied after %.1f s; 0: not yet) within %s: %w; its log:\n%s",
					ErrMember, nm.Member, cu.serve.Seconds(), cu.applied.Seconds(), timeout, err, nm.LogTail())
			}
			return cu, nil
		case <-nm.done:
			cancel()
			<-done
			return cu, fmt.Errorf("%w: new member %s exited (%v); its log:\n%s", ErrMember, nm.Member, nm.waitErr, nm.LogTail())
		case <-tick.C:
			if cu.received == 0 && logged.appended(snapshotReceived[nm.Kind]) {
				cu.received = time.Since(nm.Started)
			}
		case <-report.C:
			fmt.Fprintf(progress, "  %3.0f s: new member %s not caught up yet\n", time.Since(nm.Started).Seconds(), nm.Member)
		}
	}
}

// poll calls probe every probeEvery, each call bounded to a second, until
// it reports done or fails, or ctx ends.
func poll(ctx context.Context, probe func(context.Context) (bool, error)) error {
	for {
		rctx, cancel := context.WithTimeout(ctx, time.Second)
		ok, err := probe(rctx)
		cancel()
		if ok || err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(probeEvery):
		}
	}
}

// countPods counts the pods endpoint answers from its own store
// (serializable), within the given time, through a client of its own.
func countPods(ctx context.Context, endpoint string, within time.Duration) (int64, error) {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 5 * time.Second, Logger: nopLogger})
	if err != nil {
		return 0, err
	}
	defer cli.Close()
	rctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	resp, err := cli.Get(rctx, "/registry/pods/", clientv3.WithPrefix(), clientv3.WithCountOnly(), clientv3.WithSerializable())
	if err != nil {
		return 0, err
	}
	return resp.Count, nil
}

// snapshotReceived is the text of the log line in which each server
// says it received a whole snapshot (Strata's with --verbose, etcd's at
// info level).
var snapshotReceived = map[Kind]string{
	KindStrata: "received snapshot at index",
	KindEtcd37: `"received and saved database snapshot"`,
}

// strataSnapshotSize finds the size in Strata's line of a snapshot
// received ("... (data at 123, 456 bytes) from ...").
var strataSnapshotSize = regexp.MustCompile(`\(data at \d+, (\d+) bytes\)`)

// logFollower reads what a process appends to its log.
type logFollower struct {
	path string
	off  int64
	tail []byte // the end of what was read, for a text split across reads
}

// appended reports whether text was appended to the log since the last
// call (or, in the last call's last len(text)-1 bytes, then).
func (f *logFollower) appended(text string) bool {
	fh, err := os.Open(f.path)
	if err != nil {
		return false
	}
	defer fh.Close()
	b, err := io.ReadAll(io.NewSectionReader(fh, f.off, 1<<62))
	if err != nil || len(b) == 0 {
		return false
	}
	f.off += int64(len(b))
	b = append(f.tail, b...)
	found := strings.Contains(string(b), text)
	f.tail = append([]byte(nil), b[max(0, len(b)-len(text)+1):]...)
	return found
}

// receivedSnapshots reads a new member's log for the snapshots it
// received, and their size.
func receivedSnapshots(k Kind, logPath string) (n int, bytes int64, err error) {
	f, err := os.Open(logPath)
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case !strings.Contains(line, snapshotReceived[k]):
		case k == KindStrata:
			m := strataSnapshotSize.FindStringSubmatch(line)
			if m == nil {
				return n, bytes, fmt.Errorf("%w: Strata's log line %q states no size", ErrMember, line)
			}
			size, _ := strconv.ParseInt(m[1], 10, 64)
			n++
			bytes += size
		case k == KindEtcd37:
			var rec struct {
				Size int64 `json:"incoming-snapshot-size-bytes"`
			}
			if err := json.Unmarshal([]byte(line), &rec); err != nil {
				return n, bytes, fmt.Errorf("%w: etcd's log line %q: %w", ErrMember, line, err)
			}
			n++
			bytes += rec.Size
		}
	}
	return n, bytes, sc.Err()
}

// memberMedians are one server's medians over its samples, and the
// creates retried in all of them.
type memberMedians struct {
	name                                       string
	logical, serve, mbps, applied, snap, recvd float64
	rss, newCPU, leaderCPU, load               float64
	received                                   string
	retried                                    int
}

func (r *MemberRun) medians(k Kind) (memberMedians, bool) {
	var m memberMedians
	var logical, serve, mbps, applied, snap, recvd, rss, newCPU, leaderCPU, load []float64
	bySnapshot := 0
	for _, s := range r.Samples {
		if s.Kind != k {
			continue
		}
		m.name = s.Name
		logical = append(logical, mb(s.LogicalBytes))
		serve = append(serve, s.ServeSeconds)
		mbps = append(mbps, s.MBPerSec())
		applied = append(applied, s.AppliedSeconds)
		snap = append(snap, mb(s.SnapshotBytes))
		recvd = append(recvd, s.ReceivedSeconds)
		m.retried += s.RetriedCreates
		rss = append(rss, mb(s.NewRSSBytes))
		newCPU = append(newCPU, s.NewCPUSeconds)
		leaderCPU = append(leaderCPU, s.LeaderCPUSeconds)
		load = append(load, s.LoadSeconds)
		if s.Snapshots > 0 {
			bySnapshot++
		}
	}
	if len(serve) == 0 {
		return m, false
	}
	m.logical, m.serve, m.mbps, m.applied = stats.Median(logical), stats.Median(serve), stats.Median(mbps), stats.Median(applied)
	m.snap, m.recvd = stats.Median(snap), stats.Median(recvd)
	m.rss, m.newCPU, m.leaderCPU, m.load = stats.Median(rss), stats.Median(newCPU), stats.Median(leaderCPU), stats.Median(load)
	switch bySnapshot {
	case len(serve):
		m.received = "snapshot"
	case 0:
		m.received = "log"
	default:
		m.received = fmt.Sprintf("snapshot in %d of %d", bySnapshot, len(serve))
	}
	return m, true
}

// Tables are the catch-up and its cost, a row per server with the medians
// of its passes.
func (r *MemberRun) Tables() []*report.Table {
	catch := &report.Table{Columns: []report.Column{
		{Name: "Server"},
		{Name: "Data", Unit: "MB", Format: "%.0f"},
		{Name: "Serves after", Unit: "s", Format: "%.2f"},
		{Name: "Catch-up", Unit: "MB/s", Format: "%.0f"},
		{Name: "Applied after", Unit: "s", Format: "%.2f"},
		{Name: "Received"},
		{Name: "Snapshot", Unit: "MB", Format: "%.0f"},
		{Name: "Snapshot in after", Unit: "s", Format: "%.2f"},
	}}
	cost := &report.Table{Columns: []report.Column{
		{Name: "Server"},
		{Name: "New member RSS", Unit: "MB", Format: "%.0f"},
		{Name: "New member CPU", Unit: "s", Format: "%.1f"},
		{Name: "Leader CPU", Unit: "s", Format: "%.1f"},
		{Name: "Load", Unit: "s", Format: "%.0f"},
		{Name: "Retried"},
	}}
	for _, k := range r.Options.Servers {
		m, ok := r.medians(k)
		if !ok {
			continue
		}
		catch.Rows = append(catch.Rows, []any{m.name, m.logical, m.serve, m.mbps, m.applied, m.received, orNil(m.snap), orNil(m.recvd)})
		cost.Rows = append(cost.Rows, []any{m.name, m.rss, m.newCPU, m.leaderCPU, m.load, m.retried})
	}
	passes := fmt.Sprintf("Medians of %d passes", r.Options.Passes)
	if r.Options.Passes == 1 {
		passes = "One pass"
	}
	catch.Notes = []string{
		fmt.Sprintf("A 3-member cluster loaded through its leader with %d pod creates and %d updates (Kubernetes-shaped, about 14 KB each), then a last key and a compaction to its revision; then a 4th member added (MemberAdd, then its process joining). Times from the start of its process: 'Serves after' to its first serializable read, through a client of the new member alone, that sees the last key; 'Applied after' to its applied index reaching the leader's (Status). Catch-up: Data / 'Serves after'. %s; 1 MB = 2^20 bytes.", r.Options.Load.Pods, r.Options.Load.Updates, passes),
		"Received: how the new member caught up, from its log (snapshot: it was sent a raft snapshot, then the log's tail). Snapshot: what it received as snapshots, as its log line states. 'Snapshot in after': from the start until the new member logged the whole snapshot received (read every 50 ms); the rest of 'Serves after' is its restore and the log's tail.",
	}
	cost.Notes = []string{
		"New member: its resident set and CPU time from its start until it served and applied everything; Leader CPU: the leader's CPU time over the same span; Load: the time to write the pods; Retried: creates that timed out (\"request timed out\") and were tried again.",
	}
	return []*report.Table{catch, cost}
}

// orNil is x, or an empty cell for 0 (nothing received).
func orNil(x float64) any {
	if x == 0 {
		return nil
	}
	return x
}

// RunsTable lists every pass (a snapshot time and size only where the
// member received a snapshot).
func (r *MemberRun) RunsTable() *report.Table {
	t := &report.Table{Columns: []report.Column{
		{Name: "Server"},
		{Name: "Pass"},
		{Name: "Serves after", Unit: "s", Format: "%.2f"},
		{Name: "Applied after", Unit: "s", Format: "%.2f"},
		{Name: "Snapshot in after", Unit: "s", Format: "%.2f"},
		{Name: "Snapshot", Unit: "MB", Format: "%.0f"},
		{Name: "New member CPU", Unit: "s", Format: "%.1f"},
		{Name: "Leader CPU", Unit: "s", Format: "%.1f"},
	}}
	for _, s := range r.Samples {
		t.Rows = append(t.Rows, []any{s.Name, s.Pass, s.ServeSeconds, s.AppliedSeconds, orNil(s.ReceivedSeconds), orNil(mb(s.SnapshotBytes)), s.NewCPUSeconds, s.LeaderCPUSeconds})
	}
	return t
}

// WriteTables writes Tables, and with runs RunsTable, in format f, a
// blank line between them.
func (r *MemberRun) WriteTables(w io.Writer, f report.Format, runs bool) error {
	ts := r.Tables()
	if runs {
		ts = append(ts, r.RunsTable())
	}
	return writeTables(w, f, ts)
}
