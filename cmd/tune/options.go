package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/stratadb/strata/internal/tune"
)

// optionsOptions are the options of options.
type optionsOptions struct {
	configPath string
	dbDir      string
}

// AddFlags registers options' flags.
func (o *optionsOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.configPath, "config", "", "print the OPTIONS file of the config `FILE`")
	fs.StringVar(&o.dbDir, "db", "", "print the options of the existing database in `DIR`, without opening it")
}

// Validate checks that at most one source is given.
func (o *optionsOptions) Validate() error {
	if o.configPath != "" && o.dbDir != "" {
		return errors.New("--config and --db are exclusive: give one")
	}
	return nil
}

func newOptionsCommand() *cobra.Command {
	o := &optionsOptions{}
	cmd := &cobra.Command{
		Use:   "options",
		Short: "Print the RocksDB-format OPTIONS file of a config or a database",
		Long: `options prints the RocksDB-format OPTIONS file that a config produces
(--config FILE; without flags, the default config), the file Strata writes
into db_path on every open.

With --db DIR it prints the effective options of an existing database without
opening it: the OPTIONS-rocksdb file Strata wrote at the last open, then
Pebble's newest OPTIONS-NNNNNN file. A directory with neither is not a
database. To turn the database's options back into a config, run
"tune import DIR/OPTIONS-rocksdb".`,
		Example: `  tune options --config strata.toml > OPTIONS-rocksdb
  tune options --db data/strata | grep compression
  tune options                                   # the default config`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.Validate(); err != nil {
				return err
			}
			if o.dbDir != "" {
				files, err := tune.ReadDBOptions(o.dbDir)
				if err != nil {
					return err
				}
				return tune.WriteDBOptions(cmd.OutOrStdout(), files)
			}
			cfg, err := loadBase(o.configPath)
			if err != nil {
				return err
			}
			_, err = io.WriteString(cmd.OutOrStdout(), cfg.RocksDBOptions())
			return err
		},
	}
	o.AddFlags(cmd.Flags())
	return cmd
}

func newImportCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "import FILE",
		Short: "Turn a RocksDB OPTIONS file into a Strata TOML config",
		Long: `import reads a RocksDB OPTIONS file (RocksDB's own OPTIONS-NNNNNN, or the
OPTIONS-rocksdb Strata writes) and prints the Strata config it maps to, as TOML,
on standard output. Comment lines at the top list every setting that was not
taken over (or was changed), with its section and the reason. Settings the file
does not give keep their defaults.`,
		Example: `  tune import /var/lib/rocksdb/OPTIONS-000042 > strata.toml
  tune import data/strata/OPTIONS-rocksdb`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return fmt.Errorf("%s: takes exactly one argument, the OPTIONS FILE (usage: %s)", cmd.Name(), cmd.UseLine())
			}
			if args[0] == "" {
				return fmt.Errorf("%s: argument FILE is empty", cmd.Name())
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			f, err := os.Open(args[0])
			if err != nil {
				return err // "open FILE: ..."
			}
			defer f.Close()
			text, err := tune.ImportOptions(f, args[0])
			if err != nil {
				return err
			}
			_, err = cmd.OutOrStdout().Write(text)
			return err
		},
	}
}
