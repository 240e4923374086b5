package tune

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stratadb/strata/config"
)

// TestRecommend runs the whole recommendation on a small sample and checks
// what a user reads: every planned candidate measured once, the base first,
// absent reads against L0-L5 tables, and a chosen config that satisfies
// the goal's constraints in the very table printed, loadable as TOML.
func TestRecommend(t *testing.T) {
	base := config.Default()
	base.MemtableSizeMB = 64
	res, err := RunRecommend(context.Background(), RecommendOptions{Base: base, Data: smallData(t), Sample: 200, Goal: GoalSize, Seed: 1, MinTime: testMinTime})
	if err != nil {
		t.Fatal(err)
	}
	if res.Entities != 200 || len(res.Candidates) != len(planCandidates(base)) {
		t.Fatalf("%d entities, %d candidates, want 200 and %d", res.Entities, len(res.Candidates), len(planCandidates(base)))
	}
	if res.Candidates[0].Varied != "base" || res.Candidates[0].Setting != settingOf(base) {
		t.Errorf("first candidate is %q %+v, want the base", res.Candidates[0].Varied, res.Candidates[0].Setting)
	}
	varied := map[string]int{}
	seen := map[string]bool{}
	for _, c := range res.Candidates {
		varied[c.Varied]++
		if seen[c.key(base)] {
			t.Errorf("%s measured twice", c.Name)
		}
		seen[c.key(base)] = true
		if len(c.Runs) != 1 || !(c.DBSizeBytes > 0 && c.WriteMBps > 0 && c.IngestMBps > 0 && c.IngestMBps < c.WriteMBps && c.ReadMBps > 0 && c.AbsentMBps > 0) || c.Runs[0].AbsentReads != 200 {
			t.Errorf("%s: %+v", c.Name, c)
		}
		if !c.AbsentMeasured {
			t.Errorf("%s: absent reads met tables %v, want L0-L5", c.Name, c.Runs[0].AbsentTables)
		}
	}
	// The bottom grid: every zstd level with every bottommost block size.
	if want := len(recommendZstdLevels)*len(recommendBottomBlocks) - 1; varied["bottom"] < want {
		t.Errorf("%d bottom candidates, want >= %d: %v", varied["bottom"], want, varied)
	}
	checkChosenInTable(t, res)

	// The TOML is the base config with the chosen keys, and config.Load
	// accepts it.
	chosen := res.Candidates[res.Chosen]
	text, err := res.ConfigTOML()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "strata.toml")
	if err := os.WriteFile(path, text, 0o644); err != nil {
		t.Fatal(err)
	}
	loaded, err := config.Load(path)
	if err != nil {
		t.Fatalf("config.Load of the recommendation: %v\n%s", err, text)
	}
	if settingOf(loaded) != chosen.Setting || loaded.MemtableSizeMB != 64 {
		t.Errorf("loaded %+v, chosen %+v", settingOf(loaded), chosen.Setting)
	}
	if chosen.uncompressed(base) {
		t.Errorf("chose %s for data the base stores at %.2fx", chosen.Name, res.Candidates[0].Ratio)
	}
}

// checkChosenInTable renders res as JSON and checks that the row marked
// chosen says "yes" under Within bounds and that its printed figures
// satisfy the goal's bounds.
func checkChosenInTable(t *testing.T, res *RecommendResult) {
	t.Helper()
	var js bytes.Buffer
	if err := res.Table().Render(&js, "json"); err != nil {
		t.Fatal(err)
	}
	var rows []map[string]any
	if err := json.Unmarshal(js.Bytes(), &rows); err != nil {
		t.Fatalf("JSON: %v\n%s", err, js.String())
	}
	var chosen []map[string]any
	for _, r := range rows {
		for _, key := range []string{"write_mb_per_cpu_s", "read_mb_per_cpu_s", "size_vs_base", "ingest_vs_base", "read_vs_base", "within_bounds"} {
			if _, ok := r[key]; !ok {
				t.Fatalf("JSON row lacks %q: %v", key, r)
			}
		}
		if r["chosen"] != "" {
			chosen = append(chosen, r)
		}
	}
	if len(chosen) != 1 {
		t.Fatalf("%d rows marked chosen, want 1", len(chosen))
	}
	r, b := chosen[0], res.Bounds
	if r["within_bounds"] != "yes" {
		t.Errorf("chosen row is not within bounds: %v", r)
	}
	num := func(k string) float64 { return r[k].(float64) }
	switch res.Goal {
	case GoalSize:
		if num("ingest_vs_base") < 1-b.MaxWriteLoss || num("read_vs_base") < 1-b.MaxReadLoss {
			t.Errorf("goal size chose a row outside its bounds: %v", r)
		}
	case GoalRead, GoalWrite:
		if num("size_vs_base") > 1+b.MaxSizeGrowth {
			t.Errorf("goal %s chose a row outside its bound: %v", res.Goal, r)
		}
	}
	if !strings.HasSuffix(r["chosen"].(string), string(res.Goal)) {
		t.Errorf("chosen mark %q does not name goal %s", r["chosen"], res.Goal)
	}
}

// cand returns a synthetic candidate.
func cand(s Setting, size, write, read float64) Candidate {
	return Candidate{Setting: s, Name: fmt.Sprintf("%+v", s), DBSizeBytes: size, Ratio: 1000 / size, WriteMBps: write, IngestMBps: write, ReadMBps: read,
		AbsentMBps: read, AbsentMeasured: true}
}

func TestChooseGoals(t *testing.T) {
	cfg := config.Default()
	b := settingOf(cfg)
	with := func(f func(*Setting)) Setting { s := b; f(&s); return s }
	cs := []Candidate{
		cand(b, 500, 100, 100), // 0: the base, 2x
		cand(with(func(s *Setting) { s.Bottommost = "zstd:19" }), 400, 95, 92),                   // 1: smaller, within 10%
		cand(with(func(s *Setting) { s.BottommostBlockSize = 131072 }), 350, 96, 70),             // 2: smallest, reads too slow
		cand(with(func(s *Setting) { s.BottommostBlockSize = 4096 }), 540, 100, 130),             // 3: fastest read within +10% size
		cand(with(func(s *Setting) { s.Default = "snappy" }), 520, 140, 100),                     // 4: fastest write within +10%
		cand(with(func(s *Setting) { s.Default, s.Bottommost = "zstd", "zstd" }), 600, 300, 300), // 5: fast but +20%
	}
	for goal, want := range map[Goal]int{GoalSize: 1, GoalRead: 3, GoalWrite: 4, GoalBalanced: 5} {
		t.Run(string(goal), func(t *testing.T) {
			res := &RecommendResult{Candidates: append([]Candidate(nil), cs...), Goal: goal, Bounds: DefaultBounds(), Base: cfg, Config: cfg}
			res.Chosen = choose(res.Candidates, goal, res.Bounds, cfg)
			if res.Chosen != want {
				t.Errorf("chose %d, want %d", res.Chosen, want)
			}
			checkChosenInTable(t, res)
		})
	}
	// Looser bounds move the choice: with 35% read loss allowed, size
	// takes the 128 KB blocks.
	loose := DefaultBounds()
	loose.MaxReadLoss = 0.35
	if got := choose(append([]Candidate(nil), cs...), GoalSize, loose, cfg); got != 2 {
		t.Errorf("size with --max-read-loss 0.35 chose %d, want 2", got)
	}
	// Within SizeTie the candidate changing fewer keys wins.
	tie := []Candidate{cand(b, 520, 100, 100), cand(with(func(s *Setting) { s.Bottommost, s.BlockSize = "zstd:9", 8192 }), 497, 100, 100), cand(with(func(s *Setting) { s.Bottommost = "zstd:9" }), 498, 100, 100)}
	if got := choose(tie, GoalSize, DefaultBounds(), cfg); got != 2 {
		t.Errorf("size tie chose %d, want 2 (one key changed)", got)
	}
	if n := changes(with(func(s *Setting) { s.Bottommost = "zstd:3"; s.BlockSize = 8192 }), b, cfg); n != 1 {
		t.Errorf("changes = %d, want 1 (zstd is zstd:3)", n)
	}
	if n := changes(with(func(s *Setting) { s.Default = "minlz" }), b, cfg); n != 0 {
		t.Errorf("changes = %d, want 0 (lz4 is stored as minlz)", n)
	}
}

// TestNeverNoneWhenCompressible: whatever the speeds and bounds, no goal
// turns compression off for data the base codecs store at >= 1.5x, even
// when no compression is ten times faster.
func TestNeverNoneWhenCompressible(t *testing.T) {
	cfg := config.Default()
	b := settingOf(cfg)
	none := b
	none.Default, none.Bottommost = "none", "none"
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 500 {
		ratio := 1.5 + 2*r.Float64()
		base := cand(b, 1000/ratio, 50+100*r.Float64(), 50+100*r.Float64())
		fast := cand(none, 1000, base.IngestMBps*(1+10*r.Float64()), base.ReadMBps*(1+10*r.Float64()))
		other := b
		other.BottommostBlockSize = 65536
		cs := []Candidate{base, fast, cand(other, base.DBSizeBytes*0.9, base.IngestMBps*r.Float64()*2, base.ReadMBps*r.Float64()*2)}
		bounds := Bounds{MaxWriteLoss: r.Float64() * 0.99, MaxReadLoss: r.Float64() * 0.99, MaxSizeGrowth: r.Float64() * 9.9}
		for _, goal := range []Goal{GoalSize, GoalWrite, GoalRead, GoalBalanced} {
			if got := choose(cs, goal, bounds, cfg); cs[got].uncompressed(cfg) {
				t.Fatalf("case %d, goal %s, bounds %+v: chose none/none over a base storing %.2fx (%+v)", i, goal, bounds, ratio, cs)
			}
		}
	}
	// Data that does not compress may drop compression for speed.
	flat := []Candidate{cand(b, 980, 100, 100), cand(none, 1000, 200, 200)}
	if got := choose(flat, GoalBalanced, DefaultBounds(), cfg); got != 1 {
		t.Errorf("incompressible data: balanced chose %d, want none/none (1)", got)
	}
}

// TestNeverLowersBloomWithoutAbsentReads: fewer bloom bits than the base
// only when measured with absent-key reads against L0-L5 tables, and only
// when those reads stay within the read bound.
func TestNeverLowersBloomWithoutAbsentReads(t *testing.T) {
	cfg := config.Default()
	b := settingOf(cfg)
	noBloom := b
	noBloom.BloomBits = 0
	for _, goal := range []Goal{GoalSize, GoalWrite, GoalRead, GoalBalanced} {
		cs := []Candidate{cand(b, 500, 100, 100), cand(noBloom, 450, 150, 150)}
		cs[1].AbsentMeasured = false // e.g. every table in L6
		if got := choose(cs, goal, DefaultBounds(), cfg); got != 0 {
			t.Errorf("goal %s: chose bloom 0 without absent reads in L0-L5 (%s)", goal, cs[1].Excluded)
		}
		cs[1].AbsentMeasured, cs[1].AbsentMBps = true, 30 // measured: 0.3x the base's
		if got := choose(cs, goal, DefaultBounds(), cfg); got != 0 {
			t.Errorf("goal %s: chose bloom 0 with absent reads at 0.3x the base's", goal)
		}
		cs[1].AbsentMBps = 100 // measured and as fast: allowed
		if got := choose(cs, goal, DefaultBounds(), cfg); got != 1 {
			t.Errorf("goal %s: chose %d, want bloom 0 once measured as fast (%s)", goal, got, cs[1].Excluded)
		}
	}
}

func TestParseGoal(t *testing.T) {
	if g, err := ParseGoal(" Size "); err != nil || g != GoalSize {
		t.Errorf("%v %v", g, err)
	}
	if _, err := ParseGoal("cheap"); err == nil || !strings.Contains(err.Error(), "size, write, read, balanced") {
		t.Errorf("%v", err)
	}
}

func TestBoundsValidate(t *testing.T) {
	if err := DefaultBounds().Validate(); err != nil {
		t.Fatal(err)
	}
	err := Bounds{MaxWriteLoss: 1, MaxReadLoss: -0.1, MaxSizeGrowth: 11}.Validate()
	for _, want := range []string{"--max-write-loss 1: must be from 0 to 1", "--max-read-loss -0.1", "--max-size-growth 11: must be from 0 to 10"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v lacks %q", err, want)
		}
	}
}

// TestPlanKeepsBaseSpelling: a candidate storing the base's bottommost
// codec keeps the base's spelling, so the recommended TOML does not list
// "zstd:3" as a change from "zstd".
func TestPlanKeepsBaseSpelling(t *testing.T) {
	base := config.Default()
	for _, c := range planCandidates(base) {
		if c.Bottommost == "zstd:3" {
			t.Errorf("%s (%s) spells the base's zstd as zstd:3", c.Name, c.Varied)
		}
	}
}
