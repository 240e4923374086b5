// Package tune measures Strata configurations and helps choose one. It is
// the tune command: NewRootCommand builds it, and cmd/tune only executes
// it. Each command lives in the file of its name (compression.go,
// codecs.go, options.go, import.go, recommend.go, doctor.go, memory.go)
// with one options struct that holds its flags, their validation, the
// measurement's inputs and its run; root.go holds the flags every command
// shares. Tests and benchmarks call the measurements directly:
//
//	data, _ := tune.GenerateDataset(10000, 2048, 1) // or tune.LoadDataset("entities.jsonl")
//	res, err := tune.RunCompression(ctx, tune.CompressionOptions{Data: data, Repeat: 3, Baseline: true})
//	if err != nil { ... }
//	err = res.Table().Render(os.Stdout, "markdown")
//
// # Commands
//
//   - RunCompression: the THEMIS RocksDB tuning guide's compression table
//     (`tune compression`).
//   - RunCodecs: the raw block codecs on one core (`tune codecs`).
//   - ReadDBOptions, ImportOptions: OPTIONS files (`tune options`, `tune import`).
//   - RunRecommend: candidate settings on a sample and a recommended config
//     for a goal stated as constraints against the base config, with the
//     Pareto frontier (`tune recommend`); PlotTradeoff draws the trade-off
//     as SVG (--plot).
//   - RunDoctor: findings on an existing database (`tune doctor`).
//   - RunMemory: etcd's storage memory tables for mvcc's key index and
//     store, each row in a fresh process (internal/indexmem), with c1 and
//     c2 of etcd's model fitted (`tune memory`).
//
// # The figures of `tune compression`
//
// Every size and speed is in MB = MiB = 1,048,576 bytes (MiB), the unit of
// the config's *_mb keys. The raw bytes are the keys plus the values
// written (keys "entity:%08d"). For each profile and repeat a run
// (measure) does, in a fresh directory:
//
//  1. open with the base config, compression_default and
//     compression_bottommost from the profile, db_path in the run's
//     directory (wal_dir and db_paths cleared); write every entity in
//     batches of WriteBatchSize (100) puts, each committed; Flush.
//     Write (MB/s) = raw bytes / wall time of the puts and the Flush. The
//     compaction is not included.
//  2. Before compaction (MB): the sizes of the *.sst files in the directory,
//     as stat reports them.
//  3. CompactAll (a real rewrite: a table whose codec is not its level's
//     is rewritten, so the bottommost codec applies). Compact (s): its wall
//     time. W-Amp: engine Metrics().WriteAmp, bytes written to tables by
//     flushes, compactions and rewrites / bytes written to the WAL.
//  4. Close, which waits for obsolete tables to be deleted. DB Size (MB):
//     the *.sst bytes now on disk, WAL, MANIFEST and OPTIONS files not
//     counted. Ratio = raw bytes / DB Size.
//  5. Reopen: the block cache is new and cold, the OS page cache is warm
//     (the files were just written and not evicted). Read (MB/s) = raw
//     bytes / wall time of one Get of every key in a shuffled order that
//     depends only on --seed; every value is compared with what was
//     written, and a mismatch is an error, not a figure.
//  6. Scan (MB/s) = raw bytes / wall time of one forward scan over every
//     key, after the reads (so with the blocks the reads cached), every
//     key and value checked.
//
// Each timed phase (write, read, scan) repeats its work until it has run
// --min-time (DefaultMinTime, 1 s): a write pass writes every entity into
// a fresh database (removed after), a read pass follows a reopen; each
// figure is per pass. Beside each MB/s, MB/CPU-s divides the same bytes by
// the process's CPU time (user + system, every thread, Pebble's background
// work included) over the passes. A profile may be a whole config file
// (--configs), so that configs differing in more than codecs share one run.
//
// The Go garbage collector runs before each pass. With --repeat N
// each figure is the median of the N runs, taken per column. With
// --baseline each run is repeated on raw Pebble (pebble.Open with
// pebbleconf.Options of the same config: identical options, without
// Strata's wrapping), in the same process, alternating which of the two
// runs first; "X vs Pebble" is the median of the per-run ratios Strata MB/s
// / Pebble MB/s. Both sides compare each value in place, without a copy:
// Strata through engine.DB.View, Pebble before releasing its Get. Pebble's compaction moves a lone table down without
// rewriting it, so its tables may keep the L0 codec; the table notes when
// the two compared different codecs. Each profile's raw-Pebble figures
// follow its row ("raw Pebble: ...", W-Amp left empty: it is Strata's
// accounting).
package tune
