package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// The APIs and operations of the QPS table.
const (
	// APIV2 is etcd's v2 keys API over HTTP/1.1, loaded with wrk.
	APIV2 = "v2"
	// APIV3 is etcd's v3 gRPC API, loaded with V3Load.
	APIV3 = "v3"
	// OpRead reads one key: GET /v2/keys/foo, or a v3 Range of "foo".
	OpRead = "read"
	// OpWrite writes one key: PUT /v2/keys/foo with value=..., or a v3
	// Put of "foo".
	OpWrite = "write"
	// OpReadSerializable is a serializable v3 Range of "foo" (etcd's
	// --consistency s): on a cluster, a follower answers it from its own
	// store without asking the leader. The v2 API has no such read; its
	// rows leave it out.
	OpReadSerializable = "read-serializable"
)

// benchKey is the one key every QPS run reads or writes, as in etcd's
// hack/benchmark script.
const benchKey = "foo"

// QPSOptions configure RunQPS. Every row is a combination of APIs, Ops,
// ValueSizes and Clients.
type QPSOptions struct {
	// Servers are the servers to measure: KindStrata and its peers, and
	// KindFloor, the transport's own cost. The v2 rows run on KindStrata,
	// KindEtcd34 and KindFloor, the v3 rows on KindStrata, V3Peer and
	// KindFloor, each where selected. The default is Strata and both
	// etcds.
	Servers []Kind
	// V3Peer is the etcd the v3 rows compare with: KindEtcd37 (the
	// default) or KindEtcd34.
	V3Peer Kind
	// APIs, Ops, ValueSizes and Clients span the rows. The defaults are
	// v2 and v3; read and write; 64 and 256 bytes; 1, 64 and 256 clients.
	// With Members > 1 they are v3 only, and write, read and
	// read-serializable.
	APIs       []string
	Ops        []string
	ValueSizes []int
	Clients    []int
	// Members is the number of members of each server: 1 (the default)
	// runs servers alone; 3, 5 or 7 runs a raft cluster of Strata and one
	// of etcd 3.7, every member pinned to the server CPUs, their CPU times
	// summed. Cluster rows are v3 only.
	Members int
	// Via are the members a cluster row's requests go to, ViaLeader and
	// ViaFollower, one row each; the default is both. Empty with Members
	// 1.
	Via []string
	// Passes is the number of passes over all rows, each with freshly
	// started servers; the table shows the medians. The default value is 3.
	Passes int
	// Requests is the number of requests of one v3 run with more than
	// one client; SingleRequests with one client. The defaults are 20,000
	// and 2,000.
	Requests, SingleRequests int
	// Duration is the length of one v2 run: wrk runs for a time, not a
	// count. The default value is 5 seconds.
	Duration time.Duration
	// Conns is the number of gRPC connections the v3 clients share; 0
	// means ceil(clients/16).
	Conns int
	// Serializable makes v3 reads serializable (served locally, etcd's
	// --consistency s) instead of linearizable, the default of clientv3.
	Serializable bool
	// RunTimeout bounds each run. The default value is 2 minutes.
	RunTimeout time.Duration
	// Wrk is the wrk executable. The default value is "wrk" on $PATH.
	Wrk string
	// Pin places the servers and the load tools (wrk, and this process,
	// which runs the v3 load) on CPUs of their own; the zero Pinning
	// leaves everything unpinned. See DefaultPinning.
	Pin Pinning
	// Programs are the servers' executables.
	Programs Programs
	// Dir is where the servers' data directories go; "" is os.TempDir().
	Dir string
	// Progress receives a line per run and per server start; nil is
	// silent.
	Progress io.Writer
}

// ErrOptions is wrapped by every error about bad options.
var ErrOptions = errors.New("bench: bad option")

func (o *QPSOptions) setDefaults() {
	if len(o.Servers) == 0 {
		o.Servers = []Kind{KindStrata, KindEtcd34, KindEtcd37}
	}
	if o.V3Peer == "" {
		o.V3Peer = KindEtcd37
	}
	if o.Members == 0 {
		o.Members = 1
	}
	if len(o.APIs) == 0 {
		o.APIs = []string{APIV2, APIV3}
		if o.Members > 1 {
			o.APIs = []string{APIV3}
		}
	}
	if len(o.Ops) == 0 {
		o.Ops = []string{OpRead, OpWrite}
		if o.Members > 1 {
			o.Ops = []string{OpWrite, OpRead, OpReadSerializable}
		}
	}
	if len(o.Via) == 0 && o.Members > 1 {
		o.Via = []string{ViaLeader, ViaFollower}
	}
	if len(o.ValueSizes) == 0 {
		o.ValueSizes = []int{64, 256}
	}
	if len(o.Clients) == 0 {
		o.Clients = []int{1, 64, 256}
	}
	if o.Passes == 0 {
		o.Passes = 3
	}
	if o.Requests == 0 {
		o.Requests = 20_000
	}
	if o.SingleRequests == 0 {
		o.SingleRequests = 2_000
	}
	if o.RunTimeout == 0 {
		o.RunTimeout = 2 * time.Minute
	}
	if o.Duration == 0 {
		o.Duration = 5 * time.Second
	}
	if o.Wrk == "" {
		o.Wrk = "wrk"
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
}

// Validate reports every bad option at once, after filling in defaults.
func (o *QPSOptions) Validate() error {
	o.setDefaults()
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrOptions}, args...)...))
	}
	for _, a := range o.APIs {
		if a != APIV2 && a != APIV3 {
			bad("api %q: allowed are v2 and v3", a)
		}
	}
	for _, op := range o.Ops {
		if op != OpRead && op != OpWrite && op != OpReadSerializable {
			bad("op %q: allowed are read, write and read-serializable", op)
		}
	}
	if o.Members != 1 && (o.Members < 3 || o.Members > 7 || o.Members%2 == 0) {
		bad("members %d: allowed are 1 (servers alone), 3, 5 and 7 (raft clusters)", o.Members)
	}
	if o.Members > 1 {
		if slices.Contains(o.APIs, APIV2) {
			bad("api v2 with members %d: the v2 rows run on servers alone (members 1)", o.Members)
		}
		if o.V3Peer != KindEtcd37 {
			bad("v3 peer %q with members %d: clusters are compared with etcd37 only", o.V3Peer, o.Members)
		}
		if slices.Contains(o.Servers, KindFloor) {
			bad("server floor with members %d: the transport floor runs alone (members 1)", o.Members)
		}
	}
	for _, v := range o.Via {
		if o.Members == 1 {
			bad("via %q with members 1: leader and follower rows need a cluster (members 3, 5 or 7)", v)
			break
		}
		if v != ViaLeader && v != ViaFollower {
			bad("via %q: allowed are leader and follower", v)
		}
	}
	for _, v := range o.ValueSizes {
		if v < 1 || v > 1<<20 {
			bad("value size %d: must be in [1, 1048576]", v)
		}
	}
	for _, c := range o.Clients {
		if c < 1 || c > 10_000 {
			bad("clients %d: must be in [1, 10000]", c)
		}
		if c > 1 && o.Requests < c {
			bad("requests %d: must be >= clients (%d)", o.Requests, c)
		}
	}
	if o.V3Peer != KindEtcd34 && o.V3Peer != KindEtcd37 {
		bad("v3 peer %q: allowed are etcd34 and etcd37", o.V3Peer)
	}
	if o.Passes < 1 {
		bad("passes %d: must be >= 1", o.Passes)
	}
	if o.SingleRequests < 1 {
		bad("single-client requests %d: must be >= 1", o.SingleRequests)
	}
	if o.Conns < 0 {
		bad("conns %d: must be >= 0 (0 is ceil(clients/16))", o.Conns)
	}
	if o.RunTimeout <= 0 {
		bad("run timeout %s: must be > 0", o.RunTimeout)
	}
	if o.Duration < time.Second || o.Duration%time.Second != 0 {
		bad("duration %s: must be whole seconds, at least 1s (wrk's -d)", o.Duration)
	}
	if err := o.Pin.Validate(); err != nil {
		errs = append(errs, err)
	}
	if len(o.targets(APIV2)) == 0 && len(o.targets(APIV3)) == 0 {
		bad("servers %v: no selected server serves the selected APIs %v", o.Servers, o.APIs)
	}
	return errors.Join(errs...)
}

// targets are the selected servers a row of api runs on, Strata first.
func (o *QPSOptions) targets(api string) []Kind {
	if !slices.Contains(o.APIs, api) {
		return nil
	}
	var want []Kind
	switch api {
	case APIV2:
		want = []Kind{KindStrata, KindEtcd34, KindFloor}
	case APIV3:
		want = []Kind{KindStrata, o.V3Peer, KindFloor}
	}
	var out []Kind
	for _, k := range want {
		if slices.Contains(o.Servers, k) {
			out = append(out, k)
		}
	}
	return out
}

// peer is the server Strata is compared with on api.
func (o *QPSOptions) peer(api string) Kind {
	if api == APIV2 {
		return KindEtcd34
	}
	return o.V3Peer
}

// QPSRow is one row of the QPS table.
type QPSRow struct {
	API       string `json:"api"`
	Op        string `json:"op"`
	ValueSize int    `json:"value_size"`
	Clients   int    `json:"clients"`
	// Members is the number of members of each server, 1 for servers
	// alone.
	Members int `json:"members"`
	// Via is the member of a cluster the requests go to, ViaLeader or
	// ViaFollower; "" for servers alone.
	Via string `json:"via,omitempty"`
}

func (r QPSRow) String() string {
	s := fmt.Sprintf("%s %s %dB c=%d", r.API, r.Op, r.ValueSize, r.Clients)
	if r.Members > 1 {
		s += fmt.Sprintf(" %dm via %s", r.Members, r.Via)
	}
	return s
}

// rows lists the table's rows in order.
func (o *QPSOptions) rows() []QPSRow {
	var out []QPSRow
	for _, api := range o.APIs {
		if len(o.targets(api)) == 0 {
			continue
		}
		for _, op := range o.Ops {
			if api == APIV2 && op == OpReadSerializable {
				continue
			}
			for _, vs := range o.ValueSizes {
				for _, c := range o.Clients {
					row := QPSRow{API: api, Op: op, ValueSize: vs, Clients: c, Members: o.Members}
					if o.Members == 1 {
						out = append(out, row)
					}
					for _, via := range o.Via {
						row.Via = via
						out = append(out, row)
					}
				}
			}
		}
	}
	return out
}

// QPSSample is one run: one row on one server in one pass.
type QPSSample struct {
	Pass   int    `json:"pass"`
	Row    QPSRow `json:"row"`
	Kind   Kind   `json:"server"`
	Name   string `json:"name"`
	Result Result `json:"result"`
	// Requests is the number of requests sent in the run.
	Requests int `json:"requests_sent"`
	// CPUSeconds is the server's CPU time (user + system) over the run,
	// summed over the members of a cluster.
	CPUSeconds float64 `json:"cpu_seconds"`
	// Member is the member of a cluster the requests went to, "" for a
	// server alone.
	Member string `json:"member,omitempty"`
	// MemberCPUSeconds is each member's share of CPUSeconds, in the
	// order of their names, for a cluster.
	MemberCPUSeconds []float64 `json:"member_cpu_seconds,omitempty"`
	// LeaderChanged says the cluster had another leader after the run
	// than before it: the run's figures include an election.
	LeaderChanged bool `json:"leader_changed,omitempty"`
	// SettleSeconds is the time from the load's end until the members
	// were quiet; CPUSeconds includes their work in it (see settle).
	SettleSeconds float64 `json:"settle_seconds"`
	// Unsettled says the members were still busy settleLimit after the
	// load.
	Unsettled bool `json:"unsettled,omitempty"`
}

// CPUPer1000 is the server's CPU seconds per 1000 requests sent.
func (s QPSSample) CPUPer1000() float64 { return per1000(s.CPUSeconds, s.Requests) }

// LoadCPUPer1000 is the load tool's CPU seconds per 1000 requests sent.
func (s QPSSample) LoadCPUPer1000() float64 { return per1000(s.Result.LoadCPUSeconds, s.Requests) }

func per1000(seconds float64, requests int) float64 {
	if requests == 0 {
		return math.NaN()
	}
	return seconds / float64(requests) * 1000
}

// QPSResult holds every run of RunQPS.
type QPSResult struct {
	Options QPSOptions  `json:"-"`
	Rows    []QPSRow    `json:"rows"`
	Samples []QPSSample `json:"samples"`
	// Names maps each server to its name and version.
	Names map[Kind]string `json:"names"`
}

// RunQPS measures the QPS table: Passes passes, each starting every
// selected server afresh and running every row on each, alternating which
// server goes first from row to row and pass to pass. With o.Pin this
// process runs on the load CPUs until RunQPS returns. On an error it
// returns the runs done so far beside it.
func RunQPS(ctx context.Context, o QPSOptions) (res *QPSResult, err error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	fmt.Fprintf(o.Progress, "%s\n", o.Pin)
	unpin, err := o.Pin.PinSelf()
	if err != nil {
		return nil, err
	}
	defer func() {
		if uerr := unpin(); uerr != nil && err == nil {
			err = uerr
		}
	}()
	res = &QPSResult{Options: o, Rows: o.rows(), Names: map[Kind]string{}}
	var needed []Kind
	for _, k := range Kinds {
		if slices.Contains(o.targets(APIV2), k) || slices.Contains(o.targets(APIV3), k) {
			needed = append(needed, k)
		}
	}
	runs := 0
	for _, r := range res.Rows {
		runs += len(o.targets(r.API))
	}
	runs *= o.Passes
	for pass := range o.Passes {
		if err := o.runPass(ctx, pass, needed, runs, res); err != nil {
			return res, err
		}
	}
	return res, nil
}

func (o *QPSOptions) runPass(ctx context.Context, pass int, needed []Kind, runs int, res *QPSResult) (err error) {
	servers := map[Kind]*Cluster{}
	defer func() {
		for _, k := range needed {
			if s := servers[k]; s != nil {
				if serr := s.Stop(); serr != nil && err == nil {
					err = serr
				}
			}
		}
	}()
	for _, k := range rotate(needed, pass) {
		fmt.Fprintf(o.Progress, "pass %d/%d: starting %s\n", pass+1, o.Passes, k)
		c, err := StartCluster(ctx, k, o.Members, o.Programs, o.Dir, StartOptions{Pin: o.Pin})
		if err != nil {
			return err
		}
		servers[k] = c
		res.Names[k] = c.Name
		leader, _, err := c.Target(ctx, ViaLeader)
		if err != nil {
			return err
		}
		if err := warmUp(ctx, leader); err != nil {
			return err
		}
	}
	for ri, row := range res.Rows {
		for _, k := range rotate(o.targets(row.API), pass+ri) {
			smp, err := o.runOne(ctx, servers[k], row)
			smp.Pass = pass
			if err != nil {
				return fmt.Errorf("pass %d, %s on %s: %w", pass+1, row, servers[k].Name, err)
			}
			res.Samples = append(res.Samples, smp)
			fmt.Fprintf(o.Progress, "[%d/%d] pass %d %-20s %-12s %9.0f QPS  p90 %7.2f ms  p99 %7.2f ms  CPU %.3f s/1k req  errors %d%s\n",
				len(res.Samples), runs, pass+1, row, smp.Name, smp.Result.QPS, ms(smp.Result.P90), ms(smp.Result.P99), smp.CPUPer1000(), smp.Result.Errors, runNote(smp))
		}
	}
	return nil
}

// warmUp sends a fresh server 1000 v3 puts from 16 clients, unmeasured,
// so that no row measures a server's first requests (connection set-up,
// first WAL segment, first allocations).
func warmUp(ctx context.Context, s *Server) error {
	l := V3Load{Endpoint: s.Endpoint, Clients: 16, Conns: 1, Total: 1000, Timeout: time.Minute, NoLatencies: true,
		Op: func(ctx context.Context, kv clientv3.KV, _, _ int) error {
			_, err := kv.Put(ctx, benchKey, "warm-up")
			return err
		}}
	r, err := l.Run(ctx)
	if err == nil && r.Errors > 0 {
		err = fmt.Errorf("bench: warm-up of %s: %d of %d puts failed", s.Name, r.Errors, l.Total)
	}
	return err
}

// rotate returns ks rotated left by n, so that passes and rows alternate
// which server goes first.
func rotate(ks []Kind, n int) []Kind {
	if len(ks) == 0 {
		return nil
	}
	n %= len(ks)
	return append(slices.Clone(ks[n:]), ks[:n]...)
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// value is the value of a row: the byte 'a' repeated, as etcd's
// hack/benchmark script makes it.
func value(size int) string { return strings.Repeat("a", size) }

// runNote is what a progress line adds: how long the members took to
// go quiet after the load and, for a cluster, the member loaded and a
// leader change.
func runNote(smp QPSSample) string {
	note := fmt.Sprintf("  settled in %.1f s", smp.SettleSeconds)
	if smp.Unsettled {
		note = fmt.Sprintf("  STILL BUSY %.0f s after the load", smp.SettleSeconds)
	}
	if smp.Member == "" {
		return note
	}
	note += "  on " + smp.Member
	if smp.LeaderChanged {
		note += "  LEADER CHANGED during the run"
	}
	return note
}

// runOne runs row on c, sending the requests to the member row.Via names
// and measuring the CPU time of every member around the run.
func (o *QPSOptions) runOne(ctx context.Context, c *Cluster, row QPSRow) (QPSSample, error) {
	smp := QPSSample{Row: row, Kind: c.Kind, Name: c.Name}
	n := o.Requests
	if row.Clients == 1 {
		n = o.SingleRequests
	}
	s, leader, err := c.Target(ctx, row.Via)
	if err != nil {
		return smp, err
	}
	if len(c.Members) > 1 {
		smp.Member = s.Member
	}
	if row.Op != OpWrite {
		// Through the member read, which has applied the write when it
		// answers (Strata and etcd alike), so that a serializable read
		// on a follower finds the key too.
		if err := o.writeKey(ctx, s, row); err != nil {
			return smp, err
		}
	}
	// Start on quiet members: the warm-up, the key's write or the run
	// before may have left work behind (see settle).
	before, err := settle(ctx, c.MemberCPU, quietWindow, settleLimit)
	if err != nil {
		return smp, err
	}
	cpu0 := before.CPU
	switch row.API {
	case APIV2:
		w := WrkRun{Wrk: o.Wrk, URL: s.URL + "/v2/keys/" + benchKey, Clients: row.Clients, Threads: min(row.Clients, o.Pin.LoadThreads()), Duration: o.Duration, Dir: o.Dir, Pin: o.Pin}
		if row.Op == OpWrite {
			w.Value = value(row.ValueSize)
		}
		smp.Result, err = w.Run(ctx)
		smp.Requests = smp.Result.Requests + smp.Result.Errors
	case APIV3:
		smp.Requests = n
		smp.Result, err = o.v3Load(s, row, n).Run(ctx)
	}
	if err != nil {
		return smp, err
	}
	// Count what the run left behind until the members are quiet again.
	after, err := settle(ctx, c.MemberCPU, quietWindow, settleLimit)
	if err != nil {
		return smp, err
	}
	cpu1 := after.CPU
	smp.SettleSeconds, smp.Unsettled = after.Waited.Seconds(), !after.Quiet
	for i := range cpu1 {
		smp.CPUSeconds += cpu1[i] - cpu0[i]
		if len(c.Members) > 1 {
			smp.MemberCPUSeconds = append(smp.MemberCPUSeconds, cpu1[i]-cpu0[i])
		}
	}
	if len(c.Members) > 1 {
		now, err := c.Leader(ctx)
		if err != nil {
			return smp, err
		}
		smp.LeaderChanged = now != leader
	}
	return smp, nil
}

func (o *QPSOptions) v3Load(s *Server, row QPSRow, n int) V3Load {
	conns := o.Conns
	if conns == 0 {
		conns = (row.Clients + 15) / 16
	}
	l := V3Load{Endpoint: s.Endpoint, Clients: row.Clients, Conns: min(conns, row.Clients), Total: n, Timeout: o.RunTimeout}
	if row.Op == OpWrite {
		v := value(row.ValueSize)
		l.Op = func(ctx context.Context, kv clientv3.KV, _, _ int) error {
			_, err := kv.Put(ctx, benchKey, v)
			return err
		}
		return l
	}
	var opts []clientv3.OpOption
	if o.Serializable || row.Op == OpReadSerializable {
		opts = append(opts, clientv3.WithSerializable())
	}
	want := value(row.ValueSize)
	l.Op = func(ctx context.Context, kv clientv3.KV, _, _ int) error {
		r, err := kv.Get(ctx, benchKey, opts...)
		switch {
		case err != nil:
		case len(r.Kvs) != 1:
			err = fmt.Errorf("bench: v3 get %q: %d keys, want 1", benchKey, len(r.Kvs))
		case string(r.Kvs[0].Value) != want:
			err = fmt.Errorf("bench: v3 get %q: a value of %d bytes, not the %d written", benchKey, len(r.Kvs[0].Value), len(want))
		}
		return err
	}
	return l
}

// writeKey stores the row's value under the benchmark key, so reads find
// it.
func (o *QPSOptions) writeKey(ctx context.Context, s *Server, row QPSRow) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	v := value(row.ValueSize)
	if row.API == APIV3 {
		c, err := clientv3.New(clientv3.Config{Endpoints: []string{s.Endpoint}, DialTimeout: 5 * time.Second, Logger: nopLogger})
		if err != nil {
			return err
		}
		defer c.Close()
		_, err = c.Put(ctx, benchKey, v)
		return err
	}
	body := url.Values{"value": {v}}.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, s.URL+"/v2/keys/"+benchKey, strings.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusCreated {
		return fmt.Errorf("bench: PUT %s/v2/keys/%s: %s", s.URL, benchKey, resp.Status)
	}
	return nil
}
