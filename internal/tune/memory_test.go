package tune

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stratadb/strata/internal/indexmem"
	"github.com/stratadb/strata/internal/procfs"
	"github.com/stratadb/strata/internal/report"
)

// TestMain lets RunMemory re-execute this test binary for a row, and
// RunCompression for a run.
func TestMain(m *testing.M) {
	if child, err := RunChildMain(context.Background(), os.Stdout); child {
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	if child, err := indexmem.ChildMain(os.Stdout); child {
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// fakeRows returns a Run that makes up rows from c1 and c2 (live heap),
// twice as much for TotalAlloc, and records each request.
func fakeRows(c1, c2 float64, seen *[]indexmem.Request) func(context.Context, indexmem.Request, io.Writer) (indexmem.Row, error) {
	return func(_ context.Context, req indexmem.Request, _ io.Writer) (indexmem.Row, error) {
		*seen = append(*seen, req)
		b := float64(req.Keys)*(c1+float64(req.KeySize)) + float64(req.Keys*req.Versions)*c2
		row := indexmem.Row{Kind: req.Kind, Keys: req.Keys, Versions: req.Versions, KeySize: req.KeySize, ValueSize: req.ValueSize,
			LiveHeapBytes: int64(b), TotalAllocBytes: int64(2 * b)}
		if req.ValueSize > 0 {
			row.Kind = "store"
			row.RSSBytes = 100 << 20
			if req.Dir == "" {
				return row, errors.New("store row without a directory")
			}
		}
		return row, nil
	}
}

func TestRunMemorySeedRows(t *testing.T) {
	var seen []indexmem.Request
	parent := t.TempDir()
	res, err := RunMemory(context.Background(), MemoryOptions{Index: true, Store: true, Dir: parent, MemtableSizeMB: 8, Run: fakeRows(30, 6, &seen)})
	if err != nil {
		t.Fatal(err)
	}
	if len(seen) != 16 || len(res.Index.Rows) != 8 || len(res.Store.Rows) != 8 {
		t.Fatalf("%d requests, %d index rows, %d store rows; want 16, 8, 8", len(seen), len(res.Index.Rows), len(res.Store.Rows))
	}
	f := res.Index.Fit
	if f == nil || math.Abs(f.LiveHeap.C1-30) > 0.01 || math.Abs(f.LiveHeap.C2-6) > 0.01 {
		t.Fatalf("live heap fit %+v; want c1 = 30, c2 = 6", f)
	}
	// TotalAlloc is 2*(N*(30+K) + N*V*6) = N*(60+2K) + N*V*12: c1 = 60 + K.
	if math.Abs(f.TotalAlloc.C2-12) > 0.01 {
		t.Errorf("TotalAlloc fit %+v; want c2 = 12", f.TotalAlloc)
	}
	for i, r := range res.Index.Rows {
		if r.Kind != indexmem.KindKeyIndex || r.EtcdMB == nil {
			t.Errorf("index row %d: %+v", i, r)
		}
	}
	if got := *res.Index.Rows[3].EtcdMB; res.Index.Rows[3].Keys != 1_000_000 || res.Index.Rows[3].Versions != 5 || got != 432 {
		t.Errorf("row 4 (1M x 5 x 64): etcd %v MB; want 432", got)
	}
	if got := *res.Store.Rows[7].EtcdMB; got != 836 || res.Store.Rows[7].ValueSize != 1024 {
		t.Errorf("store row 8: etcd %v MB; want 836", got)
	}
	for _, req := range seen[8:] {
		if req.MemtableSizeMB != 8 || !strings.HasPrefix(req.Dir, res.Store.Dir+string(filepath.Separator)) || !strings.HasPrefix(res.Store.Dir, parent) {
			t.Errorf("store request %+v, kept in %q", req, res.Store.Dir)
		}
	}
	if res.Store.MemtableSizeMB != 8 || res.Store.BlockCacheSizeMB != 256 {
		t.Errorf("store settings %d, %d", res.Store.MemtableSizeMB, res.Store.BlockCacheSizeMB)
	}
}

func TestRunMemoryOneRowNoFit(t *testing.T) {
	var seen []indexmem.Request
	res, err := RunMemory(context.Background(), MemoryOptions{One: true, Keys: 1234, Versions: 3, KeySize: 16, Index: true, Kind: indexmem.KindPlain, Run: fakeRows(30, 6, &seen)})
	if err != nil {
		t.Fatal(err)
	}
	if res.Store != nil || len(seen) != 1 || seen[0] != (indexmem.Request{Kind: indexmem.KindPlain, Keys: 1234, Versions: 3, KeySize: 16}) {
		t.Fatalf("requests %+v, store %+v", seen, res.Store)
	}
	if res.Index.Fit != nil || res.Index.Rows[0].EtcdMB != nil {
		t.Errorf("one row: fit %+v, etcd %v; want neither", res.Index.Fit, res.Index.Rows[0].EtcdMB)
	}
	var out bytes.Buffer
	if err := res.Write(&out, report.FormatTable); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"plain google/btree", "No fit of c1 and c2", "1234"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}
}

func TestRunMemoryRowError(t *testing.T) {
	boom := errors.New("boom")
	dir := t.TempDir()
	_, err := RunMemory(context.Background(), MemoryOptions{Store: true, Dir: dir, Run: func(context.Context, indexmem.Request, io.Writer) (indexmem.Row, error) {
		return indexmem.Row{}, boom
	}})
	if !errors.Is(err, boom) {
		t.Fatalf("err %v; want boom", err)
	}
}

func TestMemoryValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    MemoryOptions
		want []string
	}{
		{"no table", MemoryOptions{}, []string{"no table selected"}},
		{"bad row", MemoryOptions{Index: true, Store: true, One: true, Keys: 0, Versions: -1, KeySize: 7, ValueSize: 0},
			[]string{"--keys 0: must be >= 1", "--versions -1: must be >= 1", "--key-size 7: must be from 8", "--value-size 0: must be from 1"}},
		{"huge key", MemoryOptions{Index: true, One: true, Keys: 1, Versions: 1, KeySize: 1 << 20}, []string{"--key-size 1048576"}},
		{"huge value", MemoryOptions{Store: true, One: true, Keys: 1, Versions: 1, KeySize: 8, ValueSize: 1 << 30}, []string{"--value-size 1073741824"}},
		{"absurd keys", MemoryOptions{Index: true, One: true, Keys: 1 << 40, Versions: 1, KeySize: 64}, []string{"--keys 1099511627776", "more than this machine's"}},
		{"kind", MemoryOptions{Index: true, Kind: "art"}, []string{`--index "art"`}},
		{"engine", MemoryOptions{Store: true, MemtableSizeMB: -1, BlockCacheSizeMB: -2}, []string{"--memtable-size-mb -1", "--block-cache-size-mb -2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.o.Validate()
			if tc.name == "absurd keys" {
				if _, merr := procfs.MemTotal(); merr != nil {
					t.Skip("no /proc/meminfo")
				}
			}
			for _, want := range tc.want {
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Errorf("error %v lacks %q", err, want)
				}
			}
		})
	}
	ok := MemoryOptions{Index: true, Store: true, One: true, Keys: 10, Versions: 1, KeySize: 8, ValueSize: 1}
	if err := ok.Validate(); err != nil {
		t.Error(err)
	}
}

// TestRunMemoryInChildren measures one small index row and one store row,
// each in a fresh process (this test binary), and checks every format.
func TestRunMemoryInChildren(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns child processes")
	}
	var lines bytes.Buffer
	res, err := RunMemory(context.Background(), MemoryOptions{
		One: true, Keys: 2000, Versions: 2, KeySize: 32, ValueSize: 128,
		Index: true, Store: true, MemtableSizeMB: 4, BlockCacheSizeMB: 8,
		Progress: NewLines(&lines), ChildStderr: os.Stderr,
	})
	if err != nil {
		t.Fatal(err)
	}
	ix, st := res.Index.Rows[0], res.Store.Rows[0]
	if ix.Keys != 2000 || ix.Versions != 2 || ix.KeySize != 32 || ix.LiveHeapBytes < 2000*32 || ix.TotalAllocBytes < ix.LiveHeapBytes {
		t.Errorf("index row %+v", ix)
	}
	if st.Kind != "store" || st.ValueSize != 128 || st.RSSBytes <= 0 {
		t.Errorf("store row %+v", st)
	}
	if got := strings.Count(lines.String(), "\n"); got != 2 || !strings.Contains(lines.String(), "row 2/2: store 2K keys x 2 versions x 32 B keys, 128 B values ... ") {
		t.Errorf("progress lines:\n%s", lines.String())
	}

	var js bytes.Buffer
	if err := res.Write(&js, report.FormatJSON); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Index struct {
			Rows []map[string]any `json:"rows"`
			Etcd map[string]any   `json:"etcd"`
		} `json:"index"`
		Store struct {
			Rows []map[string]any `json:"rows"`
		} `json:"store"`
	}
	if err := json.Unmarshal(js.Bytes(), &doc); err != nil {
		t.Fatalf("%v\n%s", err, js.String())
	}
	for _, k := range []string{"keys", "versions", "key_size", "total_alloc_bytes", "live_heap_bytes"} {
		if _, ok := doc.Index.Rows[0][k]; !ok {
			t.Errorf("index row lacks %q: %v", k, doc.Index.Rows[0])
		}
	}
	if _, ok := doc.Store.Rows[0]["rss_bytes"]; !ok {
		t.Errorf("store row lacks rss_bytes: %v", doc.Store.Rows[0])
	}

	var c bytes.Buffer
	if err := res.Write(&c, report.FormatCSV); err != nil {
		t.Fatal(err)
	}
	recs, err := csv.NewReader(&c).ReadAll()
	if err != nil || len(recs) != 3 || recs[0][0] != "table" || recs[1][0] != "index" || recs[2][0] != "store" {
		t.Errorf("CSV %q: %v", recs, err)
	}

	var md bytes.Buffer
	if err := res.Write(&md, report.FormatMarkdown); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Index memory:", "| Keys |", "TotalAlloc (MB)", "Store memory:", "RSS (MB)", "etcd RSS (MB)"} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("markdown lacks %q:\n%s", want, md.String())
		}
	}
}

func TestCountString(t *testing.T) {
	for n, want := range map[int]string{1: "1", 999: "999", 2000: "2K", 100_000: "100K", 1_000_000: "1M", 1_500_000: "1500K", 1234: "1234"} {
		if got := countString(n); got != want {
			t.Errorf("countString(%d) = %q; want %q", n, got, want)
		}
	}
}
