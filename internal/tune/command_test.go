package tune

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stratadb/strata/config"
)

// run executes tune (NewRootCommand) with args and returns its stdout, stderr and error.
func run(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	root := NewRootCommand()
	var stdout, stderr bytes.Buffer
	root.SetOut(&stdout)
	root.SetErr(&stderr)
	root.SetArgs(args)
	err := root.Execute()
	return stdout.String(), stderr.String(), err
}

func TestHelpListsCommandsWithExamples(t *testing.T) {
	out, _, err := run(t, "help")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"compression", "codecs", "options", "import", "recommend", "doctor", "memory", "Examples:", "tune compression --repeat 3 --baseline --format markdown"} {
		if !strings.Contains(out, want) {
			t.Errorf("help lacks %q:\n%s", want, out)
		}
	}
	for _, cmd := range []string{"compression", "codecs", "options", "import", "recommend", "doctor", "memory"} {
		out, _, err := run(t, "help", cmd)
		if err != nil || !strings.Contains(out, "Examples:") || !strings.Contains(out, "  tune "+cmd) {
			t.Errorf("help %s: %v\n%s", cmd, err, out)
		}
	}
}

func TestCompressionCommand(t *testing.T) {
	dir := t.TempDir()
	plot := filepath.Join(t.TempDir(), "tradeoff.svg")
	out, stderr, err := run(t, "compression", "--entities", "200", "--size", "512", "--profiles", "none/none,zstd/zstd", "--format", "csv", "--dir", dir, "--min-time", "1ns", "--plot", plot)
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	records, err := csv.NewReader(strings.NewReader(out)).ReadAll()
	if err != nil || len(records) != 3 || records[1][0] != "none / none" || records[2][0] != "zstd / zstd" {
		t.Fatalf("CSV %q: %v", records, err)
	}
	if !slices.Contains(records[0], "write_mb_per_cpu_s") || !slices.Contains(records[0], "read_mb_per_cpu_s") {
		t.Errorf("CSV header %q lacks the MB per CPU-second columns", records[0])
	}
	if svg, err := os.ReadFile(plot); err != nil || !bytes.Contains(svg, []byte("<svg")) || !strings.Contains(stderr, "plot written to "+plot) {
		t.Errorf("--plot: %v, stderr %s", err, stderr)
	}
	if !strings.Contains(stderr, "databases kept in "+dir) {
		t.Errorf("stderr: %s", stderr)
	}
}

func TestRecommendCommand(t *testing.T) {
	dir := t.TempDir()
	plot, toml := filepath.Join(dir, "tradeoff.svg"), filepath.Join(dir, "strata.toml")
	out, stderr, err := run(t, "recommend", "--entities", "120", "--size", "512", "--sample", "100", "--min-time", "1ns",
		"--goal", "size", "--max-write-loss", "0.5", "--max-read-loss", "0.5", "--format", "json", "--out", toml, "--plot", plot)
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	var rows []map[string]any
	if err := json.Unmarshal([]byte(out), &rows); err != nil || len(rows) < 20 {
		t.Fatalf("JSON %d rows: %v\n%s", len(rows), err, out)
	}
	chosen := 0
	for _, r := range rows {
		if r["chosen"] == "<- size" {
			chosen++
			if r["within_bounds"] != "yes" || r["ingest_vs_base"].(float64) < 0.5 || r["read_vs_base"].(float64) < 0.5 {
				t.Errorf("chosen row outside --max-write-loss/--max-read-loss 0.5: %v", r)
			}
		}
	}
	if chosen != 1 {
		t.Errorf("%d rows chosen", chosen)
	}
	if _, err := config.Load(toml); err != nil {
		t.Errorf("--out: %v", err)
	}
	if svg, err := os.ReadFile(plot); err != nil || !bytes.Contains(svg, []byte("chosen: ")) {
		t.Errorf("--plot: %v", err)
	}
}

func TestCompressionCommandErrors(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(t.TempDir(), "bad.jsonl")
	if err := os.WriteFile(bad, []byte("{\"a\":1}\nnot json\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"compression", "--profiles", "lz4/zsdt"}, `profile "lz4/zsdt": unknown codec "zsdt"`},
		{[]string{"compression", "--dir", filepath.Join(file, "sub")}, "--dir " + filepath.Join(file, "sub")},
		{[]string{"compression", "--repeat", "0"}, "--repeat 0: must be >= 1"},
		{[]string{"compression", "--format", "yaml"}, `unknown format "yaml"`},
		{[]string{"compression", "--input", bad}, "line 2: not valid JSON"},
		{[]string{"compression", "--input", bad + ".missing"}, "no such file"},
		{[]string{"compression", "extra"}, `unexpected argument "extra"`},
		{[]string{"codecs", "--codecs", "lz4,brotli"}, `unknown codec "brotli"`},
		{[]string{"recommend", "--format", "json"}, "give --out FILE"},
		{[]string{"recommend", "--goal", "cheap"}, "--goal"},
		{[]string{"recommend", "--max-read-loss", "1.5"}, "--max-read-loss 1.5: must be from 0 to 1"},
		{[]string{"recommend", "--max-size-growth", "-1"}, "--max-size-growth -1"},
		{[]string{"recommend", "--min-time", "0s"}, "--min-time 0s: must be > 0"},
		{[]string{"recommend", "--plot", "tradeoff.png"}, "--plot tradeoff.png: the plot is SVG"},
		{[]string{"compression", "--plot", filepath.Join(file, "x.svg")}, "does not exist"},
		{[]string{"compression", "--min-time", "-1s"}, "--min-time -1s: must be > 0"},
		{[]string{"compression", "--configs", "default", "--profiles", "lz4/zstd"}, "give either --configs or --profiles/--config"},
		{[]string{"compression", "--configs", "default," + bad + ".toml"}, "--configs: "},
		{[]string{"doctor"}, "need --config FILE or --db DIR"},
		{[]string{"doctor", "--db", t.TempDir()}, "not a Strata database"},
		{[]string{"doctor", "--db", t.TempDir(), "--format", "csv"}, "--format csv: allowed are table, markdown, json"},
		{[]string{"options", "--config", "a.toml", "--db", "b"}, "exclusive"},
		{[]string{"options", "--db", t.TempDir()}, "not a Strata database"},
		{[]string{"import"}, "takes exactly one argument"},
		{[]string{"import", file}, "the file is empty"},
	} {
		out, _, err := run(t, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: err %v, want one containing %q", tc.args, err, tc.want)
		}
		if out != "" {
			t.Errorf("%q: printed %q on failure", tc.args, out)
		}
	}
}

func TestOptionsImportRoundTrip(t *testing.T) {
	dir := t.TempDir()
	cfg := config.Default()
	cfg.DBPath = filepath.Join(dir, "db")
	cfg.CompressionDefault = "minlz"
	cfg.CompressionBottommost = "zstd:9"
	cfg.BlockSize = 32768
	cfg.BlockCacheSizeMB = 1024
	text, _ := cfg.Marshal(config.FormatTOML)
	cfgPath := filepath.Join(dir, "strata.toml")
	if err := os.WriteFile(cfgPath, text, 0o644); err != nil {
		t.Fatal(err)
	}
	opts, _, err := run(t, "options", "--config", cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	optsPath := filepath.Join(dir, "OPTIONS-rocksdb")
	if err := os.WriteFile(optsPath, []byte(opts), 0o644); err != nil {
		t.Fatal(err)
	}
	imported, _, err := run(t, "import", optsPath)
	if err != nil {
		t.Fatal(err)
	}
	got, err := config.Parse([]byte(imported), config.FormatTOML)
	if err != nil {
		t.Fatalf("%v\n%s", err, imported)
	}
	again, _ := got.Marshal(config.FormatTOML)
	if !bytes.Equal(again, text) {
		t.Errorf("round trip:\n%s\nwant\n%s", again, text)
	}
}

func TestErrorLine(t *testing.T) {
	if got := ErrorLine(os.ErrNotExist); got != "tune: file does not exist" {
		t.Error(got)
	}
	_, _, err := run(t, "options", "--db", t.TempDir())
	if got := ErrorLine(err); strings.Count(got, "tune:") != 1 {
		t.Errorf("%q", got)
	}
}

// TestMemoryCommand runs one small row of each table, each in a child
// process, and reads the JSON.
func TestMemoryCommand(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns child processes")
	}
	out, stderr, err := run(t, "memory", "--keys", "2000", "--versions", "2", "--key-size", "32",
		"--memtable-size-mb", "4", "--block-cache-size-mb", "8", "--format", "json")
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	var doc struct {
		Index *struct {
			Kind string           `json:"kind"`
			Rows []map[string]any `json:"rows"`
			Fit  any              `json:"fit"`
			Etcd struct {
				LiveHeap struct{ C1, C2 float64 } `json:"live_heap"`
			} `json:"etcd"`
		} `json:"index"`
		Store *struct {
			Rows             []map[string]any `json:"rows"`
			MemtableSizeMB   int              `json:"memtable_size_mb"`
			BlockCacheSizeMB int              `json:"block_cache_size_mb"`
		} `json:"store"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if doc.Index == nil || len(doc.Index.Rows) != 1 || doc.Store == nil || len(doc.Store.Rows) != 1 {
		t.Fatalf("want one index and one store row:\n%s", out)
	}
	ix := doc.Index.Rows[0]
	for k, want := range map[string]float64{"keys": 2000, "versions": 2, "key_size": 32} {
		if ix[k] != want {
			t.Errorf("index row %s = %v; want %v", k, ix[k], want)
		}
	}
	for _, k := range []string{"total_alloc_bytes", "live_heap_bytes"} {
		if v, ok := ix[k].(float64); !ok || v < 2000*32 {
			t.Errorf("index row %s = %v; want at least the key bytes", k, ix[k])
		}
	}
	if doc.Index.Kind != "keyindex" || doc.Index.Fit != nil || doc.Index.Etcd.LiveHeap.C1 != 113 || doc.Index.Etcd.LiveHeap.C2 != 28 {
		t.Errorf("index table %+v", doc.Index)
	}
	st := doc.Store.Rows[0]
	if v, ok := st["rss_bytes"].(float64); !ok || v <= 0 || st["value_size"] != 256.0 || doc.Store.MemtableSizeMB != 4 || doc.Store.BlockCacheSizeMB != 8 {
		t.Errorf("store table %+v", doc.Store)
	}
	if !strings.Contains(stderr, "row 1/2: index 2K keys x 2 versions x 32 B keys ... ") || !strings.Contains(stderr, "tune memory: 2 rows") {
		t.Errorf("stderr:\n%s", stderr)
	}

	out, _, err = run(t, "memory", "--keys", "1000", "--versions", "1", "--key-size", "16", "--index-only", "--index", "plain", "--progress", "never")
	if err != nil || !strings.Contains(out, "plain google/btree") || strings.Contains(out, "Store memory") {
		t.Errorf("--index-only --index plain: %v\n%s", err, out)
	}
}

func TestMemoryCommandErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"memory", "--keys", "0"}, "--keys 0: must be >= 1"},
		{[]string{"memory", "--keys", "-5"}, "--keys -5: must be >= 1"},
		{[]string{"memory", "--versions", "0"}, "--versions 0: must be >= 1"},
		{[]string{"memory", "--key-size", "4"}, "--key-size 4: must be from 8"},
		{[]string{"memory", "--key-size", "100000000"}, "--key-size 100000000: must be from 8"},
		{[]string{"memory", "--keys", "1000000000000", "--key-size", "64"}, "--keys 1000000000000"},
		{[]string{"memory", "--value-size", "0"}, "--value-size 0: must be from 1"},
		{[]string{"memory", "--store", "--index-only"}, "--store and --index-only are exclusive"},
		{[]string{"memory", "--index-only", "--value-size", "512"}, "--value-size applies to the store table"},
		{[]string{"memory", "--store", "--index", "plain"}, "--index applies to the index table"},
		{[]string{"memory", "--index", "art"}, `--index "art": must be keyindex or plain`},
		{[]string{"memory", "--memtable-size-mb", "-1"}, "--memtable-size-mb -1"},
		{[]string{"memory", "--keys", "many"}, `invalid argument "many" for "--keys"`},
		{[]string{"memory", "--format", "yaml"}, `unknown format "yaml"`},
		{[]string{"memory", "extra"}, `unexpected argument "extra"`},
	} {
		out, _, err := run(t, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: err %v, want one containing %q", tc.args, err, tc.want)
		}
		if out != "" {
			t.Errorf("%q: printed %q on failure", tc.args, out)
		}
	}
}
