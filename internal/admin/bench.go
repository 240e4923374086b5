package admin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/stratadb/strata/internal/bench"
	"github.com/stratadb/strata/internal/cli"
	"github.com/stratadb/strata/internal/report"
)

func newBenchCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Compare strata serve with etcd: QPS (etcd v2.1's benchmark) and memory",
		Long: `bench starts strata serve and etcd as separate processes on loopback ports,
each with a fresh temporary data directory, loads them and prints a table.

  qps     etcd v2.1's QPS benchmark: reads and writes of one key, 64 and 256 B
          values, 1, 64 and 256 clients; wrk on the v2 API (Strata and etcd
          3.4) and a clientv3 load generator on the v3 API (Strata and etcd
          3.7); medians of several passes, ratios, server CPU seconds per
          1000 requests, p90 and p99. By default each server runs on CPU 0
          and the load tool on CPU 1 (taskset), so the server has one core.
          With --members 3, a 3-member Strata cluster against a 3-member
          etcd 3.7 cluster, all members on CPU 0: writes and reads through
          the leader and through a follower, CPU summed over the members.
          --servers ...,floor adds the transport floor, a baseline that
          answers Range/Put and v2 GET/PUT from a map: what grpc-go or
          net/http alone cost per request, in a table of its own.
  memory  etcd's storage memory benchmark: RSS after loading N keys with
          several versions through the v3 API.
  kube    Kubernetes-shaped pods, watch, leases, compactions, a paginated list;
          with --members 3, against a 3-member Strata cluster and a 3-member
          etcd 3.7 cluster (and --kill-leader-at: the leader SIGKILLed mid-load).
  watch   puts with no watcher, then with 10,000 watchers (etcd's benchmark watch).
  member  a 4th member added to a loaded 3-member cluster: the time until it
          serves the data, and whether it was sent a snapshot.
  patroni Patroni's etcd3 traffic against strata etcd and etcd 3.4 side by
          side with periodic auto-compaction: disk and history over time.

Needs wrk and etcd 3.4 (Debian: apt-get install wrk etcd-server) and, for
etcd 3.7, the go command in Strata's checkout (or --etcd37 PATH).`,
		Example: `  strata bench qps --passes 3 --format markdown
  strata bench memory --servers strata,etcd34,etcd37
  strata bench member --pods 70000 --passes 2`,
	}
	cmd.AddCommand(newBenchQPSCommand(), newBenchMemoryCommand(), newBenchKubeCommand(), newBenchWatchCommand(), newBenchMemberCommand(), newBenchPatroniCommand())
	return cmd
}

// benchCommon are the flags of both bench commands: programs, where data
// goes, and the output format.
type benchCommon struct {
	servers    []string
	strata     string
	strataTOML string
	etcd       string
	etcd37     string
	floor      string
	dir        string
	format     report.Format
	// floorOK lets --servers name the transport floor, a baseline of the
	// QPS table, of Kubernetes' traffic and of watches at scale only.
	floorOK bool
}

// AddFlags registers the common flags; servers defaults to defServers.
func (o *benchCommon) AddFlags(fs *pflag.FlagSet, defServers []string) {
	fs.StringSliceVar(&o.servers, "servers", defServers, "servers to run, of strata, etcd34 and etcd37 (and floor: bench qps, kube and watch)")
	fs.StringVar(&o.strata, "strata", "", "strata `EXECUTABLE` that runs `serve` (default: this program)")
	fs.StringVar(&o.strataTOML, "strata-toml", "", "TOML `LINES` appended to Strata's generated config (db_path, server.listen): top-level or dotted keys, e.g. 'server.memory_budget_mb = 32'")
	fs.StringVar(&o.etcd, "etcd", "etcd", "etcd 3.4 `EXECUTABLE` (Debian's etcd-server)")
	fs.StringVar(&o.etcd37, "etcd37", "", "etcd 3.7 `EXECUTABLE` built from ./internal/bench/etcd37 (default: built now with go build)")
	fs.StringVar(&o.floor, "floor", "", "transport floor `EXECUTABLE` built from ./internal/bench/floor, for --servers floor (default: built now with go build)")
	fs.StringVar(&o.dir, "dir", "", "`DIR` for the servers' temporary data directories (default: the system's temporary directory)")
	o.format = report.FormatTable
	fs.Var(&o.format, "format", "output `FORMAT`: table, markdown, json or csv")
}

// kinds parses --servers.
func (o *benchCommon) kinds() ([]bench.Kind, error) {
	var ks []bench.Kind
	for _, s := range o.servers {
		k, err := bench.ParseKind(s)
		if err != nil {
			return nil, fmt.Errorf("--servers: %w", err)
		}
		if k == bench.KindFloor && !o.floorOK {
			return nil, errors.New("--servers floor: the transport floor is a baseline of `strata bench qps`, `strata bench kube` and `strata bench watch` only")
		}
		if !slices.Contains(ks, k) {
			ks = append(ks, k)
		}
	}
	if len(ks) == 0 {
		return nil, errors.New("--servers: empty: name at least one of strata, etcd34, etcd37")
	}
	return ks, nil
}

// programs finds (or builds) the executables of the selected servers;
// cleanup removes what was built.
func (o *benchCommon) programs(ctx context.Context, ks []bench.Kind, progress io.Writer) (p bench.Programs, cleanup func(), err error) {
	cleanup = func() {}
	p.StrataTOML = o.strataTOML
	if slices.Contains(ks, bench.KindStrata) {
		p.Strata = o.strata
		if p.Strata == "" {
			if p.Strata, err = os.Executable(); err != nil {
				return p, cleanup, fmt.Errorf("--strata: this program's path: %w", err)
			}
		} else if p.Strata, err = bench.LookPath(p.Strata, "pass --strata PATH to a strata binary"); err != nil {
			return p, cleanup, err
		}
	}
	if slices.Contains(ks, bench.KindEtcd34) {
		if p.Etcd, err = bench.LookPath(o.etcd, "install etcd 3.4 (apt-get install etcd-server) or pass --etcd PATH"); err != nil {
			return p, cleanup, err
		}
	}
	var dir string
	for _, b := range []struct {
		kind  bench.Kind
		path  string
		into  *string
		what  string
		build func(context.Context, string) (string, error)
	}{
		{bench.KindEtcd37, o.etcd37, &p.Etcd37, "etcd 3.7 (./internal/bench/etcd37)", bench.BuildEtcd37},
		{bench.KindFloor, o.floor, &p.Floor, "the transport floor (./internal/bench/floor)", bench.BuildFloor},
	} {
		if !slices.Contains(ks, b.kind) {
			continue
		}
		if b.path != "" {
			if *b.into, err = bench.LookPath(b.path, "build it with `go build -o "+string(b.kind)+" ./internal/bench/"+string(b.kind)+"`"); err != nil {
				return p, cleanup, err
			}
			continue
		}
		if dir == "" {
			if dir, err = os.MkdirTemp(o.dir, "strata-bench-bin-"); err != nil {
				return p, cleanup, err
			}
			cleanup = func() { os.RemoveAll(dir) }
		}
		fmt.Fprintf(progress, "building %s ...\n", b.what)
		if *b.into, err = b.build(ctx, dir); err != nil {
			return p, cleanup, err
		}
	}
	return p, cleanup, nil
}

// signalContext ends on SIGINT or SIGTERM, so that an interrupted run still
// stops its servers and prints what it measured.
func signalContext(cmd *cobra.Command) (context.Context, context.CancelFunc) {
	ctx := cmd.Context()
	if ctx == nil {
		ctx = context.Background()
	}
	return signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
}

type benchQPSOptions struct {
	common       benchCommon
	v3Peer       string
	apis, ops    []string
	valueSizes   []int
	clients      []int
	members      int
	via          []string
	passes       int
	requests     int
	single       int
	conns        int
	serializable bool
	runTimeout   time.Duration
	duration     time.Duration
	wrk          string
	pinFlags
	runs bool
}

// AddFlags registers qps's flags.
func (o *benchQPSOptions) AddFlags(fs *pflag.FlagSet) {
	o.common.AddFlags(fs, []string{"strata", "etcd34", "etcd37"})
	o.common.floorOK = true
	fs.StringVar(&o.v3Peer, "v3-peer", "etcd37", "etcd the v3 rows compare with: etcd37 or etcd34")
	fs.StringSliceVar(&o.apis, "apis", []string{"v2", "v3"}, "APIs: v2 (wrk) and v3 (clientv3); with --members 3: v3")
	fs.StringSliceVar(&o.ops, "ops", []string{"read", "write"}, "operations: read (linearizable on v3), write and read-serializable (v3); with --members 3: write,read,read-serializable")
	fs.IntSliceVar(&o.valueSizes, "value-sizes", []int{64, 256}, "value sizes in bytes")
	fs.IntSliceVar(&o.clients, "clients", []int{1, 64, 256}, "concurrent clients")
	fs.IntVar(&o.members, "members", 1, "members of each server: 1 runs servers alone; 3, 5 or 7 runs a Strata raft cluster against an etcd 3.7 cluster (v3 rows), every member on --server-cpus, their CPU summed")
	fs.StringSliceVar(&o.via, "via", nil, "with --members 3: the member the requests go to, leader and follower, a row each (default both)")
	fs.IntVar(&o.passes, "passes", 3, "passes over every row, alternating the servers; the table shows medians")
	fs.IntVar(&o.requests, "requests", 20_000, "requests per v3 run with more than one client")
	fs.IntVar(&o.single, "single-requests", 2_000, "requests per v3 run with one client")
	fs.DurationVar(&o.duration, "duration", 5*time.Second, "length of each v2 (wrk) run, whole seconds")
	fs.IntVar(&o.conns, "conns", 0, "gRPC connections the v3 clients share (0: ceil(clients/16))")
	fs.BoolVar(&o.serializable, "serializable", false, "serializable v3 reads instead of linearizable (clientv3's default)")
	fs.DurationVar(&o.runTimeout, "run-timeout", 2*time.Minute, "bound on each run")
	fs.StringVar(&o.wrk, "wrk", "wrk", "wrk `EXECUTABLE` (Debian: apt-get install wrk)")
	o.pinFlags.AddFlags(fs)
	fs.BoolVar(&o.runs, "runs", false, "also print every run, not only the medians")
}

func newBenchQPSCommand() *cobra.Command {
	o := &benchQPSOptions{}
	cmd := &cobra.Command{
		Use:   "qps",
		Short: "etcd v2.1's QPS table: Strata against etcd 3.4 (v2, wrk) and etcd 3.7 (v3, clientv3)",
		Example: `  strata bench qps --format markdown
  strata bench qps --pin=false   # server and load tool share every CPU
  strata bench qps --servers etcd34 --apis v2 --passes 1   # etcd alone
  strata bench qps --ops write --clients 64,256 --runs
  strata bench qps --members 3 --value-sizes 256 --clients 64,256   # 3-member clusters
  strata bench qps --servers strata,etcd34,etcd37,floor --value-sizes 256 --clients 64,256   # and the transport floor`,
		Args: cli.Args(),
		RunE: func(cmd *cobra.Command, _ []string) error { return o.run(cmd) },
	}
	o.AddFlags(cmd.Flags())
	return cmd
}

func (o *benchQPSOptions) run(cmd *cobra.Command) (err error) {
	ks, err := o.common.kinds()
	if err != nil {
		return err
	}
	peer, err := bench.ParseKind(o.v3Peer)
	if err != nil {
		return fmt.Errorf("--v3-peer: %w", err)
	}
	// 0 means a default in bench.QPSOptions, but not on the command line.
	var problems []error
	for _, f := range []struct {
		name string
		v    int
	}{{"--passes", o.passes}, {"--requests", o.requests}, {"--single-requests", o.single}, {"--members", o.members}} {
		if f.v < 1 {
			problems = append(problems, fmt.Errorf("%s %d: must be >= 1", f.name, f.v))
		}
	}
	if o.duration < time.Second {
		problems = append(problems, fmt.Errorf("--duration %s: must be >= 1s", o.duration))
	}
	pin, err := o.pinning(cmd.ErrOrStderr())
	if err != nil {
		problems = append(problems, err)
	}
	// A cluster's defaults (v3 only; a serializable read too) are
	// bench.QPSOptions's, where the flags were not given.
	apis, ops := o.apis, o.ops
	if o.members > 1 {
		if !cmd.Flags().Changed("apis") {
			apis = nil
		}
		if !cmd.Flags().Changed("ops") {
			ops = nil
		}
	}
	qo := bench.QPSOptions{
		Servers: ks, V3Peer: peer, APIs: apis, Ops: ops, ValueSizes: o.valueSizes, Clients: o.clients,
		Members: o.members, Via: o.via, Passes: o.passes, Requests: o.requests, SingleRequests: o.single, Duration: o.duration, Conns: o.conns, Pin: pin,
		Serializable: o.serializable, RunTimeout: o.runTimeout, Dir: o.common.dir, Progress: cmd.ErrOrStderr(),
	}
	if err := errors.Join(append(problems, qo.Validate())...); err != nil {
		return err
	}
	if slices.Contains(qo.APIs, bench.APIV2) {
		if qo.Wrk, err = bench.LookPath(o.wrk, "install wrk (apt-get install wrk) or pass --wrk PATH"); err != nil {
			return err
		}
	}
	ctx, stop := signalContext(cmd)
	defer stop()
	var cleanup func()
	qo.Programs, cleanup, err = o.common.programs(ctx, ks, cmd.ErrOrStderr())
	defer cleanup()
	if err != nil {
		return err
	}
	start := time.Now()
	res, runErr := bench.RunQPS(ctx, qo)
	if res == nil {
		return runErr
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "done in %s\n", time.Since(start).Round(time.Second))
	out := cmd.OutOrStdout()
	if err := res.Table().Write(out, o.common.format); err != nil {
		return err
	}
	if ft := res.FloorTable(); ft != nil {
		fmt.Fprintln(out)
		if err := ft.Write(out, o.common.format); err != nil {
			return err
		}
	}
	if o.runs {
		fmt.Fprintln(out)
		if err := res.RunsTable().Write(out, o.common.format); err != nil {
			return err
		}
	}
	return runErr
}

// pinFlags are the benchmarks' --pin, --server-cpus and --load-cpus.
type pinFlags struct {
	pin                  bool
	serverCPUs, loadCPUs string
}

// AddFlags registers the pinning flags.
func (o *pinFlags) AddFlags(fs *pflag.FlagSet) {
	fs.BoolVar(&o.pin, "pin", true, "pin each server to --server-cpus and the load tools (wrk, and this process for v3) to --load-cpus with taskset; --pin=false shares every CPU")
	fs.StringVar(&o.serverCPUs, "server-cpus", bench.DefaultServerCPUs, "`CPUS` the servers run on when pinned (taskset -c list)")
	fs.StringVar(&o.loadCPUs, "load-cpus", bench.DefaultLoadCPUs, "`CPUS` the load tools run on when pinned (taskset -c list)")
}

// pinning resolves --pin, --server-cpus and --load-cpus. Pinning is the
// default where it can be done (taskset and two CPUs); where it cannot,
// and the CPUs were not asked for, the run goes on unpinned and says so.
func (o *pinFlags) pinning(progress io.Writer) (bench.Pinning, error) {
	if !o.pin {
		return bench.Pinning{}, nil
	}
	custom := o.serverCPUs != bench.DefaultServerCPUs || o.loadCPUs != bench.DefaultLoadCPUs
	def, why := bench.DefaultPinning()
	if why != "" && !custom {
		fmt.Fprintf(progress, "not pinning the servers and load tools: %s\n", why)
		return bench.Pinning{}, nil
	}
	ts := def.Taskset
	if ts == "" {
		var err error
		if ts, err = bench.LookPath("taskset", "install util-linux or pass --pin=false"); err != nil {
			return bench.Pinning{}, fmt.Errorf("--server-cpus/--load-cpus: %w", err)
		}
	}
	p := bench.Pinning{Taskset: ts, ServerCPUs: o.serverCPUs, LoadCPUs: o.loadCPUs}
	if err := p.Validate(); err != nil {
		return bench.Pinning{}, fmt.Errorf("--server-cpus %q, --load-cpus %q: %w", o.serverCPUs, o.loadCPUs, err)
	}
	return p, nil
}

type benchMemoryOptions struct {
	common      benchCommon
	keys        []int
	versions    []int
	keySizes    []int
	valueSizes  []int
	clients     int
	conns       int
	settle      time.Duration
	loadTimeout time.Duration
}

// AddFlags registers memory's flags.
func (o *benchMemoryOptions) AddFlags(fs *pflag.FlagSet) {
	o.common.AddFlags(fs, []string{"strata", "etcd34"})
	fs.IntSliceVar(&o.keys, "keys", []int{100_000}, "numbers of keys (etcd's table: 100000,1000000; a million keys take minutes per server and row)")
	fs.IntSliceVar(&o.versions, "versions", []int{1, 5}, "versions per key, written round-robin")
	fs.IntSliceVar(&o.keySizes, "key-sizes", []int{64}, "key sizes in bytes (>= 16)")
	fs.IntSliceVar(&o.valueSizes, "value-sizes", []int{256, 1024}, "value sizes in bytes")
	fs.IntVar(&o.clients, "clients", 64, "concurrent writers")
	fs.IntVar(&o.conns, "conns", 0, "gRPC connections the writers share (0: ceil(clients/16))")
	fs.DurationVar(&o.settle, "settle", 2*time.Second, "wait after the load before reading RSS")
	fs.DurationVar(&o.loadTimeout, "load-timeout", 30*time.Minute, "bound on each load")
}

func newBenchMemoryCommand() *cobra.Command {
	o := &benchMemoryOptions{}
	cmd := &cobra.Command{
		Use:   "memory",
		Short: "etcd's storage memory table: server RSS after loading keys through the v3 API",
		Example: `  strata bench memory --format markdown
  strata bench memory --keys 1000000 --versions 1 --value-sizes 256   # a long row
  strata bench memory --servers strata,etcd34,etcd37
  strata bench member --pods 70000 --passes 2`,
		Args: cli.Args(),
		RunE: func(cmd *cobra.Command, _ []string) error { return o.run(cmd) },
	}
	o.AddFlags(cmd.Flags())
	return cmd
}

func (o *benchMemoryOptions) run(cmd *cobra.Command) error {
	ks, err := o.common.kinds()
	if err != nil {
		return err
	}
	mo := bench.MemoryOptions{
		Servers: ks, Keys: o.keys, Versions: o.versions, KeySizes: o.keySizes, ValueSizes: o.valueSizes,
		Clients: o.clients, Conns: o.conns, Settle: o.settle, LoadTimeout: o.loadTimeout,
		Dir: o.common.dir, Progress: cmd.ErrOrStderr(),
	}
	var problems []error
	if o.clients < 1 {
		// 0 means the default in bench.MemoryOptions, but not here.
		problems = append(problems, fmt.Errorf("--clients %d: must be >= 1", o.clients))
	}
	if err := errors.Join(append(problems, mo.Validate())...); err != nil {
		return err
	}
	ctx, stop := signalContext(cmd)
	defer stop()
	var cleanup func()
	mo.Programs, cleanup, err = o.common.programs(ctx, ks, cmd.ErrOrStderr())
	defer cleanup()
	if err != nil {
		return err
	}
	res, runErr := bench.RunMemory(ctx, mo)
	if res == nil {
		return runErr
	}
	if err := res.Table().Write(cmd.OutOrStdout(), o.common.format); err != nil {
		return err
	}
	return runErr
}
