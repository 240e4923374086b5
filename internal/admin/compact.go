package admin

import (
	"github.com/spf13/cobra"
	"github.com/stratadb/strata/engine"
	"github.com/stratadb/strata/internal/cli"
)

func newCompactCommand(g *globalOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "compact",
		Short: "Compact the whole key space to the bottommost level",
		Long: `compact compacts every key down to the bottom of the LSM and rewrites any
table whose codec is not its level's, so afterwards the bottommost level
carries compression_bottommost (RocksDB's CompactRange with
bottommost_level_compaction = kForce). It prints the elapsed time.`,
		Example: `  strata --config strata.toml compact`,
		Args:    cli.Args(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.timed(cmd, "compacted", (*engine.DB).CompactAll)
		},
	}
}
