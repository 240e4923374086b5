package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/stratadb/strata/internal/tune"
	"github.com/stratadb/strata/report"
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
		Short: "Try codecs, zstd levels, block sizes and bloom bits on a sample; recommend a config",
		Long: `recommend measures candidate settings on a sample of the data (--input FILE,
or generated entities) with the measurement of "tune compression", plus one
read of an absent key per present key, so that bloom filters count.

It varies one dimension at a time around the base config (--config FILE or
the default): codec pairs none/none, lz4/zstd, zstd/zstd, snappy/zstd,
minlz/zstd, zstd:1/zstd:6; bottommost zstd levels 1, 3, 6, 9; block sizes 4,
8, 16, 32, 64 KB; bloom bits 0, 10, 16. It then combines each dimension's best
value for the goal (when it beats the base by more than 5%) and measures the
combination.

The table marks the Pareto frontier (no candidate is smaller, faster to write
and faster to read at once) and the frontier member chosen for --goal:
  size      the smallest database
  write     the fastest writes
  read      the fastest reads
  balanced  the best geometric mean of min size / size, write / max write and
            read / max read
The recommended config (the base config with the chosen keys) is written as
TOML to --out, or to standard output after the table.`,
		Example: `  tune recommend --input entities.jsonl --goal balanced --out strata.toml
  tune recommend --goal size --config strata.toml --out strata-small.toml
  tune recommend --entities 5000 --size 4096 --goal read`,
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
	_, err = cmd.OutOrStdout().Write(out.Bytes())
	return err
}
