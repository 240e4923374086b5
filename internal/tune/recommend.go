package tune

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"strings"

	"github.com/stratadb/strata/compression"
	"github.com/stratadb/strata/config"
	"github.com/stratadb/strata/report"
)

// Goal is what `tune recommend` optimises.
type Goal string

// The goals.
const (
	// GoalSize picks the smallest database.
	GoalSize Goal = "size"
	// GoalWrite picks the fastest writes.
	GoalWrite Goal = "write"
	// GoalRead picks the fastest point reads.
	GoalRead Goal = "read"
	// GoalBalanced picks the best geometric mean of the three, each
	// normalised to the best candidate: (min size / size), (write / max
	// write), (read / max read).
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

// DefaultSample is the default number of entities recommend measures on.
const DefaultSample = 2000

// MinGain is how much better, on the goal's score, a dimension's best value
// must be than the base config's before the combined candidate takes it:
// 5%, about the noise of speeds measured on a sample. Below it the base
// value stays, so noise does not move a setting.
const MinGain = 0.05

// The values recommend tries, one dimension at a time around the base.
var (
	recommendPairs      = []Profile{{"none", "none"}, {"lz4", "zstd"}, {"zstd", "zstd"}, {"snappy", "zstd"}, {"minlz", "zstd"}, {"zstd:1", "zstd:6"}}
	recommendZstdLevels = []int{1, 3, 6, 9}
	recommendBlockSizes = []int{4 << 10, 8 << 10, 16 << 10, 32 << 10, 64 << 10}
	recommendBloomBits  = []int{0, 10, 16}
)

// Setting is the part of a config a candidate varies.
type Setting struct {
	// Default and Bottommost are compression_default and
	// compression_bottommost as written into the config.
	Default, Bottommost string
	// BlockSize is block_size in bytes; BloomBits bloom_bits_per_key.
	BlockSize, BloomBits int
}

// apply returns base with the setting's keys.
func (s Setting) apply(base *config.Config) *config.Config {
	cfg := base.Clone()
	cfg.CompressionDefault, cfg.CompressionBottommost = s.Default, s.Bottommost
	cfg.BlockSize, cfg.BloomBitsPerKey = s.BlockSize, s.BloomBits
	return cfg
}

// key identifies the setting by its effective codecs, so "zstd" and
// "zstd:3" (with zstd_level 3) are the same candidate.
func (s Setting) key(base *config.Config) string {
	cfg := s.apply(base)
	levels, bottom, err := cfg.Codecs()
	if err != nil {
		return fmt.Sprintf("%s/%s/%d/%d", s.Default, s.Bottommost, s.BlockSize, s.BloomBits)
	}
	return fmt.Sprintf("%s/%s/%d/%d", explicit(levels), explicit(bottom), s.BlockSize, s.BloomBits)
}

// explicit spells a codec with its zstd level always written, so that the
// name means the same whatever zstd_level says.
func explicit(c compression.Codec) string {
	if c.Algorithm == compression.Zstd {
		return fmt.Sprintf("zstd:%d", c.Level)
	}
	return c.String()
}

// Candidate is one measured setting.
type Candidate struct {
	Setting
	// Name is "codecs, block size, bloom bits", with effective codecs.
	Name string
	// Varied names the dimension the candidate varies from the base
	// ("base", "codecs", "zstd level", "block size", "bloom bits",
	// "combined").
	Varied string
	// DBSizeBytes is the median table bytes after the full compaction;
	// Ratio the sample's key+value bytes / DBSizeBytes.
	DBSizeBytes, Ratio float64
	// WriteMBps is the median write speed in MiB/s, as in `tune
	// compression`. ReadMBps is the median speed of a 50/50 mix of point
	// reads: key+value bytes of the sample / time of one read of every key
	// plus one read of an absent key next to each.
	WriteMBps, ReadMBps float64
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
	// Goal chooses among the Pareto frontier; "" means GoalBalanced.
	Goal Goal
	// Dir, Repeat, Seed and Progress are as in CompressionOptions.
	Dir      string
	Repeat   int
	Seed     int64
	Progress Progress
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
	if o.Goal != "" {
		if _, err := ParseGoal(string(o.Goal)); err != nil {
			errs = append(errs, err)
		}
	}
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

// RecommendResult is the outcome of RunRecommend.
type RecommendResult struct {
	// Candidates are in the order measured: the base, each dimension, then
	// the combination (if it is new).
	Candidates []Candidate
	// Chosen indexes the recommended candidate, a Pareto member.
	Chosen int
	// Goal is the goal it was chosen for.
	Goal Goal
	// Base is the base config; Config the recommended one: Base with the
	// chosen candidate's keys.
	Base, Config *config.Config
	// Source, Entities and RawBytes describe the sample.
	Source   string
	Entities int
	RawBytes int64
	// Repeat is the number of runs per candidate.
	Repeat int
}

// RunRecommend measures candidate settings on a sample of the data with the
// measurement of RunCompression (plus reads of absent keys) and recommends
// one for the goal. It does not try the full cross product:
//
// Every run uses a block cache of SampleCacheMB.
//
//  1. it varies one dimension at a time around the base config: the codec
//     pairs none/none, lz4/zstd, zstd/zstd, snappy/zstd, minlz/zstd,
//     zstd:1/zstd:6; the bottommost zstd level 1, 3, 6, 9; block sizes 4,
//     8, 16, 32, 64 KB; bloom bits 0, 10, 16;
//  2. it combines the best value of each dimension for the goal (a value
//     replaces the base's only if it scores more than MinGain better; the
//     zstd level only applies when the chosen bottommost codec is zstd)
//     and measures the combination if it is new;
//  3. it marks the Pareto frontier (smaller size, faster writes, faster
//     reads) and picks the frontier member with the best score for the
//     goal: size the smallest, write the fastest write, read the fastest
//     read, balanced the best geometric mean of the normalised figures.
//     Scores within MinGain of the best count as equal, and among those the
//     candidate changing the fewest keys of the base wins (see choose).
//
// Bloom bits show here in the size only: every candidate is measured after
// a full compaction, which puts every table in L6, and Pebble's Get never
// reads the bloom filters of L6 tables.
func RunRecommend(ctx context.Context, o RecommendOptions) (res *RecommendResult, err error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	base, goal := o.base(), o.Goal
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

	baseSet := Setting{Default: base.CompressionDefault, Bottommost: base.CompressionBottommost, BlockSize: base.BlockSize, BloomBits: base.BloomBitsPerKey}
	type phase struct {
		varied   string
		settings []Setting
	}
	var phases []phase
	var pairs []Setting
	for _, p := range recommendPairs {
		pairs = append(pairs, Setting{p.Default, p.Bottommost, baseSet.BlockSize, baseSet.BloomBits})
	}
	phases = append(phases, phase{"codecs", pairs})
	var levels []Setting
	for _, l := range recommendZstdLevels {
		levels = append(levels, Setting{baseSet.Default, fmt.Sprintf("zstd:%d", l), baseSet.BlockSize, baseSet.BloomBits})
	}
	phases = append(phases, phase{"zstd level", levels})
	var blocks []Setting
	for _, b := range recommendBlockSizes {
		blocks = append(blocks, Setting{baseSet.Default, baseSet.Bottommost, b, baseSet.BloomBits})
	}
	phases = append(phases, phase{"block size", blocks})
	var blooms []Setting
	for _, b := range recommendBloomBits {
		blooms = append(blooms, Setting{baseSet.Default, baseSet.Bottommost, baseSet.BlockSize, b})
	}
	phases = append(phases, phase{"bloom bits", blooms})

	// Plan: the base first, then each phase without repeats.
	seen := map[string]int{} // setting key -> candidate index
	var planned []Candidate
	plan := func(s Setting, varied string) {
		if _, ok := seen[s.key(base)]; ok {
			return
		}
		seen[s.key(base)] = len(planned)
		planned = append(planned, Candidate{Setting: s, Varied: varied, Name: settingName(s, base)})
	}
	plan(baseSet, "base")
	for _, ph := range phases {
		for _, s := range ph.settings {
			plan(s, ph.varied)
		}
	}

	p := orNop(o.Progress)
	p.Start(int64(len(planned)+1) * int64(repeat) * runUnits(data.Len()))
	order := readOrder(data.Len(), o.Seed)
	raw := data.RawBytes()
	cacheMB := SampleCacheMB(raw)
	measureCandidate := func(c *Candidate, idx int) error {
		for rep := range repeat {
			dir := filepath.Join(wd.path, fmt.Sprintf("%02d-%s", idx+1, slug(c.Name)), fmt.Sprintf("run%d", rep+1))
			p.Describe(fmt.Sprintf("%s run %d/%d", c.Name, rep+1, repeat))
			cfg := c.apply(base)
			cfg.DBPath = dir
			cfg.WALDir, cfg.WALFailoverDir, cfg.DBPaths = "", "", nil
			cfg.BlockCacheSizeMB = cacheMB
			run, err := measure(ctx, runSpec{impl: Strata, cfg: cfg, data: data, order: order, absent: true, progress: p})
			if err != nil {
				return fmt.Errorf("candidate %s, run %d/%d: %w", c.Name, rep+1, repeat, err)
			}
			if err := wd.done(dir); err != nil {
				return err
			}
			c.Runs = append(c.Runs, run)
		}
		c.summarize(raw)
		return nil
	}
	for i := range planned {
		if err := measureCandidate(&planned[i], i); err != nil {
			return nil, err
		}
	}

	// Combine the best value of each dimension.
	ref := newScoreRef(planned)
	combined := baseSet
	baseCand := planned[0]
	best := func(varied string, baseline Setting) (Setting, bool) {
		var ph phase
		for _, x := range phases {
			if x.varied == varied {
				ph = x
			}
		}
		bestSet, bestScore := baseline, ref.score(goal, baseCand)
		for _, s := range ph.settings {
			c := planned[seen[s.key(base)]]
			if sc := ref.score(goal, c); sc > bestScore {
				bestSet, bestScore = s, sc
			}
		}
		return bestSet, bestScore > ref.score(goal, baseCand)*(1+MinGain)
	}
	if s, ok := best("codecs", baseSet); ok {
		combined.Default, combined.Bottommost = s.Default, s.Bottommost
	}
	if s, ok := best("zstd level", baseSet); ok {
		if c, err := compression.ParseCodec(combined.Bottommost); err == nil && c.Algorithm == compression.Zstd {
			combined.Bottommost = s.Bottommost
		}
	}
	if s, ok := best("block size", baseSet); ok {
		combined.BlockSize = s.BlockSize
	}
	if s, ok := best("bloom bits", baseSet); ok {
		combined.BloomBits = s.BloomBits
	}
	if _, ok := seen[combined.key(base)]; !ok {
		seen[combined.key(base)] = len(planned)
		planned = append(planned, Candidate{Setting: combined, Varied: "combined", Name: settingName(combined, base)})
		if err := measureCandidate(&planned[len(planned)-1], len(planned)-1); err != nil {
			return nil, err
		}
	} else {
		p.Add(int64(repeat) * runUnits(data.Len())) // the combination's share of the bar
	}

	chosen := choose(planned, goal, baseSet, base)
	cfg := planned[chosen].apply(base)
	return &RecommendResult{
		Candidates: planned, Chosen: chosen, Goal: goal, Base: base.Clone(), Config: cfg,
		Source: data.Source, Entities: data.Len(), RawBytes: raw, Repeat: repeat,
	}, nil
}

// SampleCacheMB is the block cache recommend's runs use for a sample of raw
// key+value bytes: an eighth of them, at least 1 MB. The sample's database
// is then larger than its cache, as a production database usually is, so
// the reads pay for block size and codec as they would there; a sample
// that fits its cache would favour large blocks. The recommended config
// keeps the base's block_cache_size_mb.
func SampleCacheMB(raw int64) int64 { return max(1, raw/8/MiB) }

// settingName returns "lz4 / zstd, 4 KB, bloom 10".
func settingName(s Setting, base *config.Config) string {
	return fmt.Sprintf("%s, %s, bloom %d", codecPair(s.apply(base)), formatBlockSize(s.BlockSize), s.BloomBits)
}

func formatBlockSize(n int) string {
	if n%1024 == 0 {
		return fmt.Sprintf("%d KB", n/1024)
	}
	return fmt.Sprintf("%d B", n)
}

// summarize sets the candidate's medians from its runs.
func (c *Candidate) summarize(raw int64) {
	c.DBSizeBytes = median(collect(c.Runs, func(x Run) float64 { return float64(x.DBSizeBytes) }))
	if c.DBSizeBytes > 0 {
		c.Ratio = float64(raw) / c.DBSizeBytes
	}
	c.WriteMBps = median(collect(c.Runs, func(x Run) float64 { return mibPerSec(raw, x.WriteSeconds) }))
	c.ReadMBps = median(collect(c.Runs, func(x Run) float64 { return mibPerSec(raw, x.ReadSeconds+x.AbsentSeconds) }))
}

// dominates reports whether a is at least as good as b on size, write and
// read, and better on one.
func dominates(a, b Candidate) bool {
	if a.DBSizeBytes > b.DBSizeBytes || a.WriteMBps < b.WriteMBps || a.ReadMBps < b.ReadMBps {
		return false
	}
	return a.DBSizeBytes < b.DBSizeBytes || a.WriteMBps > b.WriteMBps || a.ReadMBps > b.ReadMBps
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

// choose marks the Pareto frontier of cs and returns the index of the
// candidate recommended for goal: among the frontier members whose score is
// within MinGain of the best (equal, given the noise of sample-scale
// speeds), the one that changes the fewest keys of base, then the one with
// the best score, then the first.
func choose(cs []Candidate, goal Goal, base Setting, cfg *config.Config) int {
	markPareto(cs)
	ref := newScoreRef(cs)
	best := math.Inf(-1)
	for _, c := range cs {
		if c.Pareto {
			best = max(best, ref.score(goal, c))
		}
	}
	chosen := -1
	for i, c := range cs {
		if !c.Pareto || ref.score(goal, c) < best*(1-MinGain) {
			continue
		}
		if chosen < 0 {
			chosen = i
			continue
		}
		n, m := changes(c.Setting, base, cfg), changes(cs[chosen].Setting, base, cfg)
		if n < m || n == m && ref.score(goal, c) > ref.score(goal, cs[chosen]) {
			chosen = i
		}
	}
	return chosen
}

// changes counts the keys of s that differ from base: the effective codecs,
// the block size and the bloom bits.
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

// scoreRef holds the best figures over a set of candidates, the
// normalisation of the balanced score.
type scoreRef struct{ minSize, maxWrite, maxRead float64 }

func newScoreRef(cs []Candidate) scoreRef {
	r := scoreRef{minSize: math.Inf(1)}
	for _, c := range cs {
		r.minSize = min(r.minSize, c.DBSizeBytes)
		r.maxWrite = max(r.maxWrite, c.WriteMBps)
		r.maxRead = max(r.maxRead, c.ReadMBps)
	}
	return r
}

// score returns c's score for the goal: higher is better. A candidate that
// dominates another scores higher for every goal, so the best score of a
// set is always on its Pareto frontier.
func (r scoreRef) score(g Goal, c Candidate) float64 {
	switch g {
	case GoalSize:
		return 1 / c.DBSizeBytes
	case GoalWrite:
		return c.WriteMBps
	case GoalRead:
		return c.ReadMBps
	}
	if c.DBSizeBytes <= 0 || r.maxWrite <= 0 || r.maxRead <= 0 {
		return 0
	}
	return math.Cbrt(r.minSize / c.DBSizeBytes * c.WriteMBps / r.maxWrite * c.ReadMBps / r.maxRead)
}

// Table returns the candidates as a report.Table, marking the frontier and
// the chosen one.
func (res *RecommendResult) Table() *report.Table {
	t := &report.Table{Columns: []report.Column{
		{Name: "#", Key: "candidate"},
		{Name: "Varied"},
		{Name: "Compression"},
		{Name: "Block", Unit: "KB", Format: "%g"},
		{Name: "Bloom bits"},
		{Name: "DB Size", Unit: "MB", Format: "%.2f"},
		{Name: "Ratio", Format: "%.2fx"},
		{Name: "Write", Unit: "MB/s", Format: "%.1f"},
		{Name: "Read", Unit: "MB/s", Format: "%.1f"},
		{Name: "Pareto"},
		{Name: "Chosen"},
	}}
	for i, c := range res.Candidates {
		pareto, chosen := "", ""
		if c.Pareto {
			pareto = "yes"
		}
		if i == res.Chosen {
			chosen = "<- " + string(res.Goal)
		}
		t.Rows = append(t.Rows, []any{i + 1, c.Varied, codecPair(c.apply(res.Base)), float64(c.BlockSize) / 1024, c.BloomBits,
			c.DBSizeBytes / MiB, c.Ratio, c.WriteMBps, c.ReadMBps, pareto, chosen})
	}
	runs := "one run"
	if res.Repeat > 1 {
		runs = fmt.Sprintf("the median of %d runs", res.Repeat)
	}
	t.Notes = []string{
		fmt.Sprintf("Data: %s, %.1f MB of keys and values. Each figure is %s of the `tune compression` measurement.", res.Source, mib(res.RawBytes), runs),
		fmt.Sprintf("MB = MiB. Read: key+value bytes / time of one Get per key plus one Get of an absent key next to each (a 50/50 mix), with a %d MB block cache, smaller than the sample's database as production caches are (the recommended config keeps the base's block_cache_size_mb).", SampleCacheMB(res.RawBytes)),
		"Bloom bits show in the size only: the full compaction puts every table in L6, and Pebble's Get never reads the filters of L6 tables; filters pay off for reads of absent keys while tables sit in L0-L5 (see `tune doctor`).",
		fmt.Sprintf("Pareto: no other candidate is as small, as fast to write and as fast to read, and better on one. Goal %s: %s among the Pareto members; scores within %.0f%% of the best count as equal, and among them the one changing the fewest keys of the base wins.", res.Goal, goalRule(res.Goal), MinGain*100),
		fmt.Sprintf("One dimension is varied at a time around the base; \"combined\" takes each dimension's best value when it beats the base by more than %.0f%% on the goal's score.", MinGain*100),
	}
	return t
}

func goalRule(g Goal) string {
	switch g {
	case GoalSize:
		return "the smallest DB size"
	case GoalWrite:
		return "the fastest write"
	case GoalRead:
		return "the fastest read"
	}
	return "the best geometric mean of min size / size, write / max write and read / max read"
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
	fmt.Fprintf(&b, "# Chosen: %s: %.2fx, write %.1f MB/s, read %.1f MB/s (MB = MiB).\n", c.Name, c.Ratio, c.WriteMBps, c.ReadMBps)
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
