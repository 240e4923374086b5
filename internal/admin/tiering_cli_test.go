package admin

import (
	"bufio"
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stratadb/strata/config"
	"github.com/stratadb/strata/engine"
)

// cliChildEnv carries, to TestStrataCLIChild, the arguments of one strata
// command line, separated by newlines.
const cliChildEnv = "STRATA_TIERING_CLI_ARGS"

// TestStrataCLIChild runs one strata command line in this process when
// started by runStrata; otherwise it does nothing.
func TestStrataCLIChild(t *testing.T) {
	args := os.Getenv(cliChildEnv)
	if args == "" {
		t.Skip("runs only as a child of runStrata")
	}
	root := NewRootCommand()
	root.SetArgs(strings.Split(args, "\n"))
	root.SetOut(os.Stdout)
	root.SetErr(os.Stderr)
	if err := root.Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "strata:", err)
		os.Exit(1)
	}
}

// runStrata runs a strata command line in a child process of its own, as a
// user running the tool twice would, and returns its standard output.
func runStrata(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestStrataCLIChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), cliChildEnv+"="+strings.Join(args, "\n"))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("strata %s: %v\n%s%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String()
}

// jsonLine is line i of the test file: a JSON document of about 1 KB.
func jsonLine(i int) string {
	r := rand.New(rand.NewPCG(uint64(i), 3))
	words := []string{"tier", "level", "path", "table", "move", "device", "fast", "cold", "warm", "bytes"}
	var b strings.Builder
	fmt.Fprintf(&b, `{"id":%d,"score":%d,"text":"`, i, r.IntN(1000))
	for b.Len() < 1000 {
		b.WriteString(words[r.IntN(len(words))])
		b.WriteByte(' ')
	}
	b.WriteString(`"}`)
	return b.String()
}

// TestLoadThenCompactHoldsTierTargets is the run of engine's
// TestCompactAllSettlesTheLayout through the tool:
// `strata load` of ~19 MB of JSON Lines, then `strata compact`, each in a
// process of its own, over db_paths of 3 MB, 16 MB and 1 GB (1 MB
// memtables, tables and base level, no compression). When compact's process
// has exited, every path but the last holds at most its target on disk
// (RocksDB's "close to, but not larger than"), and every line reads back.
func TestLoadThenCompactHoldsTierTargets(t *testing.T) {
	if testing.Short() {
		t.Skip("loads 19 MB in child processes")
	}
	dir := t.TempDir()
	cfg := tieredConfig(dir, 3<<20, 16<<20)
	text, err := cfg.Marshal("toml")
	if err != nil {
		t.Fatal(err)
	}
	cfgPath := filepath.Join(dir, "strata.toml")
	if err := os.WriteFile(cfgPath, text, 0o644); err != nil {
		t.Fatal(err)
	}
	const lines = 19000
	data := filepath.Join(dir, "data.jsonl")
	f, err := os.Create(data)
	if err != nil {
		t.Fatal(err)
	}
	w := bufio.NewWriter(f)
	for i := range lines {
		fmt.Fprintln(w, jsonLine(i))
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}

	runStrata(t, "--config", cfgPath, "load", data, "--progress", "never")
	runStrata(t, "--config", cfgPath, "compact")
	stats := runStrata(t, "--config", cfgPath, "stats")
	t.Logf("after load and compact:\n%s", stats)

	for i, p := range cfg.DBPaths[:len(cfg.DBPaths)-1] {
		if size := tableBytes(t, p.Path); size > int64(p.TargetSizeBytes) {
			t.Errorf("db_paths[%d] %s holds %d bytes of tables, over its target of %d",
				i, p.Path, size, p.TargetSizeBytes)
		}
	}
	db, err := engine.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for i := range lines {
		key := fmt.Appendf(nil, "entity:%08d", i)
		if v, err := db.Get(key); err != nil || string(v) != jsonLine(i) {
			t.Fatalf("%s: %v", key, err)
		}
	}
}

// tableBytes sums the sizes of the table files in dir.
func tableBytes(t *testing.T, dir string) int64 {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".sst") {
			info, err := e.Info()
			if err != nil {
				t.Fatal(err)
			}
			n += info.Size()
		}
	}
	return n
}

// tierLine matches one db_paths line of `strata stats`.
var tierLine = regexp.MustCompile(`db_paths\[(\d+)\] (\S+): (\d+) files, ([\d.]+) MB of ([\d.]+) MB target`)

// TestStatsShowsTierPaths: `strata stats` opens the database read-only,
// where no tiering layout runs; it still prints one line per db_paths
// entry with the tables, bytes and target really there, and the
// level-to-path map.
func TestStatsShowsTierPaths(t *testing.T) {
	dir := t.TempDir()
	cfg := tieredConfig(dir, 2<<20, 3<<20)
	db, err := engine.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 8000 {
		j := (i * 7919) % 8000 // every key once, out of order
		if err := db.Put(fmt.Appendf(nil, "key%06d", j), []byte(jsonLine(j))); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.CompactAll(); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	text, err := cfg.Marshal("toml")
	if err != nil {
		t.Fatal(err)
	}
	cfgPath := filepath.Join(dir, "strata.toml")
	if err := os.WriteFile(cfgPath, text, 0o644); err != nil {
		t.Fatal(err)
	}

	out := runStrata(t, "--config", cfgPath, "stats")
	if !strings.Contains(out, "level-to-path map L0:") {
		t.Errorf("no level-to-path map in stats:\n%s", out)
	}
	lines := tierLine.FindAllStringSubmatch(out, -1)
	if len(lines) != len(cfg.DBPaths) {
		t.Fatalf("%d db_paths lines in stats, want %d:\n%s", len(lines), len(cfg.DBPaths), out)
	}
	withTables := 0
	for i, m := range lines {
		p := cfg.DBPaths[i]
		if m[1] != strconv.Itoa(i) || m[2] != p.Path {
			t.Errorf("line %d names db_paths[%s] %s, want db_paths[%d] %s", i, m[1], m[2], i, p.Path)
		}
		files, _ := strconv.Atoi(m[3])
		if want := tableCount(t, p.Path); files != want {
			t.Errorf("db_paths[%d]: stats say %d files, the directory holds %d tables", i, files, want)
		}
		if files > 0 {
			withTables++
		}
		want := fmt.Sprintf("%.2f", float64(tableBytes(t, p.Path))/(1<<20))
		if m[4] != want {
			t.Errorf("db_paths[%d]: stats say %s MB, the directory holds %s MB of tables", i, m[4], want)
		}
		if target := fmt.Sprintf("%.2f", float64(p.TargetSizeBytes)/(1<<20)); m[5] != target {
			t.Errorf("db_paths[%d]: stats say a %s MB target, configured %s MB", i, m[5], target)
		}
	}
	if withTables < 2 {
		t.Errorf("tables in %d of the paths, want them spread over at least 2:\n%s", withTables, out)
	}
	t.Logf("strata stats:\n%s", out)
}

// tableCount counts the table files in dir.
func tableCount(t *testing.T, dir string) int {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".sst") {
			n++
		}
	}
	return n
}

// tieredConfig is a small tiered database under dir: db_paths fast, warm
// (targets as given) and a 1 GB cold path, the WAL apart, 1 MB memtables,
// tables and base level, no compression.
func tieredConfig(dir string, fast, warm uint64) *config.Config {
	cfg := config.Default()
	cfg.DBPath = filepath.Join(dir, "fast")
	cfg.WALDir = filepath.Join(dir, "wal")
	cfg.BlockCacheSizeMB = 8
	cfg.MemtableSizeMB = 1
	cfg.TargetFileSizeBaseMB = 1
	cfg.MaxBytesForLevelBaseMB = 1
	cfg.CompressionDefault, cfg.CompressionBottommost = "none", "none"
	cfg.DBPaths = []config.DBPath{
		{Path: cfg.DBPath, TargetSizeBytes: fast},
		{Path: filepath.Join(dir, "warm"), TargetSizeBytes: warm},
		{Path: filepath.Join(dir, "cold"), TargetSizeBytes: 1 << 30},
	}
	return cfg
}
