package admin

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/stratadb/strata/internal/bench"
	"github.com/stratadb/strata/internal/cli"
)

type benchKubeOptions struct {
	common       benchCommon
	passes       int
	pods         podFlags
	eventEvery   int
	compactEvery time.Duration
	settle       time.Duration
	members      int
	killLeaderAt time.Duration
	endpoints    []string
	plot         string
	timeline     string
	pinFlags
}

// podFlags are the flags of the pods that kube and member write: how
// many, by how many writers, and etcd's quota for them.
type podFlags struct {
	pods, updates, clients, conns int
	seed, quota                   int64
	timeout                       time.Duration
}

// AddFlags registers the pods' flags with the given default counts.
func (o *podFlags) AddFlags(fs *pflag.FlagSet, pods, updates int) {
	fs.IntVar(&o.pods, "pods", pods, "pods created (about 14 KB each: 70000 are about 1 GB)")
	fs.IntVar(&o.updates, "updates", updates, "pod updates after the creates")
	fs.IntVar(&o.clients, "clients", 32, "concurrent writers")
	fs.IntVar(&o.conns, "conns", 4, "gRPC connections the writers share")
	fs.Int64Var(&o.seed, "seed", 1, "workload seed")
	fs.Int64Var(&o.quota, "quota-bytes", 16<<30, "etcd's backend quota")
	fs.DurationVar(&o.timeout, "load-timeout", 30*time.Minute, "bound on each server's load")
}

// problems reports every bad value, each naming its flag.
func (o *podFlags) problems() []error {
	var problems []error
	for _, f := range []struct {
		name   string
		v, min int
	}{{"--pods", o.pods, 1}, {"--updates", o.updates, 0}, {"--clients", o.clients, 1}, {"--conns", o.conns, 1}} {
		if f.v < f.min {
			problems = append(problems, fmt.Errorf("%s %d: must be >= %d", f.name, f.v, f.min))
		}
	}
	if o.conns > o.clients {
		problems = append(problems, fmt.Errorf("--conns %d: must be <= --clients (%d)", o.conns, o.clients))
	}
	if o.timeout <= 0 {
		problems = append(problems, fmt.Errorf("--load-timeout %s: must be > 0", o.timeout))
	}
	return problems
}

// load is the pods' load, without an endpoint.
func (o *podFlags) load() bench.KubeLoad {
	return bench.KubeLoad{Pods: o.pods, Updates: o.updates, Clients: o.clients, Conns: o.conns, Seed: o.seed, Timeout: o.timeout}
}

// AddFlags registers kube's flags.
func (o *benchKubeOptions) AddFlags(fs *pflag.FlagSet) {
	o.common.AddFlags(fs, []string{"strata", "etcd37"})
	o.common.floorOK = true
	fs.IntVar(&o.passes, "passes", 1, "passes over the servers, the first server alternating")
	o.pods.AddFlags(fs, 80_000, 80_000)
	fs.IntVar(&o.eventEvery, "event-every", 10, "an event on a lease every N writes (0: none)")
	fs.DurationVar(&o.compactEvery, "compact-every", 30*time.Second, "compaction period (the apiserver's is 5m); 0 never compacts")
	fs.DurationVar(&o.settle, "settle", 0, "after the load, compact to its last revision, wait this long and read the disk again (Disk settled: what compaction gave back, no defrag); 0 skips")
	fs.StringVar(&o.plot, "plot", "", "also draw the time line (puts/s and p99 per second, compactions marked) as SVG to `FILE`")
	fs.StringVar(&o.timeline, "timeline", "", "also write the time line (per second: puts, p99, compaction marks, RSS, disk) as CSV to `FILE`")
	fs.IntVar(&o.members, "members", 1, "members of each server: 1 runs servers alone; 3, 5 or 7 runs a Strata raft cluster against an etcd 3.7 cluster, every member on --server-cpus, the clients' connections each to every member, the full list through a follower, CPU, RSS and disk summed and per member, leader changes counted")
	fs.DurationVar(&o.killLeaderAt, "kill-leader-at", 0, "kill the leader (SIGKILL) this long into the load and start it again at once; writes are retried meanwhile, and the table says when puts resumed (0: no kill)")
	o.pinFlags.AddFlags(fs)
	fs.StringSliceVar(&o.endpoints, "endpoint", nil, "load a running server at `HOST:PORT` (a cluster: every member's, comma-separated) instead of starting servers (--servers is then ignored)")
}

func newBenchKubeCommand() *cobra.Command {
	o := &benchKubeOptions{}
	cmd := &cobra.Command{
		Use:   "kube",
		Short: "Kubernetes-sized data: pod creates and updates as the apiserver sends them, with watch, leases, compactions and a paginated list",
		Example: `  strata bench kube --pods 80000 --updates 80000      # about 2 GB of writes
  strata bench kube --members 3 --pods 30000 --updates 30000 --plot kube-3m.svg   # 3-member clusters
  strata bench kube --members 3 --kill-leader-at 20s --pods 30000 --updates 30000
  strata bench kube --pods 10000 --updates 10000 --servers strata --strata-toml 'server.memory_budget_mb = 512'`,
		Args: cli.Args(),
		RunE: func(cmd *cobra.Command, _ []string) error { return o.run(cmd) },
	}
	o.AddFlags(cmd.Flags())
	return cmd
}

func (o *benchKubeOptions) run(cmd *cobra.Command) error {
	ks, err := o.common.kinds()
	if err != nil {
		return err
	}
	problems := o.pods.problems()
	for _, f := range []struct {
		name   string
		v, min int
	}{{"--event-every", o.eventEvery, 0}, {"--members", o.members, 1}} {
		if f.v < f.min {
			problems = append(problems, fmt.Errorf("%s %d: must be >= %d", f.name, f.v, f.min))
		}
	}
	if o.compactEvery < 0 {
		problems = append(problems, fmt.Errorf("--compact-every %s: must be >= 0", o.compactEvery))
	}
	if o.settle < 0 {
		problems = append(problems, fmt.Errorf("--settle %s: must be >= 0", o.settle))
	}
	if len(o.endpoints) > 0 && (o.members != 1 || o.killLeaderAt != 0) {
		problems = append(problems, errors.New("--endpoint with --members or --kill-leader-at: a running server is loaded as it is; its members are not started, counted or killed here"))
	}
	load := o.pods.load()
	load.EventEvery, load.CompactEvery = o.eventEvery, o.compactEvery
	var ko bench.KubeOptions
	if len(o.endpoints) == 0 {
		pin, err := o.pinning(cmd.ErrOrStderr())
		if err != nil {
			problems = append(problems, err)
		}
		ko = bench.KubeOptions{
			Servers: ks, Passes: o.passes, Dir: o.common.dir, QuotaBytes: o.pods.quota, Pin: pin, Progress: cmd.ErrOrStderr(),
			Load: load, Settle: o.settle, Members: o.members, KillLeaderAt: o.killLeaderAt,
		}
		problems = append(problems, ko.Validate())
	}
	if err := errors.Join(problems...); err != nil {
		return err
	}
	ctx, stop := signalContext(cmd)
	defer stop()
	if len(o.endpoints) > 0 {
		load.Endpoints, load.Progress = o.endpoints, cmd.ErrOrStderr()
		r, err := load.Run(ctx)
		if r == nil {
			return err
		}
		res := &bench.KubeRun{Options: bench.KubeOptions{Load: load}, Samples: []bench.KubeSample{{Name: strings.Join(o.endpoints, ","), KubeResult: r}}}
		return errors.Join(err, o.write(cmd, res))
	}
	var cleanup func()
	ko.Programs, cleanup, err = o.common.programs(ctx, ks, cmd.ErrOrStderr())
	defer cleanup()
	if err != nil {
		return err
	}
	res, runErr := bench.RunKube(ctx, ko)
	if res == nil {
		return runErr
	}
	return errors.Join(runErr, o.write(cmd, res))
}

// write prints res's tables and, with --plot and --timeline, its time
// line as SVG and CSV.
func (o *benchKubeOptions) write(cmd *cobra.Command, res *bench.KubeRun) error {
	if err := res.WriteTables(cmd.OutOrStdout(), o.common.format); err != nil {
		return err
	}
	for _, out := range []struct {
		flag, file string
		write      func(io.Writer) error
	}{{"--plot", o.plot, res.Plot}, {"--timeline", o.timeline, res.WriteTimeline}} {
		if out.file == "" {
			continue
		}
		if err := writeFile(out.file, out.write); err != nil {
			return fmt.Errorf("%s %s: %w", out.flag, out.file, err)
		}
		fmt.Fprintf(cmd.ErrOrStderr(), "time line written to %s\n", out.file)
	}
	return nil
}

// writeFile creates name and writes it with write.
func writeFile(name string, write func(io.Writer) error) error {
	f, err := os.Create(name)
	if err != nil {
		return err
	}
	if err := write(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
