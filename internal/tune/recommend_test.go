package tune

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stratadb/strata/config"
)

func TestRecommend(t *testing.T) {
	base := config.Default()
	base.MemtableSizeMB = 64
	res, err := RunRecommend(context.Background(), RecommendOptions{Base: base, Data: smallData(t), Sample: 200, Goal: GoalBalanced, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if res.Entities != 200 || len(res.Candidates) < 13 {
		t.Fatalf("%d entities, %d candidates", res.Entities, len(res.Candidates))
	}
	if res.Candidates[0].Varied != "base" {
		t.Errorf("first candidate is %q, want the base", res.Candidates[0].Varied)
	}
	seen := map[string]bool{}
	for _, c := range res.Candidates {
		if seen[c.key(base)] {
			t.Errorf("%s measured twice", c.Name)
		}
		seen[c.key(base)] = true
		if len(c.Runs) != 1 || !(c.DBSizeBytes > 0 && c.WriteMBps > 0 && c.ReadMBps > 0) || c.Runs[0].AbsentReads != 200 {
			t.Errorf("%s: %+v", c.Name, c)
		}
	}
	chosen := res.Candidates[res.Chosen]
	if !chosen.Pareto {
		t.Errorf("chose %s, which is not on the Pareto frontier", chosen.Name)
	}
	for _, c := range res.Candidates {
		if dominates(c, chosen) {
			t.Errorf("chose %s, dominated by %s", chosen.Name, c.Name)
		}
	}

	// The TOML is the base config with the chosen keys, and config.Load
	// accepts it.
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
	if loaded.BlockSize != chosen.BlockSize || loaded.BloomBitsPerKey != chosen.BloomBits ||
		loaded.CompressionDefault != chosen.Default || loaded.CompressionBottommost != chosen.Bottommost || loaded.MemtableSizeMB != 64 {
		t.Errorf("loaded %+v, chosen %+v", loaded, chosen.Setting)
	}

	var table bytes.Buffer
	if err := res.Table().Render(&table, "table"); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Pareto", "<- balanced", "block size", "bloom bits", "zstd level", "codecs"} {
		if !strings.Contains(table.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, table.String())
		}
	}
}

func TestChoose(t *testing.T) {
	cand := func(size, write, read float64) Candidate {
		return Candidate{DBSizeBytes: size, WriteMBps: write, ReadMBps: read}
	}
	cs := []Candidate{
		cand(100, 50, 50), // 0: small, slow-ish
		cand(200, 90, 60), // 1: fast writes
		cand(150, 60, 95), // 2: fast reads
		cand(210, 80, 55), // 3: dominated by 1
		cand(120, 70, 80), // 4: balanced
	}
	base := config.Default()
	var baseSet Setting
	for goal, want := range map[Goal]int{GoalSize: 0, GoalWrite: 1, GoalRead: 2, GoalBalanced: 4} {
		if got := choose(cs, goal, baseSet, base); got != want {
			t.Errorf("goal %s chose %d, want %d", goal, got, want)
		}
	}
	for i, want := range []bool{true, true, true, false, true} {
		if cs[i].Pareto != want {
			t.Errorf("candidate %d: Pareto %v, want %v", i, cs[i].Pareto, want)
		}
	}
	// A tie on size goes to the candidate that dominates.
	tie := []Candidate{cand(100, 10, 10), cand(100, 20, 20)}
	if got := choose(tie, GoalSize, baseSet, base); got != 1 || tie[0].Pareto {
		t.Errorf("tie: chose %d, Pareto %v", got, tie[0].Pareto)
	}
	// Within MinGain of the best, the candidate closest to the base wins:
	// a 2% faster read is noise, not a reason to drop the bloom filters.
	baseSet = Setting{"lz4", "zstd", 4096, 10}
	near := []Candidate{cand(99, 50, 51), cand(100, 51, 50)}
	near[0].Setting = Setting{"lz4", "zstd", 4096, 0}
	near[1].Setting = baseSet
	if got := choose(near, GoalRead, baseSet, base); got != 1 {
		t.Errorf("chose %d, want the base (1)", got)
	}
	if n := changes(Setting{"lz4", "zstd:3", 8192, 10}, baseSet, base); n != 1 {
		t.Errorf("changes = %d, want 1 (zstd is zstd:3)", n)
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
