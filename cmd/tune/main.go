// Command tune measures Strata configurations on the user's machine and
// helps choose one: it reproduces the compression table of the THEMIS
// RocksDB tuning guide (compression), measures the raw block codecs
// (codecs), prints and imports RocksDB-format OPTIONS files (options,
// import), recommends a config for a goal
// (recommend), diagnoses an existing database (doctor) and reproduces etcd's
// storage memory tables for the mvcc key index and store (memory). Run "tune
// help" for the commands and their examples.
//
// The commands only bind flags; the work is done by package internal/tune.
// memory runs each row in a fresh process: tune re-executes itself, and
// main hands such a child to indexmem.ChildMain before anything else.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strings"

	"github.com/spf13/cobra"
	"github.com/stratadb/strata/internal/indexmem"
)

func main() {
	if child, err := indexmem.ChildMain(os.Stdout); child {
		if err != nil {
			fmt.Fprintln(os.Stderr, errorLine(err))
			os.Exit(1)
		}
		os.Exit(0)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	err := newRootCommand().ExecuteContext(ctx)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, errorLine(err))
		os.Exit(1)
	}
}

// errorLine returns the line printed for a failed command: the error after
// "tune: ", which errors of package tune already start with.
func errorLine(err error) string {
	msg := err.Error()
	if strings.HasPrefix(msg, "tune: ") {
		return msg
	}
	return "tune: " + msg
}

// newRootCommand returns the tune command with every subcommand attached.
// Each call builds fresh commands and options, so a test may build and run
// any number of them.
func newRootCommand() *cobra.Command {
	g := &globalOptions{}
	root := &cobra.Command{
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
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	root.CompletionOptions.HiddenDefaultCmd = true
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return fmt.Errorf("%w (see '%s --help')", err, c.CommandPath())
	})
	g.AddFlags(root.PersistentFlags())
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
