package admin

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/stratadb/strata/engine"
	"github.com/stratadb/strata/internal/cli"
	"github.com/stratadb/strata/internal/workload"
)

// loadOptions are the options of load.
type loadOptions struct {
	global    *globalOptions
	file      string
	batchSize int
	resume    bool
	progress  cli.Progress
	// waitCompactions makes load wait, before it closes the database, for
	// the background compactions to bring L0 below Pebble's threshold.
	waitCompactions bool
}

// AddFlags registers load's flags.
func (o *loadOptions) AddFlags(fs *pflag.FlagSet) {
	fs.IntVar(&o.batchSize, "batch-size", 1000, "commit every `N` entities as one atomic batch")
	fs.BoolVar(&o.resume, "resume", false, "skip the lines already loaded: continue after the last entity:%08d key present")
	cli.AddProgressFlag(fs, &o.progress, "progress bar on stderr, `MODE` auto (when stderr is a terminal and not --verbose), always or never")
	fs.BoolVar(&o.waitCompactions, "wait-compactions", true, "before exiting, wait for the background compactions to bring L0 below Pebble's compaction threshold (false: exit at once and leave the backlog to later opens)")
}

// Validate takes the FILE argument and checks it and the flags.
func (o *loadOptions) Validate(cmd *cobra.Command, args []string) error {
	o.file = args[0]
	var problems []error
	if err := cli.NonEmpty(cmd, "FILE", o.file); err != nil {
		problems = append(problems, err)
	}
	if o.batchSize < 1 {
		problems = append(problems, fmt.Errorf("--batch-size %d: must be >= 1", o.batchSize))
	}
	if err := o.progress.Validate(); err != nil {
		problems = append(problems, err)
	}
	return errors.Join(problems...)
}

func newLoadCommand(g *globalOptions) *cobra.Command {
	o := &loadOptions{global: g}
	return cli.Command(&cobra.Command{
		Use:   "load FILE.jsonl",
		Short: "Load a JSON Lines file, one entity per line",
		Long: `load stores line i of FILE (counted from 0) under the key entity:%08d of i,
the line itself as the value. Every line must be one JSON value.

Lines are written in batches of --batch-size entities, committed atomically in
input order (with sync = true in the configuration each batch is durable
before the next is built). So whatever stops a load, a crash or a bad line,
the entities present are a prefix of the file: a bad line leaves every line
before it loaded, and --resume continues after the last entity present.

A bulk load leaves many tables in L0, and later commands are too short for
a compaction to finish, so before it exits load waits (with progress) until
the background compactions have brought L0 below Pebble's compaction
threshold, then reports how much compaction debt is left, if any.
--wait-compactions=false skips the wait.`,
		Example: `  strata --config strata.toml load entities.jsonl
  strata --db ./data load entities.jsonl --batch-size 5000
  strata --db ./data load entities.jsonl --resume   # after a crash or a fixed line`,
		Args: cli.Args("FILE"),
	}, o.AddFlags, o.Validate, o.run)
}

// loadStats is the outcome of a load.
type loadStats struct {
	skipped int   // lines already present (--resume)
	loaded  int   // entities written
	bytes   int64 // bytes of the values written
	elapsed time.Duration
}

func (o *loadOptions) run(cmd *cobra.Command, _ []string) (err error) {
	f, err := os.Open(o.file)
	if err != nil {
		return err // "open FILE: ..."
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return err
	}
	log := o.global.logger(cmd)
	db, err := o.global.open(log, createIfMissing)
	if err != nil {
		return err
	}
	defer closeDB(db, &err)

	start := 0
	if o.resume {
		if start, err = nextEntity(db); err != nil {
			return err
		}
	}
	size := info.Size()
	if !info.Mode().IsRegular() {
		size = -1 // a pipe: unknown length, the bar becomes a spinner
	}
	bar := o.newBar(cmd.ErrOrStderr(), size)
	st, err := o.load(db, io.TeeReader(f, bar), start, log)
	if err != nil {
		_ = bar.Exit() // keep the bar where the load stopped
		return err
	}
	if err := bar.Finish(); err != nil {
		return err
	}
	out := cmd.OutOrStdout()
	if o.resume {
		if st.skipped == 0 {
			fmt.Fprintln(out, "skipped 0 entities: none was present")
		} else {
			fmt.Fprintf(out, "skipped %d entities already present (%s..%s)\n", st.skipped, workload.Key(0), workload.Key(st.skipped-1))
		}
	}
	if _, err := fmt.Fprintf(out, "loaded %d entities (%.1f MB) in %s: %.1f MB/s\n",
		st.loaded, mib(st.bytes), formatElapsed(st.elapsed), mib(st.bytes)/max(st.elapsed.Seconds(), 1e-9)); err != nil {
		return err
	}
	return o.settle(cmd, db)
}

// settle waits for the compactions (unless --wait-compactions=false) and
// reports the state of L0 and the compaction debt left.
func (o *loadOptions) settle(cmd *cobra.Command, db *engine.DB) error {
	m, err := db.Metrics()
	if err != nil {
		return err
	}
	began, l0Before := time.Now(), m.Levels[0].Tables
	if o.waitCompactions {
		bar := o.newBar(cmd.ErrOrStderr(), -1)
		bar.Describe("compacting")
		m, err = db.WaitForCompactions(cmd.Context(), 100*time.Millisecond, func(m *engine.Metrics) {
			bar.Describe(fmt.Sprintf("compacting: L0 %d tables, %d sublevels; debt %.1f MB", m.Levels[0].Tables, m.Levels[0].Sublevels, mib(int64(m.Compaction.EstimatedDebtBytes))))
			_ = bar.Add(1)
		})
		_ = bar.Finish()
		if err != nil {
			return fmt.Errorf("waiting for compactions: %w", err)
		}
	}
	out := cmd.OutOrStdout()
	debt := mib(int64(m.Compaction.EstimatedDebtBytes))
	if o.waitCompactions {
		_, err = fmt.Fprintf(out, "compactions: L0 from %d to %d tables in %s; compaction debt left %.1f MB\n",
			l0Before, m.Levels[0].Tables, formatElapsed(time.Since(began)), debt)
		return err
	}
	_, err = fmt.Fprintf(out, "compactions not awaited (--wait-compactions=false): L0 holds %d tables (%d sublevels); compaction debt left %.1f MB for later opens\n",
		m.Levels[0].Tables, m.Levels[0].Sublevels, debt)
	return err
}

// load writes the lines of r from line start on in batches and returns what
// it did. On a bad line it commits the lines before it, so the entities
// present stay a prefix of the input, and returns the line's error.
func (o *loadOptions) load(db *engine.DB, r io.Reader, start int, log engine.Logger) (st loadStats, err error) {
	began := time.Now()
	b := db.NewBatch()
	defer func() { _ = b.Close() }() // b is always the current, uncommitted batch
	first := start                   // first entity of b
	var pendingBytes int64
	commit := func(next int) error {
		if b.Empty() {
			return nil
		}
		if err := b.Commit(); err != nil {
			return fmt.Errorf("commit of %s..%s: %w", workload.Key(first), workload.Key(next-1), err)
		}
		if log != nil {
			log.Infof("load: committed %s..%s", workload.Key(first), workload.Key(next-1))
		}
		st.loaded += next - first
		st.bytes += pendingBytes
		_ = b.Close()
		b, first, pendingBytes = db.NewBatch(), next, 0
		return nil
	}

	var fnErr error // an error of ours, as opposed to one of the input
	n, err := workload.ReadJSONL(r, func(i int, line []byte) error {
		if i < start {
			return nil
		}
		if fnErr = b.Put(workload.Key(i), line); fnErr != nil {
			return fnErr
		}
		pendingBytes += int64(len(line))
		if int(b.Count()) >= o.batchSize {
			fnErr = commit(i + 1)
		}
		return fnErr
	})
	st.skipped = min(start, n)
	st.elapsed = time.Since(began)
	switch {
	case fnErr != nil:
		return st, fmt.Errorf("load %s: %w", o.file, fnErr)
	case errors.Is(err, workload.ErrNoEntities):
		return st, fmt.Errorf("load %s: %w", o.file, err)
	case err != nil:
		// The lines before the bad one are valid: keep them, so that a rerun
		// with --resume after fixing the line continues there.
		if cerr := commit(n); cerr != nil {
			return st, fmt.Errorf("load %s: %w", o.file, errors.Join(err, cerr))
		}
		if n == 0 {
			return st, fmt.Errorf("load %s: %w", o.file, err)
		}
		return st, fmt.Errorf("load %s: %w (the %d lines before it are loaded; fix the line and rerun with --resume)",
			o.file, err, n)
	}
	if err := commit(n); err != nil {
		return st, fmt.Errorf("load %s: %w", o.file, err)
	}
	st.elapsed = time.Since(began)
	if start > n {
		return st, fmt.Errorf("load %s --resume: the database holds entities up to %s but the file has only %d lines: is it the same file?",
			o.file, workload.Key(start-1), n)
	}
	return st, nil
}

// nextEntity returns the index after the last entity key present: 0 for
// none. Keys in the entity range that are not workload.Key's form are an
// error, since resuming after them would be a guess.
func nextEntity(db *engine.DB) (int, error) {
	prefix := []byte("entity:")
	it, err := db.NewIter(&engine.IterOptions{LowerBound: prefix, UpperBound: prefixEnd(prefix)})
	if err != nil {
		return 0, err
	}
	defer it.Close()
	if !it.Last() {
		return 0, it.Error()
	}
	key := it.Key()
	i, err := strconv.Atoi(string(key[len(prefix):]))
	if err != nil || i < 0 || !bytes.Equal(workload.Key(i), key) {
		return 0, fmt.Errorf("--resume: the last entity key %q is not of the form entity:%%08d", key)
	}
	return i + 1, nil
}

// newBar returns the load's progress bar over size bytes of input (-1:
// unknown).
func (o *loadOptions) newBar(w io.Writer, size int64) *progressbar.ProgressBar {
	return newByteBar(w, size, "loading", o.progress, o.global.verbose)
}

// newByteBar returns a progress bar over size bytes (-1: unknown) with
// description, writing to w, invisible unless mode says so or w is a
// terminal (and --verbose is not interleaving log lines): the bar of the
// commands that read a file (load, restore).
func newByteBar(w io.Writer, size int64, description string, mode cli.Progress, verbose bool) *progressbar.ProgressBar {
	visible := mode == cli.ProgressAlways || (!verbose && mode.Visible(w))
	opts := []progressbar.Option{
		progressbar.OptionSetWriter(w),
		progressbar.OptionSetVisibility(visible),
		progressbar.OptionSetDescription(description),
		progressbar.OptionShowBytes(true),
		progressbar.OptionSetWidth(30),
		progressbar.OptionThrottle(100 * time.Millisecond),
	}
	if visible {
		// End the bar's line, so what follows starts on a fresh one.
		opts = append(opts, progressbar.OptionOnCompletion(func() { fmt.Fprintln(w) }))
	}
	return progressbar.NewOptions64(size, opts...)
}

func mib(n int64) float64 { return float64(n) / (1 << 20) }

// formatElapsed prints d as 1.2s, or 34ms below a second.
func formatElapsed(d time.Duration) string {
	if d < time.Second {
		return d.Round(time.Millisecond).String()
	}
	return fmt.Sprintf("%.1fs", d.Seconds())
}
