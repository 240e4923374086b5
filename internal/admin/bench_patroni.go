package admin

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/stratadb/strata/internal/bench"
	"github.com/stratadb/strata/internal/cli"
)

type benchPatroniOptions struct {
	common        benchCommon
	clusters      int
	members       int
	loop          time.Duration
	ttl           int64
	failoverEvery time.Duration
	duration      time.Duration
	retention     time.Duration
	quota         int64
	sampleEvery   time.Duration
	seed          int64
	plot          string
	timeline      string
	pinFlags
}

// AddFlags registers patroni's flags.
func (o *benchPatroniOptions) AddFlags(fs *pflag.FlagSet) {
	o.common.AddFlags(fs, []string{"strata", "etcd34"})
	fs.IntVar(&o.clusters, "clusters", 10, "Patroni clusters (scopes), each under /service/patroni-N/")
	fs.IntVar(&o.members, "members", 3, "Patroni members of each cluster")
	fs.DurationVar(&o.loop, "loop", 100*time.Millisecond, "Patroni's loop_wait (10s in production), scaled down")
	fs.Int64Var(&o.ttl, "ttl", 3, "leader lease TTL in seconds (Patroni's ttl, 30 in production), scaled down; >= 2")
	fs.DurationVar(&o.failoverEvery, "failover-every", 20*time.Second, "a leader crashes (stops, its lease expires, another member takes over) this often, clusters in turn; 0 never")
	fs.DurationVar(&o.duration, "duration", 10*time.Minute, "length of the load")
	fs.DurationVar(&o.retention, "retention", time.Minute, "--auto-compaction-retention with --auto-compaction-mode=periodic, given to every server (etcd's deployments use 1h), whole seconds; 0 runs without auto-compaction")
	fs.Int64Var(&o.quota, "quota-bytes", 0, "--quota-backend-bytes for every server (0: each server's default)")
	fs.DurationVar(&o.sampleEvery, "sample-every", 2*time.Second, "how often the disk, the revision and the compacted revision are read")
	fs.Int64Var(&o.seed, "seed", 1, "workload seed")
	fs.StringVar(&o.plot, "plot", "", "also draw the data directory's size and the revisions kept over time as SVG to `FILE`")
	fs.StringVar(&o.timeline, "timeline", "", "also write every sample (dir, db size, RSS, revision, compacted revision) as CSV to `FILE`")
	o.pinFlags.AddFlags(fs)
}

func newBenchPatroniCommand() *cobra.Command {
	o := &benchPatroniOptions{}
	cmd := &cobra.Command{
		Use:   "patroni",
		Short: "An etcd user's path: Patroni's etcd3 traffic against strata etcd and etcd 3.4 side by side, with periodic auto-compaction; disk and history over time",
		Long: `patroni starts strata etcd and etcd 3.4 with the same etcd command line
(--auto-compaction-mode=periodic --auto-compaction-retention=RETENTION), and
runs against both at once the traffic of Patroni's etcd3 DCS: each member
keeps a lease alive, watches its cluster's prefix, takes the leader key with a
txn on create_revision, updates its member key, and the leader writes its
status and compare-and-swaps sync and config on mod_revision; leaders crash
in turn and others take over once their lease expired. The tables say what
each server's data directory and db size did over the run and whether a
revision older than three times the retention still reads (it must not: ErrCompacted).`,
		Example: `  strata bench patroni --duration 10m --retention 1m --plot patroni-disk.svg
  strata bench patroni --duration 30s --retention 5s --clusters 2 --format markdown
  strata bench patroni --retention 0 --duration 5m    # no auto-compaction: the disk grows`,
		Args: cli.Args(),
		RunE: func(cmd *cobra.Command, _ []string) error { return o.run(cmd) },
	}
	o.AddFlags(cmd.Flags())
	return cmd
}

func (o *benchPatroniOptions) run(cmd *cobra.Command) error {
	ks, err := o.common.kinds()
	if err != nil {
		return err
	}
	var problems []error
	for _, k := range ks {
		if k != bench.KindStrata && k != bench.KindEtcd34 {
			problems = append(problems, fmt.Errorf("--servers %s: allowed are strata and etcd34 (the servers started from etcd's command line)", k))
		}
	}
	for _, f := range []struct {
		name   string
		v, min int64
	}{{"--clusters", int64(o.clusters), 1}, {"--members", int64(o.members), 1}, {"--ttl", o.ttl, 2}, {"--quota-bytes", o.quota, 0}} {
		if f.v < f.min {
			problems = append(problems, fmt.Errorf("%s %d: must be >= %d", f.name, f.v, f.min))
		}
	}
	for _, f := range []struct {
		name string
		v    time.Duration
		zero bool
	}{{"--loop", o.loop, false}, {"--duration", o.duration, false}, {"--sample-every", o.sampleEvery, false}, {"--failover-every", o.failoverEvery, true}, {"--retention", o.retention, true}} {
		if f.v < 0 || (f.v == 0 && !f.zero) {
			want := "> 0"
			if f.zero {
				want = ">= 0"
			}
			problems = append(problems, fmt.Errorf("%s %s: must be %s", f.name, f.v, want))
		}
	}
	if o.retention > 0 && (o.retention < time.Second || o.retention%time.Second != 0) {
		problems = append(problems, fmt.Errorf("--retention %s: must be whole seconds, at least 1s (or 0: no auto-compaction)", o.retention))
	}
	pin, err := o.pinning(cmd.ErrOrStderr())
	if err != nil {
		problems = append(problems, err)
	}
	if err := errors.Join(problems...); err != nil {
		return err
	}
	po := bench.PatroniOptions{
		Servers: ks, Dir: o.common.dir, Pin: pin, Progress: cmd.ErrOrStderr(), Retention: o.retention, QuotaBytes: o.quota, SampleEvery: o.sampleEvery,
		Load: bench.PatroniLoad{Clusters: o.clusters, Members: o.members, Loop: o.loop, TTL: o.ttl, FailoverEvery: o.failoverEvery, Duration: o.duration, Seed: o.seed},
	}
	if err := po.Validate(); err != nil {
		return err
	}
	ctx, stop := signalContext(cmd)
	defer stop()
	var cleanup func()
	po.Programs, cleanup, err = o.common.programs(ctx, ks, cmd.ErrOrStderr())
	defer cleanup()
	if err != nil {
		return err
	}
	res, runErr := bench.RunPatroni(ctx, po)
	if res == nil {
		return runErr
	}
	if err := res.WriteTables(cmd.OutOrStdout(), o.common.format); err != nil {
		return errors.Join(runErr, err)
	}
	for _, out := range []struct {
		flag, file string
		write      func(io.Writer) error
	}{{"--plot", o.plot, res.Plot}, {"--timeline", o.timeline, res.WriteTimeline}} {
		if out.file == "" {
			continue
		}
		if err := writeFile(out.file, out.write); err != nil {
			return errors.Join(runErr, fmt.Errorf("%s %s: %w", out.flag, out.file, err))
		}
		fmt.Fprintf(cmd.ErrOrStderr(), "time line written to %s\n", out.file)
	}
	return runErr
}
