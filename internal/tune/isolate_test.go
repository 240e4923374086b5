package tune

import (
	"context"
	"os"
	"strings"
	"testing"
)

// TestCompressionProcessPerRun checks what isolation is for: each run is
// measured by a process of its own, none of them this one, and the
// figures come back whole (the reads checked every value in the child).
func TestCompressionProcessPerRun(t *testing.T) {
	profiles, err := ParseProfiles("none/none,lz4/zstd")
	if err != nil {
		t.Fatal(err)
	}
	data := smallData(t)
	res, err := RunCompression(context.Background(), CompressionOptions{
		MinTime: testMinTime, Data: data, Profiles: profiles, Repeat: 2, Baseline: true, ProcessPerRun: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for _, row := range res.Rows {
		for _, run := range append(append([]Run(nil), row.Runs...), row.PebbleRuns...) {
			if run.PID == os.Getpid() || run.PID == 0 {
				t.Fatalf("%s %s run measured in process %d, this test's is %d", row.Name, run.Impl, run.PID, os.Getpid())
			}
			if seen[run.PID] {
				t.Fatalf("%s %s run measured in process %d, which measured another run", row.Name, run.Impl, run.PID)
			}
			seen[run.PID] = true
			if run.DBSizeBytes <= 0 || run.WriteCPUSeconds <= 0 || run.ReadPasses < 1 {
				t.Errorf("%s %s run: size %d, write CPU %.3f s, %d read passes", row.Name, run.Impl, run.DBSizeBytes, run.WriteCPUSeconds, run.ReadPasses)
			}
		}
	}
	if len(seen) != 8 {
		t.Errorf("%d processes, want 8 (2 profiles x 2 repeats x 2 stores)", len(seen))
	}
	if res.Rows[1].DBSizeBytes >= res.Rows[0].DBSizeBytes {
		t.Errorf("lz4/zstd %.0f bytes, none/none %.0f: the child did not apply the profile", res.Rows[1].DBSizeBytes, res.Rows[0].DBSizeBytes)
	}
}

// TestProcessPerRunInputChanged checks that a child measuring an --input
// file that changed since the measurement began refuses, naming both
// sizes, rather than measuring other data.
func TestProcessPerRunInputChanged(t *testing.T) {
	path := writeJSONL(t, jsonLines(50)...)
	data, err := LoadDataset(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(strings.Join(jsonLines(40), "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	profiles, _ := ParseProfiles("none/none")
	_, err = RunCompression(context.Background(), CompressionOptions{MinTime: testMinTime, Data: data, Profiles: profiles, ProcessPerRun: true})
	if err == nil || !strings.Contains(err.Error(), "the data changed") {
		t.Fatalf("err = %v, want the data changed", err)
	}
}

// TestProcessPerRunNeedsAnOrigin checks that data no child can build again
// (a sample) is refused before any run, naming the flag.
func TestProcessPerRunNeedsAnOrigin(t *testing.T) {
	profiles, _ := ParseProfiles("none/none")
	_, err := RunCompression(context.Background(), CompressionOptions{MinTime: testMinTime, Data: smallData(t).Sample(10), Profiles: profiles, ProcessPerRun: true})
	if err == nil || !strings.Contains(err.Error(), "--process-per-run") {
		t.Fatalf("err = %v, want a --process-per-run error", err)
	}
}
