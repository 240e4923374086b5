package tune

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/stratadb/strata/compression"
	"github.com/stratadb/strata/config"
	"github.com/stratadb/strata/internal/cli"
	"github.com/stratadb/strata/internal/report"
	"github.com/stratadb/strata/internal/stats"
)

// DefaultProfiles are the four rows of the THEMIS RocksDB tuning guide's
// compression table.
const DefaultProfiles = "none/none,lz4/zstd,zstd/zstd,snappy/zstd"

// Profile is one row of `tune compression`: the codec of levels 0-5
// (compression_default) and of the bottommost level
// (compression_bottommost), spelled as in a config file.
type Profile struct {
	// Default is compression_default, Bottommost compression_bottommost.
	Default, Bottommost string
	// Config, if set, is a whole config the row runs with instead of the
	// base config with the two codecs (its paths are ignored), and Label
	// names it ("default", "size.toml"); see ConfigProfile.
	Config *config.Config
	Label  string
}

// ConfigProfile returns the row of a whole config: cfg as it is, named
// label.
func ConfigProfile(label string, cfg *config.Config) Profile {
	return Profile{Default: cfg.CompressionDefault, Bottommost: cfg.CompressionBottommost, Config: cfg, Label: label}
}

// String returns "default/bottommost" as written, or the label of a whole
// config.
func (p Profile) String() string {
	if p.Label != "" {
		return p.Label
	}
	return p.Default + "/" + p.Bottommost
}

// runConfig returns the config of p's runs: its whole config, or base
// with its codecs; db_path = dir and every other path cleared.
func (p Profile) runConfig(base *config.Config, dir string) *config.Config {
	if p.Config != nil {
		return placeRun(p.Config, dir)
	}
	return runConfig(base, p.Default, p.Bottommost, dir)
}

// name returns the row's name: its effective codecs ("lz4 / zstd"), after
// the label of a whole config with its bottommost block size ("size.toml:
// lz4 / zstd:19, 128 KB").
func (p Profile) name(base *config.Config) string {
	cfg := p.runConfig(base, "")
	if p.Config == nil {
		return codecPair(cfg)
	}
	return fmt.Sprintf("%s: %s, %s", p.Label, codecPair(cfg), formatBlockSize(cfg.LevelBlockSize(6)))
}

// ParseProfiles parses a comma-separated list of default/bottommost codec
// pairs ("none/none,lz4/zstd"). Each codec must be a name
// compression.ParseCodec accepts; an unknown one is an error naming the
// profile and the allowed names.
func ParseProfiles(s string) ([]Profile, error) {
	var out []Profile
	seen := map[string]bool{}
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		def, bottom, ok := strings.Cut(item, "/")
		if !ok || strings.Contains(bottom, "/") {
			return nil, fmt.Errorf("--profiles: profile %q: want default/bottommost, such as lz4/zstd", item)
		}
		p := Profile{Default: strings.TrimSpace(def), Bottommost: strings.TrimSpace(bottom)}
		for _, name := range []string{p.Default, p.Bottommost} {
			if _, err := compression.ParseCodec(name); err != nil || name == "" {
				return nil, fmt.Errorf("--profiles: profile %q: unknown codec %q: allowed are %s", item, name, strings.Join(compression.Names(), ", "))
			}
		}
		key := strings.ToLower(p.String())
		if seen[key] {
			return nil, fmt.Errorf("--profiles: profile %q is listed twice", item)
		}
		seen[key] = true
		out = append(out, p)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("--profiles %q: no profile given: list default/bottommost pairs such as %s", s, DefaultProfiles)
	}
	return out, nil
}

// runConfig returns base with the codecs def on L0-L5 and bottom on L6
// (base's compression_levels, which would replace them, cleared), placed
// in dir (placeRun).
func runConfig(base *config.Config, def, bottom, dir string) *config.Config {
	cfg := placeRun(base, dir)
	cfg.CompressionDefault, cfg.CompressionBottommost, cfg.CompressionLevels = def, bottom, nil
	return cfg
}

// placeRun returns base with db_path = dir and every other path cleared,
// so a run never touches the base config's directories.
func placeRun(base *config.Config, dir string) *config.Config {
	cfg := base.Clone()
	cfg.DBPath = dir
	cfg.WALDir, cfg.WALFailoverDir, cfg.DBPaths = "", "", nil
	return cfg
}

// codecPair returns "levels / bottommost" of cfg's effective codecs, with
// zstd_level applied: "lz4 / zstd", "zstd:1 / zstd:6"; with
// compression_levels every level's ("L0-L1 none, L2-L6 zstd").
func codecPair(cfg *config.Config) string {
	if len(cfg.CompressionLevels) > 0 {
		if r, err := cfg.Resolve(); err == nil {
			return r.DescribeCodecs()
		}
		return strings.Join(cfg.CompressionLevels, " ")
	}
	levels, bottom, err := cfg.Codecs()
	if err != nil {
		return cfg.CompressionDefault + " / " + cfg.CompressionBottommost
	}
	return levels.String() + " / " + bottom.String()
}

// CompressionOptions configure RunCompression.
type CompressionOptions struct {
	// Base is the config every profile starts from; nil means
	// config.Default(). Its paths are ignored: each run has its own
	// directory.
	Base *config.Config
	// Profiles are the rows; nil means DefaultProfiles.
	Profiles []Profile
	// Data is what every run writes. Required.
	Data *Dataset
	// Dir, if set, keeps the databases in a fresh directory under it (see
	// CompressionResult.Dir); "" uses a temporary directory, removed after.
	Dir string
	// Repeat is the number of runs per profile; each figure is the median.
	// The default value is 1.
	Repeat int
	// Baseline also runs each profile on raw Pebble opened with
	// pebbleconf.Options of the same config, interleaved with the Strata
	// runs, for the "vs Pebble" columns.
	Baseline bool
	// RocksDB also runs each profile on real RocksDB (a build with -tags
	// rocksdb) opened with the RocksDB OPTIONS file Strata writes for the
	// same config, interleaved with the other runs, for the "vs RocksDB"
	// columns.
	RocksDB bool
	// ProcessPerRun runs each run (one store, one profile, one repeat) in
	// a fresh process of this program, which must call RunChildMain first
	// thing (cmd/tune does): in one process RocksDB reuses memory that
	// glibc kept from earlier runs and Pebble does not, which halves
	// RocksDB's write cost (see isolate.go). Data must come from
	// GenerateDataset or LoadDataset.
	ProcessPerRun bool
	// Seed chooses the shuffled read order.
	Seed int64
	// MinTime is the least wall time of each timed phase of a run (write,
	// read, scan): the phase repeats its work until it has run this long.
	// 0 means DefaultMinTime.
	MinTime time.Duration
	// Progress receives progress; nil is silent.
	Progress Progress

	// The command line of tune compression: addFlags binds them (and Dir,
	// Repeat, Baseline and MinTime), validateFlags parses them into the
	// fields above.
	global      *globalFlags
	data        dataFlags
	configPath  string
	profileList string
	profilesSet bool // --profiles was given
	configs     string
	plot        string
	format      report.Format
}

// Validate checks the options, Dir's writability included, before any work.
func (o *CompressionOptions) Validate() error {
	var errs []error
	if o.MinTime < 0 {
		errs = append(errs, fmt.Errorf("--min-time %s: must be >= 0", o.MinTime))
	}
	if o.Data == nil || o.Data.Len() == 0 {
		errs = append(errs, errors.New("tune: no data to write"))
	} else if o.ProcessPerRun && o.Data.origin == nil {
		errs = append(errs, errors.New("--process-per-run: the data must be generated or read from an --input file, so that each process can build it again"))
	}
	if o.Repeat < 0 {
		errs = append(errs, fmt.Errorf("--repeat %d: must be >= 1", o.Repeat))
	}
	base := o.base()
	for _, p := range o.profiles() {
		if err := p.runConfig(base, "validate").Validate(); err != nil {
			errs = append(errs, fmt.Errorf("profile %s: %w", p, err))
		}
	}
	if o.Dir != "" {
		if err := CheckWritableDir(o.Dir); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (o *CompressionOptions) base() *config.Config {
	if o.Base == nil {
		return config.Default()
	}
	return o.Base
}

func (o *CompressionOptions) profiles() []Profile {
	if o.Profiles == nil {
		p, _ := ParseProfiles(DefaultProfiles)
		return p
	}
	return o.Profiles
}

func (o *CompressionOptions) repeat() int { return max(o.Repeat, 1) }

// CompressionRow is one profile's figures: each the median over the runs.
type CompressionRow struct {
	// Profile is the row's profile as given; Name its effective codecs
	// ("lz4 / zstd").
	Profile Profile
	Name    string
	// DBSizeBytes and SizeBeforeBytes are the median table bytes on disk
	// after and before the full compaction.
	DBSizeBytes, SizeBeforeBytes float64
	// Ratio is the data's key+value bytes / DBSizeBytes.
	Ratio float64
	// WriteMBps, ReadMBps and ScanMBps are the medians, in MiB/s of
	// key+value bytes.
	WriteMBps, ReadMBps, ScanMBps float64
	// IngestMBps is the median of key+value bytes / (write + full
	// compaction time): what writing costs once the bottommost codec has
	// been applied to every byte, as it is in a database that has grown.
	IngestMBps float64
	// IngestMBPerCPUs is the median of key+value bytes / the CPU time of
	// the write and the full compaction: the whole work of a MB, wherever
	// a store's scheduler put it. A store whose compactions lag its writes
	// (RocksDB's do) spends less of it in the write phase and more in the
	// compaction; this figure counts both.
	IngestMBPerCPUs float64
	// WriteMBPerCPUs and ReadMBPerCPUs are the medians of MiB of
	// key+value bytes per CPU-second of the process (every thread) in the
	// write and the read phase: the work a MB costs, whatever the number
	// of cores and the noise of a shared machine.
	WriteMBPerCPUs, ReadMBPerCPUs float64
	// CompactSeconds is the median time of the full compaction; WriteAmp
	// the median write amplification.
	CompactSeconds, WriteAmp float64
	// WriteVsPebble, ReadVsPebble and ScanVsPebble are the medians of the
	// per-run ratios Strata MiB/s / raw Pebble MiB/s; 0 without a baseline.
	WriteVsPebble, ReadVsPebble, ScanVsPebble float64
	// WriteVsFirst and ReadVsFirst are the medians of the per-repeat
	// ratios of this row's MiB/s to the first row's (run k against run k,
	// measured in the same pass over the rows): how a config compares
	// with the first, with a drift of the machine's speed between passes
	// cancelled.
	WriteVsFirst, ReadVsFirst float64
	// WriteCPUVsRocksDB and ReadCPUVsRocksDB are the medians of the
	// per-run ratios Strata MiB per CPU-second / RocksDB's, and
	// WriteVsRocksDB and ReadVsRocksDB those of MiB/s; 0 without RocksDB.
	WriteCPUVsRocksDB, ReadCPUVsRocksDB, WriteVsRocksDB, ReadVsRocksDB float64
	// IngestCPUVsRocksDB is the median of the per-run ratios of
	// IngestMBPerCPUs, Strata's / RocksDB's; 0 without RocksDB.
	IngestCPUVsRocksDB float64
	// Runs are the Strata runs; PebbleRuns the baseline's and RocksDBRuns
	// RocksDB's, in run order.
	Runs, PebbleRuns, RocksDBRuns []Run
	// Pebble holds the baseline's own figures (medians of PebbleRuns),
	// named "raw Pebble: " and the row's name; nil without a baseline.
	// RocksDB holds RocksDB's, named "RocksDB: " and the row's name.
	Pebble, RocksDB *CompressionRow
}

// CompressionResult is the outcome of RunCompression.
type CompressionResult struct {
	// Rows holds one row per profile, in the order given.
	Rows []CompressionRow
	// Source, Entities and RawBytes describe the data.
	Source   string
	Entities int
	RawBytes int64
	// Repeat is the number of runs per row; Baseline whether raw Pebble
	// ran, RocksDB whether RocksDB did.
	Repeat            int
	Baseline, RocksDB bool
	// MinTime is the least wall time of each timed phase.
	MinTime time.Duration
	// Dir is the directory holding the kept databases ("" when they were
	// in a temporary directory): Dir/NN-profile/runK-strata and
	// runK-pebble.
	Dir string
}

// RunCompression measures every profile as described in the package
// documentation and returns the table's figures. It returns only once every
// run succeeded: a failed run is an error naming the profile and the run,
// and no partial result is returned. Without Dir, the temporary databases
// are removed even on error.
func RunCompression(ctx context.Context, o CompressionOptions) (res *CompressionResult, err error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	profiles, base, repeat, data := o.profiles(), o.base(), o.repeat(), o.Data
	impls := []Implementation{Strata}
	if o.Baseline {
		impls = append(impls, Pebble)
	}
	if o.RocksDB {
		impls = append(impls, RocksDB)
	}
	wd, err := newWorkDir(o.Dir, "compression")
	if err != nil {
		return nil, err
	}
	defer func() {
		if cerr := wd.cleanup(); err == nil && cerr != nil {
			err = cerr
		}
	}()

	p := orNop(o.Progress)
	p.Start(int64(len(profiles)*repeat*len(impls)) * runUnits(data.Len()))
	order := readOrder(data.Len(), o.Seed)
	rows := make([]CompressionRow, len(profiles))
	for i, prof := range profiles {
		rows[i] = CompressionRow{Profile: prof, Name: prof.name(base)}
	}
	// Repeat-major order, so that a drift of the machine's speed spreads
	// over every row; with a baseline or RocksDB, the stores take turns
	// at running first.
	for rep := range repeat {
		for i, prof := range profiles {
			for k := range impls {
				impl := impls[(rep+k)%len(impls)]
				dir := filepath.Join(wd.path, fmt.Sprintf("%02d-%s", i+1, slug(prof.String())), fmt.Sprintf("run%d-%s", rep+1, impl))
				p.Describe(fmt.Sprintf("%s run %d/%d %s", rows[i].Name, rep+1, repeat, impl))
				spec := runSpec{
					impl:     impl,
					cfg:      prof.runConfig(base, dir),
					data:     data,
					order:    order,
					minTime:  o.MinTime,
					progress: p,
				}
				var run Run
				if o.ProcessPerRun {
					run, err = measureInChild(ctx, spec, o.Seed)
				} else {
					run, err = measure(ctx, spec)
				}
				if err != nil {
					return nil, fmt.Errorf("profile %s, run %d/%d on %s: %w", prof, rep+1, repeat, impl, err)
				}
				if err := wd.done(dir); err != nil {
					return nil, err
				}
				switch impl {
				case Strata:
					rows[i].Runs = append(rows[i].Runs, run)
				case Pebble:
					rows[i].PebbleRuns = append(rows[i].PebbleRuns, run)
				case RocksDB:
					rows[i].RocksDBRuns = append(rows[i].RocksDBRuns, run)
				}
			}
		}
	}
	raw := data.RawBytes()
	for i := range rows {
		rows[i].summarize(raw)
		rows[i].WriteVsFirst = pairedRatio(rows[0].Runs, rows[i].Runs, func(x Run) float64 { return x.WriteSeconds })
		rows[i].ReadVsFirst = pairedRatio(rows[0].Runs, rows[i].Runs, func(x Run) float64 { return x.ReadSeconds })
	}
	res = &CompressionResult{Rows: rows, Source: data.Source, Entities: data.Len(), RawBytes: raw, Repeat: repeat, Baseline: o.Baseline, RocksDB: o.RocksDB, MinTime: cmp.Or(o.MinTime, DefaultMinTime)}
	if wd.keep {
		res.Dir = wd.path
	}
	return res, nil
}

// pairedRatio returns the median over k of seconds(ref[k]) /
// seconds(runs[k]): the MiB/s of runs against ref's for the same bytes.
func pairedRatio(ref, runs []Run, seconds func(Run) float64) float64 {
	n := min(len(ref), len(runs))
	r := make([]float64, n)
	for k := range n {
		r[k] = ratioOf(seconds(ref[k]), seconds(runs[k]))
	}
	return stats.Median(r)
}

// ingestCPUSeconds is the CPU time of a run's write and full compaction.
func ingestCPUSeconds(x Run) float64 { return x.WriteCPUSeconds + x.CompactCPUSeconds }

// summarize sets the row's medians from its runs.
func (r *CompressionRow) summarize(raw int64) {
	r.DBSizeBytes = stats.Median(collect(r.Runs, func(x Run) float64 { return float64(x.DBSizeBytes) }))
	r.SizeBeforeBytes = stats.Median(collect(r.Runs, func(x Run) float64 { return float64(x.SizeBeforeBytes) }))
	if r.DBSizeBytes > 0 {
		r.Ratio = float64(raw) / r.DBSizeBytes
	}
	r.WriteMBps = stats.Median(collect(r.Runs, func(x Run) float64 { return mibPerSec(raw, x.WriteSeconds) }))
	r.ReadMBps = stats.Median(collect(r.Runs, func(x Run) float64 { return mibPerSec(raw, x.ReadSeconds) }))
	r.ScanMBps = stats.Median(collect(r.Runs, func(x Run) float64 { return mibPerSec(raw, x.ScanSeconds) }))
	r.IngestMBps = stats.Median(collect(r.Runs, func(x Run) float64 { return mibPerSec(raw, x.WriteSeconds+x.CompactSeconds) }))
	r.IngestMBPerCPUs = stats.Median(collect(r.Runs, func(x Run) float64 { return mibPerSec(raw, ingestCPUSeconds(x)) }))
	r.WriteMBPerCPUs = stats.Median(collect(r.Runs, func(x Run) float64 { return mibPerSec(raw, x.WriteCPUSeconds) }))
	r.ReadMBPerCPUs = stats.Median(collect(r.Runs, func(x Run) float64 { return mibPerSec(raw, x.ReadCPUSeconds) }))
	r.CompactSeconds = stats.Median(collect(r.Runs, func(x Run) float64 { return x.CompactSeconds }))
	r.WriteAmp = stats.Median(collect(r.Runs, func(x Run) float64 { return x.WriteAmp }))
	if len(r.PebbleRuns) == len(r.Runs) && len(r.Runs) > 0 {
		// Same bytes on both sides: the MiB/s ratio is the inverse time ratio.
		r.WriteVsPebble = pairedRatio(r.PebbleRuns, r.Runs, func(x Run) float64 { return x.WriteSeconds })
		r.ReadVsPebble = pairedRatio(r.PebbleRuns, r.Runs, func(x Run) float64 { return x.ReadSeconds })
		r.ScanVsPebble = pairedRatio(r.PebbleRuns, r.Runs, func(x Run) float64 { return x.ScanSeconds })
	}
	if len(r.RocksDBRuns) == len(r.Runs) && len(r.Runs) > 0 {
		r.WriteCPUVsRocksDB = pairedRatio(r.RocksDBRuns, r.Runs, func(x Run) float64 { return x.WriteCPUSeconds })
		r.ReadCPUVsRocksDB = pairedRatio(r.RocksDBRuns, r.Runs, func(x Run) float64 { return x.ReadCPUSeconds })
		r.IngestCPUVsRocksDB = pairedRatio(r.RocksDBRuns, r.Runs, ingestCPUSeconds)
		r.WriteVsRocksDB = pairedRatio(r.RocksDBRuns, r.Runs, func(x Run) float64 { return x.WriteSeconds })
		r.ReadVsRocksDB = pairedRatio(r.RocksDBRuns, r.Runs, func(x Run) float64 { return x.ReadSeconds })
	}
	if len(r.PebbleRuns) > 0 {
		r.Pebble = &CompressionRow{Profile: r.Profile, Name: "raw Pebble: " + r.Name, Runs: r.PebbleRuns}
		r.Pebble.summarize(raw)
	}
	if len(r.RocksDBRuns) > 0 {
		r.RocksDB = &CompressionRow{Profile: r.Profile, Name: "RocksDB: " + r.Name, Runs: r.RocksDBRuns}
		r.RocksDB.summarize(raw)
	}
}

// Table returns the result as a report.Table: the columns of the THEMIS
// RocksDB tuning guide's compression table, then
// Scan, Before compaction, Compact and W-Amp, and with a baseline the
// "vs Pebble" ratios; the notes define every figure.
func (res *CompressionResult) Table() *report.Table {
	t := &report.Table{Columns: []report.Column{
		{Name: "Compression"},
		{Name: "DB Size", Unit: "MB", Format: "%.1f"},
		{Name: "Ratio", Format: "%.2fx"},
		{Name: "Write", Unit: "MB/s", Format: "%.1f"},
		{Name: "Read", Unit: "MB/s", Format: "%.1f"},
		{Name: "Write", Unit: "MB/CPU-s", Key: "write_mb_per_cpu_s", Format: "%.1f"},
		{Name: "Read", Unit: "MB/CPU-s", Key: "read_mb_per_cpu_s", Format: "%.1f"},
		{Name: "Ingest", Unit: "MB/s", Format: "%.1f"},
		{Name: "Ingest", Unit: "MB/CPU-s", Key: "ingest_mb_per_cpu_s", Format: "%.1f"},
		{Name: "Scan", Unit: "MB/s", Format: "%.1f"},
		{Name: "Before compaction", Unit: "MB", Format: "%.1f"},
		{Name: "Compact", Unit: "s", Format: "%.2f"},
		{Name: "W-Amp", Format: "%.2f"},
	}}
	vsFirst := len(res.Rows) > 1
	if vsFirst {
		t.Columns = append(t.Columns,
			report.Column{Name: "Write vs row 1", Format: "%.2f"},
			report.Column{Name: "Read vs row 1", Format: "%.2f"},
		)
	}
	if res.Baseline {
		t.Columns = append(t.Columns,
			report.Column{Name: "Write vs Pebble", Format: "%.2f"},
			report.Column{Name: "Read vs Pebble", Format: "%.2f"},
			report.Column{Name: "Scan vs Pebble", Format: "%.2f"},
		)
	}
	if res.RocksDB {
		t.Columns = append(t.Columns,
			report.Column{Name: "Write vs RocksDB", Format: "%.2f"},
			report.Column{Name: "Read vs RocksDB", Format: "%.2f"},
			report.Column{Name: "Write/CPU vs RocksDB", Key: "write_cpu_vs_rocksdb", Format: "%.2f"},
			report.Column{Name: "Read/CPU vs RocksDB", Key: "read_cpu_vs_rocksdb", Format: "%.2f"},
			report.Column{Name: "Ingest/CPU vs RocksDB", Key: "ingest_cpu_vs_rocksdb", Format: "%.2f"},
		)
	}
	lz4 := false
	for _, r := range res.Rows {
		row := []any{r.Name, r.DBSizeBytes / MiB, r.Ratio, r.WriteMBps, r.ReadMBps, r.WriteMBPerCPUs, r.ReadMBPerCPUs, r.IngestMBps, r.IngestMBPerCPUs, r.ScanMBps,
			r.SizeBeforeBytes / MiB, r.CompactSeconds, r.WriteAmp}
		if vsFirst {
			row = append(row, r.WriteVsFirst, r.ReadVsFirst)
		}
		if res.Baseline {
			row = append(row, r.WriteVsPebble, r.ReadVsPebble, r.ScanVsPebble)
		}
		if res.RocksDB {
			row = append(row, r.WriteVsRocksDB, r.ReadVsRocksDB, r.WriteCPUVsRocksDB, r.ReadCPUVsRocksDB, r.IngestCPUVsRocksDB)
		}
		t.Rows = append(t.Rows, row)
		for _, pr := range []*CompressionRow{r.Pebble, r.RocksDB} {
			if pr == nil {
				continue
			}
			prow := []any{pr.Name, pr.DBSizeBytes / MiB, pr.Ratio, pr.WriteMBps, pr.ReadMBps, pr.WriteMBPerCPUs, pr.ReadMBPerCPUs, pr.IngestMBps, pr.IngestMBPerCPUs, pr.ScanMBps,
				pr.SizeBeforeBytes / MiB, pr.CompactSeconds}
			if pr == r.RocksDB {
				prow = append(prow, pr.WriteAmp)
			}
			t.Rows = append(t.Rows, append(prow, make([]any, len(t.Columns)-len(prow))...))
		}
		for _, name := range []string{r.Profile.Default, r.Profile.Bottommost} {
			if c, err := compression.ParseCodec(name); err == nil && c.Algorithm == compression.LZ4 {
				lz4 = true
			}
		}
	}
	runs := "one run"
	if res.Repeat > 1 {
		runs = fmt.Sprintf("the median of %d runs", res.Repeat)
	}
	t.Notes = append(t.Notes,
		fmt.Sprintf("Data: %s, %.1f MB of keys and values. Each figure is %s; each timed phase repeats its work until it has run %s (the figure is per pass).", res.Source, mib(res.RawBytes), runs, res.MinTime),
		"MB = MiB = 1,048,576 bytes. DB Size: the table files (*.sst) on disk after a full compaction (WAL, MANIFEST, OPTIONS not counted); Before compaction: the same after the load's final flush. Ratio = key+value bytes / DB Size.",
		fmt.Sprintf("Write: key+value bytes / time of the puts (batches of %d) and the final flush, compaction excluded. Read: / time of one Get per key in a shuffled order after a reopen (cold block cache, warm OS page cache), each value checked. Scan: / time of one forward scan after the reads. MB/CPU-s: the same bytes / CPU time of the process (user+system, every thread, Pebble's background work included) over the phase. Ingest: / time of the write and the full compaction (Compact), what writing costs once the bottommost codec applies to every byte; in MB/CPU-s, / their CPU time, the compactions a store deferred past the write phase included. W-Amp: bytes written to tables / bytes written to the WAL.", WriteBatchSize),
	)
	if vsFirst {
		t.Notes = append(t.Notes, "X vs row 1: the median of the per-repeat ratios of the row's MB/s to the first row's, run k against run k (each repeat runs every row in turn).")
	}
	if lz4 {
		t.Notes = append(t.Notes, "lz4 is stored as MinLZ: Pebble's table format has no LZ4 block codec (`tune codecs` measures true LZ4 beside MinLZ).")
	}
	if res.Baseline {
		t.Notes = append(t.Notes, "X vs Pebble = Strata's MB/s / raw Pebble's (pebble.Open with the Pebble options Strata derives from the same config), run interleaved in this process; the median of the per-run ratios, > 1 means Strata is faster. Both compare each value in place, without a copy (Strata through engine.DB.View).")
		for _, r := range res.Rows {
			if len(r.Runs) == 0 || len(r.PebbleRuns) == 0 || r.Runs[0].TableCodecs == r.PebbleRuns[0].TableCodecs {
				continue
			}
			t.Notes = append(t.Notes, fmt.Sprintf("%s: after the compaction raw Pebble's tables carry %s, Strata's %s (Pebble moves a lone table down without rewriting it; Strata rewrites it into the level's codec), so Read/Scan vs Pebble compare different codecs.",
				r.Name, r.PebbleRuns[0].TableCodecs, r.Runs[0].TableCodecs))
		}
	}
	if res.RocksDB {
		t.Notes = append(t.Notes, "RocksDB rows: RocksDB (librocksdb) opened with the RocksDB OPTIONS file Strata writes for the same config (codecs per level with real LZ4, memtable size and count, file and level sizes, bloom bits, block_size; RocksDB has no per-level block size, so its bottommost level keeps block_size), with an LRU block cache of the capacity of Strata's Pebble cache (block_cache_size_mb plus the memtable budget Pebble reserves in it), run interleaved in this process; the full compaction is CompactRange with bottommost_level_compaction = kForce. Its W-Amp is RocksDB's own (the Sum row of rocksdb.stats: table bytes written / bytes flushed). X vs RocksDB = Strata's MB/s (or MB per CPU-second) / RocksDB's, the median of the per-run ratios, > 1 means Strata is faster.")
	}
	return t
}

// parseConfigs reads --configs: one profile per config file, "default"
// for config.Default(), each labelled with its file name.
func parseConfigs(list string) ([]Profile, error) {
	var out []Profile
	var errs []error
	for _, item := range strings.Split(list, ",") {
		item = strings.TrimSpace(item)
		switch item {
		case "":
			continue
		case "default":
			out = append(out, ConfigProfile("default", config.Default()))
			continue
		}
		cfg, err := config.Load(item)
		if err != nil {
			errs = append(errs, fmt.Errorf("--configs: %w", err))
			continue
		}
		out = append(out, ConfigProfile(filepath.Base(item), cfg))
	}
	if len(out) == 0 && len(errs) == 0 {
		errs = append(errs, fmt.Errorf("--configs %q: no config given: list config files or default", list))
	}
	return out, errors.Join(errs...)
}

// addFlags registers compression's flags.
func (o *CompressionOptions) addFlags(fs *pflag.FlagSet) {
	o.data.addFlags(fs)
	fs.StringVar(&o.profileList, "profiles", DefaultProfiles, "comma-separated `LIST` of default/bottommost codec pairs (none, snappy, lz4, zstd, zstd:N, minlz)")
	fs.StringVar(&o.configPath, "config", "", "base config `FILE` (default: the default config); its paths are ignored")
	fs.StringVar(&o.configs, "configs", "", "instead of --profiles and --config: one row per config, a comma-separated `LIST` of config files, \"default\" for the default config")
	fs.StringVar(&o.Dir, "dir", "", "keep the databases in a new directory under `DIR` (default: a temporary directory, removed after)")
	fs.IntVar(&o.Repeat, "repeat", 1, "run each profile `N` times and report the median of each figure")
	fs.BoolVar(&o.Baseline, "baseline", false, "also run each profile on raw Pebble with identical options and add Strata/Pebble ratio columns")
	fs.BoolVar(&o.ProcessPerRun, "process-per-run", false, "run each store's run in a fresh process of tune, so that no store reuses memory an earlier run freed (default: true with --rocksdb)")
	fs.BoolVar(&o.RocksDB, "rocksdb", false, "also run each profile on RocksDB opened with the OPTIONS file Strata writes for the config, and add Strata/RocksDB ratio columns (needs a build with -tags rocksdb)")
	fs.DurationVar(&o.MinTime, "min-time", DefaultMinTime, "repeat each timed phase (write, read, scan) until it has run `DURATION`")
	fs.StringVar(&o.plot, "plot", "", "also draw size against write and read MB/s, with the Pareto frontier, as SVG into `FILE`")
	formatFlag(fs, &o.format, allFormats...)
}

// validateFlags checks the flags and parses --profiles or --configs; a
// --dir that is not writable fails here, before any data is generated.
func (o *CompressionOptions) validateFlags(cmd *cobra.Command, _ []string) error {
	o.profilesSet = cmd.Flags().Changed("profiles")
	if o.RocksDB && !cmd.Flags().Changed("process-per-run") {
		o.ProcessPerRun = true
	}
	errs := []error{o.global.progress.Validate(), o.data.validate()}
	if o.Repeat < 1 {
		errs = append(errs, fmt.Errorf("--repeat %d: must be >= 1", o.Repeat))
	}
	if o.MinTime <= 0 {
		errs = append(errs, fmt.Errorf("--min-time %s: must be > 0", o.MinTime))
	}
	errs = append(errs, checkPlotPath(o.plot))
	if o.RocksDB && !rocksDBAvailable {
		errs = append(errs, errNoRocksDB)
	}
	if o.configs != "" {
		if o.profilesSet || o.configPath != "" {
			errs = append(errs, fmt.Errorf("--configs %s: give either --configs or --profiles/--config: each config brings its own codecs", o.configs))
		}
		p, err := parseConfigs(o.configs)
		errs = append(errs, err)
		o.Profiles = p
	} else {
		p, err := ParseProfiles(o.profileList)
		errs = append(errs, err)
		o.Profiles = p
	}
	if o.Dir != "" {
		errs = append(errs, CheckWritableDir(o.Dir))
	}
	return errors.Join(errs...)
}

func newCompressionCommand(g *globalFlags) *cobra.Command {
	o := &CompressionOptions{global: g}
	return cli.Command(&cobra.Command{
		Use:   "compression",
		Short: "Measure size and speed of compression profiles (the THEMIS RocksDB tuning guide's table)",
		Long: `compression writes the same data into a fresh database per profile
(compression_default / compression_bottommost), flushes, compacts everything
(a real rewrite, so the bottommost codec applies), measures, then reads every
key back and scans. Columns:

  DB Size            table files (*.sst) on disk after the full compaction
  Ratio              key+value bytes / DB Size
  Write              key+value bytes / time of the puts (batches of 100) + final flush
  Read               key+value bytes / time of one Get per key, shuffled, after a
                     reopen (cold block cache, warm OS page cache); values checked
  Write, Read (MB/CPU-s)  the same bytes / CPU time of the process (all threads)
  Ingest             key+value bytes / time of the write and the full compaction;
                     in MB/CPU-s, / their CPU time (compactions deferred past the
                     write phase included)
  Scan               key+value bytes / time of one forward scan after the reads
  Before compaction  table bytes on disk after the flush
  Compact            time of the full compaction
  W-Amp              bytes written to tables / bytes written to the WAL

With --baseline, each profile also runs on raw Pebble opened with the same
options Strata gives Pebble, interleaved in this process; the "vs Pebble"
columns are Strata MB/s / Pebble MB/s. MB = MiB. Each timed phase repeats its
work until it has run --min-time (1s), so that a figure is not a few
milliseconds of a shared machine; the figures are per pass. With --rocksdb
(or --process-per-run) each run is a fresh process of tune: in one process
RocksDB reuses memory glibc kept from the earlier runs and Pebble does not,
which halves RocksDB's write cost. The table prints
only once every run succeeded. --plot FILE.svg draws DB size against write and
read MB/s with the Pareto frontier marked.`,
		Example: `  tune compression
  tune compression --repeat 3 --baseline --format markdown
  tune compression --profiles none/none,lz4/zstd,minlz/zstd,zstd:1/zstd:6 --config strata.toml
  tune compression --input entities.jsonl --dir /mnt/nvme/tune --format json
  tune compression --profiles lz4/zstd,lz4/zstd:19 --plot tradeoff.svg
  tune compression --configs default,strata-small.toml --baseline --repeat 3`,
		Args: cli.Args(),
	}, o.addFlags, o.validateFlags, o.run)
}

// run measures, prints the table, writes the plot and sums up on stderr.
func (o *CompressionOptions) run(cmd *cobra.Command, _ []string) error {
	began := time.Now()
	base, err := loadBase(o.configPath)
	if err != nil {
		return err
	}
	data, err := o.data.load()
	if err != nil {
		return err
	}
	bar := o.global.bar(cmd)
	o.Base, o.Data, o.Seed, o.Progress = base, data, o.data.seed, bar
	res, err := RunCompression(cmd.Context(), *o)
	if err != nil {
		bar.Abort()
		return err
	}
	bar.Finish()
	var out bytes.Buffer
	if err := res.Table().Write(&out, o.format); err != nil {
		return err
	}
	if _, err := cmd.OutOrStdout().Write(out.Bytes()); err != nil {
		return err
	}
	stderr := cmd.ErrOrStderr()
	if o.plot != "" {
		if err := writePlot(o.plot, res.Plot); err != nil {
			return err
		}
		fmt.Fprintf(stderr, "plot written to %s\n", o.plot)
	}
	if res.Dir != "" {
		fmt.Fprintf(stderr, "databases kept in %s\n", res.Dir)
	}
	runs := "run"
	if res.Repeat > 1 {
		runs = "runs"
	}
	if res.Baseline {
		runs += " (and as many on raw Pebble)"
	}
	fmt.Fprintf(stderr, "tune compression: %d profiles x %d %s in %s\n", len(res.Rows), res.Repeat, runs, time.Since(began).Round(100*time.Millisecond))
	return nil
}
