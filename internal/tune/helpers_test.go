package tune

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stratadb/strata/internal/report"
)

// testMinTime makes every timed phase of a test run one pass: tests check
// what is measured, not how fast.
const testMinTime = time.Nanosecond

// smallData is the tests' data: a few hundred entities of about 768 bytes.
func smallData(t testing.TB) *Dataset {
	t.Helper()
	d, err := GenerateDataset(300, 768, 1)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// writeJSONL writes lines into a file in a fresh directory.
func writeJSONL(t testing.TB, lines ...string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "in.jsonl")
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// jsonLines returns n JSON documents.
func jsonLines(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf(`{"id":%d,"name":"user %d","bio":"likes hiking, coffee and long walks by the river number %d"}`, i, i, i%7)
	}
	return out
}

// unwritableDir returns a --dir that cannot be written: a directory with
// mode 0500 for an ordinary user, or, since root ignores the mode, a path
// under a regular file, which fails for root too.
func unwritableDir(t testing.TB) string {
	t.Helper()
	if os.Geteuid() != 0 {
		dir := filepath.Join(t.TempDir(), "ro")
		if err := os.Mkdir(dir, 0o500); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = os.Chmod(dir, 0o700) })
		return dir
	}
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(file, "sub")
}

// jsonRows renders tb as JSON and returns its rows.
func jsonRows(t testing.TB, tb *report.Table) []map[string]any {
	t.Helper()
	var js bytes.Buffer
	if err := tb.Render(&js, "json"); err != nil {
		t.Fatal(err)
	}
	var rows []map[string]any
	if err := json.Unmarshal(js.Bytes(), &rows); err != nil {
		t.Fatal(err)
	}
	return rows
}
