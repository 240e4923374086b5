package workload

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestReadJSONL(t *testing.T) {
	big := `{"text":"` + strings.Repeat("x", 1<<20) + `"}`
	errStop := errors.New("stop")
	for _, tc := range []struct {
		name    string
		in      string
		stopAt  int // fn returns errStop at this index; -1 never
		want    []string
		wantErr string
	}{
		{name: "lines", in: "{\"a\":1}\n[2]\n\"three\"\n", stopAt: -1, want: []string{`{"a":1}`, `[2]`, `"three"`}},
		{name: "no final newline", in: "{\"a\":1}\n{\"b\":2}", stopAt: -1, want: []string{`{"a":1}`, `{"b":2}`}},
		{name: "crlf", in: "{\"a\":1}\r\n{\"b\":2}\r\n", stopAt: -1, want: []string{`{"a":1}`, `{"b":2}`}},
		{name: "bom", in: "\ufeff{\"a\":1}\n", stopAt: -1, want: []string{`{"a":1}`}},
		{name: "line over 64K", in: "1\n" + big + "\n2\n", stopAt: -1, want: []string{"1", big, "2"}},
		{name: "bad line", in: "{}\n{}\n{\"a\":}\n{}\n", stopAt: -1, want: []string{"{}", "{}"},
			wantErr: "line 3: not valid JSON: invalid character '}' looking for beginning of value (at byte 6)"},
		{name: "blank line", in: "{}\n\n{}\n", stopAt: -1, want: []string{"{}"},
			wantErr: "line 2: blank line: every line must hold one JSON value"},
		{name: "spaces line", in: "{}\n  \t\n", stopAt: -1, want: []string{"{}"},
			wantErr: "line 2: blank line: every line must hold one JSON value"},
		{name: "two values", in: "{} {}\n", stopAt: -1,
			wantErr: "line 1: not valid JSON: invalid character '{' after top-level value (at byte 4)"},
		{name: "empty", in: "", stopAt: -1, wantErr: "workload: no entities"},
		{name: "fn error", in: "1\n2\n3\n", stopAt: 1, want: []string{"1"}, wantErr: "line 2: stop"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			n, err := ReadJSONL(strings.NewReader(tc.in), func(i int, line []byte) error {
				if i != len(got) {
					t.Fatalf("index %d, want %d", i, len(got))
				}
				if i == tc.stopAt {
					return errStop
				}
				got = append(got, string(line))
				return nil
			})
			if tc.wantErr == "" && err != nil {
				t.Fatalf("error %v", err)
			}
			if tc.wantErr != "" && (err == nil || err.Error() != tc.wantErr) {
				t.Fatalf("error %v, want %q", err, tc.wantErr)
			}
			if n != len(got) || strings.Join(got, "|") != strings.Join(tc.want, "|") {
				t.Fatalf("read %d lines %.80q, want %.80q", n, got, tc.want)
			}
		})
	}
}

func TestReadJSONLErrorChains(t *testing.T) {
	_, err := ReadJSONL(strings.NewReader(""), nil)
	if !errors.Is(err, ErrNoEntities) {
		t.Errorf("empty input: %v, want ErrNoEntities", err)
	}
	_, err = ReadJSONL(strings.NewReader("{]\n"), func(int, []byte) error { return nil })
	var se *json.SyntaxError
	if !errors.As(err, &se) || se.Offset != 2 {
		t.Errorf("bad JSON: %v, want a *json.SyntaxError at offset 2", err)
	}
	errStop := errors.New("stop")
	_, err = ReadJSONL(strings.NewReader("1\n"), func(int, []byte) error { return errStop })
	if !errors.Is(err, errStop) {
		t.Errorf("fn error: %v, want errStop in the chain", err)
	}
}

func TestReadJSONLTooLong(t *testing.T) {
	if testing.Short() {
		t.Skip("allocates 64 MiB")
	}
	in := `"` + strings.Repeat("x", MaxLineBytes) + `"` + "\n"
	_, err := ReadJSONL(strings.NewReader("1\n"+in), func(int, []byte) error { return nil })
	if want := "line 2: longer than 67108864 bytes"; err == nil || err.Error() != want {
		t.Fatalf("error %v, want %q", err, want)
	}
}

func TestLoadJSONL(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}

	good := write("good.jsonl", "{\"a\":1}\n{\"b\":2}\n")
	lines, err := LoadJSONL(good)
	if err != nil || len(lines) != 2 || string(lines[1]) != `{"b":2}` {
		t.Fatalf("LoadJSONL(good) = %q, %v", lines, err)
	}

	for _, tc := range []struct {
		name, path, want string
		is               error
	}{
		{"missing", filepath.Join(dir, "missing.jsonl"), "open " + filepath.Join(dir, "missing.jsonl") + ": no such file or directory", fs.ErrNotExist},
		{"empty", write("empty.jsonl", ""), filepath.Join(dir, "empty.jsonl") + ": workload: no entities", ErrNoEntities},
		{"bad", write("bad.jsonl", "{}\nnope\n"), filepath.Join(dir, "bad.jsonl") + ": line 2: not valid JSON: invalid character 'o' in literal null (expecting 'u') (at byte 2)", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := LoadJSONL(tc.path)
			if err == nil || err.Error() != tc.want {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Fatalf("error %v is not %v", err, tc.is)
			}
		})
	}
}

// FuzzReadJSONL checks ReadJSONL never panics and passes on only valid,
// non-blank lines with consecutive indices.
func FuzzReadJSONL(f *testing.F) {
	f.Add("{\"a\":1}\n[2]\n")
	f.Add("\ufeff1\r\n2")
	f.Add("{}\n\n{}")
	f.Fuzz(func(t *testing.T, in string) {
		next := 0
		n, err := ReadJSONL(strings.NewReader(in), func(i int, line []byte) error {
			if i != next || !json.Valid(line) || strings.TrimSpace(string(line)) == "" {
				t.Fatalf("line %d (want %d): %q", i, next, line)
			}
			next++
			return nil
		})
		if n != next {
			t.Fatalf("returned %d, passed %d lines (error %v)", n, next, err)
		}
		if err == nil && n == 0 {
			t.Fatalf("no error for no lines")
		}
	})
}
