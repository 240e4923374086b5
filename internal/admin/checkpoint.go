package admin

import (
	"fmt"

	"github.com/spf13/cobra"
	"github.com/stratadb/strata/internal/cli"
)

// checkpointOptions are the options of checkpoint.
type checkpointOptions struct {
	global *globalOptions
	dir    string
}

// Validate takes the DIR argument and rejects an empty one.
func (o *checkpointOptions) Validate(cmd *cobra.Command, args []string) error {
	o.dir = args[0]
	return cli.NonEmpty(cmd, "DIR", o.dir)
}

func newCheckpointCommand(g *globalOptions) *cobra.Command {
	o := &checkpointOptions{global: g}
	return cli.Command(&cobra.Command{
		Use:   "checkpoint DIR",
		Short: "Write a consistent, openable copy of the database into DIR",
		Long: `checkpoint writes a consistent copy of the database into DIR, which must not
exist. Table files are hard-linked where possible; the copy holds every write
acknowledged before the command and opens with db_path = DIR (no wal_dir).`,
		Example: `  strata --config strata.toml checkpoint /backup/strata-$(date +%F)
  strata --db ./backup get user:1`,
		Args: cli.Args("DIR"),
	}, nil, o.Validate, o.run)
}

// run writes the checkpoint.
func (o *checkpointOptions) run(cmd *cobra.Command, _ []string) (err error) {
	db, err := o.global.open(o.global.logger(cmd), mustExist)
	if err != nil {
		return err
	}
	defer closeDB(db, &err)
	if err := db.Checkpoint(o.dir); err != nil {
		return err
	}
	_, err = fmt.Fprintf(cmd.OutOrStdout(), "checkpoint written to %s\n", o.dir)
	return err
}
