package tune

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/stratadb/strata/config"
	"github.com/stratadb/strata/engine"
	"github.com/stratadb/strata/internal/cli"
	"github.com/stratadb/strata/internal/report"
)

// DefaultProbe is the default number of point reads of present keys, and
// of absent keys, doctor's probe makes.
const DefaultProbe = 2000

// DoctorLoadBatch is the number of entities per batch of doctor's --input
// load (as `strata load`'s default).
const DoctorLoadBatch = 1000

// The thresholds of doctor's findings.
const (
	// FilterUsefulnessMin is the share of absent-key reads the bloom filters
	// must answer without a data block: 10 bits per key give about 99%.
	FilterUsefulnessMin = 0.90
	// CacheHitRateMin is the block cache hit rate of the probe's reads
	// below which a full cache is too small.
	CacheHitRateMin = 0.80
	// CacheFullShare is the share of its capacity a cache must use to count
	// as full: below it, misses are first reads, not evictions.
	CacheFullShare = 0.90
	// MissesPerGetHigh is the block cache misses per present-key read above
	// which point lookups are slow: more than the one data block a read of
	// a single table needs.
	MissesPerGetHigh = 1.5
	// L0TablesHigh is the number of L0 tables from which compactions are
	// behind: twice Pebble's L0CompactionThreshold of 4 (writes stop at 12).
	L0TablesHigh = 8
)

// DoctorOptions configure RunDoctor.
type DoctorOptions struct {
	// Config is the database's config; db_path is the database. Required.
	Config *config.Config
	// Input, if set, is loaded into the database first, in batches of
	// DoctorLoadBatch, counting the stalls during the load.
	Input *Dataset
	// Probe is the number of present-key reads and of absent-key reads; 0
	// means DefaultProbe.
	Probe int
	// Seed chooses the sampled keys.
	Seed int64
	// Progress receives the load's progress; nil is silent.
	Progress Progress

	// The command line of tune doctor: addFlags binds them (and Probe and
	// Seed); run loads Config and Input from them.
	global     *globalFlags
	configPath string
	dbDir      string
	input      string
	format     report.Format
}

// Finding is one problem doctor found: the figure behind it, the config key
// to change and the value to try.
type Finding struct {
	// Finding says what is wrong ("slow point lookups: ...").
	Finding string `json:"finding"`
	// Figure is the measured figure behind it.
	Figure string `json:"figure"`
	// Key is the config key to change.
	Key string `json:"key"`
	// Try is the value to try (or the command to run).
	Try string `json:"try"`
}

// LoadFigures describe doctor's --input load.
type LoadFigures struct {
	// Entities and Bytes (keys plus values) are what was loaded.
	Entities int   `json:"entities"`
	Bytes    int64 `json:"bytes"`
	// Seconds is the load's wall time; MBps is Bytes / Seconds in MiB/s.
	Seconds float64 `json:"seconds"`
	MBps    float64 `json:"mb_s"`
	// Stalls and StallSeconds count the write stalls during the load.
	Stalls       int64   `json:"stalls"`
	StallSeconds float64 `json:"stall_seconds"`
}

// ProbeFigures describe one half of the probe: reads of present or of
// absent keys.
type ProbeFigures struct {
	// Reads is the number of reads counted.
	Reads int `json:"reads"`
	// MicrosPerRead is the mean wall time of a read in µs.
	MicrosPerRead float64 `json:"micros_per_read"`
	// BlocksPerRead and MissesPerRead are block cache accesses and misses
	// per read.
	BlocksPerRead float64 `json:"blocks_per_read"`
	MissesPerRead float64 `json:"misses_per_read"`
	// FilterChecks is the number of bloom filter checks;
	// FilterUsefulness the share that answered "absent".
	FilterChecks     int64   `json:"filter_checks"`
	FilterUsefulness float64 `json:"filter_usefulness"`
}

// DoctorFigures are every figure doctor checked.
type DoctorFigures struct {
	// Load describes the --input load; nil without one.
	Load *LoadFigures `json:"load,omitempty"`
	// Present and Absent describe the probe's reads of present keys and of
	// absent keys next to them.
	Present ProbeFigures `json:"present"`
	Absent  ProbeFigures `json:"absent"`
	// CacheHitRate is the block cache hit rate of the probe's reads;
	// CacheUsedBytes and CacheCapacityBytes the cache's use after them.
	CacheHitRate       float64 `json:"cache_hit_rate"`
	CacheUsedBytes     int64   `json:"cache_used_bytes"`
	CacheCapacityBytes int64   `json:"cache_capacity_bytes"`
	// Stalls and StallSeconds count the write stalls since the open.
	Stalls       int64   `json:"stalls"`
	StallSeconds float64 `json:"stall_seconds"`
	// CompactionDebtBytes is Pebble's estimate of the bytes still to
	// compact; L0Tables the tables in L0, Tables those of every level.
	CompactionDebtBytes uint64 `json:"compaction_debt_bytes"`
	L0Tables            int64  `json:"l0_tables"`
	Tables              int64  `json:"tables"`
	// UpperTables counts the tables in L0-L5, whose bloom filters every Get
	// consults; Strata's Get consults those of L6 too unless
	// optimize_filters_for_hits; FilterTables counts the tables whose
	// filters Get consults.
	UpperTables  int64 `json:"upper_tables"`
	FilterTables int64 `json:"filter_tables"`
	// MismatchedTables counts tables whose codec is not their level's.
	MismatchedTables int `json:"mismatched_tables"`
	// BloomBitsPerKey, BlockCacheSizeMB, MemtableSizeMB and
	// MaxBackgroundJobs are the settings the findings are about.
	BloomBitsPerKey   int   `json:"bloom_bits_per_key"`
	BlockCacheSizeMB  int64 `json:"block_cache_size_mb"`
	MemtableSizeMB    int64 `json:"memtable_size_mb"`
	MaxBackgroundJobs int   `json:"max_background_jobs"`
}

// DoctorReport is the outcome of RunDoctor.
type DoctorReport struct {
	// DBPath is the database diagnosed.
	DBPath string `json:"db_path"`
	// Findings are the problems found; empty (not nil) for none.
	Findings []Finding `json:"findings"`
	// Figures are every figure checked.
	Figures DoctorFigures `json:"figures"`
	// NotApplicable lists the settings without (full) effect on Pebble, as
	// "key = value: reason".
	NotApplicable []string `json:"not_applicable"`
}

// Validate checks the options.
func (o *DoctorOptions) Validate() error {
	var errs []error
	if o.Config == nil {
		errs = append(errs, errors.New("tune: doctor needs a config"))
	} else if err := o.Config.Validate(); err != nil {
		errs = append(errs, err)
	}
	if o.Probe < 0 {
		errs = append(errs, fmt.Errorf("--probe %d: must be >= 1", o.Probe))
	}
	return errors.Join(errs...)
}

// IsDatabase reports whether dir holds a Strata or Pebble database (an
// OPTIONS file of either).
func IsDatabase(dir string) bool {
	_, err := ReadDBOptions(dir)
	return err == nil
}

// DBConfig returns the config of the database in dir without opening it:
// the one Strata recorded in dir's OPTIONS-rocksdb at the last open (with
// db_path = dir), or config.Default() with db_path = dir when there is
// none. found reports whether the file was there. It is
// config.RecordedConfig, the reader the engine and the admin tool share.
func DBConfig(dir string) (cfg *config.Config, found bool, err error) {
	return config.RecordedConfig(dir)
}

// RunDoctor opens the database (read-only unless Input is given), loads Input if given, probes it with point
// reads of sampled present keys (one full scan samples them) and of absent
// keys next to them, reads its metrics and turns the troubleshooting section
// of the THEMIS RocksDB tuning guide into findings. The database is closed before it returns.
func RunDoctor(ctx context.Context, o DoctorOptions) (rep *DoctorReport, err error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	probe := o.Probe
	if probe == 0 {
		probe = DefaultProbe
	}
	cfg := o.Config
	// Diagnosing an existing database changes nothing on disk (no OPTIONS
	// rewrite with the flags' config, no compaction): only a run that
	// loads Input writes.
	db, err := engine.Open(cfg, engine.Options{ReadOnly: o.Input == nil})
	if err != nil {
		return nil, err
	}
	defer func() {
		if cerr := db.Close(); err == nil && cerr != nil {
			err = cerr
		}
	}()
	rep = &DoctorReport{DBPath: cfg.DBPath, Findings: []Finding{}}
	fig := &rep.Figures
	fig.BloomBitsPerKey, fig.BlockCacheSizeMB, fig.MemtableSizeMB, fig.MaxBackgroundJobs =
		cfg.BloomBitsPerKey, cfg.BlockCacheSizeMB, cfg.MemtableSizeMB, cfg.MaxBackgroundJobs

	if o.Input != nil {
		if fig.Load, err = doctorLoad(ctx, db, o.Input, orNop(o.Progress)); err != nil {
			return nil, err
		}
	}

	keys, err := sampleKeys(db, probe, o.Seed)
	if err != nil {
		return nil, err
	}
	before, err := db.Metrics()
	if err != nil {
		return nil, err
	}
	if fig.Present, err = probeReads(ctx, db, keys, true); err != nil {
		return nil, err
	}
	mid, err := db.Metrics()
	if err != nil {
		return nil, err
	}
	fig.Present.addMetrics(before, mid)
	absent := make([][]byte, len(keys))
	for i, k := range keys {
		absent[i] = append(bytes.Clone(k), 0)
	}
	if fig.Absent, err = probeReads(ctx, db, absent, false); err != nil {
		return nil, err
	}
	m, err := db.Metrics()
	if err != nil {
		return nil, err
	}
	fig.Absent.addMetrics(mid, m)
	if n := (m.BlockCache.Hits - before.BlockCache.Hits) + (m.BlockCache.Misses - before.BlockCache.Misses); n > 0 {
		fig.CacheHitRate = float64(m.BlockCache.Hits-before.BlockCache.Hits) / float64(n)
	}
	// The room blocks have now: the cache less what memtables reserve in it.
	fig.CacheUsedBytes, fig.CacheCapacityBytes = m.BlockCache.UsedBytes, m.BlockCache.CapacityBytes-m.BlockCache.MemTableReservedBytes
	fig.Stalls, fig.StallSeconds = m.Stalls.Count, m.Stalls.Total.Seconds()
	fig.CompactionDebtBytes = m.Compaction.EstimatedDebtBytes
	fig.L0Tables = m.Levels[0].Tables
	for _, lm := range m.Levels {
		fig.Tables += lm.Tables
	}
	fig.UpperTables = fig.Tables - m.Levels[engine.NumLevels-1].Tables
	fig.FilterTables = filterTables(cfg, fig)
	for _, n := range m.NotApplicable {
		rep.NotApplicable = append(rep.NotApplicable, n.String())
	}
	rep.Findings = findings(cfg, m, fig)
	return rep, nil
}

// doctorLoad writes data in batches of DoctorLoadBatch and returns the
// load's figures, stalls included.
func doctorLoad(ctx context.Context, db *engine.DB, d *Dataset, p Progress) (*LoadFigures, error) {
	before, err := db.Metrics()
	if err != nil {
		return nil, err
	}
	p.Start(int64(d.Len()))
	p.Describe("loading")
	began := time.Now()
	for lo := 0; lo < d.Len(); lo += DoctorLoadBatch {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		hi := min(lo+DoctorLoadBatch, d.Len())
		b := db.NewBatch()
		for i := lo; i < hi; i++ {
			if err := b.Put(d.Keys[i], d.Values[i]); err != nil {
				_ = b.Close()
				return nil, err
			}
		}
		err := b.Commit()
		_ = b.Close()
		if err != nil {
			return nil, fmt.Errorf("load %s..%s: %w", d.Keys[lo], d.Keys[hi-1], err)
		}
		p.Add(int64(hi - lo))
	}
	elapsed := time.Since(began).Seconds()
	after, err := db.Metrics()
	if err != nil {
		return nil, err
	}
	raw := d.RawBytes()
	return &LoadFigures{
		Entities: d.Len(), Bytes: raw, Seconds: elapsed, MBps: mibPerSec(raw, elapsed),
		Stalls:       after.Stalls.Count - before.Stalls.Count,
		StallSeconds: (after.Stalls.Total - before.Stalls.Total).Seconds(),
	}, nil
}

// sampleKeys returns up to n keys chosen uniformly by reservoir sampling
// over one full scan, in a random order.
func sampleKeys(db *engine.DB, n int, seed int64) ([][]byte, error) {
	r := rand.New(rand.NewPCG(uint64(seed), 0x646f63)) // "doc"
	it, err := db.NewIter(nil)
	if err != nil {
		return nil, err
	}
	var keys [][]byte
	seen := 0
	for valid := it.First(); valid; valid = it.Next() {
		seen++
		if len(keys) < n {
			keys = append(keys, bytes.Clone(it.Key()))
		} else if j := r.IntN(seen); j < n {
			keys[j] = bytes.Clone(it.Key())
		}
	}
	if err := it.Close(); err != nil {
		return nil, err
	}
	r.Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
	return keys, nil
}

// probeReads reads every key and times the reads. Present keys must be
// found; an absent key that exists is not counted.
func probeReads(ctx context.Context, db *engine.DB, keys [][]byte, present bool) (ProbeFigures, error) {
	var f ProbeFigures
	began := time.Now()
	for _, k := range keys {
		if err := ctx.Err(); err != nil {
			return f, err
		}
		_, err := db.Get(k)
		switch {
		case err == nil && !present:
			continue // a key next to a sampled one happens to exist
		case errors.Is(err, engine.ErrNotFound) && present:
			return f, fmt.Errorf("probe: key %q, seen by the scan, is gone", k)
		case err != nil && !errors.Is(err, engine.ErrNotFound):
			return f, fmt.Errorf("probe: read %q: %w", k, err)
		}
		f.Reads++
	}
	if f.Reads > 0 {
		f.MicrosPerRead = float64(time.Since(began).Microseconds()) / float64(f.Reads)
	}
	return f, nil
}

// addMetrics sets the per-read cache and filter figures from the metrics
// before and after the reads.
func (f *ProbeFigures) addMetrics(before, after *engine.Metrics) {
	if f.Reads == 0 {
		return
	}
	hits := after.BlockCache.Hits - before.BlockCache.Hits
	misses := after.BlockCache.Misses - before.BlockCache.Misses
	f.BlocksPerRead = float64(hits+misses) / float64(f.Reads)
	f.MissesPerRead = float64(misses) / float64(f.Reads)
	fh := after.Filter.Hits - before.Filter.Hits
	fm := after.Filter.Misses - before.Filter.Misses
	f.FilterChecks = fh + fm
	if f.FilterChecks > 0 {
		f.FilterUsefulness = float64(fh) / float64(f.FilterChecks)
	}
}

// findings turns the THEMIS RocksDB tuning guide's troubleshooting section
// into findings:
//
//  1. slow point lookups, while tables sit where Get consults filters
//     (L0-L5, and L6 unless optimize_filters_for_hits; see filterTables):
//     bloom_bits_per_key = 0 while
//     absent-key reads read data blocks, or filters that let more than 10%
//     of absent keys through, or more than MissesPerGetHigh cache misses per
//     read without filters -> bloom_bits_per_key 10 (or 16 when already on);
//  2. stalls, compaction debt above max_bytes_for_level_base_mb or
//     L0TablesHigh L0 tables -> max_background_jobs x2 (and direct I/O for
//     flushes and compactions once Strata delivers it);
//  3. a full cache with a hit rate below CacheHitRateMin, or above
//     MissesPerGetHigh misses per read with filters on -> block_cache_size_mb
//     x2, or memtable_size_mb / 2 if memory is short;
//  4. tables whose codec is not their level's -> a full compaction;
//  5. optimize_filters_for_hits = true while reads of absent keys read L6
//     data blocks (at least half a block per read, no filter answering)
//     -> optimize_filters_for_hits = false.
func findings(cfg *config.Config, m *engine.Metrics, f *DoctorFigures) []Finding {
	out := []Finding{}
	bits := cfg.BloomBitsPerKey
	cacheFull := f.CacheCapacityBytes > 0 && float64(f.CacheUsedBytes) >= CacheFullShare*float64(f.CacheCapacityBytes)

	// 1. Slow point lookups. Filters only help on the tables whose filters
	// Get consults.
	upper := filterTables(cfg, f)
	switch {
	case upper == 0:
		// Every table is in L6 and its filters are skipped: no bloom
		// setting changes a read (finding 5 covers it).
	case bits == 0 && f.Absent.Reads > 0 && f.Absent.BlocksPerRead >= 0.5:
		out = append(out, Finding{
			Finding: "slow point lookups: no bloom filters, so every read of an absent key reads a data block",
			Figure: fmt.Sprintf("bloom_bits_per_key = 0; %d absent-key reads: %.2f blocks and %.1f µs per read; %d of %d tables in L0-L5",
				f.Absent.Reads, f.Absent.BlocksPerRead, f.Absent.MicrosPerRead, upper, f.Tables),
			Key: "bloom_bits_per_key", Try: "10",
		})
	case bits == 0 && f.Present.Reads > 0 && f.Present.MissesPerRead > MissesPerGetHigh:
		out = append(out, Finding{
			Finding: "slow point lookups: without bloom filters a read visits every table that may hold the key",
			Figure:  fmt.Sprintf("bloom_bits_per_key = 0; %.2f block cache misses per present-key read", f.Present.MissesPerRead),
			Key:     "bloom_bits_per_key", Try: "10",
		})
	case bits > 0 && f.Absent.FilterChecks > 0 && f.Absent.FilterUsefulness < FilterUsefulnessMin:
		out = append(out, Finding{
			Finding: "slow point lookups: the bloom filters let many absent keys through",
			Figure: fmt.Sprintf("bloom_bits_per_key = %d; filters answered %.1f%% of %d checks for absent keys (want >= %.0f%%)",
				bits, 100*f.Absent.FilterUsefulness, f.Absent.FilterChecks, 100*FilterUsefulnessMin),
			Key: "bloom_bits_per_key", Try: fmt.Sprint(moreBloomBits(bits)),
		})
	}

	// 2. Stalls and compaction debt.
	baseBytes := uint64(cfg.MaxBytesForLevelBaseMB) << 20
	if f.Stalls > 0 || f.CompactionDebtBytes > baseBytes || f.L0Tables >= L0TablesHigh {
		var why []string
		if f.Stalls > 0 {
			why = append(why, fmt.Sprintf("%d write stalls (%.2f s)", f.Stalls, f.StallSeconds))
		}
		if f.CompactionDebtBytes > baseBytes {
			why = append(why, fmt.Sprintf("compaction debt %.1f MB > max_bytes_for_level_base_mb = %d", mib(int64(f.CompactionDebtBytes)), cfg.MaxBytesForLevelBaseMB))
		}
		if f.L0Tables >= L0TablesHigh {
			why = append(why, fmt.Sprintf("%d L0 tables (>= %d)", f.L0Tables, L0TablesHigh))
		}
		try := fmt.Sprint(min(2*cfg.MaxBackgroundJobs, 256))
		if !cfg.UseDirectIOForFlushAndCompaction {
			try += "; also try use_direct_io_for_flush_and_compaction = true"
		}
		out = append(out, Finding{
			Finding: "flushes and compactions fall behind the writes",
			Figure:  strings.Join(why, "; "),
			Key:     "max_background_jobs", Try: try,
		})
	}

	// 3. Block cache.
	lowHits := f.CacheHitRate < CacheHitRateMin && f.Present.Reads+f.Absent.Reads > 0
	manyMisses := bits > 0 && f.Present.MissesPerRead > MissesPerGetHigh
	if cacheFull && (lowHits || manyMisses) {
		out = append(out, Finding{
			Finding: "the block cache is full and too small for the reads",
			Figure: fmt.Sprintf("hit rate %.1f%% over the probe (want >= %.0f%%), %.2f misses per present-key read; cache %.1f of %d MB used",
				100*f.CacheHitRate, 100*CacheHitRateMin, f.Present.MissesPerRead, mib(f.CacheUsedBytes), cfg.BlockCacheSizeMB),
			Key: "block_cache_size_mb",
			Try: fmt.Sprintf("%d (if memory is short: memtable_size_mb = %d, to give its memory to the cache)", 2*max(cfg.BlockCacheSizeMB, 1), max(cfg.MemtableSizeMB/2, 1)),
		})
	}

	// 4. Tables that kept another codec.
	for l, lm := range m.Levels {
		var other []string
		n := 0
		for codec, count := range lm.TableCodecs {
			if codec != lm.StoredCodec {
				other = append(other, fmt.Sprintf("%d %s", count, codec))
				n += count
			}
		}
		if n == 0 {
			continue
		}
		f.MismatchedTables += n
		sort.Strings(other)
		key := "compression_default"
		if l == engine.NumLevels-1 {
			key = "compression_bottommost"
		}
		out = append(out, Finding{
			Finding: fmt.Sprintf("L%d tables carry another codec than their level's", l),
			Figure:  fmt.Sprintf("L%d: %s of %d tables; the level's codec is %s (stored as %s)", l, strings.Join(other, ", "), lm.Tables, lm.Codec, lm.StoredCodec),
			Key:     key,
			Try:     fmt.Sprintf("keep %s = %q and run a full compaction: strata --config FILE compact", key, lm.Codec),
		})
	}
	// 5. Absent keys that read L6 data blocks because its filters are
	// skipped.
	if l6 := f.Tables - f.UpperTables; cfg.OptimizeFiltersForHits && bits > 0 && l6 > 0 && f.Absent.Reads > 0 && f.Absent.BlocksPerRead >= 0.5 {
		out = append(out, Finding{
			Finding: "reads of absent keys read L6 data blocks: optimize_filters_for_hits = true skips the bottommost bloom filters",
			Figure: fmt.Sprintf("optimize_filters_for_hits = true; %d absent-key reads: %.2f blocks, %.2f cache misses and %.1f µs per read, %d filter checks; %d of %d tables in L6",
				f.Absent.Reads, f.Absent.BlocksPerRead, f.Absent.MissesPerRead, f.Absent.MicrosPerRead, f.Absent.FilterChecks, l6, f.Tables),
			Key: "optimize_filters_for_hits", Try: "false (unless nearly every key read exists)",
		})
	}
	return out
}

// filterTables returns the number of tables whose bloom filters Strata's Get
// consults: those in L0-L5, and those in L6 unless optimize_filters_for_hits.
func filterTables(cfg *config.Config, f *DoctorFigures) int64 {
	if cfg.OptimizeFiltersForHits {
		return f.UpperTables
	}
	return f.Tables
}

// moreBloomBits returns the bloom bits to try after bits: 16, or 6 more
// when already at 16 or above (at most 64).
func moreBloomBits(bits int) int {
	if bits < 16 {
		return 16
	}
	return min(bits+6, 64)
}

// checked returns the figures doctor checked, one line each.
func (r *DoctorReport) checked() []string {
	f := r.Figures
	var lines []string
	if f.Load != nil {
		lines = append(lines, fmt.Sprintf("load: %d entities, %.1f MB in %.2f s (%.1f MB/s), %d stalls (%.2f s)",
			f.Load.Entities, mib(f.Load.Bytes), f.Load.Seconds, f.Load.MBps, f.Load.Stalls, f.Load.StallSeconds))
	}
	lines = append(lines,
		fmt.Sprintf("present-key reads: %d, %.1f µs, %.2f blocks and %.2f cache misses per read", f.Present.Reads, f.Present.MicrosPerRead, f.Present.BlocksPerRead, f.Present.MissesPerRead),
		fmt.Sprintf("absent-key reads: %d, %.1f µs, %.2f blocks per read; bloom_bits_per_key = %d, filters answered %.1f%% of %d checks", f.Absent.Reads, f.Absent.MicrosPerRead, f.Absent.BlocksPerRead, f.BloomBitsPerKey, 100*f.Absent.FilterUsefulness, f.Absent.FilterChecks),
		fmt.Sprintf("tables whose bloom filters reads consult: %d of %d (L0-L5: %d; L6 only with optimize_filters_for_hits = false)", f.FilterTables, f.Tables, f.UpperTables),
		fmt.Sprintf("block cache: hit rate %.1f%% over the probe, %.1f of %d MB used", 100*f.CacheHitRate, mib(f.CacheUsedBytes), f.BlockCacheSizeMB),
		fmt.Sprintf("stalls since open: %d (%.2f s); compaction debt %.1f MB; %d L0 tables of %d; max_background_jobs = %d", f.Stalls, f.StallSeconds, mib(int64(f.CompactionDebtBytes)), f.L0Tables, f.Tables, f.MaxBackgroundJobs),
		fmt.Sprintf("tables with another codec than their level's: %d", f.MismatchedTables),
	)
	return lines
}

// Table returns the findings as a report.Table (Finding, Figure, Key, Try)
// with the figures checked and the settings without effect as notes.
func (r *DoctorReport) Table() *report.Table {
	t := &report.Table{Columns: []report.Column{{Name: "Finding"}, {Name: "Figure"}, {Name: "Key"}, {Name: "Try"}}}
	for _, f := range r.Findings {
		t.Rows = append(t.Rows, []any{f.Finding, f.Figure, f.Key, f.Try})
	}
	t.Notes = append(t.Notes, "Checked ("+r.DBPath+"; MB = MiB):")
	for _, l := range r.checked() {
		t.Notes = append(t.Notes, "  "+l)
	}
	if len(r.NotApplicable) > 0 {
		t.Notes = append(t.Notes, "Settings without effect on Pebble:")
		for _, n := range r.NotApplicable {
			t.Notes = append(t.Notes, "  "+n)
		}
	}
	return t
}

// Write writes the report in format f: the findings table (or "no
// findings") with the figures checked, or with FormatJSON the whole report
// as one JSON object.
func (r *DoctorReport) Write(w io.Writer, f report.Format) error {
	var b bytes.Buffer
	switch {
	case f == report.FormatJSON:
		enc := json.NewEncoder(&b)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false)
		if err := enc.Encode(r); err != nil {
			return err
		}
	case len(r.Findings) == 0 && (f == report.FormatTable || f == report.FormatMarkdown):
		b.WriteString("no findings\n\n")
		for _, n := range r.Table().Notes {
			b.WriteString(n + "\n")
		}
	default:
		if err := r.Table().Write(&b, f); err != nil {
			return err
		}
	}
	_, err := w.Write(b.Bytes())
	return err
}

// addFlags registers doctor's flags.
func (o *DoctorOptions) addFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.configPath, "config", "", "the database's config `FILE`; its db_path is the database")
	fs.StringVar(&o.dbDir, "db", "", "the database `DIR`, opened with the config recorded in its OPTIONS-rocksdb (or overriding db_path of --config)")
	fs.StringVar(&o.input, "input", "", "load the JSON Lines `FILE` first (key entity:%08d of the line number from 0), counting stalls")
	fs.IntVar(&o.Probe, "probe", DefaultProbe, "probe with `N` reads of present keys and N reads of absent keys")
	fs.Int64Var(&o.Seed, "seed", 1, "`SEED` of the sampled keys")
	formatFlag(fs, &o.format, report.FormatTable, report.FormatMarkdown, report.FormatJSON)
}

// validateFlags checks the flags.
func (o *DoctorOptions) validateFlags(*cobra.Command, []string) error {
	errs := []error{o.global.progress.Validate(), checkFormat(o.format, report.FormatTable, report.FormatMarkdown, report.FormatJSON)}
	if o.configPath == "" && o.dbDir == "" {
		errs = append(errs, errors.New("need --config FILE or --db DIR"))
	}
	if o.Probe < 1 {
		errs = append(errs, fmt.Errorf("--probe %d: must be >= 1", o.Probe))
	}
	return errors.Join(errs...)
}

func newDoctorCommand(g *globalFlags) *cobra.Command {
	o := &DoctorOptions{global: g}
	return cli.Command(&cobra.Command{
		Use:   "doctor",
		Short: "Diagnose a database: findings with the figure, the key to change and the value to try",
		Long: `doctor opens a database read-only (nothing on disk changes) or, with
--input, loads that first (counting write stalls); then it probes it with point
reads of present keys (sampled by one full scan) and of absent keys next
to them, reads its metrics and turns the tuning
guide's troubleshooting section into findings:

  slow point lookups (no bloom filters, or filters that let absent keys
    through, or many block cache misses per read)  -> bloom_bits_per_key
  write stalls, compaction debt, many L0 tables     -> max_background_jobs
  a full block cache with a hit rate below 80%      -> block_cache_size_mb
                                                       (or memtable_size_mb)
  tables that kept another level's codec            -> a full compaction

Each finding names the figure behind it, the config key and the value to try.
Without findings it says "no findings", with the figures it checked. The
settings accepted without effect on Pebble are listed too.`,
		Example: `  tune doctor --config strata.toml
  tune doctor --db data/strata --probe 10000
  tune doctor --config strata.toml --input entities.jsonl --format json`,
		Args: cli.Args(),
	}, o.addFlags, o.validateFlags, o.run)
}

// loadConfig returns the database's config: --config's file (db_path
// replaced by --db), or the config recorded in --db's OPTIONS-rocksdb.
func (o *DoctorOptions) loadConfig() (*config.Config, error) {
	if o.configPath != "" {
		cfg, err := loadBase(o.configPath)
		if err != nil {
			return nil, err
		}
		if o.dbDir != "" {
			cfg.DBPath = o.dbDir
		}
		return cfg, nil
	}
	cfg, _, err := DBConfig(o.dbDir)
	return cfg, err
}

// run loads the config (and --input), diagnoses and prints the report.
func (o *DoctorOptions) run(cmd *cobra.Command, _ []string) error {
	cfg, err := o.loadConfig()
	if err != nil {
		return err
	}
	var input *Dataset
	if o.input != "" {
		if input, err = LoadDataset(o.input); err != nil {
			return err
		}
	} else if !IsDatabase(cfg.DBPath) {
		return fmt.Errorf("%w: %s holds no database (give --input FILE to load one)", ErrNotDatabase, cfg.DBPath)
	}
	bar := o.global.bar(cmd)
	o.Config, o.Input, o.Progress = cfg, input, bar
	rep, err := RunDoctor(cmd.Context(), *o)
	if err != nil {
		bar.Abort()
		return err
	}
	bar.Finish()
	return rep.Write(cmd.OutOrStdout(), o.format)
}
