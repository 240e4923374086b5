package indexmem

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func TestMain(m *testing.M) {
	if ok, err := ChildMain(os.Stdout); ok {
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func TestFit(t *testing.T) {
	const c1, c2 = 21.5, 4.25
	var rows []Row
	for _, r := range SeedIndexRows() {
		bytes := float64(r.Keys)*(c1+float64(r.KeySize)) + float64(r.Keys*r.Versions)*c2
		rows = append(rows, Row{Keys: r.Keys, Versions: r.Versions, KeySize: r.KeySize, LiveHeapBytes: int64(bytes), TotalAllocBytes: int64(2 * bytes)})
	}
	g1, g2 := Fit(rows)
	if math.Abs(g1-c1) > 0.01 || math.Abs(g2-c2) > 0.01 {
		t.Fatalf("Fit = %v, %v; want %v, %v", g1, g2, c1, c2)
	}
	if g1, g2 := Fit(rows[:1]); g1 != 0 || g2 != 0 {
		t.Fatalf("Fit of one row = %v, %v; want 0, 0", g1, g2)
	}
}

func TestKeysDistinct(t *testing.T) {
	g := keyGen{nil}
	seen := map[string]bool{}
	for i := range 100_000 {
		k := g.key(i, 8)
		if seen[string(k)] {
			t.Fatalf("key %d repeats", i)
		}
		seen[string(k)] = true
	}
	row, err := MeasureIndex(5000, 2, 8)
	if err != nil {
		t.Fatal(err)
	}
	if row.LiveHeapBytes < 5000*8 {
		t.Fatalf("live heap %d below the key bytes", row.LiveHeapBytes)
	}
}

func TestBadRequest(t *testing.T) {
	_, err := Measure(Request{Keys: 0, Versions: 0, KeySize: 4, Kind: "x", ValueSize: 1})
	for _, want := range []string{"keys = 0", "versions = 0", "key_size = 4", `kind = "x"`, "dir is empty"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not mention %q", err, want)
		}
	}
}

// TestRowsInChildren runs small index and store rows in fresh processes.
func TestRowsInChildren(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns child processes")
	}
	ctx := context.Background()
	var rows []Row
	for _, v := range []int{1, 5} {
		for _, k := range []int{64, 256} {
			row, err := RunRowInChild(ctx, Request{Keys: 20_000, Versions: v, KeySize: k}, os.Stderr)
			if err != nil {
				t.Fatal(err)
			}
			rows = append(rows, row)
		}
	}
	c1, c2 := Fit(rows)
	t.Logf("20K keys: c1 = %.1f B, c2 = %.1f B (live heap)", c1, c2)
	if c1 <= 0 || c1 > 80 || c2 <= 0 || c2 > 20 {
		t.Errorf("implausible fit c1 = %.1f, c2 = %.1f", c1, c2)
	}
	row, err := RunRowInChild(ctx, Request{Keys: 2000, Versions: 2, KeySize: 64, ValueSize: 256, Dir: filepath.Join(t.TempDir(), "db"), MemtableSizeMB: 4, BlockCacheSizeMB: 8}, os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	if row.RSSBytes <= 0 || row.Kind != "store" {
		t.Fatalf("store row %+v", row)
	}
}

// TestSeedTable runs etcd's 8 index rows, each in a fresh process, for
// mvcc's index and the plain baseline, and prints the table and the fits.
// It takes a few minutes and several GiB: set STRATA_MEMTABLE_SEED=1.
func TestSeedTable(t *testing.T) {
	kinds := []string{KindKeyIndex, KindPlain}
	switch k := os.Getenv("STRATA_MEMTABLE_SEED"); k {
	case "":
		t.Skip("set STRATA_MEMTABLE_SEED=1 (or a kind: keyindex, plain) to run etcd's rows")
	case KindKeyIndex, KindPlain:
		kinds = []string{k}
	}
	ctx := context.Background()
	for _, kind := range kinds {
		var rows []Row
		for _, req := range SeedIndexRows() {
			req.Kind = kind
			row, err := RunRowInChild(ctx, req, os.Stderr)
			if err != nil {
				t.Fatal(err)
			}
			rows = append(rows, row)
			t.Logf("%-8s N=%-8d versions=%d key=%-4d total_alloc=%6.1f MB live_heap=%6.1f MB build=%.2fs",
				kind, row.Keys, row.Versions, row.KeySize, float64(row.TotalAllocBytes)/1e6, float64(row.LiveHeapBytes)/1e6, row.BuildSeconds)
		}
		c1, c2 := Fit(rows)
		t1, t2 := FitTotalAlloc(rows)
		t.Logf("%s: live heap c1 = %.1f B, c2+pointer = %.1f B; TotalAlloc c1 = %.1f B, c2+pointer = %.1f B", kind, c1, c2, t1, t2)
	}
}

// TestSeedStoreTable runs etcd's overall-memory rows (whole store, values
// on disk, process RSS) with the engine's default configuration, each in a
// fresh process. Set STRATA_MEMTABLE_STORE to the largest N to run (the
// 1M x 5 x 1 KiB row writes 5 GB).
func TestSeedStoreTable(t *testing.T) {
	maxKeys, _ := strconv.Atoi(os.Getenv("STRATA_MEMTABLE_STORE"))
	if maxKeys == 0 {
		t.Skip("set STRATA_MEMTABLE_STORE=N to run etcd's store rows with at most N keys")
	}
	ctx := context.Background()
	for i, req := range SeedStoreRows() {
		if req.Keys > maxKeys {
			continue
		}
		req.Dir = filepath.Join(t.TempDir(), fmt.Sprint("db", i))
		row, err := RunRowInChild(ctx, req, os.Stderr)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("N=%-8d versions=%d key=%d value=%-5d rss=%6.1f MB live_heap=%6.1f MB total_alloc=%7.1f MB build=%.1fs",
			row.Keys, row.Versions, row.KeySize, row.ValueSize, float64(row.RSSBytes)/1e6, float64(row.LiveHeapBytes)/1e6, float64(row.TotalAllocBytes)/1e6, row.BuildSeconds)
	}
}
