package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/stratadb/strata/config"
	"github.com/stratadb/strata/internal/report"
	"github.com/stratadb/strata/internal/tune"
)

// doctorOptions are the options of doctor.
type doctorOptions struct {
	global     *globalOptions
	configPath string
	dbDir      string
	input      string
	probe      int
	seed       int64
	format     report.Format
}

// AddFlags registers doctor's flags.
func (o *doctorOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.configPath, "config", "", "the database's config `FILE`; its db_path is the database")
	fs.StringVar(&o.dbDir, "db", "", "the database `DIR`, opened with the config recorded in its OPTIONS-rocksdb (or overriding db_path of --config)")
	fs.StringVar(&o.input, "input", "", "load the JSON Lines `FILE` first (key entity:%08d of the line number from 0), counting stalls")
	fs.IntVar(&o.probe, "probe", tune.DefaultProbe, "probe with `N` reads of present keys and N reads of absent keys")
	fs.Int64Var(&o.seed, "seed", 1, "`SEED` of the sampled keys")
	formatFlag(fs, &o.format, report.FormatTable, report.FormatMarkdown, report.FormatJSON)
}

// Validate checks the flags.
func (o *doctorOptions) Validate() error {
	errs := []error{o.global.Validate(), checkFormat(o.format, report.FormatTable, report.FormatMarkdown, report.FormatJSON)}
	if o.configPath == "" && o.dbDir == "" {
		errs = append(errs, errors.New("need --config FILE or --db DIR"))
	}
	if o.probe < 1 {
		errs = append(errs, fmt.Errorf("--probe %d: must be >= 1", o.probe))
	}
	return errors.Join(errs...)
}

func newDoctorCommand(g *globalOptions) *cobra.Command {
	o := &doctorOptions{global: g}
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Diagnose a database: findings with the figure, the key to change and the value to try",
		Long: `doctor opens a database, loads --input first if given (counting write
stalls), probes it with point reads of present keys (sampled by one full scan)
and of absent keys next to them, reads its metrics and turns the tuning
guide's troubleshooting section into findings:

  slow point lookups (no bloom filters, or filters that let absent keys
    through, or many block cache misses per read)  -> bloom_bits_per_key
  write stalls, compaction debt, many L0 tables     -> max_background_jobs
  a full block cache with a hit rate below 80%      -> block_cache_size_mb
                                                       (or memtable_size_mb)
  tables that kept another level's codec            -> a full compaction

Each finding names the figure behind it, the config key and the value to try.
Without findings it says "no findings", with the figures it checked. The
settings accepted without effect on Pebble are listed too.`,
		Example: `  tune doctor --config strata.toml
  tune doctor --db data/strata --probe 10000
  tune doctor --config strata.toml --input entities.jsonl --format json`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.Validate(); err != nil {
				return err
			}
			return o.run(cmd)
		},
	}
	o.AddFlags(cmd.Flags())
	return cmd
}

// loadConfig returns the database's config: --config's file (db_path
// replaced by --db), or the config recorded in --db's OPTIONS-rocksdb.
func (o *doctorOptions) loadConfig() (*config.Config, error) {
	if o.configPath != "" {
		cfg, err := loadBase(o.configPath)
		if err != nil {
			return nil, err
		}
		if o.dbDir != "" {
			cfg.DBPath = o.dbDir
		}
		return cfg, nil
	}
	cfg, _, err := tune.DBConfig(o.dbDir)
	return cfg, err
}

func (o *doctorOptions) run(cmd *cobra.Command) error {
	cfg, err := o.loadConfig()
	if err != nil {
		return err
	}
	var input *tune.Dataset
	if o.input != "" {
		if input, err = tune.LoadDataset(o.input); err != nil {
			return err
		}
	} else if !tune.IsDatabase(cfg.DBPath) {
		return fmt.Errorf("%w: %s holds no database (give --input FILE to load one)", tune.ErrNotDatabase, cfg.DBPath)
	}
	bar := o.global.bar(cmd)
	rep, err := tune.RunDoctor(cmd.Context(), tune.DoctorOptions{
		Config:   cfg,
		Input:    input,
		Probe:    o.probe,
		Seed:     o.seed,
		Progress: bar,
	})
	if err != nil {
		bar.Abort()
		return err
	}
	bar.Finish()
	return rep.Write(cmd.OutOrStdout(), o.format)
}
