// Package report renders result tables for people (aligned text, Markdown)
// and for machines (JSON, CSV) from one description.
//
//	t := report.Table{
//		Columns: []report.Column{
//			{Name: "Codec"},
//			{Name: "Ratio", Format: "%.2fx"},
//			{Name: "Compress", Unit: "MB/s", Format: "%.1f"},
//		},
//		Rows:  [][]any{{"lz4", 1.65, 512.34}},
//		Notes: []string{"1 MB = 1,000,000 bytes."},
//	}
//	err := t.Render(os.Stdout, "table")
//
// prints
//
//	Codec    Ratio    Compress (MB/s)
//	---------------------------------
//	lz4      1.65x              512.3
//
//	1 MB = 1,000,000 bytes.
//
// Formats apply to text output only: JSON and CSV carry the values at full
// precision under snake_case keys ("compress_mb_s"), and no notes.
package report

import (
	"bytes"
	"encoding"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Format is an output format of Table.Render.
type Format uint8

// The formats, in the order of Formats.
const (
	// FormatTable is aligned plain text with a dashed rule under the header.
	FormatTable Format = iota
	// FormatMarkdown is a GitHub pipe table.
	FormatMarkdown
	// FormatJSON is an array of objects, one per row, keyed by Column.Key.
	FormatJSON
	// FormatCSV is RFC 4180 CSV with a header row of Column.Key.
	FormatCSV
)

var formatNames = [...]string{FormatTable: "table", FormatMarkdown: "markdown", FormatJSON: "json", FormatCSV: "csv"}

// Formats lists the format names, for error messages and help.
func Formats() []string { return formatNames[:] }

// ParseFormat parses a format name: table, markdown, json or csv. Case and
// surrounding spaces are ignored.
func ParseFormat(s string) (Format, error) {
	name := strings.ToLower(strings.TrimSpace(s))
	for i, n := range formatNames {
		if n == name {
			return Format(i), nil
		}
	}
	return 0, fmt.Errorf("report: unknown format %q: allowed are %s", s, strings.Join(Formats(), ", "))
}

// String returns the format's name, as ParseFormat accepts it.
func (f Format) String() string {
	if int(f) < len(formatNames) {
		return formatNames[f]
	}
	return fmt.Sprintf("format(%d)", uint8(f))
}

// Set parses s into f, so that a *Format is a flag.Value (and a pflag.Value).
func (f *Format) Set(s string) error {
	v, err := ParseFormat(s)
	if err != nil {
		return err
	}
	*f = v
	return nil
}

// Type returns "format", the value name pflag shows in help.
func (f *Format) Type() string { return "format" }

// Align is the alignment of a column in text output.
type Align uint8

const (
	// AlignAuto aligns a column right when every non-nil cell is a number,
	// left otherwise.
	AlignAuto Align = iota
	// AlignLeft aligns a column left.
	AlignLeft
	// AlignRight aligns a column right.
	AlignRight
)

// Column describes one column of a Table.
type Column struct {
	// Name is the header, followed in text output by " (Unit)" if Unit is set.
	Name string
	// Unit is the unit of the values, such as "MB/s". It is optional.
	Unit string
	// Key is the field name in JSON and CSV output. The default value is
	// the snake_case form of Name and Unit ("Write (MB/s)" is "write_mb_s",
	// "%" becomes "pct").
	Key string
	// Format is a fmt format with one verb for numbers in text output, such
	// as "%.1f" or "%.2fx"; an integer given a float verb is converted. It
	// is ignored for other values and in JSON and CSV. The default value is
	// "" (integers in decimal, floats in the shortest exact form).
	Format string
	// Align is the alignment in text output. The default value is AlignAuto.
	Align Align
}

func (c Column) header() string {
	if c.Unit == "" {
		return c.Name
	}
	return c.Name + " (" + c.Unit + ")"
}

func (c Column) key() string {
	if c.Key != "" {
		return c.Key
	}
	return snakeCase(c.Name + " " + c.Unit)
}

// snakeCase lowercases s and joins its runs of letters and digits with '_'.
func snakeCase(s string) string {
	s = strings.ReplaceAll(s, "%", " pct ")
	var b strings.Builder
	sep := false
	for _, r := range s {
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			if sep && b.Len() > 0 {
				b.WriteByte('_')
			}
			sep = false
			b.WriteRune(unicode.ToLower(r))
			continue
		}
		sep = true
	}
	return b.String()
}

// Table is a table of results: a header of Columns, Rows of cells and Notes.
//
//  1. Every row has one cell per column. A cell is a string, a number, a
//     bool, nil (an empty cell; null in JSON), a fmt.Stringer or an error,
//     or any value encoding/json can encode.
//  2. Column keys are unique.
//  3. Notes are printed as lines under text output, and left out of JSON
//     and CSV.
type Table struct {
	// Columns are the columns, left to right.
	Columns []Column
	// Rows are the rows, top to bottom, each with len(Columns) cells.
	Rows [][]any
	// Notes are remarks printed under the table in text formats.
	Notes []string
}

// Render writes t to w in the named format, one of Formats.
func (t *Table) Render(w io.Writer, format string) error {
	f, err := ParseFormat(format)
	if err != nil {
		return err
	}
	return t.Write(w, f)
}

// Write writes t to w in format f, after checking the table's invariants.
func (t *Table) Write(w io.Writer, f Format) error {
	if err := t.validate(); err != nil {
		return err
	}
	var buf bytes.Buffer
	var err error
	switch f {
	case FormatTable:
		t.writeText(&buf)
	case FormatMarkdown:
		t.writeMarkdown(&buf)
	case FormatJSON:
		err = t.writeJSON(&buf)
	case FormatCSV:
		err = t.writeCSV(&buf)
	default:
		err = fmt.Errorf("report: unknown format %s: allowed are %s", f, strings.Join(Formats(), ", "))
	}
	if err != nil {
		return err
	}
	_, err = w.Write(buf.Bytes())
	return err
}

func (t *Table) validate() error {
	if len(t.Columns) == 0 {
		return fmt.Errorf("report: table has no columns")
	}
	seen := make(map[string]string, len(t.Columns))
	for _, c := range t.Columns {
		k := c.key()
		if k == "" {
			return fmt.Errorf("report: column %q has an empty key", c.header())
		}
		if other, ok := seen[k]; ok {
			return fmt.Errorf("report: columns %q and %q both have key %q", other, c.header(), k)
		}
		seen[k] = c.header()
	}
	for i, row := range t.Rows {
		if len(row) != len(t.Columns) {
			return fmt.Errorf("report: Rows[%d] has %d cells for %d columns", i, len(row), len(t.Columns))
		}
	}
	return nil
}

// text returns the cells as text, one slice per row, and each column's
// right-alignment.
func (t *Table) text() (cells [][]string, right []bool) {
	right = make([]bool, len(t.Columns))
	for j, c := range t.Columns {
		switch c.Align {
		case AlignRight:
			right[j] = true
		case AlignAuto:
			right[j] = len(t.Rows) > 0
			for _, row := range t.Rows {
				if row[j] != nil && !isNumber(row[j]) {
					right[j] = false
				}
			}
		}
	}
	cells = make([][]string, len(t.Rows))
	for i, row := range t.Rows {
		cells[i] = make([]string, len(row))
		for j, v := range row {
			s := formatText(v, t.Columns[j].Format)
			cells[i][j] = oneLine(s)
		}
	}
	return cells, right
}

// oneLine replaces line breaks and tabs by spaces.
func oneLine(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '\n' || r == '\r' || r == '\t' {
			return ' '
		}
		return r
	}, s)
}

func width(s string) int { return utf8.RuneCountInString(s) }

func pad(s string, w int, right bool) string {
	fill := strings.Repeat(" ", max(w-width(s), 0))
	if right {
		return fill + s
	}
	return s + fill
}

// gap separates columns in FormatTable.
const gap = "    "

func (t *Table) writeText(buf *bytes.Buffer) {
	cells, right := t.text()
	widths := make([]int, len(t.Columns))
	header := make([]string, len(t.Columns))
	for j, c := range t.Columns {
		header[j] = c.header()
		widths[j] = width(header[j])
		for _, row := range cells {
			widths[j] = max(widths[j], width(row[j]))
		}
	}
	line := func(row []string) {
		var b strings.Builder
		for j, s := range row {
			if j > 0 {
				b.WriteString(gap)
			}
			b.WriteString(pad(s, widths[j], right[j]))
		}
		buf.WriteString(strings.TrimRight(b.String(), " "))
		buf.WriteByte('\n')
	}
	line(header)
	total := len(gap) * (len(widths) - 1)
	for _, w := range widths {
		total += w
	}
	buf.WriteString(strings.Repeat("-", total))
	buf.WriteByte('\n')
	for _, row := range cells {
		line(row)
	}
	if len(t.Notes) > 0 {
		buf.WriteByte('\n')
		for _, n := range t.Notes {
			buf.WriteString(n)
			buf.WriteByte('\n')
		}
	}
}

func (t *Table) writeMarkdown(buf *bytes.Buffer) {
	cells, right := t.text()
	escape := func(s string) string { return strings.ReplaceAll(s, "|", `\|`) }
	widths := make([]int, len(t.Columns))
	header := make([]string, len(t.Columns))
	for j, c := range t.Columns {
		header[j] = escape(c.header())
		widths[j] = max(width(header[j]), 3)
		for _, row := range cells {
			row[j] = escape(row[j])
			widths[j] = max(widths[j], width(row[j]))
		}
	}
	line := func(row []string) {
		buf.WriteString("|")
		for j, s := range row {
			buf.WriteString(" " + pad(s, widths[j], right[j]) + " |")
		}
		buf.WriteByte('\n')
	}
	line(header)
	buf.WriteString("|")
	for j, w := range widths {
		if right[j] {
			buf.WriteString(" " + strings.Repeat("-", w-1) + ": |")
		} else {
			buf.WriteString(" :" + strings.Repeat("-", w-1) + " |")
		}
	}
	buf.WriteByte('\n')
	for _, row := range cells {
		line(row)
	}
	// Notes are paragraphs, so that each renders on a line of its own.
	for _, n := range t.Notes {
		buf.WriteByte('\n')
		buf.WriteString(n)
		buf.WriteByte('\n')
	}
}

func (t *Table) writeJSON(buf *bytes.Buffer) error {
	if len(t.Rows) == 0 {
		buf.WriteString("[]\n")
		return nil
	}
	keys := make([][]byte, len(t.Columns))
	for j, c := range t.Columns {
		k, err := json.Marshal(c.key())
		if err != nil {
			return fmt.Errorf("report: column %q: %w", c.header(), err)
		}
		keys[j] = k
	}
	buf.WriteString("[\n")
	for i, row := range t.Rows {
		buf.WriteString("  {")
		for j, v := range row {
			b, err := jsonValue(v)
			if err != nil {
				return fmt.Errorf("report: Rows[%d] column %q: %w", i, t.Columns[j].header(), err)
			}
			if j > 0 {
				buf.WriteString(", ")
			}
			buf.Write(keys[j])
			buf.WriteString(": ")
			buf.Write(b)
		}
		buf.WriteString("}")
		if i < len(t.Rows)-1 {
			buf.WriteByte(',')
		}
		buf.WriteByte('\n')
	}
	buf.WriteString("]\n")
	return nil
}

func (t *Table) writeCSV(buf *bytes.Buffer) error {
	cw := csv.NewWriter(buf)
	rec := make([]string, len(t.Columns))
	for j, c := range t.Columns {
		rec[j] = c.key()
	}
	if err := cw.Write(rec); err != nil {
		return err
	}
	for _, row := range t.Rows {
		for j, v := range row {
			rec[j] = formatRaw(v)
		}
		if err := cw.Write(rec); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

func isNumber(v any) bool {
	switch v.(type) {
	case int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64, uintptr, float32, float64:
		return true
	}
	return false
}

// floatVerb reports whether the first verb of format is a floating-point
// one (e, E, f, F, g, G).
func floatVerb(format string) bool {
	for i := 0; i < len(format); i++ {
		if format[i] != '%' {
			continue
		}
		if i+1 < len(format) && format[i+1] == '%' {
			i++
			continue
		}
		for _, r := range format[i+1:] {
			if unicode.IsLetter(r) {
				return strings.ContainsRune("eEfFgG", r)
			}
		}
		return false
	}
	return false
}

func toFloat(v any) float64 {
	switch n := v.(type) {
	case int:
		return float64(n)
	case int8:
		return float64(n)
	case int16:
		return float64(n)
	case int32:
		return float64(n)
	case int64:
		return float64(n)
	case uint:
		return float64(n)
	case uint8:
		return float64(n)
	case uint16:
		return float64(n)
	case uint32:
		return float64(n)
	case uint64:
		return float64(n)
	case uintptr:
		return float64(n)
	case float32:
		return float64(n)
	case float64:
		return n
	}
	return math.NaN()
}

// formatText returns a cell as shown in text output.
func formatText(v any, format string) string {
	if isNumber(v) && format != "" {
		if floatVerb(format) {
			return fmt.Sprintf(format, toFloat(v))
		}
		return fmt.Sprintf(format, v)
	}
	return formatRaw(v)
}

// formatRaw returns a cell at full precision, as in CSV output.
func formatRaw(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	case float32:
		return strconv.FormatFloat(float64(x), 'f', -1, 32)
	case bool:
		return strconv.FormatBool(x)
	case error:
		return x.Error()
	case fmt.Stringer:
		return x.String()
	}
	return fmt.Sprint(v)
}

// jsonValue encodes a cell for JSON output: numbers as numbers (NaN and
// infinities, which JSON lacks, as null), a fmt.Stringer or error without
// its own JSON or text encoding as its string.
func jsonValue(v any) ([]byte, error) {
	switch x := v.(type) {
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return []byte("null"), nil
		}
	case float32:
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return []byte("null"), nil
		}
	case json.Marshaler, encoding.TextMarshaler:
	case error:
		return json.Marshal(x.Error())
	case fmt.Stringer:
		return json.Marshal(x.String())
	}
	return json.Marshal(v)
}
