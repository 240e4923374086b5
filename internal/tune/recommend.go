package tune

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
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

// Goal is what `tune recommend` optimises: a constraint relative to the
// base config's figures, measured in the same run, and what to make best
// within it.
type Goal string

// The goals.
const (
	// GoalSize picks the smallest database whose write and point-read MB/s
	// stay within Bounds.MaxWriteLoss and Bounds.MaxReadLoss of the base
	// config's.
	GoalSize Goal = "size"
	// GoalWrite picks the fastest writes among the candidates whose
	// database is at most Bounds.MaxSizeGrowth larger than the base's.
	GoalWrite Goal = "write"
	// GoalRead picks the fastest point reads within the same size bound.
	GoalRead Goal = "read"
	// GoalBalanced picks the best
	//
	//	(ratio / base ratio) x sqrt(write / base write x read / base read)
	//
	// so that 1% smaller counts as much as 1% faster at both writing and
	// reading; a candidate without compression on any level is considered
	// only when the base codecs compress less than IncompressibleRatio.
	GoalBalanced Goal = "balanced"
)

// ParseGoal parses a goal name.
func ParseGoal(s string) (Goal, error) {
	switch g := Goal(strings.ToLower(strings.TrimSpace(s))); g {
	case GoalSize, GoalWrite, GoalRead, GoalBalanced:
		return g, nil
	}
	return "", fmt.Errorf("--goal %q: allowed are size, write, read, balanced", s)
}

// Bounds are the goals' constraints, as shares of the base config's
// figures measured in the same run.
type Bounds struct {
	// MaxWriteLoss and MaxReadLoss bound goal size: a candidate's write and
	// point-read MB/s must be at least (1 - loss) x the base's. They bound
	// the reads of absent keys of a candidate with fewer bloom bits than
	// the base too (every goal).
	MaxWriteLoss, MaxReadLoss float64
	// MaxSizeGrowth bounds goals read and write: a candidate's database
	// must be at most (1 + growth) x the base's.
	MaxSizeGrowth float64
}

// DefaultBounds are 10% each.
func DefaultBounds() Bounds {
	return Bounds{MaxWriteLoss: 0.10, MaxReadLoss: 0.10, MaxSizeGrowth: 0.10}
}

// Validate checks that each bound is a share: losses from 0 to 1 (1
// excluded), growth from 0 to 10.
func (b Bounds) Validate() error {
	var errs []error
	for _, x := range []struct {
		flag string
		v    float64
		max  float64
	}{{"--max-write-loss", b.MaxWriteLoss, 1}, {"--max-read-loss", b.MaxReadLoss, 1}, {"--max-size-growth", b.MaxSizeGrowth, 10}} {
		if !(x.v >= 0 && x.v < x.max) { // also rejects NaN
			errs = append(errs, fmt.Errorf("%s %g: must be from 0 to %g (a share of the base config's figure; %g excluded)", x.flag, x.v, x.max, x.max))
		}
	}
	return errors.Join(errs...)
}

// IncompressibleRatio is the ratio below which data counts as not
// compressing: only then may a recommendation turn compression off.
const IncompressibleRatio = 1.1

// DefaultSample is the default number of entities recommend measures on.
const DefaultSample = 2000

// MinGain is how much better, on a speed or the balanced score, a candidate
// must be than one changing fewer keys of the base config to be preferred:
// 5%, about the noise of speeds on a shared machine. SizeTie is the same
// for the size goal: 1%, sizes being exact.
const (
	MinGain = 0.05
	SizeTie = 0.01
)

// The values recommend tries around the base.
var (
	recommendPairs        = []Profile{{Default: "none", Bottommost: "none"}, {Default: "lz4", Bottommost: "zstd"}, {Default: "zstd", Bottommost: "zstd"}, {Default: "snappy", Bottommost: "zstd"}, {Default: "minlz", Bottommost: "zstd"}}
	recommendZstdLevels   = []int{3, 9, 19}
	recommendBottomBlocks = []int{4 << 10, 8 << 10, 16 << 10, 32 << 10, 64 << 10, 128 << 10}
	recommendBlockSizes   = []int{4 << 10, 16 << 10}
	recommendBloomBits    = []int{0, 10, 16}
)

// Setting is the part of a config a candidate varies.
type Setting struct {
	// Default and Bottommost are compression_default and
	// compression_bottommost as written into the config.
	Default, Bottommost string
	// BlockSize is block_size, BottommostBlockSize bottommost_block_size
	// (0 = block_size), in bytes; BloomBits bloom_bits_per_key.
	BlockSize, BottommostBlockSize, BloomBits int
}

// settingOf returns the keys of cfg a candidate varies.
func settingOf(cfg *config.Config) Setting {
	return Setting{Default: cfg.CompressionDefault, Bottommost: cfg.CompressionBottommost,
		BlockSize: cfg.BlockSize, BottommostBlockSize: cfg.BottommostBlockSize, BloomBits: cfg.BloomBitsPerKey}
}

// apply returns base with the setting's keys; base's compression_levels,
// which would replace the setting's codecs, is cleared.
func (s Setting) apply(base *config.Config) *config.Config {
	cfg := base.Clone()
	cfg.CompressionDefault, cfg.CompressionBottommost, cfg.CompressionLevels = s.Default, s.Bottommost, nil
	cfg.BlockSize, cfg.BottommostBlockSize, cfg.BloomBitsPerKey = s.BlockSize, s.BottommostBlockSize, s.BloomBits
	return cfg
}

// key identifies the setting by what it stores: the effective codecs
// ("zstd" and "zstd:3" with zstd_level 3 are one candidate) and the
// effective bottommost block size (0 and block_size are one).
func (s Setting) key(base *config.Config) string {
	cfg := s.apply(base)
	levels, bottom, err := cfg.Codecs()
	if err != nil {
		return fmt.Sprintf("%s/%s/%d/%d/%d", s.Default, s.Bottommost, s.BlockSize, cfg.LevelBlockSize(6), s.BloomBits)
	}
	return fmt.Sprintf("%s/%s/%d/%d/%d", explicit(levels), explicit(bottom), s.BlockSize, cfg.LevelBlockSize(6), s.BloomBits)
}

// uncompressed reports whether the setting stores every level without
// compression.
func (s Setting) uncompressed(base *config.Config) bool {
	levels, bottom, err := s.apply(base).Codecs()
	return err == nil && levels.Algorithm == compression.None && bottom.Algorithm == compression.None
}

// explicit spells the codec tables really carry, with its zstd level
// always written, so that the name means the same whatever zstd_level says
// and lz4 (stored as MinLZ) is minlz.
func explicit(c compression.Codec) string {
	if c.Algorithm == compression.Zstd {
		return fmt.Sprintf("zstd:%d", c.Level)
	}
	return c.Effective().String()
}

// Candidate is one measured setting.
type Candidate struct {
	Setting
	// Name is "codecs, block sizes, bloom bits", with effective codecs.
	Name string
	// Varied names what the candidate varies from the base ("base",
	// "codecs", "bottom" (zstd level and bottommost block size), "block
	// size", "bloom bits").
	Varied string
	// DBSizeBytes is the median table bytes after the full compaction;
	// Ratio the sample's key+value bytes / DBSizeBytes.
	DBSizeBytes, Ratio float64
	// WriteMBps and ReadMBps are the median write and point-read (present
	// keys, after the full compaction) speeds in MiB/s of key+value bytes,
	// as in `tune compression`; WriteMBPerCPUs and ReadMBPerCPUs the same
	// bytes per CPU-second of the process.
	WriteMBps, ReadMBps           float64
	WriteMBPerCPUs, ReadMBPerCPUs float64
	// IngestMBps is the median of the sample's bytes / (write + full
	// compaction time): writing once the bottommost codec has been applied
	// to every byte, as in a grown database. The goals' write bound and
	// score use it, so a slow bottommost codec cannot pass for free.
	IngestMBps float64
	// AbsentMBps is the median speed of reads of absent keys (the sample's
	// key+value bytes / time of one absent read per key), made after the
	// flush against tables in L0-L5, where every Get consults the bloom
	// filters; AbsentMeasured says every run met such tables.
	AbsentMBps     float64
	AbsentMeasured bool
	// CompactSeconds is the median time of the full compaction.
	CompactSeconds float64
	// SizeVsBase, IngestVsBase and ReadVsBase are the figures relative to
	// the base config's (see setVsBase); absentVsBase the same for the
	// reads of absent keys.
	SizeVsBase, IngestVsBase, ReadVsBase float64
	absentVsBase                         float64
	// Excluded says why the goal's constraints rule the candidate out; ""
	// when it satisfies them.
	Excluded string
	// Pareto is true when no other candidate is at least as good on size,
	// write and read and better on one.
	Pareto bool
	// Runs are the candidate's runs.
	Runs []Run
}

// RecommendOptions configure RunRecommend.
type RecommendOptions struct {
	// Base is the config candidates start from; nil means config.Default().
	Base *config.Config
	// Data is sampled (Dataset.Sample) down to Sample entities. Required.
	Data *Dataset
	// Sample is the number of entities measured; 0 means DefaultSample.
	Sample int
	// Goal chooses among the candidates; "" means GoalBalanced.
	Goal Goal
	// Bounds are the goals' constraints; nil means DefaultBounds().
	Bounds *Bounds
	// Dir, Repeat, Seed, MinTime and Progress are as in
	// CompressionOptions.
	Dir      string
	Repeat   int
	Seed     int64
	MinTime  time.Duration
	Progress Progress

	// The command line of tune recommend: addFlags binds them (and Sample,
	// Dir, Repeat and MinTime), validateFlags parses them into the fields
	// above.
	global     *globalFlags
	data       dataFlags
	configPath string
	goal       string
	flagBounds Bounds
	out        string
	plot       string
	format     report.Format
}

// Validate checks the options before any work.
func (o *RecommendOptions) Validate() error {
	var errs []error
	if o.Data == nil || o.Data.Len() == 0 {
		errs = append(errs, errors.New("tune: no data to write"))
	}
	if o.Sample < 0 {
		errs = append(errs, fmt.Errorf("--sample %d: must be >= 1", o.Sample))
	}
	if o.Repeat < 0 {
		errs = append(errs, fmt.Errorf("--repeat %d: must be >= 1", o.Repeat))
	}
	if o.MinTime < 0 {
		errs = append(errs, fmt.Errorf("--min-time %s: must be >= 0", o.MinTime))
	}
	if o.Goal != "" {
		if _, err := ParseGoal(string(o.Goal)); err != nil {
			errs = append(errs, err)
		}
	}
	errs = append(errs, o.bounds().Validate())
	if err := o.base().Validate(); err != nil {
		errs = append(errs, err)
	}
	if o.Dir != "" {
		errs = append(errs, CheckWritableDir(o.Dir))
	}
	return errors.Join(errs...)
}

func (o *RecommendOptions) base() *config.Config {
	if o.Base == nil {
		return config.Default()
	}
	return o.Base
}

func (o *RecommendOptions) bounds() Bounds {
	if o.Bounds == nil {
		return DefaultBounds()
	}
	return *o.Bounds
}

// RecommendResult is the outcome of RunRecommend.
type RecommendResult struct {
	// Candidates are in the order measured, the base first.
	Candidates []Candidate
	// Chosen indexes the recommended candidate.
	Chosen int
	// Goal is the goal it was chosen for, Bounds the goal's constraints.
	Goal   Goal
	Bounds Bounds
	// Base is the base config; Config the recommended one: Base with the
	// chosen candidate's keys.
	Base, Config *config.Config
	// Source, Entities and RawBytes describe the sample.
	Source   string
	Entities int
	RawBytes int64
	// Repeat is the number of runs per candidate; MinTime the least wall
	// time of each timed phase.
	Repeat  int
	MinTime time.Duration
}

// RunRecommend measures candidate settings on a sample of the data with the
// measurement of RunCompression (plus reads of absent keys, without the
// scan) and recommends one for the goal. Every run uses a block cache of
// SampleCacheMB. The candidates, each measured once per repeat:
//
//  1. the base config;
//  2. "codecs": the pairs none/none, lz4/zstd, zstd/zstd, snappy/zstd,
//     minlz/zstd with the base's block sizes and bloom bits;
//  3. "bottom": lz4 above (minlz when the base says so; Pebble stores lz4
//     as MinLZ) and zstd at levels 3, 9, 19 at the bottom, each with
//     bottommost_block_size 4, 8, 16, 32, 64 and 128 KB;
//  4. "block size": block_size (L0-L5) 4 and 16 KB;
//  5. "bloom bits": 0, 10 and 16.
//
// choose then applies the goal's constraints and picks the candidate (see
// Goal and choose); the Pareto frontier (size, write, read) is marked for
// the table and the plot.
func RunRecommend(ctx context.Context, o RecommendOptions) (res *RecommendResult, err error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	base, goal, bounds := o.base(), o.Goal, o.bounds()
	if goal == "" {
		goal = GoalBalanced
	}
	sample := o.Sample
	if sample == 0 {
		sample = DefaultSample
	}
	data := o.Data.Sample(sample)
	repeat := max(o.Repeat, 1)
	wd, err := newWorkDir(o.Dir, "recommend")
	if err != nil {
		return nil, err
	}
	defer func() {
		if cerr := wd.cleanup(); err == nil && cerr != nil {
			err = cerr
		}
	}()

	planned := planCandidates(base)
	p := orNop(o.Progress)
	p.Start(int64(len(planned)) * int64(repeat) * runUnits(data.Len()))
	order := readOrder(data.Len(), o.Seed)
	raw := data.RawBytes()
	cacheMB := SampleCacheMB(raw)
	// Repeat-major order, so that a drift of the machine's speed spreads
	// over every candidate.
	for rep := range repeat {
		for i := range planned {
			c := &planned[i]
			dir := filepath.Join(wd.path, fmt.Sprintf("%02d-%s", i+1, slug(c.Name)), fmt.Sprintf("run%d", rep+1))
			p.Describe(fmt.Sprintf("%s run %d/%d", c.Name, rep+1, repeat))
			cfg := c.apply(base)
			cfg.DBPath = dir
			cfg.WALDir, cfg.WALFailoverDir, cfg.DBPaths = "", "", nil
			cfg.BlockCacheSizeMB = cacheMB
			run, err := measure(ctx, runSpec{impl: Strata, cfg: cfg, data: data, order: order, absent: true, noScan: true, minTime: o.MinTime, progress: p})
			if err != nil {
				return nil, fmt.Errorf("candidate %s, run %d/%d: %w", c.Name, rep+1, repeat, err)
			}
			if err := wd.done(dir); err != nil {
				return nil, err
			}
			c.Runs = append(c.Runs, run)
		}
	}
	for i := range planned {
		planned[i].summarize(raw)
	}
	chosen := choose(planned, goal, bounds, base)
	return &RecommendResult{
		Candidates: planned, Chosen: chosen, Goal: goal, Bounds: bounds,
		Base: base.Clone(), Config: planned[chosen].apply(base),
		Source: data.Source, Entities: data.Len(), RawBytes: raw,
		Repeat: repeat, MinTime: cmp.Or(o.MinTime, DefaultMinTime),
	}, nil
}

// planCandidates returns the candidates RunRecommend measures, the base
// first, each setting once.
func planCandidates(base *config.Config) []Candidate {
	b := settingOf(base)
	seen := map[string]bool{}
	var out []Candidate
	plan := func(s Setting, varied string) {
		if k := s.key(base); !seen[k] {
			seen[k] = true
			out = append(out, Candidate{Setting: s, Varied: varied, Name: settingName(s, base)})
		}
	}
	plan(b, "base")
	for _, pair := range recommendPairs {
		s := b
		s.Default, s.Bottommost = pair.Default, pair.Bottommost
		plan(s, "codecs")
	}
	above := "lz4"
	if c, err := compression.ParseCodec(b.Default); err == nil && c.Algorithm == compression.MinLZ {
		above = b.Default
	}
	for _, level := range recommendZstdLevels {
		for _, block := range recommendBottomBlocks {
			s := b
			s.Default, s.Bottommost, s.BottommostBlockSize = above, fmt.Sprintf("zstd:%d", level), block
			if sameCodec(base, s.Bottommost, b.Bottommost) {
				s.Bottommost = b.Bottommost // the base's spelling: "zstd", not "zstd:3"
			}
			plan(s, "bottom")
		}
	}
	for _, block := range recommendBlockSizes {
		s := b
		s.BlockSize = block
		plan(s, "block size")
	}
	for _, bits := range recommendBloomBits {
		s := b
		s.BloomBits = bits
		plan(s, "bloom bits")
	}
	return out
}

// sameCodec reports whether two codec names store the same under cfg's
// zstd_level.
func sameCodec(cfg *config.Config, a, b string) bool {
	x, y := cfg.Clone(), cfg.Clone()
	x.CompressionBottommost, y.CompressionBottommost = a, b
	_, xb, errx := x.Codecs()
	_, yb, erry := y.Codecs()
	return errx == nil && erry == nil && explicit(xb) == explicit(yb)
}

// SampleCacheMB is the block_cache_size_mb recommend's runs use for a
// sample of raw key+value bytes: an eighth of them, at least 1 MB, meant to
// keep the sample's database larger than its cache, as a production
// database usually is. Known limit: the engine sizes Pebble's cache as
// block_cache_size_mb plus the memtable budget (engine/options.go,
// pebbleCacheBytes), and while memtables are small after a reopen that
// budget holds blocks too, so with the base's memtable_size_mb the
// sample's blocks fit: each read pass starts cold (a reopen) and
// decompresses every block once, but not once per read, which favours
// large blocks less than a production cache miss rate would. The
// recommended config keeps the base's block_cache_size_mb.
func SampleCacheMB(raw int64) int64 { return max(1, raw/8/MiB) }

// settingName returns "lz4 / zstd, 4 KB / 32 KB, bloom 10".
func settingName(s Setting, base *config.Config) string {
	cfg := s.apply(base)
	return fmt.Sprintf("%s, %s / %s, bloom %d", codecPair(cfg), formatBlockSize(cfg.LevelBlockSize(0)), formatBlockSize(cfg.LevelBlockSize(6)), s.BloomBits)
}

func formatBlockSize(n int) string {
	if n%1024 == 0 {
		return fmt.Sprintf("%d KB", n/1024)
	}
	return fmt.Sprintf("%d B", n)
}

// summarize sets the candidate's medians from its runs.
func (c *Candidate) summarize(raw int64) {
	c.DBSizeBytes = stats.Median(collect(c.Runs, func(x Run) float64 { return float64(x.DBSizeBytes) }))
	if c.DBSizeBytes > 0 {
		c.Ratio = float64(raw) / c.DBSizeBytes
	}
	c.WriteMBps = stats.Median(collect(c.Runs, func(x Run) float64 { return mibPerSec(raw, x.WriteSeconds) }))
	c.ReadMBps = stats.Median(collect(c.Runs, func(x Run) float64 { return mibPerSec(raw, x.ReadSeconds) }))
	c.WriteMBPerCPUs = stats.Median(collect(c.Runs, func(x Run) float64 { return mibPerSec(raw, x.WriteCPUSeconds) }))
	c.IngestMBps = stats.Median(collect(c.Runs, func(x Run) float64 { return mibPerSec(raw, x.WriteSeconds+x.CompactSeconds) }))
	c.ReadMBPerCPUs = stats.Median(collect(c.Runs, func(x Run) float64 { return mibPerSec(raw, x.ReadCPUSeconds) }))
	c.AbsentMBps = stats.Median(collect(c.Runs, func(x Run) float64 { return mibPerSec(raw, x.AbsentSeconds) }))
	c.CompactSeconds = stats.Median(collect(c.Runs, func(x Run) float64 { return x.CompactSeconds }))
	c.AbsentMeasured = len(c.Runs) > 0
	for _, r := range c.Runs {
		c.AbsentMeasured = c.AbsentMeasured && r.AbsentInUpperLevels()
	}
}

// dominates reports whether a is at least as good as b on size, ingest
// and read, and better on one.
func dominates(a, b Candidate) bool {
	if a.DBSizeBytes > b.DBSizeBytes || a.IngestMBps < b.IngestMBps || a.ReadMBps < b.ReadMBps {
		return false
	}
	return a.DBSizeBytes < b.DBSizeBytes || a.IngestMBps > b.IngestMBps || a.ReadMBps > b.ReadMBps
}

// markPareto sets Pareto on every candidate no other dominates.
func markPareto(cs []Candidate) {
	for i := range cs {
		cs[i].Pareto = true
		for j := range cs {
			if i != j && dominates(cs[j], cs[i]) {
				cs[i].Pareto = false
				break
			}
		}
	}
}

// choose returns the index of the candidate recommended for goal; cs[0] is
// the base config's. It sets each candidate's figures relative to the base,
// its Pareto mark and, for a candidate the constraints rule out, Excluded:
//
//  1. bloom bits: fewer than the base's only when the candidate and the
//     base were measured with reads of absent keys against tables in
//     L0-L5 (where every Get consults the filters) and the candidate's
//     absent reads are within MaxReadLoss of the base's; a smaller
//     database is no reason to drop filters a read path depends on;
//  2. compression: a candidate without compression on any level only when
//     the base stores the data below IncompressibleRatio;
//  3. the goal's bound: size keeps write and read within MaxWriteLoss and
//     MaxReadLoss of the base; read and write keep the size within
//     MaxSizeGrowth.
//
// Among the candidates left (the base always is), the goal's score
// decides (size: the smallest; write, read: the fastest; balanced: see
// GoalBalanced). Scores within SizeTie (size) or MinGain (the others) of
// the best count as equal, and among those the candidate changing the
// fewest keys of the base wins, then the best score.
func choose(cs []Candidate, goal Goal, b Bounds, cfg *config.Config) int {
	markPareto(cs)
	setVsBase(cs)
	base := cs[0]
	for i := range cs {
		cs[i].Excluded = excluded(cs[i], base, goal, b, cfg)
	}
	tie := MinGain
	if goal == GoalSize {
		tie = SizeTie
	}
	best := math.Inf(-1)
	for _, c := range cs {
		if c.Excluded == "" {
			best = max(best, goalScore(goal, c, base))
		}
	}
	chosen := 0
	for i, c := range cs {
		sc := goalScore(goal, c, base)
		if c.Excluded != "" || sc < best-math.Abs(best)*tie {
			continue
		}
		cur := goalScore(goal, cs[chosen], base)
		if cs[chosen].Excluded != "" || cur < best-math.Abs(best)*tie {
			chosen = i
			continue
		}
		n, m := changes(c.Setting, base.Setting, cfg), changes(cs[chosen].Setting, base.Setting, cfg)
		if n < m || n == m && sc > cur {
			chosen = i
		}
	}
	return chosen
}

// setVsBase sets each candidate's figures relative to the base's (cs[0]).
// When every candidate has as many runs as the base, each ratio is the
// median of the per-repeat ratios, the candidate's run k against the
// base's run k (measured in the same pass over the candidates), so that a
// drift of a shared machine's speed between passes cancels; otherwise the
// ratio of the medians.
func setVsBase(cs []Candidate) {
	base := cs[0]
	paired := len(base.Runs) > 0
	for _, c := range cs {
		paired = paired && len(c.Runs) == len(base.Runs)
	}
	for i := range cs {
		c := &cs[i]
		c.SizeVsBase = ratioOf(c.DBSizeBytes, base.DBSizeBytes)
		if !paired {
			c.IngestVsBase, c.ReadVsBase = ratioOf(c.IngestMBps, base.IngestMBps), ratioOf(c.ReadMBps, base.ReadMBps)
			c.absentVsBase = ratioOf(c.AbsentMBps, base.AbsentMBps)
			continue
		}
		// Same bytes on both sides: the MB/s ratio is the inverse time ratio.
		vs := func(seconds func(Run) float64) float64 {
			r := make([]float64, len(c.Runs))
			for k := range c.Runs {
				r[k] = ratioOf(seconds(base.Runs[k]), seconds(c.Runs[k]))
			}
			return stats.Median(r)
		}
		c.IngestVsBase = vs(func(x Run) float64 { return x.WriteSeconds + x.CompactSeconds })
		c.ReadVsBase = vs(func(x Run) float64 { return x.ReadSeconds })
		c.absentVsBase = vs(func(x Run) float64 { return x.AbsentSeconds })
	}
}

// excluded returns why the constraints of goal rule c out, or "".
func excluded(c, base Candidate, goal Goal, b Bounds, cfg *config.Config) string {
	if c.BloomBits < base.BloomBits {
		if !c.AbsentMeasured || !base.AbsentMeasured {
			return "fewer bloom bits, absent reads not measured in L0-L5"
		}
		if c.absentVsBase < 1-b.MaxReadLoss {
			return fmt.Sprintf("fewer bloom bits, absent reads %.2fx the base's", c.absentVsBase)
		}
	}
	if c.uncompressed(cfg) && base.Ratio >= IncompressibleRatio {
		return fmt.Sprintf("no compression; the base stores %.2fx", base.Ratio)
	}
	switch goal {
	case GoalSize:
		if c.IngestVsBase < 1-b.MaxWriteLoss {
			return fmt.Sprintf("ingest %.2fx the base's < %.2f", c.IngestVsBase, 1-b.MaxWriteLoss)
		}
		if c.ReadVsBase < 1-b.MaxReadLoss {
			return fmt.Sprintf("read %.2fx the base's < %.2f", c.ReadVsBase, 1-b.MaxReadLoss)
		}
	case GoalRead, GoalWrite:
		if c.SizeVsBase > 1+b.MaxSizeGrowth {
			return fmt.Sprintf("size %.2fx the base's > %.2f", c.SizeVsBase, 1+b.MaxSizeGrowth)
		}
	}
	return ""
}

// goalScore returns c's score for goal: higher is better.
func goalScore(goal Goal, c, base Candidate) float64 {
	switch goal {
	case GoalSize:
		if c.DBSizeBytes <= 0 {
			return 0
		}
		return -c.DBSizeBytes
	case GoalWrite:
		return c.IngestVsBase
	case GoalRead:
		return c.ReadVsBase
	}
	return ratioOf(c.Ratio, base.Ratio) * math.Sqrt(c.IngestVsBase*c.ReadVsBase)
}

// ratioOf returns a / b, 0 when b is not positive.
func ratioOf(a, b float64) float64 {
	if b <= 0 {
		return 0
	}
	return a / b
}

// changes counts the keys of s that differ from base: the effective codecs,
// the block sizes and the bloom bits.
func changes(s, base Setting, cfg *config.Config) int {
	a, b := strings.Split(s.key(cfg), "/"), strings.Split(base.key(cfg), "/")
	n := 0
	for i := range a {
		if i >= len(b) || a[i] != b[i] {
			n++
		}
	}
	return n
}

// Table returns the candidates as a report.Table: each with its figures,
// the figures relative to the base, whether the goal's constraints hold
// ("yes", or why not), the Pareto mark and the chosen one.
func (res *RecommendResult) Table() *report.Table {
	t := &report.Table{Columns: []report.Column{
		{Name: "#", Key: "candidate"},
		{Name: "Varied"},
		{Name: "Compression"},
		{Name: "Block", Unit: "KB", Format: "%g"},
		{Name: "Bottom block", Unit: "KB", Format: "%g"},
		{Name: "Bloom bits"},
		{Name: "DB Size", Unit: "MB", Format: "%.2f"},
		{Name: "Ratio", Format: "%.2fx"},
		{Name: "Write", Unit: "MB/s", Format: "%.1f"},
		{Name: "Read", Unit: "MB/s", Format: "%.1f"},
		{Name: "Write", Unit: "MB/CPU-s", Key: "write_mb_per_cpu_s", Format: "%.1f"},
		{Name: "Read", Unit: "MB/CPU-s", Key: "read_mb_per_cpu_s", Format: "%.1f"},
		{Name: "Ingest", Unit: "MB/s", Format: "%.1f"},
		{Name: "Absent", Unit: "MB/s", Format: "%.1f"},
		{Name: "Compact", Unit: "s", Format: "%.2f"},
		{Name: "Size vs base", Format: "%.2f"},
		{Name: "Ingest vs base", Format: "%.2f"},
		{Name: "Read vs base", Format: "%.2f"},
		{Name: "Within bounds", Align: report.AlignLeft},
		{Name: "Pareto"},
		{Name: "Chosen"},
	}}
	for i, c := range res.Candidates {
		cfg := c.apply(res.Base)
		within, pareto, chosen := "yes", "", ""
		if c.Excluded != "" {
			within = "no: " + c.Excluded
		}
		if c.Pareto {
			pareto = "yes"
		}
		if i == res.Chosen {
			chosen = "<- " + string(res.Goal)
		}
		absent := any(c.AbsentMBps)
		if !c.AbsentMeasured {
			absent = nil
		}
		t.Rows = append(t.Rows, []any{i + 1, c.Varied, codecPair(cfg), float64(cfg.LevelBlockSize(0)) / 1024, float64(cfg.LevelBlockSize(6)) / 1024, c.BloomBits,
			c.DBSizeBytes / MiB, c.Ratio, c.WriteMBps, c.ReadMBps, c.WriteMBPerCPUs, c.ReadMBPerCPUs, c.IngestMBps, absent, c.CompactSeconds,
			c.SizeVsBase, c.IngestVsBase, c.ReadVsBase, within, pareto, chosen})
	}
	runs := "one run"
	if res.Repeat > 1 {
		runs = fmt.Sprintf("the median of %d runs", res.Repeat)
	}
	vs := "the ratio of the medians"
	if res.Repeat > 1 {
		vs = "the median of the per-repeat ratios (each candidate against the base of the same pass)"
	}
	t.Notes = []string{
		fmt.Sprintf("Data: %s, %.1f MB of keys and values. Each figure is %s of the `tune compression` measurement; each timed phase repeats until it has run %s.", res.Source, mib(res.RawBytes), runs, res.MinTime),
		fmt.Sprintf("MB = MiB. Read: present keys after the full compaction and a reopen (cold cache), block_cache_size_mb = %d (the recommended config keeps the base's; see tune.SampleCacheMB for why the sample's blocks still fit). Absent: one read of an absent key per key, after the flush, against tables in L0-L5 (where every Get consults the bloom filters). MB/CPU-s: bytes per CPU-second of the process, all threads. Write: the puts and the flush; Ingest: the same bytes / time of the write and the full compaction (Compact), which is what a slower bottommost codec costs: the goals' write bound and score use Ingest.", SampleCacheMB(res.RawBytes)),
		fmt.Sprintf("Goal %s: %s. Every goal: fewer bloom bits than the base only when absent reads were measured in L0-L5 and stay within %.0f%% of the base's; no compression at all only when the base stores less than %.2fx.", res.Goal, goalRule(res.Goal, res.Bounds), res.Bounds.MaxReadLoss*100, IncompressibleRatio),
		fmt.Sprintf("X vs base: %s.", vs),
		fmt.Sprintf("Among the candidates within bounds, scores within %.0f%% of the best (size: %.0f%%) count as equal, and the one changing the fewest keys of the base wins. Pareto: no other candidate is as small, as fast to ingest and as fast to read, and better on one.", MinGain*100, SizeTie*100),
	}
	return t
}

func goalRule(g Goal, b Bounds) string {
	switch g {
	case GoalSize:
		return fmt.Sprintf("the smallest DB size with ingest >= %.2f and read >= %.2f x the base's", 1-b.MaxWriteLoss, 1-b.MaxReadLoss)
	case GoalWrite:
		return fmt.Sprintf("the fastest ingest with DB size <= %.2f x the base's", 1+b.MaxSizeGrowth)
	case GoalRead:
		return fmt.Sprintf("the fastest read with DB size <= %.2f x the base's", 1+b.MaxSizeGrowth)
	}
	return "the best (ratio / base ratio) x sqrt(ingest / base ingest x read / base read)"
}

// ConfigTOML returns the recommended config as TOML, after comment lines
// naming the choice and the keys changed from the base config.
func (res *RecommendResult) ConfigTOML() ([]byte, error) {
	text, err := res.Config.Marshal(config.FormatTOML)
	if err != nil {
		return nil, err
	}
	c := res.Candidates[res.Chosen]
	var b bytes.Buffer
	fmt.Fprintf(&b, "# Strata config recommended by `tune recommend --goal %s` on %s.\n", res.Goal, oneLine(res.Source))
	fmt.Fprintf(&b, "# Chosen: %s: %.2fx, write %.1f MB/s (with the compaction %.1f), read %.1f MB/s (MB = MiB).\n", c.Name, c.Ratio, c.WriteMBps, c.IngestMBps, c.ReadMBps)
	var changed []string
	if res.Config.CompressionDefault != res.Base.CompressionDefault {
		changed = append(changed, fmt.Sprintf("compression_default = %q", res.Config.CompressionDefault))
	}
	if res.Config.CompressionBottommost != res.Base.CompressionBottommost {
		changed = append(changed, fmt.Sprintf("compression_bottommost = %q", res.Config.CompressionBottommost))
	}
	if res.Config.BlockSize != res.Base.BlockSize {
		changed = append(changed, fmt.Sprintf("block_size = %d", res.Config.BlockSize))
	}
	if res.Config.BottommostBlockSize != res.Base.BottommostBlockSize {
		changed = append(changed, fmt.Sprintf("bottommost_block_size = %d", res.Config.BottommostBlockSize))
	}
	if res.Config.BloomBitsPerKey != res.Base.BloomBitsPerKey {
		changed = append(changed, fmt.Sprintf("bloom_bits_per_key = %d", res.Config.BloomBitsPerKey))
	}
	if len(changed) == 0 {
		b.WriteString("# Unchanged from the base config.\n")
	} else {
		fmt.Fprintf(&b, "# Changed from the base config: %s.\n", strings.Join(changed, ", "))
	}
	b.WriteString("\n")
	b.Write(text)
	return b.Bytes(), nil
}

// addFlags registers recommend's flags.
func (o *RecommendOptions) addFlags(fs *pflag.FlagSet) {
	o.data.addFlags(fs)
	fs.StringVar(&o.configPath, "config", "", "base config `FILE` the candidates start from (default: the default config)")
	fs.StringVar(&o.goal, "goal", string(GoalBalanced), "`GOAL`: size, write, read or balanced")
	fs.IntVar(&o.Sample, "sample", DefaultSample, "measure on `N` entities spread evenly over the data")
	fs.StringVar(&o.out, "out", "", "write the recommended config as TOML to `FILE` (default: standard output, after the table)")
	fs.StringVar(&o.Dir, "dir", "", "keep the databases in a new directory under `DIR` (default: a temporary directory, removed after)")
	fs.IntVar(&o.Repeat, "repeat", 1, "run each candidate `N` times and use the median of each figure")
	fs.DurationVar(&o.MinTime, "min-time", DefaultMinTime, "repeat each timed phase (write, absent reads, reads) until it has run `DURATION`")
	d := DefaultBounds()
	fs.Float64Var(&o.flagBounds.MaxWriteLoss, "max-write-loss", d.MaxWriteLoss, "--goal size: ingest MB/s (write + compaction) may fall at most this `SHARE` below the base config's")
	fs.Float64Var(&o.flagBounds.MaxReadLoss, "max-read-loss", d.MaxReadLoss, "--goal size: point-read MB/s may fall at most this `SHARE` below the base config's (and absent-key reads, for fewer bloom bits, on every goal)")
	fs.Float64Var(&o.flagBounds.MaxSizeGrowth, "max-size-growth", d.MaxSizeGrowth, "--goal read, write: the database may grow at most this `SHARE` above the base config's")
	fs.StringVar(&o.plot, "plot", "", "also draw size against write and read MB/s, with the Pareto frontier and the chosen config, as SVG into `FILE`")
	formatFlag(fs, &o.format, allFormats...)
}

// validateFlags checks the flags before any work and parses --goal.
func (o *RecommendOptions) validateFlags(*cobra.Command, []string) error {
	errs := []error{o.global.progress.Validate(), o.data.validate()}
	g, err := ParseGoal(o.goal)
	errs = append(errs, err)
	o.Goal = g
	if o.Sample < 1 {
		errs = append(errs, fmt.Errorf("--sample %d: must be >= 1", o.Sample))
	}
	if o.Repeat < 1 {
		errs = append(errs, fmt.Errorf("--repeat %d: must be >= 1", o.Repeat))
	}
	if o.MinTime <= 0 {
		errs = append(errs, fmt.Errorf("--min-time %s: must be > 0", o.MinTime))
	}
	errs = append(errs, o.flagBounds.Validate(), checkPlotPath(o.plot))
	if o.out == "" && (o.format == report.FormatJSON || o.format == report.FormatCSV) {
		errs = append(errs, fmt.Errorf("--format %s prints only the candidates: give --out FILE for the recommended config", o.format))
	}
	if o.out != "" {
		if info, err := os.Stat(filepath.Dir(o.out)); err != nil || !info.IsDir() {
			errs = append(errs, fmt.Errorf("--out %s: the directory %s does not exist", o.out, filepath.Dir(o.out)))
		}
	}
	if o.Dir != "" {
		errs = append(errs, CheckWritableDir(o.Dir))
	}
	return errors.Join(errs...)
}

func newRecommendCommand(g *globalFlags) *cobra.Command {
	o := &RecommendOptions{global: g}
	return cli.Command(&cobra.Command{
		Use:   "recommend",
		Short: "Try codecs, zstd levels, block sizes and bloom bits on a sample; recommend a config for a goal",
		Long: `recommend measures candidate settings on a sample of the data (--input FILE,
or generated entities) with the measurement of "tune compression", plus reads
of absent keys against the flushed tables (L0-L5, where every Get consults the
bloom filters). Each timed phase repeats until it has run --min-time (1s).

Candidates, around the base config (--config FILE or the default): the base;
codec pairs none/none, lz4/zstd, zstd/zstd, snappy/zstd, minlz/zstd; lz4 above
with zstd levels 3, 9, 19 at the bottom, each with bottommost_block_size 4,
8, 16, 32, 64, 128 KB; block_size 4 and 16 KB; bloom bits 0, 10, 16.

Goals are constraints against the base config, measured in the same run:
  size      the smallest database whose ingest and point-read MB/s stay within
            --max-write-loss and --max-read-loss (10%) of the base's
  write     the fastest ingest whose database is at most --max-size-growth
            (10%) larger than the base's
  read      the fastest point reads within the same size bound
  balanced  the best (ratio / base ratio) x sqrt(ingest / base ingest x
            read / base read): 1% smaller counts as 1% faster at both
Ingest is the sample's bytes / time of the write and the full compaction:
what writing costs once the bottommost codec applies to every byte.
On every goal, fewer bloom bits than the base only when the absent-key reads
were measured in L0-L5 and stay within --max-read-loss of the base's, and no
compression at all only when the base stores the data below 1.1x. Among the
candidates within bounds, those within 5% of the best (size: 1%) count as
equal, and the one changing the fewest keys of the base wins.

The table gives every figure, the figures relative to the base, whether the
bounds hold (or why not), the Pareto frontier and the choice. The recommended
config (the base config with the chosen keys) is written as TOML to --out, or
to standard output after the table; --plot FILE.svg draws the trade-off.`,
		Example: `  tune recommend --input entities.jsonl --goal size --out strata-small.toml --plot tradeoff.svg
  tune recommend --goal size --max-read-loss 0.2 --config strata.toml
  tune recommend --goal read --max-size-growth 0.25
  tune recommend --entities 5000 --size 4096 --goal balanced`,
		Args: cli.Args(),
	}, o.addFlags, o.validateFlags, o.run)
}

// run measures the candidates, prints the table and writes the
// recommended config (and the plot).
func (o *RecommendOptions) run(cmd *cobra.Command, _ []string) error {
	base, err := loadBase(o.configPath)
	if err != nil {
		return err
	}
	data, err := o.data.load()
	if err != nil {
		return err
	}
	bar := o.global.bar(cmd)
	o.Base, o.Data, o.Seed, o.Bounds, o.Progress = base, data, o.data.seed, &o.flagBounds, bar
	res, err := RunRecommend(cmd.Context(), *o)
	if err != nil {
		bar.Abort()
		return err
	}
	bar.Finish()
	toml, err := res.ConfigTOML()
	if err != nil {
		return err
	}
	var out bytes.Buffer
	if err := res.Table().Write(&out, o.format); err != nil {
		return err
	}
	if o.out != "" {
		if err := os.WriteFile(o.out, toml, 0o644); err != nil {
			return fmt.Errorf("--out: %w", err)
		}
		fmt.Fprintf(cmd.ErrOrStderr(), "recommended config (goal %s) written to %s\n", res.Goal, o.out)
	} else {
		out.WriteString("\n")
		out.Write(toml)
	}
	if o.plot != "" {
		if err := writePlot(o.plot, res.Plot); err != nil {
			return err
		}
		fmt.Fprintf(cmd.ErrOrStderr(), "plot written to %s\n", o.plot)
	}
	_, err = cmd.OutOrStdout().Write(out.Bytes())
	return err
}
