package admin

import (
	"github.com/spf13/cobra"
	"github.com/stratadb/strata/engine"
	"github.com/stratadb/strata/internal/cli"
)

func newFlushCommand(g *globalOptions) *cobra.Command {
	return &cobra.Command{
		Use:     "flush",
		Short:   "Flush the memtable to an L0 table",
		Long:    "flush writes the memtable to an L0 table, waits for it and prints the elapsed time.",
		Example: `  strata --config strata.toml flush`,
		Args:    cli.Args(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.timed(cmd, "flushed", (*engine.DB).Flush)
		},
	}
}
