package admin

import (
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/stratadb/strata/internal/bench"
	"github.com/stratadb/strata/internal/cli"
)

type benchWatchOptions struct {
	common                   benchCommon
	watchers, prefixWatchers int
	streams                  int
	puts, clients, conns     int
	valueSize                int
	pinFlags
	timeout time.Duration
}

// AddFlags registers watch's flags.
func (o *benchWatchOptions) AddFlags(fs *pflag.FlagSet) {
	o.common.AddFlags(fs, []string{"strata", "etcd37"})
	o.common.floorOK = true
	fs.IntVar(&o.watchers, "watchers", 10000, "watchers on distinct keys")
	fs.IntVar(&o.prefixWatchers, "prefix-watchers", 100, "watchers on one shared prefix, /w/00 (keys 0 to 999)")
	fs.IntVar(&o.streams, "streams", 10, "gRPC streams (connections) the watchers are spread over")
	fs.IntVar(&o.puts, "puts", 20000, "puts to the watched keys, in turn")
	fs.IntVar(&o.clients, "clients", 32, "concurrent putters")
	fs.IntVar(&o.conns, "conns", 4, "gRPC connections the putters share")
	fs.IntVar(&o.valueSize, "value-size", 256, "value size in bytes")
	o.pinFlags.AddFlags(fs)
	fs.DurationVar(&o.timeout, "run-timeout", 5*time.Minute, "bound on each run")
}

func newBenchWatchCommand() *cobra.Command {
	o := &benchWatchOptions{}
	cmd := &cobra.Command{
		Use:   "watch",
		Short: "Watch at scale: puts with no watcher, then with 10,000 watchers on distinct keys and 100 on a prefix (etcd's benchmark watch)",
		Example: `  flock /work/bench.lock strata bench watch --format markdown
  strata bench watch --servers strata --watchers 1000 --puts 5000`,
		Args: cli.Args(),
		RunE: func(cmd *cobra.Command, _ []string) error { return o.run(cmd) },
	}
	o.AddFlags(cmd.Flags())
	return cmd
}

func (o *benchWatchOptions) run(cmd *cobra.Command) error {
	ks, err := o.common.kinds()
	if err != nil {
		return err
	}
	pin, err := o.pinning(cmd.ErrOrStderr())
	if err != nil {
		return err
	}
	wo := bench.WatchOptions{
		Servers: ks, Dir: o.common.dir, Watchers: o.watchers, PrefixWatchers: o.prefixWatchers, Streams: o.streams,
		Puts: o.puts, Clients: o.clients, Conns: o.conns, ValueSize: o.valueSize,
		Pin: pin, Timeout: o.timeout, Progress: cmd.ErrOrStderr(),
	}
	ctx, stop := signalContext(cmd)
	defer stop()
	var cleanup func()
	wo.Programs, cleanup, err = o.common.programs(ctx, ks, cmd.ErrOrStderr())
	defer cleanup()
	if err != nil {
		return err
	}
	res, runErr := bench.RunWatch(ctx, wo)
	if res == nil {
		return runErr
	}
	if err := res.Table().Write(cmd.OutOrStdout(), o.common.format); err != nil {
		return err
	}
	return runErr
}
