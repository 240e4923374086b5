package admin

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stratadb/strata/config"
	"github.com/stratadb/strata/engine"
)

// TestLoadWaitsForCompactions loads with 1 MB memtables, which leaves a
// backlog of L0 tables when the load ends, and checks that load waits for
// the compactions: the database it leaves has L0 below Pebble's compaction
// threshold, and the output says how much debt is left.
func TestLoadWaitsForCompactions(t *testing.T) {
	dir := t.TempDir()
	cfg := config.Default()
	cfg.DBPath = filepath.Join(dir, "db")
	cfg.MemtableSizeMB, cfg.BlockCacheSizeMB = 1, 8
	cfgFile := filepath.Join(dir, "strata.toml")
	data, err := cfg.Marshal("toml")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfgFile, data, 0o644); err != nil {
		t.Fatal(err)
	}
	lines := testLines(40000) // about 4 MB
	for i := range lines {
		lines[i] = append(lines[i][:len(lines[i])-1], []byte(`,"more":"`+strings.Repeat("y", 60)+`"}`)...)
	}
	file := writeJSONL(t, dir, "in.jsonl", lines)
	l0 := func(dbPath string) engine.LevelMetrics {
		t.Helper()
		c, _, err := config.RecordedConfig(dbPath)
		if err != nil {
			t.Fatal(err)
		}
		db, err := engine.Open(c, engine.Options{ReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		m, err := db.Metrics()
		if err != nil {
			t.Fatal(err)
		}
		return m.Levels[0]
	}
	const threshold = 4 // Pebble's L0CompactionThreshold

	// Without the wait the load leaves the backlog this test is about.
	skip := filepath.Join(dir, "skip")
	out := mustRun(t, "--config", cfgFile, "--db", skip, "load", file, "--batch-size", "100", "--progress", "never", "--wait-compactions=false")
	if !strings.Contains(out, "compactions not awaited") {
		t.Errorf("load --wait-compactions=false output: %q", out)
	}
	if got := l0(skip); got.Tables < threshold {
		t.Fatalf("without the wait L0 holds %d tables: the set-up makes no backlog", got.Tables)
	}

	out = mustRun(t, "--config", cfgFile, "load", file, "--batch-size", "100", "--progress", "never")
	if !strings.Contains(out, "compactions: L0 from") || !strings.Contains(out, "compaction debt left") {
		t.Fatalf("load output does not report the compactions: %q", out)
	}
	if got := l0(cfg.DBPath); got.Tables >= threshold || got.Score >= 1 {
		t.Fatalf("load left %d L0 tables (score %.2f): it did not wait for the compactions (output %q)", got.Tables, got.Score, out)
	}
	t.Logf("%s", out)
}
