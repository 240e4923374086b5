package admin

import (
	"fmt"
	"os"
	"slices"

	"github.com/spf13/cobra"
	"github.com/stratadb/strata/internal/etcdflags"
)

// newEtcdCommand is `strata etcd`: etcd's flags, ETCD_* variables and
// --config-file, with etcd's meaning, mapped onto the configuration
// `strata serve` runs (internal/etcdflags; docs/etcd-flags.md).
func newEtcdCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "etcd [etcd flags]",
		Short: "Serve as etcd would, from etcd's flags, ETCD_* environment or --config-file",
		Long: `etcd takes etcd's command line (the flags kubeadm writes into its etcd
manifest, a systemd unit's or a Helm chart's), each flag also as ETCD_<NAME>
in the environment, or etcd's YAML --config-file, and serves what serve
serves with the configuration they describe: --data-dir DIR keeps the store
in DIR/strata and a cluster member's raft log in DIR/raft (--wal-dir moves
the raft log). Each flag is mapped to Strata's setting, or accepted with a
line on stderr saying why it has no effect here, or refused where Strata
lacks what it asks for. An etcd member's data dir is refused with the
restore command that converts it. See docs/etcd-flags.md.`,
		Example: `  strata etcd --name s1 --data-dir /var/lib/etcd \
    --listen-client-urls http://10.0.0.1:2379 --advertise-client-urls http://10.0.0.1:2379 \
    --listen-peer-urls http://10.0.0.1:2380 --initial-advertise-peer-urls http://10.0.0.1:2380 \
    --initial-cluster s1=http://10.0.0.1:2380,s2=http://10.0.0.2:2380,s3=http://10.0.0.3:2380
  ETCD_NAME=s1 ETCD_DATA_DIR=/var/lib/etcd strata etcd`,
		// etcd's flags are parsed by etcdflags, one or two dashes, with
		// etcd's names for unknown ones.
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			if slices.Contains(args, "-h") || slices.Contains(args, "--help") || slices.Contains(args, "-help") {
				return cmd.Help()
			}
			res, err := etcdConfig(args, os.Environ())
			if err != nil {
				return err
			}
			// --auto-tls, --peer-auto-tls: the certificates the
			// configuration names, made in the data dir as etcd does.
			made, err := etcdflags.MakeSelfCerts(res.SelfCerts)
			if err != nil {
				return err
			}
			res.Notes = append(res.Notes, made...)
			for _, n := range res.Notes {
				fmt.Fprintln(cmd.ErrOrStderr(), "strata etcd:", n)
			}
			// etcd logs at info by default: its start, members joining
			// and leaving, leader changes, snapshots sent, compactions and
			// alarms. Strata's lines of the same events go to stderr at
			// every --log-level.
			return runServer(cmd, res.Config, &lineLogger{w: cmd.ErrOrStderr()})
		},
	}
	return cmd
}

// etcdConfig parses etcd's flags and environment and builds the
// configuration, refusing an etcd member's data dir.
func etcdConfig(args, environ []string) (*etcdflags.Result, error) {
	v, notes, err := etcdflags.Parse(args, environ)
	if err != nil {
		return nil, err
	}
	res, err := etcdflags.Build(v)
	if err != nil {
		return nil, err
	}
	if err := etcdflags.CheckDataDir(res.DataDir); err != nil {
		return nil, err
	}
	res.Notes = append(notes, res.Notes...)
	return res, nil
}
