package examples

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stratadb/strata/internal/admin"
)

// docPages returns README.md and every page under docs/.
func docPages(t *testing.T) []string {
	t.Helper()
	pages := []string{"../README.md"}
	err := filepath.WalkDir("../docs", func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".md") {
			pages = append(pages, p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return pages
}

var (
	mdLink  = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	heading = regexp.MustCompile(`(?m)^#{1,6} +(.+?) *$`)
	// anchorDrop is what GitHub drops from a heading to make its anchor.
	anchorDrop = regexp.MustCompile("[^\\p{L}\\p{N} _-]")
)

// anchors returns the GitHub anchors of a page's headings.
func anchors(text string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	for _, m := range heading.FindAllStringSubmatch(stripFences(text), -1) {
		a := strings.ReplaceAll(anchorDrop.ReplaceAllString(strings.ToLower(m[1]), ""), " ", "-")
		if n := seen[a]; n > 0 {
			out[a+"-"+strconv.Itoa(n)] = true
		} else {
			out[a] = true
		}
		seen[a]++
	}
	return out
}

var fence = regexp.MustCompile("(?ms)^```.*?^```")

// stripFences blanks fenced code blocks, whose lines are not headings or
// links.
func stripFences(text string) string {
	return fence.ReplaceAllStringFunc(text, func(s string) string { return strings.Repeat("\n", strings.Count(s, "\n")) })
}

// TestDocsLinksResolve: every relative link of README.md and docs/ names
// a file that exists and, with a #fragment into a Markdown page, one of
// its headings.
func TestDocsLinksResolve(t *testing.T) {
	checked := 0
	for _, page := range docPages(t) {
		b, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		text := stripFences(string(b))
		for _, m := range mdLink.FindAllStringSubmatch(text, -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, frag, _ := strings.Cut(target, "#")
			path := page
			if file != "" {
				path = filepath.Join(filepath.Dir(page), file)
			}
			tb, err := os.ReadFile(path)
			if err != nil {
				if st, serr := os.Stat(path); serr == nil && st.IsDir() {
					checked++
					continue
				}
				t.Errorf("%s: link %s: %v", page, target, err)
				continue
			}
			checked++
			if frag != "" && strings.HasSuffix(path, ".md") && !anchors(string(tb))[strings.ToLower(frag)] {
				t.Errorf("%s: link %s: %s has no heading with the anchor #%s", page, target, path, frag)
			}
		}
	}
	if checked == 0 {
		t.Fatal("no links found")
	}
	t.Logf("%d relative links resolve", checked)
}

// strataCommand finds the strata command lines of a page's code blocks
// (indented or fenced): "strata ..." or "go run ./cmd/strata ...", with
// continuation lines joined, cut at a pipe, redirection or &&.
var strataCommand = regexp.MustCompile(`^(?:\$ )?(?:strata|\./strata|/tmp/strata|go run \./cmd/strata) (.*)$`)

func commandLines(text string) [][]string {
	var out [][]string
	lines := strings.Split(text, "\n")
	inFence := false
	for i := 0; i < len(lines); i++ {
		raw := lines[i]
		trim := strings.TrimSpace(raw)
		if strings.HasPrefix(trim, "```") {
			inFence = !inFence
			continue
		}
		if !inFence && !strings.HasPrefix(raw, "    ") && !strings.HasPrefix(raw, "\t") {
			continue
		}
		m := strataCommand.FindStringSubmatch(trim)
		if m == nil {
			continue
		}
		cmd := m[1]
		for strings.HasSuffix(cmd, `\`) && i+1 < len(lines) {
			i++
			cmd = strings.TrimSuffix(cmd, `\`) + " " + strings.TrimSpace(lines[i])
		}
		for _, stop := range []string{" | ", " > ", " && ", " 2>", " # ", " &"} {
			if j := strings.Index(cmd, stop); j >= 0 {
				cmd = cmd[:j]
			}
		}
		out = append(out, splitArgs(cmd))
	}
	return out
}

// splitArgs splits a shell command line on spaces, keeping quoted words
// whole (without their quotes).
func splitArgs(s string) []string {
	var out []string
	var cur strings.Builder
	quote := byte(0)
	in := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote != 0 && c == quote:
			quote = 0
		case quote != 0:
			cur.WriteByte(c)
		case c == '\'' || c == '"':
			quote, in = c, true
		case c == ' ':
			if in {
				out = append(out, cur.String())
				cur.Reset()
				in = false
			}
		default:
			cur.WriteByte(c)
			in = true
		}
	}
	if in {
		out = append(out, cur.String())
	}
	return out
}

// TestDocsStrataCommandsParse: every strata command in the code blocks of
// README.md and docs/ names a subcommand that exists and only flags it
// takes, as `strata ... --help` of the same words would check.
func TestDocsStrataCommandsParse(t *testing.T) {
	n := 0
	for _, page := range docPages(t) {
		if strings.Contains(page, "history") {
			continue // the history tells of commands as they were
		}
		b, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		for _, args := range commandLines(string(b)) {
			n++
			root := admin.NewRootCommand()
			cmd, rest, err := root.Find(args)
			if err != nil {
				t.Errorf("%s: strata %s: %v", page, strings.Join(args, " "), err)
				continue
			}
			if cmd == root {
				t.Errorf("%s: strata %s: no such command", page, strings.Join(args, " "))
				continue
			}
			if cmd.Name() == "etcd" {
				continue // etcd's flags are parsed by strata etcd itself (internal/etcdflags)
			}
			if err := cmd.ParseFlags(rest); err != nil {
				t.Errorf("%s: strata %s: %v", page, strings.Join(args, " "), err)
			}
		}
	}
	if n == 0 {
		t.Fatal("no strata commands found")
	}
	t.Logf("%d strata commands parse", n)
}

// maxDocLines is the most lines a page of docs/ may have: a reader
// finishes a page in about five minutes. The history (docs/history/) and
// the raw results (docs/data/) are exempt: they are kept as written.
const maxDocLines = 320

// TestDocsPagesStayShort: every Markdown page of docs/, but for the
// history and the raw results, and README.md stay within maxDocLines.
func TestDocsPagesStayShort(t *testing.T) {
	n := 0
	for _, page := range docPages(t) {
		rel := filepath.ToSlash(page)
		if strings.HasPrefix(rel, "../docs/history/") || strings.HasPrefix(rel, "../docs/data/") {
			continue
		}
		b, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		n++
		if lines := strings.Count(string(b), "\n"); lines > maxDocLines {
			t.Errorf("%s has %d lines, over the limit of %d: split it into pages of one reader each, or move what tells how a figure came about to docs/history/ (examples/docs_test.go, maxDocLines)",
				strings.TrimPrefix(rel, "../"), lines, maxDocLines)
		}
	}
	if n == 0 {
		t.Fatal("no pages found")
	}
	t.Logf("%d pages checked against %d lines", n, maxDocLines)
}

// vetAsEmbedded type-checks src as the program examples/embedded would be:
// src takes the place of embedded/main.go through an overlay (nothing is
// written to the tree) and go vet checks it, a build without the link.
// tmp holds the copies; name tells them apart. It returns go vet's output
// and error.
func vetAsEmbedded(t *testing.T, tmp, name string, src []byte) ([]byte, error) {
	t.Helper()
	target, err := filepath.Abs(filepath.Join("embedded", "main.go"))
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(tmp, name+".go")
	if err := os.WriteFile(file, src, 0o644); err != nil {
		t.Fatal(err)
	}
	ov, err := json.Marshal(map[string]map[string]string{"Replace": {target: file}})
	if err != nil {
		t.Fatal(err)
	}
	ovPath := filepath.Join(tmp, name+".json")
	if err := os.WriteFile(ovPath, ov, 0o644); err != nil {
		t.Fatal(err)
	}
	return exec.Command("go", "vet", "-overlay="+ovPath, "./embedded").CombinedOutput()
}

// TestDocsGoCompiles type-checks every Go block of docs/ that is a whole
// program (it starts with a package clause), as TestReadmeGoCompiles does
// for README.md. Blocks that are fragments (no package clause) are left
// out.
func TestDocsGoCompiles(t *testing.T) {
	tmp := t.TempDir()
	n := 0
	for _, page := range docPages(t) {
		if page == "../README.md" || strings.Contains(page, "history") {
			continue // README has its own test; the history tells of code as it was
		}
		b, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		for i, m := range goBlock.FindAllSubmatch(b, -1) {
			if !strings.HasPrefix(strings.TrimSpace(string(m[1])), "package ") {
				continue
			}
			n++
			if out, err := vetAsEmbedded(t, tmp, fmt.Sprintf("block%d", n), m[1]); err != nil {
				t.Errorf("%s: Go block %d does not compile: %v\n%s%s", page, i+1, err, out, m[1])
			}
		}
	}
	if n == 0 {
		t.Fatal("no Go program found in docs/")
	}
	t.Logf("%d Go programs of docs/ compile", n)
}
