package tune

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stratadb/strata/config"
)

// TestMeasureRepeatsPhases checks that every timed phase repeats its work
// until it has run minTime, that the seconds are per pass, that CPU time is
// counted, and that the extra write passes leave no database behind.
func TestMeasureRepeatsPhases(t *testing.T) {
	data, err := GenerateDataset(100, 512, 1)
	if err != nil {
		t.Fatal(err)
	}
	const minTime = 60 * time.Millisecond
	dir := filepath.Join(t.TempDir(), "run")
	cfg := runConfig(config.Default(), "lz4", "zstd", dir)
	run, err := measure(context.Background(), runSpec{impl: Strata, cfg: cfg, data: data, order: readOrder(data.Len(), 1), absent: true, minTime: minTime})
	if err != nil {
		t.Fatal(err)
	}
	for _, ph := range []struct {
		name       string
		passes     int
		wall, cpus float64
	}{
		{"write", run.WritePasses, run.WriteSeconds, run.WriteCPUSeconds},
		{"compact", run.CompactPasses, run.CompactSeconds, run.CompactCPUSeconds},
		{"absent", run.AbsentPasses, run.AbsentSeconds, run.AbsentCPUSeconds},
		{"read", run.ReadPasses, run.ReadSeconds, run.ReadCPUSeconds},
		{"scan", run.ScanPasses, run.ScanSeconds, run.ScanCPUSeconds},
	} {
		if ph.passes < 2 {
			t.Errorf("%s: %d passes of 100 entities in %v; want the work repeated until it ran %v", ph.name, ph.passes, ph.wall, minTime)
		}
		total := ph.wall * float64(ph.passes)
		if ph.name == "compact" {
			// A quick compaction stops repeating once write and compaction
			// passes have run 2 x minTime together.
			total = max(total, 2*minTime.Seconds()-run.WriteSeconds*float64(run.WritePasses))
		}
		if total < minTime.Seconds() {
			t.Errorf("%s: %d passes ran %.3fs in all, want >= %v", ph.name, ph.passes, total, minTime)
		}
		if ph.cpus <= 0 {
			t.Errorf("%s: %.6f CPU seconds per pass, want > 0", ph.name, ph.cpus)
		}
	}
	if !run.AbsentInUpperLevels() {
		t.Errorf("absent reads met tables %v, want tables in L0-L5 (after the flush, before the compaction)", run.AbsentTables)
	}
	left, err := filepath.Glob(dir + ".pass*")
	if err != nil {
		t.Fatal(err)
	}
	if len(left) > 0 {
		t.Errorf("extra write passes left %v behind", left)
	}
	if _, err := os.Stat(dir); err != nil {
		t.Errorf("the measured database is gone: %v", err)
	}
}
