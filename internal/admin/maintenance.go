package admin

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"
)

// dbOptions are the options of the commands that take nothing but the
// database: flush, compact, stats and options.
type dbOptions struct {
	global *globalOptions
}

func newFlushCommand(g *globalOptions) *cobra.Command {
	o := &dbOptions{global: g}
	return &cobra.Command{
		Use:     "flush",
		Short:   "Flush the memtable to an L0 table",
		Long:    "flush writes the memtable to an L0 table, waits for it and prints the elapsed time.",
		Example: `  strata --config strata.toml flush`,
		Args:    argsNamed(),
		RunE: func(cmd *cobra.Command, _ []string) (err error) {
			db, err := o.global.open(o.global.logger(cmd), mustExist)
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

func newCompactCommand(g *globalOptions) *cobra.Command {
	o := &dbOptions{global: g}
	return &cobra.Command{
		Use:   "compact",
		Short: "Compact the whole key space to the bottommost level",
		Long: `compact compacts every key down to the bottom of the LSM and rewrites any
table whose codec is not its level's, so afterwards the bottommost level
carries compression_bottommost (RocksDB's CompactRange with
bottommost_level_compaction = kForce). It prints the elapsed time.`,
		Example: `  strata --config strata.toml compact`,
		Args:    argsNamed(),
		RunE: func(cmd *cobra.Command, _ []string) (err error) {
			db, err := o.global.open(o.global.logger(cmd), mustExist)
			if err != nil {
				return err
			}
			defer closeDB(db, &err)
			began := time.Now()
			if err := db.CompactAll(); err != nil {
				return err
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "compacted in %s\n", formatElapsed(time.Since(began)))
			return err
		},
	}
}

// checkpointOptions are the options of checkpoint.
type checkpointOptions struct {
	global *globalOptions
	dir    string
}

// Validate checks the DIR argument.
func (o *checkpointOptions) Validate(cmd *cobra.Command) error {
	return nonEmpty(cmd, "DIR", o.dir)
}

func newCheckpointCommand(g *globalOptions) *cobra.Command {
	o := &checkpointOptions{global: g}
	return &cobra.Command{
		Use:   "checkpoint DIR",
		Short: "Write a consistent, openable copy of the database into DIR",
		Long: `checkpoint writes a consistent copy of the database into DIR, which must not
exist. Table files are hard-linked where possible; the copy holds every write
acknowledged before the command and opens with db_path = DIR (no wal_dir).`,
		Example: `  strata --config strata.toml checkpoint /backup/strata-$(date +%F)
  strata --db ./backup get user:1`,
		Args: argsNamed("DIR"),
		RunE: func(cmd *cobra.Command, args []string) (err error) {
			o.dir = args[0]
			if err := o.Validate(cmd); err != nil {
				return err
			}
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
		},
	}
}

func newStatsCommand(g *globalOptions) *cobra.Command {
	o := &dbOptions{global: g}
	return &cobra.Command{
		Use:   "stats",
		Short: "Print the database statistics",
		Long: `stats prints a report in the spirit of RocksDB's rocksdb.stats: per level the
files, size and codecs, then write amplification, block cache, bloom filters,
WAL, stalls and compactions.`,
		Example: `  strata --config strata.toml stats`,
		Args:    argsNamed(),
		RunE: func(cmd *cobra.Command, _ []string) (err error) {
			db, err := o.global.open(o.global.logger(cmd), readOnly)
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

func newOptionsCommand(g *globalOptions) *cobra.Command {
	o := &dbOptions{global: g}
	return &cobra.Command{
		Use:   "options",
		Short: "Print the configuration as a RocksDB OPTIONS file",
		Long: `options validates the configuration and prints it in the RocksDB OPTIONS
format, the text written to db_path/OPTIONS-rocksdb on every open. It does not
open the database, so db_path need not exist.`,
		Example: `  strata --config strata.toml options
  strata --db ./data options > OPTIONS-rocksdb`,
		Args: argsNamed(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := o.global.loadConfig()
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
