package admin

import (
	"fmt"

	"github.com/spf13/cobra"
	"github.com/stratadb/strata/internal/cli"
)

func newStatsCommand(g *globalOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "stats",
		Short: "Print the database statistics",
		Long: `stats prints a report in the spirit of RocksDB's rocksdb.stats: per level the
files, size and codecs, then write amplification, block cache, bloom filters,
WAL, stalls and compactions.`,
		Example: `  strata --config strata.toml stats`,
		Args:    cli.Args(),
		RunE: func(cmd *cobra.Command, _ []string) (err error) {
			db, err := g.open(g.logger(cmd), readOnly)
			if err != nil {
				return err
			}
			defer closeDB(db, &err)
			s, err := db.Stats()
			if err != nil {
				return err
			}
			_, err = fmt.Fprint(cmd.OutOrStdout(), s)
			return err
		},
	}
}
