package tune

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/stratadb/strata/compression"
	"github.com/stratadb/strata/config"
)

func TestCompressionTable(t *testing.T) {
	dir := t.TempDir()
	res, err := RunCompression(context.Background(), CompressionOptions{MinTime: testMinTime, Data: smallData(t), Dir: dir, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	names := collectNames(res)
	if want := []string{"none / none", "lz4 / zstd", "zstd / zstd", "snappy / zstd"}; !slices.Equal(names, want) {
		t.Fatalf("rows %q, want %q", names, want)
	}
	if !strings.HasPrefix(res.Dir, dir) {
		t.Fatalf("Dir = %q, want a directory under %q", res.Dir, dir)
	}
	none, zstd := res.Rows[0], res.Rows[2]
	if none.Ratio < 0.8 || none.Ratio > 1.2 {
		t.Errorf("none / none ratio %.3f, want 0.8..1.2", none.Ratio)
	}
	if zstd.DBSizeBytes > none.DBSizeBytes {
		t.Errorf("zstd / zstd DB size %.0f > none / none's %.0f", zstd.DBSizeBytes, none.DBSizeBytes)
	}
	for _, row := range res.Rows {
		if len(row.Runs) != 1 || len(row.PebbleRuns) != 0 {
			t.Fatalf("%s: %d Strata and %d Pebble runs, want 1 and 0", row.Name, len(row.Runs), len(row.PebbleRuns))
		}
		run := row.Runs[0]
		// "DB Size" is what is on disk: the databases are kept under --dir,
		// and nothing rewrote their tables after the measurement.
		onDisk, err := TableBytes(run.Dir)
		if err != nil {
			t.Fatal(err)
		}
		if onDisk != run.DBSizeBytes || float64(onDisk) != row.DBSizeBytes {
			t.Errorf("%s: DB size %.0f (run %d), but the *.sst files in %s sum to %d", row.Name, row.DBSizeBytes, run.DBSizeBytes, run.Dir, onDisk)
		}
		for name, v := range map[string]float64{"write": row.WriteMBps, "read": row.ReadMBps, "scan": row.ScanMBps, "size before": row.SizeBeforeBytes, "w-amp": row.WriteAmp} {
			if !(v > 0) || math.IsInf(v, 0) {
				t.Errorf("%s: %s = %v, want > 0", row.Name, name, v)
			}
		}
	}
	// After the full compaction every table carries the bottommost codec.
	if got := res.Rows[1].Runs[0].TableCodecs; !strings.HasPrefix(got, "ZSTD:") {
		t.Errorf("lz4 / zstd tables carry %s after the compaction, want ZSTD", got)
	}

	var text bytes.Buffer
	if err := res.Table().Render(&text, "table"); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Compression", "DB Size (MB)", "Ratio", "Write (MB/s)", "Read (MB/s)", "Scan (MB/s)", "W-Amp", "lz4 / zstd", "lz4 is stored as MinLZ", "MB = MiB = 1,048,576 bytes"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, text.String())
		}
	}
	if strings.Contains(text.String(), "vs Pebble") {
		t.Errorf("table without --baseline has vs Pebble columns:\n%s", text.String())
	}

	var js bytes.Buffer
	if err := res.Table().Render(&js, "json"); err != nil {
		t.Fatal(err)
	}
	var rows []map[string]any
	if err := json.Unmarshal(js.Bytes(), &rows); err != nil {
		t.Fatalf("JSON output does not parse: %v\n%s", err, js.String())
	}
	if len(rows) != 4 {
		t.Fatalf("JSON has %d rows, want 4", len(rows))
	}
	for _, key := range []string{"compression", "db_size_mb", "ratio", "write_mb_s", "read_mb_s", "write_mb_per_cpu_s", "read_mb_per_cpu_s", "scan_mb_s", "before_compaction_mb", "compact_s", "w_amp"} {
		if _, ok := rows[0][key]; !ok {
			t.Errorf("JSON row lacks %q: %v", key, rows[0])
		}
	}
	if rows[0]["compression"] != "none / none" {
		t.Errorf("JSON compression = %v", rows[0]["compression"])
	}

	var c bytes.Buffer
	if err := res.Table().Render(&c, "csv"); err != nil {
		t.Fatal(err)
	}
	records, err := csv.NewReader(&c).ReadAll()
	if err != nil {
		t.Fatalf("CSV output does not parse: %v", err)
	}
	if len(records) != 5 || records[0][0] != "compression" || len(records[0]) != 15 {
		t.Fatalf("CSV: %d records, header %q", len(records), records[0])
	}
}

func collectNames(res *CompressionResult) []string {
	var out []string
	for _, r := range res.Rows {
		out = append(out, r.Name)
	}
	return out
}

func TestCompressionRepeatMedian(t *testing.T) {
	profiles, err := ParseProfiles("zstd/zstd")
	if err != nil {
		t.Fatal(err)
	}
	data := smallData(t)
	res, err := RunCompression(context.Background(), CompressionOptions{MinTime: testMinTime, Data: data, Profiles: profiles, Repeat: 3})
	if err != nil {
		t.Fatal(err)
	}
	row := res.Rows[0]
	if len(row.Runs) != 3 || res.Repeat != 3 {
		t.Fatalf("%d runs, repeat %d, want 3", len(row.Runs), res.Repeat)
	}
	raw := data.RawBytes()
	var speeds, sizes, ingestCPU []float64
	for _, r := range row.Runs {
		speeds = append(speeds, mibPerSec(raw, r.WriteSeconds))
		sizes = append(sizes, float64(r.DBSizeBytes))
		if !(r.CompactCPUSeconds > 0) {
			t.Errorf("run %+v: no CPU time measured for the full compaction", r)
		}
		ingestCPU = append(ingestCPU, mibPerSec(raw, r.WriteCPUSeconds+r.CompactCPUSeconds))
	}
	slices.Sort(speeds)
	slices.Sort(sizes)
	slices.Sort(ingestCPU)
	if row.WriteMBps != speeds[1] || row.DBSizeBytes != sizes[1] {
		t.Errorf("write %.3f, size %.0f: want the middle of %v and %v", row.WriteMBps, row.DBSizeBytes, speeds, sizes)
	}
	// The ingest cost counts the full compaction's CPU beside the write's.
	if row.IngestMBPerCPUs != ingestCPU[1] || !(row.IngestMBPerCPUs < row.WriteMBPerCPUs) {
		t.Errorf("ingest %.3f MB/CPU-s (write %.3f): want the middle of %v, below the write's", row.IngestMBPerCPUs, row.WriteMBPerCPUs, ingestCPU)
	}
	var text bytes.Buffer
	_ = res.Table().Render(&text, "table")
	if !strings.Contains(text.String(), "median of 3 runs") {
		t.Errorf("table does not say it shows medians:\n%s", text.String())
	}
}

func TestCompressionBaseline(t *testing.T) {
	profiles, _ := ParseProfiles("none/none,lz4/zstd")
	res, err := RunCompression(context.Background(), CompressionOptions{MinTime: testMinTime, Data: smallData(t), Profiles: profiles, Baseline: true, Repeat: 2})
	if err != nil {
		t.Fatal(err)
	}
	for _, row := range res.Rows {
		if len(row.PebbleRuns) != 2 {
			t.Fatalf("%s: %d Pebble runs, want 2", row.Name, len(row.PebbleRuns))
		}
		if !(row.WriteVsPebble > 0 && row.ReadVsPebble > 0 && row.ScanVsPebble > 0) {
			t.Errorf("%s: vs Pebble %v %v %v, want > 0", row.Name, row.WriteVsPebble, row.ReadVsPebble, row.ScanVsPebble)
		}
	}
	rows := jsonRows(t, res.Table())
	for _, key := range []string{"write_vs_pebble", "read_vs_pebble", "scan_vs_pebble"} {
		if _, ok := rows[0][key]; !ok {
			t.Errorf("JSON row lacks %q", key)
		}
	}
	// Each profile's row is followed by raw Pebble's own figures.
	if len(rows) != 4 || rows[1]["compression"] != "raw Pebble: none / none" || rows[3]["compression"] != "raw Pebble: lz4 / zstd" {
		t.Fatalf("rows %v", rows)
	}
	for _, key := range []string{"ratio", "write_mb_s", "read_mb_s", "write_mb_per_cpu_s", "read_mb_per_cpu_s"} {
		if v, ok := rows[1][key].(float64); !ok || !(v > 0) {
			t.Errorf("raw Pebble row: %s = %v, want > 0", key, rows[1][key])
		}
	}
	// Raw Pebble's compaction moves the lz4 table down as MinLZ; the note says so.
	var text bytes.Buffer
	_ = res.Table().Render(&text, "markdown")
	if !strings.Contains(text.String(), "raw Pebble's tables carry MinLZ") {
		t.Errorf("no note on Pebble's codecs:\n%s", text.String())
	}
}

// TestCompressionConfigs: whole configs as rows, each run with its own
// settings beyond the codecs (here bottommost_block_size).
func TestCompressionConfigs(t *testing.T) {
	big := config.Default()
	big.BottommostBlockSize = 128 << 10
	small := config.Default()
	small.BottommostBlockSize = 0 // block_size, 4 KB
	profiles := []Profile{ConfigProfile("4k.toml", small), ConfigProfile("128k.toml", big)}
	res, err := RunCompression(context.Background(), CompressionOptions{MinTime: testMinTime, Data: smallData(t), Profiles: profiles})
	if err != nil {
		t.Fatal(err)
	}
	if got := collectNames(res); !slices.Equal(got, []string{"4k.toml: lz4 / zstd, 4 KB", "128k.toml: lz4 / zstd, 128 KB"}) {
		t.Fatalf("rows %q", got)
	}
	// Row 1 against itself is 1; the others are paired ratios.
	if r := res.Rows[0]; r.WriteVsFirst != 1 || r.ReadVsFirst != 1 {
		t.Errorf("row 1 vs row 1: write %v, read %v, want 1", r.WriteVsFirst, r.ReadVsFirst)
	}
	if r := res.Rows[1]; !(r.WriteVsFirst > 0 && r.ReadVsFirst > 0) {
		t.Errorf("row 2 vs row 1: write %v, read %v, want > 0", r.WriteVsFirst, r.ReadVsFirst)
	}
	if !(res.Rows[1].DBSizeBytes < res.Rows[0].DBSizeBytes) {
		t.Errorf("128 KB bottommost blocks store %.0f bytes, 4 KB blocks %.0f: want smaller", res.Rows[1].DBSizeBytes, res.Rows[0].DBSizeBytes)
	}
}

func TestCompressionInput(t *testing.T) {
	d, err := LoadDataset(writeJSONL(t, jsonLines(200)...))
	if err != nil {
		t.Fatal(err)
	}
	if d.Len() != 200 || string(d.Keys[0]) != "entity:00000000" || string(d.Keys[199]) != "entity:00000199" {
		t.Fatalf("keys %q..%q of %d", d.Keys[0], d.Keys[d.Len()-1], d.Len())
	}
	profiles, _ := ParseProfiles("snappy/zstd")
	res, err := RunCompression(context.Background(), CompressionOptions{MinTime: testMinTime, Data: d, Profiles: profiles})
	if err != nil {
		t.Fatal(err)
	}
	if res.Entities != 200 || !strings.Contains(res.Source, "in.jsonl") {
		t.Errorf("entities %d, source %q", res.Entities, res.Source)
	}
}

func TestLoadDatasetErrors(t *testing.T) {
	lines := jsonLines(5)
	lines[2] = `{"id": 2, "name": }`
	_, err := LoadDataset(writeJSONL(t, lines...))
	if err == nil || !strings.Contains(err.Error(), "line 3") || !strings.Contains(err.Error(), "not valid JSON") {
		t.Errorf("bad line: %v, want an error naming line 3", err)
	}
	empty := writeJSONL(t)
	if _, err := LoadDataset(empty); err == nil {
		t.Error("an empty file loaded")
	}
	if _, err := LoadDataset(empty + ".missing"); err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Errorf("missing file: %v", err)
	}
}

func TestParseProfiles(t *testing.T) {
	p, err := ParseProfiles(" none/none, lz4/zstd ,zstd:1/zstd:6,minlz/zstd")
	if err != nil {
		t.Fatal(err)
	}
	if len(p) != 4 || p[2] != (Profile{Default: "zstd:1", Bottommost: "zstd:6"}) {
		t.Fatalf("%v", p)
	}
	for _, tc := range []struct{ in, want string }{
		{"none/none,lz5/zstd", `profile "lz5/zstd": unknown codec "lz5": allowed are none, snappy, lz4, zstd`},
		{"zstd:99/zstd", `profile "zstd:99/zstd": unknown codec "zstd:99"`},
		{"lz4", `profile "lz4": want default/bottommost`},
		{"lz4/zstd/none", `want default/bottommost`},
		{"lz4/", `profile "lz4/": unknown codec ""`},
		{"lz4/zstd,lz4/zstd", "listed twice"},
		{" , ", "no profile given"},
	} {
		_, err := ParseProfiles(tc.in)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseProfiles(%q) = %v, want an error containing %q", tc.in, err, tc.want)
		}
	}
	// Every name ParseProfiles accepts, ParseCodec accepts: one parser.
	for _, name := range []string{"none", "snappy", "lz4", "zstd", "zstd:22", "minlz"} {
		if _, err := ParseProfiles(name + "/" + name); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		if _, err := compression.ParseCodec(name); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestCompressionUnwritableDir(t *testing.T) {
	dir := unwritableDir(t)
	_, err := RunCompression(context.Background(), CompressionOptions{MinTime: testMinTime, Data: smallData(t), Dir: dir})
	if err == nil || !strings.Contains(err.Error(), "--dir "+dir) {
		t.Fatalf("err = %v, want an error naming --dir %s", err, dir)
	}
}

func TestCompressionFailsWhole(t *testing.T) {
	// A base config the engine refuses: the run fails, naming the profile,
	// and no partial result comes back.
	base := config.Default()
	base.UseUniversalCompaction = true
	profiles, _ := ParseProfiles("none/none,lz4/zstd")
	res, err := RunCompression(context.Background(), CompressionOptions{MinTime: testMinTime, Data: smallData(t), Profiles: profiles, Base: base})
	if err == nil || res != nil || !strings.Contains(err.Error(), "profile none/none, run 1/1 on strata") {
		t.Fatalf("res %v, err %v", res, err)
	}
	// A canceled context stops the run.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := RunCompression(ctx, CompressionOptions{MinTime: testMinTime, Data: smallData(t), Profiles: profiles}); !errors.Is(err, context.Canceled) {
		t.Fatalf("canceled: %v", err)
	}
}

func TestReadMismatchIsAnError(t *testing.T) {
	for _, open := range []func(*config.Config) (store, error){openStrata, openPebble} {
		cfg := config.Default()
		cfg.DBPath = t.TempDir() + "/db"
		s, err := open(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.commit([][]byte{[]byte("k")}, [][]byte{[]byte("written")}); err != nil {
			t.Fatal(err)
		}
		if err := s.get([]byte("k"), []byte("written")); err != nil {
			t.Errorf("matching read: %v", err)
		}
		if err := s.get([]byte("k"), []byte("expected")); !errors.Is(err, errMismatch) {
			t.Errorf("mismatching read: %v, want errMismatch", err)
		}
		if err := s.getAbsent([]byte("k")); !errors.Is(err, errMismatch) {
			t.Errorf("present key read as absent: %v", err)
		}
		if err := s.getAbsent([]byte("j")); err != nil {
			t.Errorf("absent key: %v", err)
		}
		if err := s.close(); err != nil {
			t.Fatal(err)
		}
	}
}
