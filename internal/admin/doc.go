// Package admin implements strata, Strata's administration tool in the spirit
// of RocksDB's ldb: point reads and writes, range scans, bulk loading of JSON
// Lines, flushes, compactions, checkpoints, statistics and the RocksDB-format
// OPTIONS text of a configuration.
//
// The commands are cobra commands built by NewRootCommand, so tests and other
// programs run them in-process exactly as cmd/strata does:
//
//	root := admin.NewRootCommand()
//	root.SetArgs([]string{"--db", dir, "put", "k", "v"})
//	root.SetOut(&stdout)
//	root.SetErr(&stderr)
//	if err := root.Execute(); err != nil { ... }
//
// Each command lives in the file of its name (put.go, get.go, delete.go,
// scan.go, load.go, flush.go, compact.go, checkpoint.go, stats.go,
// options.go, serve.go, bench.go) with its options, flags, validation and
// run; root.go holds the flags every command shares (--config, --db,
// --verbose) and opens the database. package internal/tune has the same
// layout for tune, and both build their roots with package internal/cli.
//
// Results go to the command's standard output, progress and log lines to its
// standard error. A command never exits the process: it returns an error, and
// the caller (cmd/strata) prints it once and exits with status 1.
//
// # Selecting the database
//
// Every command takes --config FILE (a TOML, YAML or JSON config.Config) or
// --db DIR alone: the configuration the database recorded at its last open
// (config.RecordedConfig: db_paths, wal_dir, codecs, ...), or config.Default
// with db_path = DIR for a new database. With both, --db overrides the file's
// db_path. Only put and load create a database; the other commands report a
// missing db_path rather than open a new, empty database there. get, scan
// and stats open the database read-only (engine.Options.ReadOnly): nothing on
// disk changes.
//
// # Loading
//
// "strata load FILE.jsonl" stores line i (counted from 0) under
// workload.Key(i), entity:%08d, in batches committed in input order, so after
// a crash or an error the entities present are always a prefix of the file,
// and "load --resume" continues after the last one present. Before it exits,
// load waits (with progress) until the compactions have brought L0 below
// Pebble's compaction threshold (engine.DB.WaitForCompactions) and reports
// the compaction debt left; --wait-compactions=false skips the wait.
package admin
