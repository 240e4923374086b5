// Command tune measures Strata configurations on the user's machine and
// helps choose one: it reproduces the compression table of the THEMIS
// RocksDB tuning guide (compression), measures the raw block codecs
// (codecs), prints and imports RocksDB-format OPTIONS files (options,
// import), recommends a config for a goal
// (recommend), diagnoses an existing database (doctor) and reproduces etcd's
// storage memory tables for the mvcc key index and store (memory). Run "tune
// help" for the commands and their examples.
//
// The commands live in package internal/tune, one file per command with its
// options, flags, validation and run. memory runs each row in a fresh
// process, and compression with --rocksdb (or --process-per-run) each run:
// tune re-executes itself, and main hands such a child to tune.RunChildMain
// or indexmem.ChildMain before anything else.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"

	"github.com/stratadb/strata/internal/cmalloc"
	"github.com/stratadb/strata/internal/indexmem"
	"github.com/stratadb/strata/internal/tune"
)

func main() {
	// Before anything else: Pebble's memtables are C blocks, and with huge
	// pages each costs a page fault per 2 MiB instead of per 4 KiB
	// (docs/config.md, "Huge pages for memtables"). A run's child
	// inherits the setting.
	if _, err := cmalloc.ExecWithHugePages(); err != nil {
		fmt.Fprintln(os.Stderr, "tune: starting with huge pages for C blocks:", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if child, err := tune.RunChildMain(ctx, os.Stdout); child {
		exitChild(err)
	}
	if child, err := indexmem.ChildMain(os.Stdout); child {
		exitChild(err)
	}
	err := tune.NewRootCommand().ExecuteContext(ctx)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, tune.ErrorLine(err))
		os.Exit(1)
	}
}

// exitChild ends a child process that measured one row or run.
func exitChild(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, tune.ErrorLine(err))
		os.Exit(1)
	}
	os.Exit(0)
}
