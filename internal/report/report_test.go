package report

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
	"time"
)

// seedTable is the THEMIS RocksDB tuning guide's compression table, with
// a note.
func seedTable() *Table {
	return &Table{
		Columns: []Column{
			{Name: "Compression"},
			{Name: "DB Size", Unit: "MB", Format: "~%.0f"},
			{Name: "Ratio", Format: "%.1fx"},
			{Name: "Write", Unit: "MB/s", Format: "%.1f"},
			{Name: "Read", Unit: "MB/s", Format: "%.1f"},
		},
		Rows: [][]any{
			{"none / none", 45, 1.0, 34.5, 125.3},
			{"lz4 / zstd", 12.25, 3.6734, 30.25, 118},
		},
		Notes: []string{"lz4 is stored as minlz.", "1 MB = 1,000,000 bytes."},
	}
}

func TestRender(t *testing.T) {
	for _, tc := range []struct {
		format string
		want   string
	}{
		{"table", `
Compression    DB Size (MB)    Ratio    Write (MB/s)    Read (MB/s)
-------------------------------------------------------------------
none / none             ~45     1.0x            34.5          125.3
lz4 / zstd              ~12     3.7x            30.2          118.0

lz4 is stored as minlz.
1 MB = 1,000,000 bytes.
`},
		{"markdown", `
| Compression | DB Size (MB) | Ratio | Write (MB/s) | Read (MB/s) |
| :---------- | -----------: | ----: | -----------: | ----------: |
| none / none |          ~45 |  1.0x |         34.5 |       125.3 |
| lz4 / zstd  |          ~12 |  3.7x |         30.2 |       118.0 |

lz4 is stored as minlz.

1 MB = 1,000,000 bytes.
`},
		{"json", `
[
  {"compression": "none / none", "db_size_mb": 45, "ratio": 1, "write_mb_s": 34.5, "read_mb_s": 125.3},
  {"compression": "lz4 / zstd", "db_size_mb": 12.25, "ratio": 3.6734, "write_mb_s": 30.25, "read_mb_s": 118}
]
`},
		{"csv", `
compression,db_size_mb,ratio,write_mb_s,read_mb_s
none / none,45,1,34.5,125.3
lz4 / zstd,12.25,3.6734,30.25,118
`},
	} {
		t.Run(tc.format, func(t *testing.T) {
			var buf bytes.Buffer
			if err := seedTable().Render(&buf, tc.format); err != nil {
				t.Fatal(err)
			}
			if want := strings.TrimPrefix(tc.want, "\n"); buf.String() != want {
				t.Fatalf("got:\n%s\nwant:\n%s", buf.String(), want)
			}
		})
	}
}

func TestRenderJSONParses(t *testing.T) {
	tbl := seedTable()
	tbl.Rows = append(tbl.Rows, []any{`quote " and \ back`, nil, math.NaN(), math.Inf(1), 2 * time.Second})
	var buf bytes.Buffer
	if err := tbl.Render(&buf, "json"); err != nil {
		t.Fatal(err)
	}
	var rows []map[string]any
	if err := json.Unmarshal(buf.Bytes(), &rows); err != nil {
		t.Fatalf("output does not parse: %v\n%s", err, buf.String())
	}
	if len(rows) != 3 || rows[1]["ratio"] != 3.6734 || rows[2]["compression"] != `quote " and \ back` ||
		rows[2]["db_size_mb"] != nil || rows[2]["ratio"] != nil || rows[2]["read_mb_s"] != "2s" {
		t.Fatalf("parsed %v", rows)
	}

	empty := &Table{Columns: []Column{{Name: "A"}}}
	buf.Reset()
	if err := empty.Render(&buf, "json"); err != nil || buf.String() != "[]\n" {
		t.Fatalf("empty table: %q, %v", buf.String(), err)
	}
}

func TestRenderCSVParses(t *testing.T) {
	tbl := seedTable()
	tbl.Rows = append(tbl.Rows, []any{"comma, \"quote\"\nnewline", nil, true, int64(7), uint8(3)})
	var buf bytes.Buffer
	if err := tbl.Render(&buf, "csv"); err != nil {
		t.Fatal(err)
	}
	recs, err := csv.NewReader(&buf).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"comma, \"quote\"\nnewline", "", "true", "7", "3"}
	if len(recs) != 4 || strings.Join(recs[3], "|") != strings.Join(want, "|") {
		t.Fatalf("records %q", recs)
	}
}

func TestRenderTextCells(t *testing.T) {
	tbl := &Table{
		Columns: []Column{
			{Name: "Name"},
			{Name: "Count", Format: "%.1f"},
			{Name: "Mixed"},
			{Name: "Forced", Align: AlignLeft},
			{Name: "Share", Unit: "%", Format: "%d%%"},
		},
		Rows: [][]any{
			{"a|b\nc", 3, "x", 10, 5},
			{"µs", nil, 2, 200, 100},
		},
	}
	var buf bytes.Buffer
	if err := tbl.Render(&buf, "table"); err != nil {
		t.Fatal(err)
	}
	want := `Name     Count    Mixed    Forced    Share (%)
----------------------------------------------
a|b c      3.0    x        10               5%
µs                2        200            100%
`
	if buf.String() != want {
		t.Fatalf("got:\n%s\nwant:\n%s", buf.String(), want)
	}
	buf.Reset()
	if err := tbl.Render(&buf, "markdown"); err != nil {
		t.Fatal(err)
	}
	want = `| Name   | Count | Mixed | Forced | Share (%) |
| :----- | ----: | :---- | :----- | --------: |
| a\|b c |   3.0 | x     | 10     |        5% |
| µs     |       | 2     | 200    |      100% |
`
	if buf.String() != want {
		t.Fatalf("got:\n%s\nwant:\n%s", buf.String(), want)
	}
	buf.Reset()
	if err := tbl.Render(&buf, "csv"); err != nil || !strings.HasPrefix(buf.String(), "name,count,mixed,forced,share_pct\n") {
		t.Fatalf("csv header: %q, %v", buf.String(), err)
	}
}

func TestParseFormat(t *testing.T) {
	for _, name := range Formats() {
		f, err := ParseFormat(name)
		if err != nil || f.String() != name {
			t.Errorf("ParseFormat(%q) = %v, %v", name, f, err)
		}
	}
	if f, err := ParseFormat(" JSON "); err != nil || f != FormatJSON {
		t.Errorf("ParseFormat(\" JSON \") = %v, %v", f, err)
	}
	const want = `report: unknown format "x": allowed are table, markdown, json, csv`
	if _, err := ParseFormat("x"); err == nil || err.Error() != want {
		t.Errorf("ParseFormat(\"x\") error %v, want %q", err, want)
	}
	if err := seedTable().Render(&bytes.Buffer{}, "x"); err == nil || err.Error() != want {
		t.Errorf("Render(\"x\") error %v, want %q", err, want)
	}
	var f Format
	if err := f.Set("csv"); err != nil || f != FormatCSV || f.Type() != "format" {
		t.Errorf("Set(\"csv\") = %v, %v", f, err)
	}
}

func TestRenderInvalid(t *testing.T) {
	for _, tc := range []struct {
		name string
		t    Table
		want string
	}{
		{"no columns", Table{}, "report: table has no columns"},
		{"short row", Table{Columns: []Column{{Name: "A"}, {Name: "B"}}, Rows: [][]any{{1, 2}, {1}}},
			"report: Rows[1] has 1 cells for 2 columns"},
		{"duplicate key", Table{Columns: []Column{{Name: "Write", Unit: "MB/s"}, {Name: "Write MB", Unit: "s"}}},
			`report: columns "Write (MB/s)" and "Write MB (s)" both have key "write_mb_s"`},
		{"empty key", Table{Columns: []Column{{Name: "?"}}}, `report: column "?" has an empty key`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, f := range Formats() {
				if err := tc.t.Render(&bytes.Buffer{}, f); err == nil || err.Error() != tc.want {
					t.Fatalf("%s: error %v, want %q", f, err, tc.want)
				}
			}
		})
	}
}

type failWriter struct{}

var errWrite = errors.New("write failed")

func (failWriter) Write([]byte) (int, error) { return 0, errWrite }

func TestRenderWriteError(t *testing.T) {
	if err := seedTable().Render(failWriter{}, "table"); !errors.Is(err, errWrite) {
		t.Fatalf("error %v, want errWrite", err)
	}
}

func TestSnakeCase(t *testing.T) {
	for in, want := range map[string]string{
		"DB Size MB":       "db_size_mb",
		"Write MB/s":       "write_mb_s",
		"  p99 Latency µs": "p99_latency_µs",
		"Hit Rate %":       "hit_rate_pct",
		"already_snake":    "already_snake",
	} {
		if got := snakeCase(in); got != want {
			t.Errorf("snakeCase(%q) = %q, want %q", in, got, want)
		}
	}
}
