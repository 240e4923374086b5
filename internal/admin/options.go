package admin

import (
	"fmt"

	"github.com/spf13/cobra"
	"github.com/stratadb/strata/internal/cli"
)

func newOptionsCommand(g *globalOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "options",
		Short: "Print the configuration as a RocksDB OPTIONS file",
		Long: `options validates the configuration and prints it in the RocksDB OPTIONS
format, the text written to db_path/OPTIONS-rocksdb on every open. It does not
open the database, so db_path need not exist.`,
		Example: `  strata --config strata.toml options
  strata --db ./data options > OPTIONS-rocksdb`,
		Args: cli.Args(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := g.loadConfig()
			if err != nil {
				return err
			}
			if err := cfg.Validate(); err != nil {
				return err
			}
			_, err = fmt.Fprint(cmd.OutOrStdout(), cfg.RocksDBOptions())
			return err
		},
	}
}
