package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/stratadb/strata/config"
	"github.com/stratadb/strata/internal/report"
	"github.com/stratadb/strata/internal/tune"
	"golang.org/x/term"
)

// Progress bar modes of --progress.
const (
	progressAuto   = "auto"
	progressAlways = "always"
	progressNever  = "never"
)

// globalOptions are the flags every command shares.
type globalOptions struct {
	progress string
}

// AddFlags registers the global flags on fs (the root's persistent flags).
func (o *globalOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.progress, "progress", progressAuto, "progress bar on stderr, `MODE` auto (when stderr is a terminal), always or never")
}

// Validate checks --progress.
func (o *globalOptions) Validate() error {
	switch o.progress {
	case progressAuto, progressAlways, progressNever:
		return nil
	}
	return fmt.Errorf("--progress %q: must be auto, always or never", o.progress)
}

// bar returns the progress bar of --progress on the command's stderr.
func (o *globalOptions) bar(cmd *cobra.Command) *tune.Bar {
	w := cmd.ErrOrStderr()
	visible := o.progress == progressAlways || (o.progress == progressAuto && isTerminal(w))
	return tune.NewBar(w, visible)
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// dataOptions select the data a measurement writes: generated entities or
// a JSON Lines file.
type dataOptions struct {
	entities int
	size     int
	seed     int64
	input    string
}

// AddFlags registers the data flags.
func (o *dataOptions) AddFlags(fs *pflag.FlagSet) {
	fs.IntVar(&o.entities, "entities", 10000, "generate `N` entities (without --input)")
	fs.IntVar(&o.size, "size", 2048, "generated entities are JSON documents of about `BYTES` bytes")
	fs.Int64Var(&o.seed, "seed", 1, "`SEED` of the generated data and of the shuffled read order")
	fs.StringVar(&o.input, "input", "", "use the JSON Lines `FILE` instead: line i (from 0) is the value of key entity:%08d of i")
}

// Validate checks the data flags.
func (o *dataOptions) Validate() error {
	var errs []error
	if o.input == "" {
		if o.entities < 1 {
			errs = append(errs, fmt.Errorf("--entities %d: must be >= 1", o.entities))
		}
		if o.size < 1 {
			errs = append(errs, fmt.Errorf("--size %d: must be >= 1", o.size))
		}
	}
	return errors.Join(errs...)
}

// load returns the selected data.
func (o *dataOptions) load() (*tune.Dataset, error) {
	if o.input != "" {
		return tune.LoadDataset(o.input)
	}
	return tune.GenerateDataset(o.entities, o.size, o.seed)
}

// loadBase returns the config of --config FILE, or config.Default().
func loadBase(path string) (*config.Config, error) {
	if path == "" {
		return config.Default(), nil
	}
	cfg, err := config.Load(path)
	if err != nil {
		return nil, fmt.Errorf("--config %s: %w", path, err)
	}
	return cfg, nil
}

// formatFlag registers --format for the given formats, table by default.
func formatFlag(fs *pflag.FlagSet, f *report.Format, allowed ...report.Format) {
	names := make([]string, len(allowed))
	for i, a := range allowed {
		names[i] = a.String()
	}
	fs.Var(f, "format", "output `FORMAT`: "+strings.Join(names, ", "))
}

// checkFormat reports a format the command does not offer.
func checkFormat(f report.Format, allowed ...report.Format) error {
	names := make([]string, len(allowed))
	for i, a := range allowed {
		if a == f {
			return nil
		}
		names[i] = a.String()
	}
	return fmt.Errorf("--format %s: allowed are %s", f, strings.Join(names, ", "))
}

// checkPlotPath checks --plot FILE: "" (no plot), or a .svg file in an
// existing directory.
func checkPlotPath(path string) error {
	if path == "" {
		return nil
	}
	if !strings.EqualFold(filepath.Ext(path), ".svg") {
		return fmt.Errorf("--plot %s: the plot is SVG: give a FILE ending in .svg", path)
	}
	if info, err := os.Stat(filepath.Dir(path)); err != nil || !info.IsDir() {
		return fmt.Errorf("--plot %s: the directory %s does not exist", path, filepath.Dir(path))
	}
	return nil
}

// writePlot writes the SVG that draw renders into path.
func writePlot(path string, draw func(io.Writer) error) error {
	var b bytes.Buffer
	if err := draw(&b); err != nil {
		return err
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		return fmt.Errorf("--plot: %w", err)
	}
	return nil
}

// allFormats are the formats of report.Table.
var allFormats = []report.Format{report.FormatTable, report.FormatMarkdown, report.FormatJSON, report.FormatCSV}

// noArgs rejects positional arguments, naming the first one.
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return fmt.Errorf("%s: unexpected argument %q: takes no arguments (usage: %s)", cmd.Name(), args[0], cmd.UseLine())
	}
	return nil
}
