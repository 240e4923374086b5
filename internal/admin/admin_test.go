package admin

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stratadb/strata/engine"
	"github.com/stratadb/strata/internal/workload"
)

// run executes the strata command line args in-process and returns what it
// wrote to stdout and stderr.
func run(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	root := NewRootCommand()
	var out, errb bytes.Buffer
	root.SetArgs(args)
	root.SetOut(&out)
	root.SetErr(&errb)
	err = root.Execute()
	return out.String(), errb.String(), err
}

// mustRun is run that fails the test on an error and returns stdout.
func mustRun(t *testing.T, args ...string) string {
	t.Helper()
	out, stderr, err := run(t, args...)
	if err != nil {
		t.Fatalf("strata %s: %v (stderr %q)", strings.Join(args, " "), err, stderr)
	}
	return out
}

// testLines returns n small JSON objects, one per line.
func testLines(n int) [][]byte {
	lines := make([][]byte, n)
	for i := range lines {
		lines[i] = fmt.Appendf(nil, `{"id":%d,"name":"entity %d","tags":["a","b"],"pad":%q}`, i, i, strings.Repeat("x", i%37))
	}
	return lines
}

// writeJSONL writes lines as a JSON Lines file and returns its path.
func writeJSONL(t *testing.T, dir, name string, lines [][]byte) string {
	t.Helper()
	var b bytes.Buffer
	for _, l := range lines {
		b.Write(l)
		b.WriteByte('\n')
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// scanEntities returns the scan output a database holding exactly lines
// as entities 0..len(lines)-1 prints.
func scanEntities(lines [][]byte) string {
	var b strings.Builder
	for i, l := range lines {
		fmt.Fprintf(&b, "%s\t%s\n", workload.Key(i), l)
	}
	return b.String()
}

func TestPutGetDelete(t *testing.T) {
	db := filepath.Join(t.TempDir(), "db") // put creates it
	mustRun(t, "--db", db, "put", "user:1", `{"name":"Ada"}`)
	if got := mustRun(t, "--db", db, "get", "user:1"); got != "{\"name\":\"Ada\"}\n" {
		t.Fatalf("get: %q", got)
	}
	mustRun(t, "--db", db, "put", "user:1", "v2")
	if got := mustRun(t, "--db", db, "get", "user:1"); got != "v2\n" {
		t.Fatalf("get after overwrite: %q", got)
	}
	mustRun(t, "--db", db, "delete", "user:1")
	mustRun(t, "--db", db, "delete", "user:1") // absent: not an error

	out, _, err := run(t, "--db", db, "get", "user:1")
	if err == nil {
		t.Fatalf("get of a deleted key: no error, stdout %q", out)
	}
	var nf *NotFoundError
	if !errors.As(err, &nf) || !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("get missing: error %v (%T), want a *NotFoundError wrapping engine.ErrNotFound", err, err)
	}
	if got, want := err.Error(), `key "user:1" not found`; got != want {
		t.Fatalf("get missing: message %q, want %q", got, want)
	}
	if out != "" {
		t.Fatalf("get missing: stdout %q, want nothing", out)
	}
}

func TestArgumentErrors(t *testing.T) {
	db := t.TempDir()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"get", "k"}, "need --config FILE or --db DIR"},
		{[]string{"options"}, "need --config FILE or --db DIR"},
		{[]string{"--db", db, "put", "k"}, "missing argument VALUE"},
		{[]string{"--db", db, "put"}, "missing arguments KEY and VALUE"},
		{[]string{"--db", db, "get"}, "missing argument KEY (usage: strata get KEY"},
		{[]string{"--db", db, "get", "a", "b"}, `unexpected argument "b": takes only KEY`},
		{[]string{"--db", db, "get", ""}, "argument KEY is empty"},
		{[]string{"--db", db, "delete"}, "missing argument KEY"},
		{[]string{"--db", db, "load"}, "missing argument FILE"},
		{[]string{"--db", db, "checkpoint"}, "missing argument DIR"},
		{[]string{"--db", db, "stats", "x"}, `unexpected argument "x": takes no arguments`},
		{[]string{"--db", db, "scan", "--limit", "-1"}, "--limit -1: must be >= 0"},
		{[]string{"--db", db, "scan", "--from", "b", "--to", "a"}, "--from must sort before --to"},
		{[]string{"--db", db, "scan", "--limit", "x"}, `invalid argument "x" for "--limit"`},
		{[]string{"--db", db, "load", "f.jsonl", "--batch-size", "0"}, "--batch-size 0: must be >= 1"},
		{[]string{"--db", db, "load", "f.jsonl", "--progress", "sometimes"}, `--progress "sometimes"`},
		{[]string{"--db", db, "load", filepath.Join(db, "missing.jsonl")}, "no such file"},
		{[]string{"--db", db, "frobnicate"}, `unknown command "frobnicate"`},
		{[]string{"--config", filepath.Join(db, "missing.toml"), "get", "k"}, "--config " + filepath.Join(db, "missing.toml")},
		{[]string{"--db", filepath.Join(db, "typo"), "get", "k"}, "no database at db_path"},
		{[]string{"--db", filepath.Join(db, "typo"), "scan"}, "the directory does not exist"},
		{[]string{"--db", filepath.Join(db, "typo"), "stats"}, "the directory does not exist"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			_, _, err := run(t, tc.args...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestConfigFlag(t *testing.T) {
	dir := t.TempDir()
	fileDB := filepath.Join(dir, "from-file")
	cfg := filepath.Join(dir, "strata.toml")
	if err := os.WriteFile(cfg, fmt.Appendf(nil, "db_path = %q\nmemtable_size_mb = 8\n", fileDB), 0o644); err != nil {
		t.Fatal(err)
	}
	mustRun(t, "--config", cfg, "put", "k", "file")
	if got := mustRun(t, "--db", fileDB, "get", "k"); got != "file\n" {
		t.Fatalf("--config did not use db_path: %q", got)
	}
	// --db overrides the file's db_path; the file's other settings stay.
	flagDB := filepath.Join(dir, "from-flag")
	mustRun(t, "--config", cfg, "--db", flagDB, "put", "k", "flag")
	if got := mustRun(t, "--db", flagDB, "get", "k"); got != "flag\n" {
		t.Fatalf("--db did not override db_path: %q", got)
	}
	if got := mustRun(t, "--config", cfg, "--db", flagDB, "options"); !strings.Contains(got, "write_buffer_size=8388608") {
		t.Fatalf("--db with --config lost the file's memtable_size_mb:\n%s", got)
	}
}

func TestScan(t *testing.T) {
	db := t.TempDir()
	for _, kv := range [][2]string{
		{"user:3", "c"}, {"user:1", "a"}, {"order:1", "o"}, {"user:2", "b"}, {"users", "s"}, {"zzz", "z"},
	} {
		mustRun(t, "--db", db, "put", kv[0], kv[1])
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "order:1\to\nuser:1\ta\nuser:2\tb\nuser:3\tc\nusers\ts\nzzz\tz\n"},
		{[]string{"--prefix", "user:"}, "user:1\ta\nuser:2\tb\nuser:3\tc\n"},
		{[]string{"--prefix", "user:", "--limit", "2"}, "user:1\ta\nuser:2\tb\n"},
		{[]string{"--prefix", "user:", "--from", "user:2"}, "user:2\tb\nuser:3\tc\n"},
		{[]string{"--prefix", "user:", "--to", "user:2"}, "user:1\ta\n"},
		{[]string{"--prefix", "user:", "--from", "zz"}, ""},
		{[]string{"--from", "user:3", "--to", "zzz"}, "user:3\tc\nusers\ts\n"},
		{[]string{"--limit", "1"}, "order:1\to\n"},
		{[]string{"--prefix", "nothing"}, ""},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			got := mustRun(t, append([]string{"--db", db, "scan"}, tc.args...)...)
			if got != tc.want {
				t.Fatalf("got\n%s\nwant\n%s", got, tc.want)
			}
		})
	}
}

func TestPrefixEnd(t *testing.T) {
	for _, tc := range []struct{ prefix, want string }{
		{"", ""},
		{"a", "b"},
		{"user:", "user;"},
		{"a\xff", "b"},
		{"a\xff\xff", "b"},
		{"ab\xffc", "ab\xffd"},
		{"\xff", ""},
		{"\xff\xff", ""},
		{"\x00", "\x01"},
	} {
		got := prefixEnd([]byte(tc.prefix))
		if tc.want == "" {
			if got != nil {
				t.Errorf("prefixEnd(%q) = %q, want nil (no upper bound)", tc.prefix, got)
			}
			continue
		}
		if string(got) != tc.want {
			t.Errorf("prefixEnd(%q) = %q, want %q", tc.prefix, got, tc.want)
		}
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "db")
	lines := testLines(200)
	file := writeJSONL(t, dir, "data.jsonl", lines)
	out := mustRun(t, "--db", db, "load", file, "--batch-size", "32")
	if !strings.HasPrefix(out, "loaded 200 entities (") || !strings.Contains(out, " MB/s") {
		t.Fatalf("load output %q", out)
	}
	if got, want := mustRun(t, "--db", db, "scan"), scanEntities(lines); got != want {
		t.Fatalf("scan after load:\n%s\nwant\n%s", got, want)
	}
	if got := mustRun(t, "--db", db, "get", "entity:00000199"); got != string(lines[199])+"\n" {
		t.Fatalf("get entity:00000199 = %q", got)
	}
}

func TestLoadProgress(t *testing.T) {
	dir := t.TempDir()
	file := writeJSONL(t, dir, "data.jsonl", testLines(50))
	out, stderr, err := run(t, "--db", filepath.Join(dir, "db"), "load", file, "--progress", "always")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stderr, "loading") || !strings.Contains(stderr, "100%") {
		t.Fatalf("no progress bar on stderr: %q", stderr)
	}
	if strings.Contains(out, "loading") {
		t.Fatalf("progress on stdout: %q", out)
	}
	// Not a terminal: no bar by default.
	if _, stderr, _ := run(t, "--db", filepath.Join(dir, "db2"), "load", file); stderr != "" {
		t.Fatalf("progress bar on a non-terminal stderr: %q", stderr)
	}
}

func TestLoadBadLine(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "db")
	lines := testLines(200)
	lines[150] = []byte(`{"id":150,"name":`) // line 151
	file := writeJSONL(t, dir, "data.jsonl", lines)
	_, _, err := run(t, "--db", db, "load", file, "--batch-size", "40")
	if err == nil || !strings.Contains(err.Error(), "line 151: not valid JSON") || !strings.Contains(err.Error(), file) {
		t.Fatalf("load of a bad line 151: error %v", err)
	}
	// Every line before the bad one is present, none after: a prefix.
	if got, want := mustRun(t, "--db", db, "scan"), scanEntities(lines[:150]); got != want {
		t.Fatalf("after the bad line, scan:\n%s\nwant\n%s", got, want)
	}
	// Fixed, --resume completes the set.
	lines[150] = []byte(`{"id":150,"name":"fixed"}`)
	writeJSONL(t, dir, "data.jsonl", lines)
	out := mustRun(t, "--db", db, "load", file, "--resume", "--batch-size", "40")
	if !strings.Contains(out, "skipped 150 entities") || !strings.Contains(out, "loaded 50 entities") {
		t.Fatalf("resume output %q", out)
	}
	if got, want := mustRun(t, "--db", db, "scan"), scanEntities(lines); got != want {
		t.Fatalf("after resume, scan:\n%s\nwant\n%s", got, want)
	}
}

func TestLoadResume(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "db")
	lines := testLines(200)
	partial := writeJSONL(t, dir, "partial.jsonl", lines[:120])
	full := writeJSONL(t, dir, "full.jsonl", lines)
	mustRun(t, "--db", db, "load", partial, "--batch-size", "50")
	// A value the resumed load must not touch: the lines already present are
	// skipped, not rewritten.
	mustRun(t, "--db", db, "put", "entity:00000005", "kept")

	out := mustRun(t, "--db", db, "load", full, "--resume", "--batch-size", "50")
	want := "skipped 120 entities already present (entity:00000000..entity:00000119)\nloaded 80 entities ("
	if !strings.HasPrefix(out, want) {
		t.Fatalf("resume output %q, want it to start with %q", out, want)
	}
	expect := append([][]byte(nil), lines...)
	expect[5] = []byte("kept")
	if got, want := mustRun(t, "--db", db, "scan"), scanEntities(expect); got != want {
		t.Fatalf("after resume, scan:\n%s\nwant\n%s", got, want)
	}
	// Complete: a second resume skips everything.
	out = mustRun(t, "--db", db, "load", full, "--resume")
	if !strings.HasPrefix(out, "skipped 200 entities") || !strings.Contains(out, "loaded 0 entities") {
		t.Fatalf("second resume output %q", out)
	}
	// A shorter file than the database holds is a mistake worth reporting.
	if _, _, err := run(t, "--db", db, "load", partial, "--resume"); err == nil || !strings.Contains(err.Error(), "only 120 lines") {
		t.Fatalf("resume with a shorter file: error %v", err)
	}
}

func TestOptions(t *testing.T) {
	db := filepath.Join(t.TempDir(), "does", "not", "exist")
	out := mustRun(t, "--db", db, "options")
	if !strings.Contains(out, "compression_per_level") {
		t.Fatalf("options output lacks compression_per_level:\n%s", out)
	}
	if _, err := os.Stat(db); !os.IsNotExist(err) {
		t.Fatalf("options created or touched db_path: %v", err)
	}
}

func TestCheckpoint(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "db")
	cp := filepath.Join(dir, "backups", "cp1")
	mustRun(t, "--db", db, "put", "k", "v")
	if out := mustRun(t, "--db", db, "checkpoint", cp); !strings.Contains(out, cp) {
		t.Fatalf("checkpoint output %q", out)
	}
	if fi, err := os.Stat(cp); err != nil || !fi.IsDir() {
		t.Fatalf("checkpoint dir: %v", err)
	}
	if got := mustRun(t, "--db", cp, "get", "k"); got != "v\n" {
		t.Fatalf("get from the checkpoint: %q", got)
	}
	if _, _, err := run(t, "--db", db, "checkpoint", cp); err == nil {
		t.Fatal("checkpoint into an existing directory: no error")
	}
}

func TestFlushCompactStats(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "db")
	mustRun(t, "--db", db, "load", writeJSONL(t, dir, "data.jsonl", testLines(100)))
	if out := mustRun(t, "--db", db, "flush"); !strings.HasPrefix(out, "flushed in ") {
		t.Fatalf("flush output %q", out)
	}
	if out := mustRun(t, "--db", db, "compact"); !strings.HasPrefix(out, "compacted in ") {
		t.Fatalf("compact output %q", out)
	}
	out := mustRun(t, "--db", db, "stats")
	if !strings.Contains(out, "L0") || !strings.Contains(out, "L6") {
		t.Fatalf("stats output:\n%s", out)
	}
}

func TestVerbose(t *testing.T) {
	dir := t.TempDir()
	file := writeJSONL(t, dir, "data.jsonl", testLines(30))
	_, stderr, err := run(t, "--db", filepath.Join(dir, "db"), "-v", "load", file, "--batch-size", "20")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"load: committed entity:00000000..entity:00000019\n", "load: committed entity:00000020..entity:00000029\n"} {
		if !strings.Contains(stderr, want) {
			t.Fatalf("verbose stderr lacks %q:\n%s", want, stderr)
		}
	}
}

func TestHelp(t *testing.T) {
	out := mustRun(t, "help")
	for _, name := range []string{"put", "get", "delete", "scan", "load", "flush", "compact", "checkpoint", "stats", "options", "--config", "--db", "Examples:"} {
		if !strings.Contains(out, name) {
			t.Errorf("help lacks %q", name)
		}
	}
	root := NewRootCommand()
	for _, c := range root.Commands() {
		if c.Name() != "help" && c.Name() != "completion" && c.Example == "" {
			t.Errorf("command %s has no example", c.Name())
		}
	}
	if out := mustRun(t, "help", "load"); !strings.Contains(out, "--resume") || !strings.Contains(out, "--batch-size") {
		t.Errorf("help load:\n%s", out)
	}
}
