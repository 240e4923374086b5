package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/stratadb/strata/internal/report"
	"github.com/stratadb/strata/internal/tune"
)

// recommendOptions are the options of recommend.
type recommendOptions struct {
	global     *globalOptions
	data       dataOptions
	configPath string
	goal       string
	sample     int
	out        string
	dir        string
	repeat     int
	minTime    time.Duration
	bounds     tune.Bounds
	plot       string
	format     report.Format

	parsedGoal tune.Goal // set by Validate
}

// AddFlags registers recommend's flags.
func (o *recommendOptions) AddFlags(fs *pflag.FlagSet) {
	o.data.AddFlags(fs)
	fs.StringVar(&o.configPath, "config", "", "base config `FILE` the candidates start from (default: the default config)")
	fs.StringVar(&o.goal, "goal", string(tune.GoalBalanced), "`GOAL`: size, write, read or balanced")
	fs.IntVar(&o.sample, "sample", tune.DefaultSample, "measure on `N` entities spread evenly over the data")
	fs.StringVar(&o.out, "out", "", "write the recommended config as TOML to `FILE` (default: standard output, after the table)")
	fs.StringVar(&o.dir, "dir", "", "keep the databases in a new directory under `DIR` (default: a temporary directory, removed after)")
	fs.IntVar(&o.repeat, "repeat", 1, "run each candidate `N` times and use the median of each figure")
	fs.DurationVar(&o.minTime, "min-time", tune.DefaultMinTime, "repeat each timed phase (write, absent reads, reads) until it has run `DURATION`")
	d := tune.DefaultBounds()
	fs.Float64Var(&o.bounds.MaxWriteLoss, "max-write-loss", d.MaxWriteLoss, "--goal size: ingest MB/s (write + compaction) may fall at most this `SHARE` below the base config's")
	fs.Float64Var(&o.bounds.MaxReadLoss, "max-read-loss", d.MaxReadLoss, "--goal size: point-read MB/s may fall at most this `SHARE` below the base config's (and absent-key reads, for fewer bloom bits, on every goal)")
	fs.Float64Var(&o.bounds.MaxSizeGrowth, "max-size-growth", d.MaxSizeGrowth, "--goal read, write: the database may grow at most this `SHARE` above the base config's")
	fs.StringVar(&o.plot, "plot", "", "also draw size against write and read MB/s, with the Pareto frontier and the chosen config, as SVG into `FILE`")
	formatFlag(fs, &o.format, allFormats...)
}

// Validate checks the flags before any work.
func (o *recommendOptions) Validate() error {
	errs := []error{o.global.Validate(), o.data.Validate()}
	g, err := tune.ParseGoal(o.goal)
	errs = append(errs, err)
	o.parsedGoal = g
	if o.sample < 1 {
		errs = append(errs, fmt.Errorf("--sample %d: must be >= 1", o.sample))
	}
	if o.repeat < 1 {
		errs = append(errs, fmt.Errorf("--repeat %d: must be >= 1", o.repeat))
	}
	if o.minTime <= 0 {
		errs = append(errs, fmt.Errorf("--min-time %s: must be > 0", o.minTime))
	}
	errs = append(errs, o.bounds.Validate(), checkPlotPath(o.plot))
	if o.out == "" && (o.format == report.FormatJSON || o.format == report.FormatCSV) {
		errs = append(errs, fmt.Errorf("--format %s prints only the candidates: give --out FILE for the recommended config", o.format))
	}
	if o.out != "" {
		if info, err := os.Stat(filepath.Dir(o.out)); err != nil || !info.IsDir() {
			errs = append(errs, fmt.Errorf("--out %s: the directory %s does not exist", o.out, filepath.Dir(o.out)))
		}
	}
	if o.dir != "" {
		errs = append(errs, tune.CheckWritableDir(o.dir))
	}
	return errors.Join(errs...)
}

func newRecommendCommand(g *globalOptions) *cobra.Command {
	o := &recommendOptions{global: g}
	cmd := &cobra.Command{
		Use:   "recommend",
		Short: "Try codecs, zstd levels, block sizes and bloom bits on a sample; recommend a config for a goal",
		Long: `recommend measures candidate settings on a sample of the data (--input FILE,
or generated entities) with the measurement of "tune compression", plus reads
of absent keys against the flushed tables (L0-L5, where every Get consults the
bloom filters). Each timed phase repeats until it has run --min-time (1s).

Candidates, around the base config (--config FILE or the default): the base;
codec pairs none/none, lz4/zstd, zstd/zstd, snappy/zstd, minlz/zstd; lz4 above
with zstd levels 3, 9, 19 at the bottom, each with bottommost_block_size 4,
16, 32, 64, 128 KB; block_size 4 and 16 KB; bloom bits 0, 10, 16.

Goals are constraints against the base config, measured in the same run:
  size      the smallest database whose ingest and point-read MB/s stay within
            --max-write-loss and --max-read-loss (10%) of the base's
  write     the fastest ingest whose database is at most --max-size-growth
            (10%) larger than the base's
  read      the fastest point reads within the same size bound
  balanced  the best (ratio / base ratio) x sqrt(ingest / base ingest x
            read / base read): 1% smaller counts as 1% faster at both
Ingest is the sample's bytes / time of the write and the full compaction:
what writing costs once the bottommost codec applies to every byte.
On every goal, fewer bloom bits than the base only when the absent-key reads
were measured in L0-L5 and stay within --max-read-loss of the base's, and no
compression at all only when the base stores the data below 1.1x. Among the
candidates within bounds, those within 5% of the best (size: 1%) count as
equal, and the one changing the fewest keys of the base wins.

The table gives every figure, the figures relative to the base, whether the
bounds hold (or why not), the Pareto frontier and the choice. The recommended
config (the base config with the chosen keys) is written as TOML to --out, or
to standard output after the table; --plot FILE.svg draws the trade-off.`,
		Example: `  tune recommend --input entities.jsonl --goal size --out strata-small.toml --plot tradeoff.svg
  tune recommend --goal size --max-read-loss 0.2 --config strata.toml
  tune recommend --goal read --max-size-growth 0.25
  tune recommend --entities 5000 --size 4096 --goal balanced`,
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

func (o *recommendOptions) run(cmd *cobra.Command) error {
	base, err := loadBase(o.configPath)
	if err != nil {
		return err
	}
	data, err := o.data.load()
	if err != nil {
		return err
	}
	bar := o.global.bar(cmd)
	res, err := tune.RunRecommend(cmd.Context(), tune.RecommendOptions{
		Base:     base,
		Data:     data,
		Sample:   o.sample,
		Goal:     o.parsedGoal,
		Dir:      o.dir,
		Repeat:   o.repeat,
		Seed:     o.data.seed,
		MinTime:  o.minTime,
		Bounds:   &o.bounds,
		Progress: bar,
	})
	if err != nil {
		bar.Abort()
		return err
	}
	bar.Finish()
	toml, err := res.ConfigTOML()
	if err != nil {
		return err
	}
	var out bytes.Buffer
	if err := res.Table().Write(&out, o.format); err != nil {
		return err
	}
	if o.out != "" {
		if err := os.WriteFile(o.out, toml, 0o644); err != nil {
			return fmt.Errorf("--out: %w", err)
		}
		fmt.Fprintf(cmd.ErrOrStderr(), "recommended config (goal %s) written to %s\n", res.Goal, o.out)
	} else {
		out.WriteString("\n")
		out.Write(toml)
	}
	if o.plot != "" {
		if err := writePlot(o.plot, res.Plot); err != nil {
			return err
		}
		fmt.Fprintf(cmd.ErrOrStderr(), "plot written to %s\n", o.plot)
	}
	_, err = cmd.OutOrStdout().Write(out.Bytes())
	return err
}
