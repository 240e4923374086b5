package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/stratadb/strata/internal/indexmem"
	"github.com/stratadb/strata/internal/report"
	"github.com/stratadb/strata/internal/tune"
)

// memoryOptions are the options of memory.
type memoryOptions struct {
	global                           *globalOptions
	keys, versions, keySize          int
	valueSize                        int
	store, indexOnly                 bool
	kind                             string
	memtableSizeMB, blockCacheSizeMB int64
	dir                              string
	format                           report.Format

	fs     *pflag.FlagSet     // to tell given flags from defaults
	parsed tune.MemoryOptions // set by Validate
}

// oneRowFlags select one row instead of the rows of etcd's storage memory benchmark.
var oneRowFlags = []string{"keys", "versions", "key-size", "value-size"}

// AddFlags registers memory's flags.
func (o *memoryOptions) AddFlags(fs *pflag.FlagSet) {
	o.fs = fs
	fs.IntVar(&o.keys, "keys", tune.DefaultMemoryKeys, "measure one row of `N` distinct keys instead of etcd's benchmark rows (with --versions, --key-size, --value-size; each defaults to etcd's first row)")
	fs.IntVar(&o.versions, "versions", tune.DefaultMemoryVersions, "one row: `V` versions of every key, written round-robin")
	fs.IntVar(&o.keySize, "key-size", tune.DefaultMemoryKeySize, "one row: keys of exactly `BYTES` bytes (8 or more)")
	fs.IntVar(&o.valueSize, "value-size", tune.DefaultMemoryValueSize, "one row of the store table: values of `BYTES` bytes")
	fs.BoolVar(&o.store, "store", false, "measure only the store table (whole-process RSS with values on disk)")
	fs.BoolVar(&o.indexOnly, "index-only", false, "measure only the index table (no store table after it)")
	fs.StringVar(&o.kind, "index", indexmem.KindKeyIndex, "`INDEX` of the index table: keyindex (mvcc's) or plain (a google/btree of {key, revs}, the baseline)")
	fs.Int64Var(&o.memtableSizeMB, "memtable-size-mb", 0, "store table: the engine's memtable_size_mb, `MB` (default: the config's default)")
	fs.Int64Var(&o.blockCacheSizeMB, "block-cache-size-mb", 0, "store table: the engine's block_cache_size_mb, `MB` (default: the config's default)")
	fs.StringVar(&o.dir, "dir", "", "keep the store table's databases in a new directory under `DIR` (default: a temporary directory, each removed after its row)")
	formatFlag(fs, &o.format, allFormats...)
}

// Validate checks the flags before any work.
func (o *memoryOptions) Validate() error {
	errs := []error{o.global.Validate()}
	if o.store && o.indexOnly {
		errs = append(errs, errors.New("--store and --index-only are exclusive: --store measures only the store table, --index-only only the index table"))
	}
	if o.indexOnly {
		for _, name := range []string{"value-size", "memtable-size-mb", "block-cache-size-mb", "dir"} {
			if o.fs.Changed(name) {
				errs = append(errs, fmt.Errorf("--%s applies to the store table, which --index-only leaves out", name))
			}
		}
	}
	if o.store && o.fs.Changed("index") {
		errs = append(errs, errors.New("--index applies to the index table, which --store leaves out"))
	}
	one := false
	for _, name := range oneRowFlags {
		one = one || o.fs.Changed(name)
	}
	o.parsed = tune.MemoryOptions{
		One:              one,
		Keys:             o.keys,
		Versions:         o.versions,
		KeySize:          o.keySize,
		ValueSize:        o.valueSize,
		Index:            !o.store,
		Store:            !o.indexOnly,
		Kind:             o.kind,
		MemtableSizeMB:   o.memtableSizeMB,
		BlockCacheSizeMB: o.blockCacheSizeMB,
		Dir:              o.dir,
	}
	if !(o.store && o.indexOnly) { // else no table: said above
		errs = append(errs, o.parsed.Validate())
	}
	if o.dir != "" && !o.indexOnly {
		errs = append(errs, tune.CheckWritableDir(o.dir))
	}
	return errors.Join(errs...)
}

func newMemoryCommand(g *globalOptions) *cobra.Command {
	o := &memoryOptions{global: g}
	cmd := &cobra.Command{
		Use:   "memory",
		Short: "Measure the memory of the mvcc key index and store (etcd's storage memory tables)",
		Long: `memory reproduces etcd's storage memory benchmark (its two tables),
each row in a fresh process (this binary, re-executed):

  index table  etcd's 8 rows: N 100K and 1M, versions 1 and 5, keys of
               64 and 256 bytes. One row builds one index: N distinct keys,
               then versions round-robin passes that put every key once.
               TotalAlloc is the TotalAlloc delta over the build (etcd's
               method, garbage included), Live heap the HeapAlloc delta
               after two runtime.GC(). Below the table: c1 and c2 of etcd's
               model bytes = N*(c1 + key_size) + N*versions*c2, fitted by
               least squares to each, beside etcd's.
  store table  etcd's 8 rows of 64-byte keys and values of 256 bytes
               and 1 KB, put into an mvcc.Store on disk: the process's RSS.

etcd's published figure is beside each of its rows. --keys, --versions,
--key-size (and --value-size) measure one row instead. Rows of 1M keys take
seconds each; the 1M x 5 x 1 KB store row writes 5 GB. MB = MiB.
--format json gives {"index": {"rows", "fit", "etcd"}, "store": {"rows"}},
each row with keys, versions, key_size, total_alloc_bytes, live_heap_bytes
(and value_size, rss_bytes in the store table); csv gives every row.`,
		Example: `  tune memory                                   # both tables, etcd's rows
  tune memory --index-only --format markdown
  tune memory --store --dir /mnt/nvme/tune
  tune memory --keys 2000000 --versions 3 --key-size 32 --index-only --format json
  tune memory --index plain --index-only      # the google/btree baseline`,
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

// rowProgress is the progress of memory's rows.
type rowProgress interface {
	tune.Progress
	Finish()
	Abort()
}

// progress returns a bar on a terminal (or with --progress always), a line
// per row on any other stderr, nothing with --progress never.
func (o *memoryOptions) progress(cmd *cobra.Command) rowProgress {
	w := cmd.ErrOrStderr()
	switch {
	case o.global.progress == progressNever:
		return tune.NewBar(w, false)
	case o.global.progress == progressAlways || isTerminal(w):
		return tune.NewBar(w, true)
	}
	return tune.NewLines(w)
}

func (o *memoryOptions) run(cmd *cobra.Command) error {
	began := time.Now()
	p := o.progress(cmd)
	opts := o.parsed
	opts.Progress = p
	opts.ChildStderr = cmd.ErrOrStderr()
	res, err := tune.RunMemory(cmd.Context(), opts)
	if err != nil {
		p.Abort()
		return err
	}
	p.Finish()
	if err := res.Write(cmd.OutOrStdout(), o.format); err != nil {
		return err
	}
	rows := 0
	if res.Index != nil {
		rows += len(res.Index.Rows)
	}
	if res.Store != nil {
		rows += len(res.Store.Rows)
	}
	noun := "rows"
	if rows == 1 {
		noun = "row"
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "tune memory: %d %s, each in a fresh process, in %s\n", rows, noun, time.Since(began).Round(100*time.Millisecond))
	return nil
}
