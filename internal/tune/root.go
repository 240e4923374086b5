package tune

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
	"github.com/stratadb/strata/internal/cli"
	"github.com/stratadb/strata/internal/report"
)

// NewRootCommand returns the tune command with every subcommand attached.
// Each call builds fresh commands and options, so a program (or a test)
// may build and execute any number of them. Each command lives in the
// file of its name, with its options, flags, validation and run.
func NewRootCommand() *cobra.Command {
	g := &globalFlags{}
	root := cli.Root(&cobra.Command{
		Use:   "tune",
		Short: "Measure and tune Strata configurations",
		Long: `tune measures Strata configurations on this machine and helps choose one.

Sizes and speeds are in MB = MiB = 1,048,576 bytes. Results go to standard
output (--format table, markdown, json or csv), progress to standard error.`,
		Example: `  tune compression                                  # the THEMIS guide's table: 10000 x 2 KB, four profiles
  tune compression --repeat 3 --baseline --format markdown
  tune compression --input entities.jsonl --profiles lz4/zstd,zstd:1/zstd:6
  tune codecs --block-size 32768
  tune options --config strata.toml > OPTIONS-rocksdb
  tune options --db data/strata
  tune import OPTIONS-000042 > strata.toml
  tune recommend --input entities.jsonl --goal size --out strata.toml --plot tradeoff.svg
  tune compression --configs default,strata.toml --baseline --repeat 5
  tune doctor --config strata.toml --input entities.jsonl
  tune memory --format markdown                     # etcd's storage memory tables`,
	})
	g.addFlags(root.PersistentFlags())
	root.AddCommand(
		newCompressionCommand(g),
		newCodecsCommand(g),
		newOptionsCommand(),
		newImportCommand(),
		newRecommendCommand(g),
		newDoctorCommand(g),
		newMemoryCommand(g),
	)
	return root
}

// ErrorLine returns the line tune prints for a failed command: the error
// after "tune: ", which the errors of this package already start with.
func ErrorLine(err error) string {
	msg := err.Error()
	if strings.HasPrefix(msg, "tune: ") {
		return msg
	}
	return "tune: " + msg
}

// globalFlags are the flags every command shares.
type globalFlags struct {
	progress cli.Progress
}

// addFlags registers the global flags on fs (the root's persistent flags).
func (g *globalFlags) addFlags(fs *pflag.FlagSet) {
	cli.AddProgressFlag(fs, &g.progress, "progress bar on stderr, `MODE` auto (when stderr is a terminal), always or never")
}

// bar returns the progress bar of --progress on the command's stderr.
func (g *globalFlags) bar(cmd *cobra.Command) *Bar {
	w := cmd.ErrOrStderr()
	return NewBar(w, g.progress.Visible(w))
}

// dataFlags select the data a measurement writes: generated entities or a
// JSON Lines file.
type dataFlags struct {
	entities int
	size     int
	seed     int64
	input    string
}

// addFlags registers the data flags.
func (d *dataFlags) addFlags(fs *pflag.FlagSet) {
	fs.IntVar(&d.entities, "entities", 10000, "generate `N` entities (without --input)")
	fs.IntVar(&d.size, "size", 2048, "generated entities are JSON documents of about `BYTES` bytes")
	fs.Int64Var(&d.seed, "seed", 1, "`SEED` of the generated data and of the shuffled read order")
	fs.StringVar(&d.input, "input", "", "use the JSON Lines `FILE` instead: line i (from 0) is the value of key entity:%08d of i")
}

// validate checks the data flags.
func (d *dataFlags) validate() error {
	var errs []error
	if d.input == "" {
		if d.entities < 1 {
			errs = append(errs, fmt.Errorf("--entities %d: must be >= 1", d.entities))
		}
		if d.size < 1 {
			errs = append(errs, fmt.Errorf("--size %d: must be >= 1", d.size))
		}
	}
	return errors.Join(errs...)
}

// load returns the selected data.
func (d *dataFlags) load() (*Dataset, error) {
	if d.input != "" {
		return dataOrigin{Path: d.input}.load()
	}
	return dataOrigin{Entities: d.entities, Size: d.size, Seed: d.seed}.load()
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

// allFormats are the formats of report.Table.
var allFormats = []report.Format{report.FormatTable, report.FormatMarkdown, report.FormatJSON, report.FormatCSV}

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
