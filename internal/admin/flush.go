package admin

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"github.com/stratadb/strata/internal/cli"
)

func newFlushCommand(g *globalOptions) *cobra.Command {
	return &cobra.Command{
		Use:     "flush",
		Short:   "Flush the memtable to an L0 table",
		Long:    "flush writes the memtable to an L0 table, waits for it and prints the elapsed time.",
		Example: `  strata --config strata.toml flush`,
		Args:    cli.Args(),
		RunE: func(cmd *cobra.Command, _ []string) (err error) {
			db, err := g.open(g.logger(cmd), mustExist)
			if err != nil {
				return err
			}
			defer closeDB(db, &err)
			began := time.Now()
			if err := db.Flush(); err != nil {
				return err
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "flushed in %s\n", formatElapsed(time.Since(began)))
			return err
		},
	}
}
