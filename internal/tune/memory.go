package tune

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/stratadb/strata/config"
	"github.com/stratadb/strata/internal/cli"
	"github.com/stratadb/strata/internal/indexmem"
	"github.com/stratadb/strata/internal/procfs"
	"github.com/stratadb/strata/internal/report"
	"github.com/stratadb/strata/mvcc"
	"github.com/stratadb/strata/mvcc/keyindex"
)

// Defaults of the one row of `tune memory --keys/--versions/--key-size`:
// the first row of etcd's storage memory benchmark, for the flags not given.
const (
	DefaultMemoryKeys      = 100_000
	DefaultMemoryVersions  = 1
	DefaultMemoryKeySize   = 64
	DefaultMemoryValueSize = 256
)

// etcd's figures, for comparison.
var (
	// etcdIndexMB is the in-memory index table of etcd's storage memory
	// benchmark: the TotalAlloc delta of building etcd's index, in the
	// benchmark's MB, by {keys, versions, key size}.
	etcdIndexMB = map[[3]int]float64{
		{100_000, 1, 64}: 22, {100_000, 5, 64}: 39, {1_000_000, 1, 64}: 218, {1_000_000, 5, 64}: 432,
		{100_000, 1, 256}: 41, {100_000, 5, 256}: 65, {1_000_000, 1, 256}: 409, {1_000_000, 5, 256}: 506,
	}
	// etcdStoreMB is the overall memory table of etcd's storage memory
	// benchmark: etcd's RSS in the benchmark's MB, by {keys, versions, key size, value size}.
	etcdStoreMB = map[[4]int]float64{
		{100_000, 1, 64, 256}: 40, {100_000, 5, 64, 256}: 89, {1_000_000, 1, 64, 256}: 470, {1_000_000, 5, 64, 256}: 880,
		{100_000, 1, 64, 1024}: 102, {100_000, 5, 64, 1024}: 164, {1_000_000, 1, 64, 1024}: 587, {1_000_000, 5, 64, 1024}: 836,
	}
	// EtcdMemoryFits are etcd's constants: its index measured on this
	// project's machine with indexmem's method, and
	// the averaged pairs published with etcd's storage memory benchmark.
	EtcdMemoryFits = EtcdFits{
		MemoryFits: MemoryFits{
			LiveHeap:   MemoryFit{C1: 113, C2: 28},
			TotalAlloc: MemoryFit{C1: 27, C2: 104},
		},
		Published: MemoryFit{C1: 120, C2: 30},
	}
)

// Strata's goals for the live heap of mvcc's index: a third of etcd's
// per-key overhead and under a third of its per-version cost.
const (
	GoalC1 = 40 // bytes per key beyond the key bytes
	GoalC2 = 8  // bytes per version, pointer included
)

// MemoryFit holds the constants of etcd's model of index memory,
//
//	bytes = N*(c1 + key_size) + N*versions*c2
//
// fitted by least squares over a table's rows (indexmem.FitBytes).
type MemoryFit struct {
	// C1 is the bytes per key beyond its key_size bytes.
	C1 float64 `json:"c1"`
	// C2 is the bytes per version, the version's pointer (revision)
	// included.
	C2 float64 `json:"c2"`
}

// MemoryFits are the fits of the two measures of an index table.
type MemoryFits struct {
	// LiveHeap is fitted to the live heap after GC.
	LiveHeap MemoryFit `json:"live_heap"`
	// TotalAlloc is fitted to the TotalAlloc deltas (etcd's method).
	TotalAlloc MemoryFit `json:"total_alloc"`
}

// EtcdFits are etcd's constants, for comparison.
type EtcdFits struct {
	// MemoryFits are etcd's index measured as memtable measures ours.
	MemoryFits
	// Published is the c1 and c2 of etcd's storage memory benchmark
	// (TotalAlloc, averaged over four pairs of rows); its c2 is stated
	// without size_of_pointer.
	Published MemoryFit `json:"published"`
}

// MemoryOptions configure RunMemory.
type MemoryOptions struct {
	// One, if true, measures the single row Keys x Versions x KeySize (and
	// ValueSize in the store table) instead of etcd's benchmark rows, which
	// then must all be set (ValueSize only with Store).
	One                                bool
	Keys, Versions, KeySize, ValueSize int
	// Index and Store select the tables: the index alone (heap, as the
	// in-memory index table of etcd's storage memory benchmark) and the
	// whole store (process RSS with values on disk, as its overall memory
	// table). At least one.
	Index, Store bool
	// Kind is the index of the index table: indexmem.KindKeyIndex (mvcc's)
	// or indexmem.KindPlain (a google/btree baseline). The default value is
	// indexmem.KindKeyIndex.
	Kind string
	// MemtableSizeMB and BlockCacheSizeMB configure the store rows'
	// engine; 0 means config.Default()'s.
	MemtableSizeMB, BlockCacheSizeMB int64
	// Dir, if set, keeps the store rows' databases in a new directory
	// under Dir; otherwise they go to a temporary directory, each removed
	// after its row.
	Dir string
	// Progress receives progress, one unit per row; nil is silent.
	Progress Progress
	// ChildStderr receives the standard error of the rows' processes; nil
	// discards it.
	ChildStderr io.Writer
	// Run measures one row. The default value is indexmem.RunRowInChild:
	// every row in a fresh process, which requires the binary to call
	// indexmem.ChildMain first thing in main (or TestMain).
	Run func(ctx context.Context, req indexmem.Request, stderr io.Writer) (indexmem.Row, error)

	// The command line of tune memory: addFlags binds them (and the row's
	// sizes, Kind, the engine's sizes and Dir), validateFlags turns them
	// into One, Index and Store.
	global           *globalFlags
	store, indexOnly bool
	fs               *pflag.FlagSet // to tell given flags from defaults
	format           report.Format
}

// Validate checks the options, naming the flag of each bad value, before
// any work starts.
func (o *MemoryOptions) Validate() error {
	var errs []error
	if !o.Index && !o.Store {
		errs = append(errs, errors.New("tune: no table selected: measure the index, the store or both"))
	}
	switch o.Kind {
	case "", indexmem.KindKeyIndex, indexmem.KindPlain:
	default:
		errs = append(errs, fmt.Errorf("--index %q: must be %s or %s", o.Kind, indexmem.KindKeyIndex, indexmem.KindPlain))
	}
	if o.MemtableSizeMB < 0 {
		errs = append(errs, fmt.Errorf("--memtable-size-mb %d: must be >= 0 (0: the default, %d)", o.MemtableSizeMB, config.Default().MemtableSizeMB))
	}
	if o.BlockCacheSizeMB < 0 {
		errs = append(errs, fmt.Errorf("--block-cache-size-mb %d: must be >= 0 (0: the default, %d)", o.BlockCacheSizeMB, config.Default().BlockCacheSizeMB))
	}
	if !o.One {
		return errors.Join(errs...)
	}
	if o.Keys < 1 {
		errs = append(errs, fmt.Errorf("--keys %d: must be >= 1", o.Keys))
	}
	if o.Versions < 1 {
		errs = append(errs, fmt.Errorf("--versions %d: must be >= 1", o.Versions))
	}
	if o.KeySize < 8 || o.KeySize > keyindex.MaxKeySize {
		errs = append(errs, fmt.Errorf("--key-size %d: must be from 8 (so that every key is distinct) to %d, the longest key the index stores", o.KeySize, keyindex.MaxKeySize))
	}
	if o.Store && (o.ValueSize < 1 || o.ValueSize > mvcc.MaxValueSize) {
		errs = append(errs, fmt.Errorf("--value-size %d: must be from 1 to %d, the largest value mvcc stores", o.ValueSize, mvcc.MaxValueSize))
	}
	if len(errs) == 0 {
		errs = append(errs, checkFits(o.Keys, o.Versions, o.KeySize))
	}
	return errors.Join(errs...)
}

// checkFits rejects a row that cannot fit in this machine's memory: the
// harness holds every key and the index another copy, and each version
// takes a revision, so a row needs at least keys*(2*key_size) +
// keys*versions*8 bytes. Without /proc/meminfo it checks nothing.
func checkFits(keys, versions, keySize int) error {
	total, err := procfs.MemTotal()
	if err != nil {
		return nil
	}
	need := float64(keys)*2*float64(keySize) + float64(keys)*float64(versions)*8
	if need <= float64(total) {
		return nil
	}
	return fmt.Errorf("--keys %d --versions %d --key-size %d: needs at least %.1f GB of memory, more than this machine's %.1f GB",
		keys, versions, keySize, need/(1<<30), float64(total)/(1<<30))
}

// MemoryRow is one measured row and etcd's figure for it.
type MemoryRow struct {
	indexmem.Row
	// EtcdMB is etcd's storage memory benchmark's figure for the same row
	// (TotalAlloc for an index row, RSS for a store row) in its MB, or nil
	// if the benchmark has no such row.
	EtcdMB *float64 `json:"etcd_mb,omitempty"`
}

// IndexMemory is the index table: the in-memory index rows of etcd's
// storage memory benchmark.
type IndexMemory struct {
	// Kind is the index measured (indexmem.KindKeyIndex or KindPlain).
	Kind string `json:"kind"`
	// Rows are the rows in the order measured.
	Rows []MemoryRow `json:"rows"`
	// Fit holds the fitted c1 and c2, or nil if the rows do not determine
	// them (fewer than two distinct versions counts).
	Fit *MemoryFits `json:"fit"`
	// Etcd holds etcd's constants for comparison.
	Etcd EtcdFits `json:"etcd"`
}

// StoreMemory is the store table: the overall memory rows of etcd's
// storage memory benchmark.
type StoreMemory struct {
	// Rows are the rows in the order measured, each with RSSBytes.
	Rows []MemoryRow `json:"rows"`
	// MemtableSizeMB and BlockCacheSizeMB are the engine's settings.
	MemtableSizeMB   int64 `json:"memtable_size_mb"`
	BlockCacheSizeMB int64 `json:"block_cache_size_mb"`
	// Dir is where the databases were kept, or "" if they were removed.
	Dir string `json:"dir,omitempty"`
}

// MemoryResult is the outcome of RunMemory: the tables selected.
type MemoryResult struct {
	Index *IndexMemory `json:"index,omitempty"`
	Store *StoreMemory `json:"store,omitempty"`
}

// MemoryRequests returns the rows o selects: first the index rows, then
// the store rows (without their Dir).
func (o *MemoryOptions) MemoryRequests() (index, store []indexmem.Request) {
	kind := o.Kind
	if kind == "" {
		kind = indexmem.KindKeyIndex
	}
	if o.Index {
		if o.One {
			index = []indexmem.Request{{Keys: o.Keys, Versions: o.Versions, KeySize: o.KeySize}}
		} else {
			index = indexmem.SeedIndexRows()
		}
		for i := range index {
			index[i].Kind = kind
		}
	}
	if o.Store {
		if o.One {
			store = []indexmem.Request{{Keys: o.Keys, Versions: o.Versions, KeySize: o.KeySize, ValueSize: o.ValueSize}}
		} else {
			store = indexmem.SeedStoreRows()
		}
		for i := range store {
			store[i].MemtableSizeMB = o.MemtableSizeMB
			store[i].BlockCacheSizeMB = o.BlockCacheSizeMB
		}
	}
	return index, store
}

// RunMemory measures the selected tables, each row by o.Run (by default
// in a fresh process), and fits c1 and c2 to the index rows.
func RunMemory(ctx context.Context, o MemoryOptions) (res *MemoryResult, err error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	run := o.Run
	if run == nil {
		run = indexmem.RunRowInChild
	}
	stderr := o.ChildStderr
	if stderr == nil {
		stderr = io.Discard
	}
	index, store := o.MemoryRequests()
	p := orNop(o.Progress)
	p.Start(int64(len(index) + len(store)))
	total, done := len(index)+len(store), 0
	step := func(table string, r indexmem.Request) string {
		done++
		versions := "versions"
		if r.Versions == 1 {
			versions = "version"
		}
		s := fmt.Sprintf("row %d/%d: %s %s keys x %d %s x %d B keys", done, total, table, countString(r.Keys), r.Versions, versions, r.KeySize)
		if r.ValueSize > 0 {
			s += fmt.Sprintf(", %d B values", r.ValueSize)
		}
		return s
	}
	res = &MemoryResult{}
	if len(index) > 0 {
		im := &IndexMemory{Kind: index[0].Kind, Etcd: EtcdMemoryFits}
		var rows []indexmem.Row
		for _, req := range index {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			p.Describe(step("index", req))
			row, err := run(ctx, req, stderr)
			if err != nil {
				return nil, err
			}
			rows = append(rows, row)
			mr := MemoryRow{Row: row}
			if mb, ok := etcdIndexMB[[3]int{row.Keys, row.Versions, row.KeySize}]; ok {
				mr.EtcdMB = &mb
			}
			im.Rows = append(im.Rows, mr)
			p.Add(1)
		}
		l1, l2 := indexmem.Fit(rows)
		t1, t2 := indexmem.FitTotalAlloc(rows)
		if l1 != 0 || l2 != 0 || t1 != 0 || t2 != 0 {
			im.Fit = &MemoryFits{LiveHeap: MemoryFit{l1, l2}, TotalAlloc: MemoryFit{t1, t2}}
		}
		res.Index = im
	}
	if len(store) > 0 {
		def := config.Default()
		sm := &StoreMemory{MemtableSizeMB: def.MemtableSizeMB, BlockCacheSizeMB: def.BlockCacheSizeMB}
		if o.MemtableSizeMB > 0 {
			sm.MemtableSizeMB = o.MemtableSizeMB
		}
		if o.BlockCacheSizeMB > 0 {
			sm.BlockCacheSizeMB = o.BlockCacheSizeMB
		}
		wd, werr := newWorkDir(o.Dir, "memory")
		if werr != nil {
			return nil, werr
		}
		defer func() {
			if cerr := wd.cleanup(); cerr != nil && err == nil {
				res, err = nil, cerr
			}
		}()
		if wd.keep {
			sm.Dir = wd.path
		}
		for i, req := range store {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			p.Describe(step("store", req))
			req.Dir = filepath.Join(wd.path, fmt.Sprintf("row%d-%dx%dx%d-%d", i+1, req.Keys, req.Versions, req.KeySize, req.ValueSize))
			row, err := run(ctx, req, stderr)
			if err != nil {
				return nil, err
			}
			if err := wd.done(req.Dir); err != nil {
				return nil, err
			}
			mr := MemoryRow{Row: row}
			if mb, ok := etcdStoreMB[[4]int{row.Keys, row.Versions, row.KeySize, row.ValueSize}]; ok {
				mr.EtcdMB = &mb
			}
			sm.Rows = append(sm.Rows, mr)
			p.Add(1)
		}
		res.Store = sm
	}
	return res, nil
}

// countString writes a count as etcd's benchmark does: 100K, 1M; other counts in
// full.
func countString(n int) string {
	switch {
	case n >= 1_000_000 && n%1_000_000 == 0:
		return strconv.Itoa(n/1_000_000) + "M"
	case n >= 1_000 && n%1_000 == 0:
		return strconv.Itoa(n/1_000) + "K"
	}
	return strconv.Itoa(n)
}

// etcdCell is a row's etcd figure for a table: nil (an empty cell) without
// one.
func etcdCell(mb *float64) any {
	if mb == nil {
		return nil
	}
	return *mb
}

// Table returns the index table for text output, the fits in its notes.
func (im *IndexMemory) Table() *report.Table {
	t := &report.Table{Columns: []report.Column{
		{Name: "Keys", Align: report.AlignRight},
		{Name: "Versions"},
		{Name: "Key size", Unit: "B"},
		{Name: "TotalAlloc", Unit: "MB", Format: "%.1f"},
		{Name: "Live heap", Unit: "MB", Format: "%.1f"},
		{Name: "etcd TotalAlloc", Unit: "MB", Format: "%.0f"},
		{Name: "Build", Unit: "s", Format: "%.2f"},
	}}
	for _, r := range im.Rows {
		t.Rows = append(t.Rows, []any{countString(r.Keys), r.Versions, r.KeySize,
			mib(r.TotalAllocBytes), mib(r.LiveHeapBytes), etcdCell(r.EtcdMB), r.BuildSeconds})
	}
	e := im.Etcd
	if im.Fit != nil {
		t.Notes = append(t.Notes,
			fmt.Sprintf("Fit of bytes = N*(c1 + key_size) + N*versions*c2 over these %d rows (least squares; c2 includes the version's pointer):", len(im.Rows)),
			fmt.Sprintf("- live heap:  c1 = %.1f B, c2 = %.1f B. etcd's index on this machine: c1 = %.0f B, c2 + pointer = %.0f B. Strata's goal: c1 <= %d B, c2 + pointer <= %d B.",
				im.Fit.LiveHeap.C1, im.Fit.LiveHeap.C2, e.LiveHeap.C1, e.LiveHeap.C2, GoalC1, GoalC2),
			fmt.Sprintf("- TotalAlloc: c1 = %.1f B, c2 = %.1f B. etcd's index on this machine: c1 = %.0f B, c2 = %.0f B. etcd's published benchmark: c1 = %.0f B, c2 = %.0f B + size_of_pointer.",
				im.Fit.TotalAlloc.C1, im.Fit.TotalAlloc.C2, e.TotalAlloc.C1, e.TotalAlloc.C2, e.Published.C1, e.Published.C2),
		)
	} else {
		t.Notes = append(t.Notes, fmt.Sprintf("No fit of c1 and c2: it needs rows with two different versions counts. For comparison, etcd's index on this machine: live heap c1 = %.0f B, c2 + pointer = %.0f B; TotalAlloc c1 = %.0f B, c2 = %.0f B; etcd's published benchmark c1 = %.0f B, c2 = %.0f B.",
			e.LiveHeap.C1, e.LiveHeap.C2, e.TotalAlloc.C1, e.TotalAlloc.C2, e.Published.C1, e.Published.C2))
	}
	twice := ""
	if im.Kind == indexmem.KindKeyIndex {
		twice = " (and counts the key bytes twice: the harness's []byte per key and the index's arena copy)"
	}
	t.Notes = append(t.Notes,
		fmt.Sprintf("Index: %s. Each row in a fresh process builds one index: N distinct keys of key_size bytes, then versions round-robin passes that put every key once, the main revision a global counter.", indexName(im.Kind)),
		"TotalAlloc: the runtime.MemStats.TotalAlloc delta over the build, etcd's method; it includes garbage"+twice+". Live heap: the HeapAlloc delta after two runtime.GC(), the keys counted as far as the index keeps them.",
		"MB = MiB = 1,048,576 bytes. etcd TotalAlloc: etcd's storage memory benchmark, in-memory index table (etcd 776e9fb on a GCE n1-standard-2), in its own MB.",
	)
	return t
}

// indexName describes an index kind.
func indexName(kind string) string {
	if kind == indexmem.KindPlain {
		return "plain google/btree of {key []byte, revs []int64} (the baseline)"
	}
	return "mvcc's key index (mvcc/keyindex)"
}

// Table returns the store table for text output.
func (sm *StoreMemory) Table() *report.Table {
	t := &report.Table{Columns: []report.Column{
		{Name: "Keys", Align: report.AlignRight},
		{Name: "Versions"},
		{Name: "Key size", Unit: "B"},
		{Name: "Value size", Unit: "B"},
		{Name: "RSS", Unit: "MB", Format: "%.1f"},
		{Name: "Live heap", Unit: "MB", Format: "%.1f"},
		{Name: "etcd RSS", Unit: "MB", Format: "%.0f"},
		{Name: "Build", Unit: "s", Format: "%.1f"},
	}}
	for _, r := range sm.Rows {
		t.Rows = append(t.Rows, []any{countString(r.Keys), r.Versions, r.KeySize, r.ValueSize,
			mib(r.RSSBytes), mib(r.LiveHeapBytes), etcdCell(r.EtcdMB), r.BuildSeconds})
	}
	t.Notes = []string{
		fmt.Sprintf("Each row in a fresh process puts N keys x versions values of value_size random bytes (round-robin, sync off) into an mvcc.Store on an on-disk engine (memtable_size_mb = %d, block_cache_size_mb = %d, other settings the defaults); values are on disk.", sm.MemtableSizeMB, sm.BlockCacheSizeMB),
		"RSS: the process's VmRSS after the puts and two runtime.GC(): the Go runtime, the key index, the engine's memtables and block cache. Live heap: the HeapAlloc delta over the puts, after the GCs.",
		"MB = MiB = 1,048,576 bytes. etcd RSS: etcd's storage memory benchmark, overall memory table (etcd's whole process, etcd 776e9fb on a GCE n1-standard-2), in its own MB.",
	}
	if sm.Dir != "" {
		t.Notes = append(t.Notes, "Databases kept in "+sm.Dir+".")
	}
	return t
}

// machineTable returns every row of both tables as one table for CSV: raw
// bytes, a "table" column saying index or store.
func (res *MemoryResult) machineTable() *report.Table {
	t := &report.Table{Columns: []report.Column{
		{Name: "table"}, {Name: "kind"}, {Name: "keys"}, {Name: "versions"}, {Name: "key_size"}, {Name: "value_size"},
		{Name: "total_alloc_bytes"}, {Name: "live_heap_bytes"}, {Name: "rss_bytes"}, {Name: "build_seconds"}, {Name: "etcd_mb"},
	}}
	add := func(table string, rows []MemoryRow) {
		for _, r := range rows {
			var vs, rss any
			if table == "store" {
				vs, rss = r.ValueSize, r.RSSBytes
			}
			t.Rows = append(t.Rows, []any{table, r.Kind, r.Keys, r.Versions, r.KeySize, vs,
				r.TotalAllocBytes, r.LiveHeapBytes, rss, r.BuildSeconds, etcdCell(r.EtcdMB)})
		}
	}
	if res.Index != nil {
		add("index", res.Index.Rows)
	}
	if res.Store != nil {
		add("store", res.Store.Rows)
	}
	return t
}

// Write writes the result to w in format f. Text formats print each table
// under a title, the index table's notes holding the fits; JSON is one
// object {"index": {"rows", "fit", "etcd"}, "store": {"rows", ...}}; CSV
// is one table of every row (bytes, no fits).
func (res *MemoryResult) Write(w io.Writer, f report.Format) error {
	var b bytes.Buffer
	switch f {
	case report.FormatJSON:
		enc := json.NewEncoder(&b)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false)
		if err := enc.Encode(res); err != nil {
			return err
		}
	case report.FormatCSV:
		if err := res.machineTable().Write(&b, f); err != nil {
			return err
		}
	default:
		if res.Index != nil {
			b.WriteString("Index memory: etcd's in-memory index table, " + indexName(res.Index.Kind) + "\n\n")
			if err := res.Index.Table().Write(&b, f); err != nil {
				return err
			}
		}
		if res.Store != nil {
			if res.Index != nil {
				b.WriteString("\n")
			}
			b.WriteString("Store memory: etcd's overall memory table, whole-process RSS with values on disk\n\n")
			if err := res.Store.Table().Write(&b, f); err != nil {
				return err
			}
		}
	}
	_, err := w.Write(b.Bytes())
	return err
}

// oneRowFlags select one row instead of the rows of etcd's storage memory benchmark.
var oneRowFlags = []string{"keys", "versions", "key-size", "value-size"}

// addFlags registers memory's flags.
func (o *MemoryOptions) addFlags(fs *pflag.FlagSet) {
	o.fs = fs
	fs.IntVar(&o.Keys, "keys", DefaultMemoryKeys, "measure one row of `N` distinct keys instead of etcd's benchmark rows (with --versions, --key-size, --value-size; each defaults to etcd's first row)")
	fs.IntVar(&o.Versions, "versions", DefaultMemoryVersions, "one row: `V` versions of every key, written round-robin")
	fs.IntVar(&o.KeySize, "key-size", DefaultMemoryKeySize, "one row: keys of exactly `BYTES` bytes (8 or more)")
	fs.IntVar(&o.ValueSize, "value-size", DefaultMemoryValueSize, "one row of the store table: values of `BYTES` bytes")
	fs.BoolVar(&o.store, "store", false, "measure only the store table (whole-process RSS with values on disk)")
	fs.BoolVar(&o.indexOnly, "index-only", false, "measure only the index table (no store table after it)")
	fs.StringVar(&o.Kind, "index", indexmem.KindKeyIndex, "`INDEX` of the index table: keyindex (mvcc's) or plain (a google/btree of {key, revs}, the baseline)")
	fs.Int64Var(&o.MemtableSizeMB, "memtable-size-mb", 0, "store table: the engine's memtable_size_mb, `MB` (default: the config's default)")
	fs.Int64Var(&o.BlockCacheSizeMB, "block-cache-size-mb", 0, "store table: the engine's block_cache_size_mb, `MB` (default: the config's default)")
	fs.StringVar(&o.Dir, "dir", "", "keep the store table's databases in a new directory under `DIR` (default: a temporary directory, each removed after its row)")
	formatFlag(fs, &o.format, allFormats...)
}

// validateFlags checks the flags before any work and sets One, Index and
// Store from them.
func (o *MemoryOptions) validateFlags(*cobra.Command, []string) error {
	errs := []error{o.global.progress.Validate()}
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
	o.One = false
	for _, name := range oneRowFlags {
		o.One = o.One || o.fs.Changed(name)
	}
	o.Index, o.Store = !o.store, !o.indexOnly
	if !(o.store && o.indexOnly) { // else no table: said above
		errs = append(errs, o.Validate())
	}
	if o.Dir != "" && !o.indexOnly {
		errs = append(errs, CheckWritableDir(o.Dir))
	}
	return errors.Join(errs...)
}

func newMemoryCommand(g *globalFlags) *cobra.Command {
	o := &MemoryOptions{global: g}
	return cli.Command(&cobra.Command{
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
		Args: cli.Args(),
	}, o.addFlags, o.validateFlags, o.run)
}

// rowProgress is the progress of memory's rows.
type rowProgress interface {
	Progress
	Finish()
	Abort()
}

// progress returns a bar on a terminal (or with --progress always), a line
// per row on any other stderr, nothing with --progress never.
func (o *MemoryOptions) progress(cmd *cobra.Command) rowProgress {
	w := cmd.ErrOrStderr()
	switch {
	case o.global.progress == cli.ProgressNever:
		return NewBar(w, false)
	case o.global.progress == cli.ProgressAlways || cli.IsTerminal(w):
		return NewBar(w, true)
	}
	return NewLines(w)
}

// run measures every row, prints the tables and sums up on stderr.
func (o *MemoryOptions) run(cmd *cobra.Command, _ []string) error {
	began := time.Now()
	p := o.progress(cmd)
	o.Progress, o.ChildStderr = p, cmd.ErrOrStderr()
	res, err := RunMemory(cmd.Context(), *o)
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
