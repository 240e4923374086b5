package tune

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stratadb/strata/config"
	"github.com/stratadb/strata/engine"
	"github.com/stratadb/strata/internal/fsutil"
	"github.com/stratadb/strata/internal/report"
)

func TestDoctorBloomOnL0(t *testing.T) {
	cfg := config.Default()
	cfg.DBPath = filepath.Join(t.TempDir(), "db")
	loadDB(t, cfg, false)
	rep, err := RunDoctor(context.Background(), DoctorOptions{Config: cfg, Probe: 200})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Figures.UpperTables != 1 || rep.Figures.Absent.FilterChecks == 0 || rep.Figures.Absent.FilterUsefulness < FilterUsefulnessMin {
		t.Errorf("10 bloom bits on an L0 table: %+v", rep.Figures.Absent)
	}
	if f := findingFor(rep, "bloom_bits_per_key"); f != nil {
		t.Errorf("bloom finding with 10 bits: %+v", f)
	}
	// Without filters, with every table in L6: Strata's Get would consult
	// L6 filters (optimize_filters_for_hits = false), so filters are
	// advised; with optimize_filters_for_hits = true no bloom setting would
	// change a read, so no finding.
	for _, hits := range []bool{false, true} {
		cfg = config.Default()
		cfg.DBPath = filepath.Join(t.TempDir(), "db")
		cfg.BloomBitsPerKey = 0
		cfg.OptimizeFiltersForHits = hits
		loadDB(t, cfg, true)
		if rep, err = RunDoctor(context.Background(), DoctorOptions{Config: cfg, Probe: 200}); err != nil {
			t.Fatal(err)
		}
		if f := findingFor(rep, "bloom_bits_per_key"); (f != nil) == hits {
			t.Errorf("optimize_filters_for_hits = %v, every table in L6: bloom finding %+v", hits, f)
		}
	}
}

// TestDoctorOptimizeFiltersForHits: with every table in L6 and
// optimize_filters_for_hits = true, reads of absent keys read L6 data
// blocks and doctor says so; with false the L6 filters answer them.
func TestDoctorOptimizeFiltersForHits(t *testing.T) {
	for _, hits := range []bool{true, false} {
		cfg := config.Default()
		cfg.DBPath = filepath.Join(t.TempDir(), "db")
		cfg.OptimizeFiltersForHits = hits
		loadDB(t, cfg, true)
		rep, err := RunDoctor(context.Background(), DoctorOptions{Config: cfg, Probe: 200})
		if err != nil {
			t.Fatal(err)
		}
		f := findingFor(rep, "optimize_filters_for_hits")
		if hits && (f == nil || !strings.HasPrefix(f.Try, "false") || !strings.Contains(f.Figure, "200 absent-key reads")) {
			t.Errorf("optimize_filters_for_hits = true: finding %+v in %+v (absent %+v)", f, rep.Findings, rep.Figures.Absent)
		}
		if !hits && (f != nil || rep.Figures.Absent.FilterChecks == 0 || rep.Figures.FilterTables != rep.Figures.Tables) {
			t.Errorf("optimize_filters_for_hits = false: finding %+v, figures %+v", f, rep.Figures)
		}
	}
}

// loadDB writes the small data into a fresh database with cfg, flushes and
// closes it, optionally after a full compaction.
func loadDB(t *testing.T, cfg *config.Config, compact bool) {
	t.Helper()
	db, err := engine.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	d := smallData(t)
	b := db.NewBatch()
	for i := range d.Keys {
		if err := b.Put(d.Keys[i], d.Values[i]); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	_ = b.Close()
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	if compact {
		if err := db.CompactAll(); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

func findingFor(rep *DoctorReport, key string) *Finding {
	for i := range rep.Findings {
		if rep.Findings[i].Key == key {
			return &rep.Findings[i]
		}
	}
	return nil
}

func TestDoctorCodecMismatch(t *testing.T) {
	cfg := config.Default()
	cfg.DBPath = filepath.Join(t.TempDir(), "db")
	loadDB(t, cfg, false) // one L0 table, lz4 stored as MinLZ
	cfg.CompressionDefault = "snappy"
	rep, err := RunDoctor(context.Background(), DoctorOptions{Config: cfg, Probe: 200})
	if err != nil {
		t.Fatal(err)
	}
	f := findingFor(rep, "compression_default")
	if f == nil {
		t.Fatalf("no codec finding: %+v", rep.Findings)
	}
	if !strings.Contains(f.Figure, "1 MinLZ of 1 tables") || !strings.Contains(f.Figure, "snappy") || !strings.Contains(f.Try, "compact") {
		t.Errorf("finding %+v", f)
	}
	if rep.Figures.MismatchedTables != 1 {
		t.Errorf("mismatched tables %d", rep.Figures.MismatchedTables)
	}
}

func TestDoctorNoBloom(t *testing.T) {
	cfg := config.Default()
	cfg.DBPath = filepath.Join(t.TempDir(), "db")
	cfg.BloomBitsPerKey = 0
	loadDB(t, cfg, false) // one L0 table: reads would consult its filter
	rep, err := RunDoctor(context.Background(), DoctorOptions{Config: cfg, Probe: 200})
	if err != nil {
		t.Fatal(err)
	}
	f := findingFor(rep, "bloom_bits_per_key")
	if f == nil || f.Try != "10" || !strings.Contains(f.Figure, "bloom_bits_per_key = 0") || !strings.Contains(f.Figure, "200 absent-key reads") {
		t.Fatalf("bloom finding %+v in %+v", f, rep.Findings)
	}
	var js bytes.Buffer
	if err := rep.Write(&js, report.FormatJSON); err != nil {
		t.Fatal(err)
	}
	var parsed struct {
		Findings []Finding      `json:"findings"`
		Figures  map[string]any `json:"figures"`
	}
	if err := json.Unmarshal(js.Bytes(), &parsed); err != nil {
		t.Fatalf("%v\n%s", err, js.String())
	}
	if len(parsed.Findings) != len(rep.Findings) || parsed.Figures["bloom_bits_per_key"] != float64(0) {
		t.Errorf("JSON %+v", parsed)
	}
}

func TestDoctorHealthy(t *testing.T) {
	cfg := config.Default()
	cfg.DBPath = filepath.Join(t.TempDir(), "db")
	loadDB(t, cfg, true)
	input, err := LoadDataset(writeJSONL(t, jsonLines(100)...))
	if err != nil {
		t.Fatal(err)
	}
	rep, err := RunDoctor(context.Background(), DoctorOptions{Config: cfg, Input: input, Probe: 200})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Findings) != 0 {
		t.Fatalf("findings on a healthy database: %+v", rep.Findings)
	}
	if rep.Figures.Load == nil || rep.Figures.Load.Entities != 100 || rep.Figures.Present.Reads != 200 || rep.Figures.Absent.Reads != 200 {
		t.Errorf("figures %+v", rep.Figures)
	}
	// Every table is in L6, whose filters Strata's Get reads
	// (optimize_filters_for_hits = false).
	if rep.Figures.UpperTables != 0 || rep.Figures.Absent.FilterChecks == 0 || rep.Figures.FilterTables != 1 {
		t.Errorf("figures %+v", rep.Figures)
	}
	var text bytes.Buffer
	if err := rep.Write(&text, report.FormatTable); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"no findings", "present-key reads: 200", "absent-key reads: 200", "load: 100 entities", "Settings without effect on Pebble", "partition_filters = true"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, text.String())
		}
	}
}

func TestFindings(t *testing.T) {
	cfg := config.Default()
	m := &engine.Metrics{}
	for l := range m.Levels {
		m.Levels[l].TableCodecs = map[string]int{}
	}
	f := &DoctorFigures{
		Tables: 4, UpperTables: 3,
		Stalls: 3, StallSeconds: 1.5, CompactionDebtBytes: 1 << 30, L0Tables: 9,
		CacheHitRate: 0.5, CacheUsedBytes: cfg.BlockCacheSizeMB << 20, CacheCapacityBytes: cfg.BlockCacheSizeMB << 20,
		Present: ProbeFigures{Reads: 100, MissesPerRead: 2},
		Absent:  ProbeFigures{Reads: 100, FilterChecks: 100, FilterUsefulness: 0.6},
	}
	got := findings(cfg, m, f)
	byKey := map[string]Finding{}
	for _, x := range got {
		byKey[x.Key] = x
	}
	if x := byKey["bloom_bits_per_key"]; x.Try != "16" || !strings.Contains(x.Figure, "60.0% of 100 checks") {
		t.Errorf("bloom: %+v", x)
	}
	if x := byKey["max_background_jobs"]; !strings.HasPrefix(x.Try, "4") || !strings.Contains(x.Figure, "3 write stalls") ||
		!strings.Contains(x.Figure, "compaction debt 1024.0 MB") || !strings.Contains(x.Figure, "9 L0 tables") || !strings.Contains(x.Try, "use_direct_io_for_flush_and_compaction") {
		t.Errorf("background jobs: %+v", x)
	}
	if x := byKey["block_cache_size_mb"]; !strings.HasPrefix(x.Try, "512") || !strings.Contains(x.Try, "memtable_size_mb = 128") || !strings.Contains(x.Figure, "hit rate 50.0%") {
		t.Errorf("cache: %+v", x)
	}
	// A cache that is not full has cold misses, not too small a cache.
	f.CacheUsedBytes = 1 << 20
	for _, x := range findings(cfg, m, f) {
		if x.Key == "block_cache_size_mb" {
			t.Errorf("cache finding with a cache 1 MB full: %+v", x)
		}
	}
	if moreBloomBits(10) != 16 || moreBloomBits(16) != 22 || moreBloomBits(62) != 64 {
		t.Error("moreBloomBits")
	}
}

// TestDoctorChangesNothing checks that diagnosing an existing database,
// even with flags that differ from its recorded config, leaves every file
// as it was (size and mtime): the doctor opens it read-only.
func TestDoctorChangesNothing(t *testing.T) {
	cfg := config.Default()
	cfg.DBPath = filepath.Join(t.TempDir(), "db")
	loadDB(t, cfg, false)
	before, err := fsutil.Listing(cfg.DBPath)
	if err != nil {
		t.Fatal(err)
	}
	cfg.CompressionDefault = "snappy"
	if _, err := RunDoctor(context.Background(), DoctorOptions{Config: cfg, Probe: 200}); err != nil {
		t.Fatal(err)
	}
	after, err := fsutil.Listing(cfg.DBPath)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(before, after) {
		t.Errorf("the doctor changed the database's files:\nbefore %q\nafter  %q", before, after)
	}
}
