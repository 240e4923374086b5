package main

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/stratadb/strata/config"
	"github.com/stratadb/strata/internal/report"
	"github.com/stratadb/strata/internal/tune"
)

// compressionOptions are the options of compression.
type compressionOptions struct {
	global     *globalOptions
	data       dataOptions
	configPath string
	profiles   string
	configs    string
	dir        string
	repeat     int
	baseline   bool
	minTime    time.Duration
	plot       string
	format     report.Format

	profilesSet bool           // --profiles was given
	parsed      []tune.Profile // set by Validate
}

// parseConfigs reads --configs: one profile per config file, "default"
// for config.Default(), each labelled with its file name.
func parseConfigs(list string) ([]tune.Profile, error) {
	var out []tune.Profile
	var errs []error
	for _, item := range strings.Split(list, ",") {
		item = strings.TrimSpace(item)
		switch item {
		case "":
			continue
		case "default":
			out = append(out, tune.ConfigProfile("default", config.Default()))
			continue
		}
		cfg, err := config.Load(item)
		if err != nil {
			errs = append(errs, fmt.Errorf("--configs: %w", err))
			continue
		}
		out = append(out, tune.ConfigProfile(filepath.Base(item), cfg))
	}
	if len(out) == 0 && len(errs) == 0 {
		errs = append(errs, fmt.Errorf("--configs %q: no config given: list config files or default", list))
	}
	return out, errors.Join(errs...)
}

// AddFlags registers compression's flags.
func (o *compressionOptions) AddFlags(fs *pflag.FlagSet) {
	o.data.AddFlags(fs)
	fs.StringVar(&o.profiles, "profiles", tune.DefaultProfiles, "comma-separated `LIST` of default/bottommost codec pairs (none, snappy, lz4, zstd, zstd:N, minlz)")
	fs.StringVar(&o.configPath, "config", "", "base config `FILE` (default: the default config); its paths are ignored")
	fs.StringVar(&o.configs, "configs", "", "instead of --profiles and --config: one row per config, a comma-separated `LIST` of config files, \"default\" for the default config")
	fs.StringVar(&o.dir, "dir", "", "keep the databases in a new directory under `DIR` (default: a temporary directory, removed after)")
	fs.IntVar(&o.repeat, "repeat", 1, "run each profile `N` times and report the median of each figure")
	fs.BoolVar(&o.baseline, "baseline", false, "also run each profile on raw Pebble with identical options and add Strata/Pebble ratio columns")
	fs.DurationVar(&o.minTime, "min-time", tune.DefaultMinTime, "repeat each timed phase (write, read, scan) until it has run `DURATION`")
	fs.StringVar(&o.plot, "plot", "", "also draw size against write and read MB/s, with the Pareto frontier, as SVG into `FILE`")
	formatFlag(fs, &o.format, allFormats...)
}

// Validate checks the flags; a --dir that is not writable fails here,
// before any data is generated.
func (o *compressionOptions) Validate() error {
	errs := []error{o.global.Validate(), o.data.Validate()}
	if o.repeat < 1 {
		errs = append(errs, fmt.Errorf("--repeat %d: must be >= 1", o.repeat))
	}
	if o.minTime <= 0 {
		errs = append(errs, fmt.Errorf("--min-time %s: must be > 0", o.minTime))
	}
	errs = append(errs, checkPlotPath(o.plot))
	if o.configs != "" {
		if o.profilesSet || o.configPath != "" {
			errs = append(errs, fmt.Errorf("--configs %s: give either --configs or --profiles/--config: each config brings its own codecs", o.configs))
		}
		p, err := parseConfigs(o.configs)
		errs = append(errs, err)
		o.parsed = p
	} else {
		p, err := tune.ParseProfiles(o.profiles)
		errs = append(errs, err)
		o.parsed = p
	}
	if o.dir != "" {
		errs = append(errs, tune.CheckWritableDir(o.dir))
	}
	return errors.Join(errs...)
}

func newCompressionCommand(g *globalOptions) *cobra.Command {
	o := &compressionOptions{global: g}
	cmd := &cobra.Command{
		Use:   "compression",
		Short: "Measure size and speed of compression profiles (the THEMIS RocksDB tuning guide's table)",
		Long: `compression writes the same data into a fresh database per profile
(compression_default / compression_bottommost), flushes, compacts everything
(a real rewrite, so the bottommost codec applies), measures, then reads every
key back and scans. Columns:

  DB Size            table files (*.sst) on disk after the full compaction
  Ratio              key+value bytes / DB Size
  Write              key+value bytes / time of the puts (batches of 100) + final flush
  Read               key+value bytes / time of one Get per key, shuffled, after a
                     reopen (cold block cache, warm OS page cache); values checked
  Write, Read (MB/CPU-s)  the same bytes / CPU time of the process (all threads)
  Ingest             key+value bytes / time of the write and the full compaction
  Scan               key+value bytes / time of one forward scan after the reads
  Before compaction  table bytes on disk after the flush
  Compact            time of the full compaction
  W-Amp              bytes written to tables / bytes written to the WAL

With --baseline, each profile also runs on raw Pebble opened with the same
options (engine.PebbleOptions), interleaved in this process; the "vs Pebble"
columns are Strata MB/s / Pebble MB/s. MB = MiB. Each timed phase repeats its
work until it has run --min-time (1s), so that a figure is not a few
milliseconds of a shared machine; the figures are per pass. The table prints
only once every run succeeded. --plot FILE.svg draws DB size against write and
read MB/s with the Pareto frontier marked.`,
		Example: `  tune compression
  tune compression --repeat 3 --baseline --format markdown
  tune compression --profiles none/none,lz4/zstd,minlz/zstd,zstd:1/zstd:6 --config strata.toml
  tune compression --input entities.jsonl --dir /mnt/nvme/tune --format json
  tune compression --profiles lz4/zstd,lz4/zstd:19 --plot tradeoff.svg
  tune compression --configs default,strata-small.toml --baseline --repeat 3`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.profilesSet = cmd.Flags().Changed("profiles")
			if err := o.Validate(); err != nil {
				return err
			}
			return o.run(cmd)
		},
	}
	o.AddFlags(cmd.Flags())
	return cmd
}

func (o *compressionOptions) run(cmd *cobra.Command) error {
	began := time.Now()
	base, err := loadBase(o.configPath)
	if err != nil {
		return err
	}
	data, err := o.data.load()
	if err != nil {
		return err
	}
	bar := o.global.bar(cmd)
	res, err := tune.RunCompression(cmd.Context(), tune.CompressionOptions{
		Base:     base,
		Profiles: o.parsed,
		Data:     data,
		Dir:      o.dir,
		Repeat:   o.repeat,
		Baseline: o.baseline,
		Seed:     o.data.seed,
		MinTime:  o.minTime,
		Progress: bar,
	})
	if err != nil {
		bar.Abort()
		return err
	}
	bar.Finish()
	var out bytes.Buffer
	if err := res.Table().Write(&out, o.format); err != nil {
		return err
	}
	if _, err := cmd.OutOrStdout().Write(out.Bytes()); err != nil {
		return err
	}
	stderr := cmd.ErrOrStderr()
	if o.plot != "" {
		if err := writePlot(o.plot, res.Plot); err != nil {
			return err
		}
		fmt.Fprintf(stderr, "plot written to %s\n", o.plot)
	}
	if res.Dir != "" {
		fmt.Fprintf(stderr, "databases kept in %s\n", res.Dir)
	}
	runs := "run"
	if res.Repeat > 1 {
		runs = "runs"
	}
	if res.Baseline {
		runs += " (and as many on raw Pebble)"
	}
	fmt.Fprintf(stderr, "tune compression: %d profiles x %d %s in %s\n", len(res.Rows), res.Repeat, runs, time.Since(began).Round(100*time.Millisecond))
	return nil
}
