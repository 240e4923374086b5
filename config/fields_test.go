package config

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// docsRow is one row of docs/config.md's table of keys.
type docsRow struct {
	key, def, rng, options string
}

// docsTable reads the table of keys of docs/config.md: the one whose header
// begins "| Key | Default | Range | In OPTIONS-rocksdb |".
func docsTable(t *testing.T) []docsRow {
	t.Helper()
	var rows []docsRow
	for _, cells := range docsTableCells(t, "| Key | Default | Range | In OPTIONS-rocksdb |", 4) {
		rows = append(rows, docsRow{
			key:     strings.Trim(cells[0], "`"),
			def:     firstCode(cells[1]),
			rng:     strings.ReplaceAll(cells[2], "`", ""),
			options: cells[3],
		})
	}
	return rows
}

// docsTableCells returns the cells of each row of the table of
// docs/config.md whose header line begins with header; each row must have
// at least n cells.
func docsTableCells(t *testing.T, header string, n int) [][]string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "docs", "config.md"))
	if err != nil {
		t.Fatal(err)
	}
	var rows [][]string
	in := false
	for _, line := range strings.Split(string(data), "\n") {
		switch {
		case strings.HasPrefix(line, header):
			in = true
			continue
		case !in:
			continue
		case strings.HasPrefix(line, "|---"):
			continue
		case !strings.HasPrefix(line, "|"):
			return rows
		}
		cells := strings.Split(strings.TrimSuffix(strings.TrimPrefix(line, "| "), " |"), " | ")
		if len(cells) < n {
			t.Fatalf("docs/config.md: a row of fewer than %d cells: %q", n, line)
		}
		rows = append(rows, cells)
	}
	if !in {
		t.Fatalf("docs/config.md has no table headed %s", header)
	}
	return rows
}

// firstCode returns the first `code` span of a cell, or the cell.
func firstCode(cell string) string {
	if _, rest, ok := strings.Cut(cell, "`"); ok {
		code, _, _ := strings.Cut(rest, "`")
		return code
	}
	return cell
}

// optionsText is what the In OPTIONS-rocksdb column says of a row: the
// section and RocksDB name it is written under (with the unit when it
// converts), or the "# strata:" comment.
func optionsText(f *field) string {
	if f.rocksdb == "" {
		return "`# strata:`"
	}
	s := "`" + f.rocksdb + "`"
	if f.scale == mib {
		s += " (bytes)"
	}
	return s
}

// TestDocsTableMatchesFields holds docs/config.md's table of keys to the
// table of fields: the same keys in the same order, each with the table's
// default, range and OPTIONS name. A key added to one and not the other,
// or a changed default or range, fails here.
func TestDocsTableMatchesFields(t *testing.T) {
	rows := docsTable(t)
	var docKeys, tableKeys []string
	for _, r := range rows {
		docKeys = append(docKeys, r.key)
	}
	for _, f := range byField {
		tableKeys = append(tableKeys, f.key)
	}
	if !reflect.DeepEqual(docKeys, tableKeys) {
		t.Fatalf("docs/config.md keys =\n  %v\nthe table of fields has\n  %v", docKeys, tableKeys)
	}
	for i, r := range rows {
		f := byField[i]
		if r.def != f.defaultText() {
			t.Errorf("docs/config.md: %s default %q, the table says %q", f.key, r.def, f.defaultText())
		}
		if r.rng != f.rangeText() {
			t.Errorf("docs/config.md: %s range %q, the table says %q", f.key, r.rng, f.rangeText())
		}
		if r.options != optionsText(f) {
			t.Errorf("docs/config.md: %s in OPTIONS-rocksdb %q, the table says %q", f.key, r.options, optionsText(f))
		}
	}
}

// TestEveryKeyHasARow checks that each file key of Config but the [server]
// and [cluster] sections is a row of the table, so a new field cannot miss
// its default, range and OPTIONS line.
func TestEveryKeyHasARow(t *testing.T) {
	rt := reflect.TypeFor[Config]()
	for i := range rt.NumField() {
		key := rt.Field(i).Tag.Get("toml")
		if key == "server" || key == "cluster" {
			continue
		}
		if fieldByKey(key) == nil {
			t.Errorf("Config key %s has no row in the table of fields", key)
		}
	}
}

// TestValidateRangesMatchTable probes Validate at each ranged row's limits:
// the limits themselves (and 0 where the row allows it) are valid, one step
// outside each is exactly one problem on that key, naming the table's
// range. A range checked anywhere else than the table, or not at all,
// fails here.
func TestValidateRangesMatchTable(t *testing.T) {
	for _, f := range byField {
		if f.limits == nil {
			continue
		}
		step := 1.0
		if f.value(Default()).Kind() == reflect.Float64 {
			step = 0.001
		}
		set := func(c *Config, x float64) {
			v := f.value(c)
			if v.CanInt() {
				v.SetInt(int64(x))
			} else {
				v.SetFloat(x)
			}
		}
		valid := []float64{f.limits.min, f.limits.max}
		if f.limits.sentinelMeans != "" {
			valid = append(valid, f.limits.sentinel)
		}
		for _, x := range valid {
			c := Default()
			set(c, x)
			if err := c.Validate(); err != nil {
				t.Errorf("%s = %s: Validate() = %v, want valid (the table allows %s)", f.key, formatNumber(x), err, f.limits)
			}
		}
		invalid := []float64{f.limits.min - step, f.limits.max + step}
		if f.limits.sentinelMeans == "" && f.value(Default()).Kind() == reflect.Float64 {
			invalid = append(invalid, math.NaN())
		}
		if f.limits.sentinelMeans != "" && f.limits.sentinel != 0 && f.limits.min > 0 {
			invalid = append(invalid, 0) // between the sentinel and the range
		}
		for _, x := range invalid {
			if x == f.limits.sentinel && f.limits.sentinelMeans != "" {
				x = f.limits.min - 2*step // the sentinel is allowed there
			}
			c := Default()
			set(c, x)
			ps := problems(t, c.Validate())
			if len(ps) != 1 || ps[0].Key != f.key || ps[0].Rule != f.limits.rule() {
				t.Errorf("%s = %s: Validate() = %v, want one problem %q", f.key, formatNumber(x), ps, f.limits.rule())
			}
		}
	}
}

// TestFixedValuesRoundTrip checks that every row Strata writes with a fixed
// value is read back without a note, and that another value is noted with
// the row's reason.
func TestFixedValuesRoundTrip(t *testing.T) {
	for i := range fields {
		f := &fields[i]
		if f.fixed == "" || f.reason == "" {
			continue
		}
		file := "[" + f.section + "]\n" + f.rocksdb + "=" + f.fixed + "\n"
		if _, unmapped := importString(t, file); len(unmapped) != 0 {
			t.Errorf("%s=%s: unmapped %v, want none", f.rocksdb, f.fixed, unmapped)
		}
		others := []string{"2"}
		if f.fixed == "true" {
			others = []string{"false", "0", "maybe"}
		}
		for _, other := range others {
			_, unmapped := importString(t, "["+f.section+"]\n"+f.rocksdb+"="+other+"\n")
			if len(unmapped) != 1 || unmapped[0].Reason != f.reason {
				t.Errorf("%s=%s: unmapped %v, want one with reason %q", f.rocksdb, other, unmapped, f.reason)
			}
		}
	}
}

// TestUnmappedAreNotRows checks that no RocksDB option is both a row of the
// table and listed as one Strata has no setting for.
func TestUnmappedAreNotRows(t *testing.T) {
	for i := range fields {
		f := &fields[i]
		if _, ok := unmappedReasons[f.rocksdb]; ok {
			t.Errorf("%s is a row of the table and in unmappedReasons", f.rocksdb)
		}
		if _, ok := agreeing[f.rocksdb]; ok {
			t.Errorf("%s is a row of the table and in agreeing", f.rocksdb)
		}
	}
}

// TestDocsServerTableMatches holds docs/config.md's [server] table to
// ServerConfig: every key once, none that does not exist, each with
// defaultServer()'s value. (The [server] and [cluster] sections keep their
// hand-written rules; this keeps at least their documentation exact.)
func TestDocsServerTableMatches(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "docs", "config.md"))
	if err != nil {
		t.Fatal(err)
	}
	documented := map[string]string{}
	for _, line := range strings.Split(string(data), "\n") {
		if !strings.HasPrefix(line, "| `server.") {
			continue
		}
		cells := strings.Split(line, " | ")
		for _, k := range strings.Split(strings.TrimPrefix(cells[0], "| "), ", ") {
			key := strings.TrimPrefix(strings.Trim(k, "`"), "server.")
			if _, dup := documented[key]; dup {
				t.Errorf("docs/config.md: server.%s documented twice", key)
			}
			documented[key] = firstCode(cells[1])
		}
	}
	def := reflect.ValueOf(defaultServer())
	rt := def.Type()
	for i := range rt.NumField() {
		key := rt.Field(i).Tag.Get("toml")
		want := fmt.Sprint(def.Field(i).Interface())
		if want == "" {
			want = `""`
		}
		got, ok := documented[key]
		switch {
		case !ok:
			t.Errorf("docs/config.md has no row for server.%s", key)
		case got != want:
			t.Errorf("docs/config.md: server.%s default %q, defaultServer() has %q", key, got, want)
		}
		delete(documented, key)
	}
	for key := range documented {
		t.Errorf("docs/config.md documents server.%s, which ServerConfig does not have", key)
	}
}
