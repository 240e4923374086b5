package admin

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/stratadb/strata/internal/bench"
	"github.com/stratadb/strata/internal/cli"
)

type benchMemberOptions struct {
	common          benchCommon
	passes          int
	pods            podFlags
	snapshotEntries uint64
	catchUpTimeout  time.Duration
	runs            bool
	pinFlags
}

// AddFlags registers member's flags.
func (o *benchMemberOptions) AddFlags(fs *pflag.FlagSet) {
	o.common.AddFlags(fs, []string{"strata", "etcd37"})
	fs.IntVar(&o.passes, "passes", 1, "passes over the servers, the first server alternating; the tables show medians")
	o.pods.AddFlags(fs, 70_000, 0)
	fs.Uint64Var(&o.snapshotEntries, "snapshot-entries", 0, "raft snapshot interval of every member, in `ENTRIES` (Strata's cluster.snapshot_entries, etcd's --snapshot-count, min(5000, N/2) kept behind each); 0 is each server's default, 10000")
	fs.DurationVar(&o.catchUpTimeout, "catchup-timeout", 10*time.Minute, "bound on each new member's catch-up")
	fs.BoolVar(&o.runs, "runs", false, "also print every pass, not only the medians")
	o.pinFlags.AddFlags(fs)
}

func newBenchMemberCommand() *cobra.Command {
	o := &benchMemberOptions{}
	cmd := &cobra.Command{
		Use:   "member",
		Short: "A new member's catch-up: the time until a member added to a loaded 3-member cluster serves the data, Strata against etcd 3.7",
		Long: `member starts a 3-member cluster of each server (every member on --server-cpus),
writes Kubernetes-shaped pods through its leader, then adds a 4th member as an
operator does (MemberAdd, then its process with join = true, or etcd's
--initial-cluster-state existing) and times, from the start of its process,
its first serializable read that sees the last key written (through a client
of the new member alone) and its applied index reaching the leader's. Its log
says whether it was sent a raft snapshot or replayed the log.`,
		Example: `  strata bench member --pods 70000 --passes 2 --format markdown   # about 1 GB
  strata bench member --pods 2000 --snapshot-entries 500 --servers strata`,
		Args: cli.Args(),
		RunE: func(cmd *cobra.Command, _ []string) error { return o.run(cmd) },
	}
	o.AddFlags(cmd.Flags())
	return cmd
}

func (o *benchMemberOptions) run(cmd *cobra.Command) error {
	ks, err := o.common.kinds()
	if err != nil {
		return err
	}
	problems := o.pods.problems()
	if o.passes < 1 {
		problems = append(problems, fmt.Errorf("--passes %d: must be >= 1", o.passes))
	}
	if o.catchUpTimeout <= 0 {
		problems = append(problems, fmt.Errorf("--catchup-timeout %s: must be > 0", o.catchUpTimeout))
	}
	pin, err := o.pinning(cmd.ErrOrStderr())
	if err != nil {
		problems = append(problems, err)
	}
	mo := bench.MemberOptions{
		Servers: ks, Passes: o.passes, Dir: o.common.dir, QuotaBytes: o.pods.quota, SnapshotEntries: o.snapshotEntries,
		CatchUpTimeout: o.catchUpTimeout, Pin: pin, Progress: cmd.ErrOrStderr(),
		Load: o.pods.load(),
	}
	if err := errors.Join(problems...); err != nil {
		return err
	}
	if err := mo.Validate(); err != nil {
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
	start := time.Now()
	res, runErr := bench.RunMember(ctx, mo)
	if res == nil {
		return runErr
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "done in %s\n", time.Since(start).Round(time.Second))
	return errors.Join(runErr, res.WriteTables(cmd.OutOrStdout(), o.common.format, o.runs))
}
