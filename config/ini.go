package config

import (
	"bytes"
	"fmt"
	"strings"
)

// The syntax of RocksDB's OPTIONS files, apart from what the keys mean:
// [Title] and [Title "argument"] section headers, key=value statements, #
// comments (also at the end of a line, unless escaped), values escaped with
// \: \# \\ \n \r, CRLF or LF line ends. parseINI reads it and hands each
// piece to an iniVisitor, as Pebble's parseOptions does for its own Parse
// and CheckCompatibility; the importer (rocksdb_import.go) is the visitor
// that maps the keys, the writer (rocksdb_options.go) produces it.

// iniVisitor receives the pieces of an OPTIONS file in order. An error
// stops the parse; parseINI adds the line number.
type iniVisitor interface {
	// visitSection starts a section; name is the header without brackets, with
	// its argument in quotes (`CFOptions "default"`), title the part before
	// the argument.
	visitSection(name, title string) error
	// visitKeyValue is a statement of the current section; raw is the value as
	// written (trailing comment removed, escapes kept).
	visitKeyValue(section, key, raw string) error
	// visitComment is the text of a comment line after the '#', left-trimmed.
	visitComment(text string) error
}

// parseINI reads data and calls v for each section header, statement and
// comment line. It rejects what is malformed whatever the keys mean: a line
// that is neither a header, a statement nor a comment, a statement before
// the first section or without a key, a repeated section, a key set twice
// in one section. Errors carry the line number.
func parseINI(data []byte, v iniVisitor) error {
	sections := map[string]int{} // section -> line of its header
	keys := map[string]int{}     // section + "\x00" + key -> line
	section, inSection := "", false
	for i, b := range bytes.Split(data, []byte{'\n'}) {
		line := i + 1
		err := func() error {
			t := strings.TrimLeft(strings.TrimSuffix(string(b), "\r"), " \t")
			switch {
			case t == "":
				return nil
			case t[0] == '#':
				return v.visitComment(strings.TrimLeft(t[1:], " \t"))
			case t[0] == '[':
				name, title, err := parseSectionHeader(strings.TrimRight(stripComment(t), " \t"))
				if err != nil {
					return err
				}
				if first, ok := sections[name]; ok {
					return fmt.Errorf("section [%s] appears again (first on line %d)", name, first)
				}
				sections[name] = line
				section, inSection = name, true
				return v.visitSection(name, title)
			}
			stmt := stripComment(t)
			eq := strings.IndexByte(stmt, '=')
			if eq < 0 {
				return fmt.Errorf("expected key=value, a [section] or a # comment, found %q", clip(t))
			}
			key := strings.TrimSpace(stmt[:eq])
			if key == "" {
				return fmt.Errorf("statement without a key: %q", clip(t))
			}
			if !inSection {
				return fmt.Errorf("%s=... before the first [section]", clip(key))
			}
			id := section + "\x00" + key
			if first, ok := keys[id]; ok {
				return fmt.Errorf("%s is set again in [%s] (first on line %d)", key, section, first)
			}
			keys[id] = line
			return v.visitKeyValue(section, key, stmt[eq+1:])
		}()
		if err != nil {
			return fmt.Errorf("line %d: %w", line, err)
		}
	}
	return nil
}

// parseSectionHeader reads [Title] or [Title "argument"].
func parseSectionHeader(h string) (name, title string, err error) {
	if !strings.HasSuffix(h, "]") || len(h) < 3 {
		return "", "", fmt.Errorf("malformed section header %q: expected [Title] or [Title \"argument\"]", clip(h))
	}
	inner := strings.TrimSpace(h[1 : len(h)-1])
	title, arg, hasArg := strings.Cut(inner, " ")
	name = title
	if hasArg {
		arg = strings.TrimSpace(arg)
		if len(arg) < 2 || arg[0] != '"' || arg[len(arg)-1] != '"' || strings.Contains(arg[1:len(arg)-1], `"`) {
			return "", "", fmt.Errorf("malformed section header %q: the argument must be in double quotes", clip(h))
		}
		name = title + ` "` + arg[1:len(arg)-1] + `"`
	}
	if title == "" || strings.ContainsAny(title, "\"[]") {
		return "", "", fmt.Errorf("malformed section header %q", clip(h))
	}
	return name, title, nil
}

// stripComment cuts a statement at its first unescaped '#'.
func stripComment(s string) string {
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '#':
			return s[:i]
		}
	}
	return s
}

// Characters escaped with a backslash besides the backslash itself: in the
// value of a RocksDB key, as RocksDB escapes them; in a "# strata: comment",
// which only Strata reads, none; in a path of db_paths, the separators.
const (
	rocksDBSpecial = ":#"
	strataSpecial  = ""
	dbPathSpecial  = ":,"
	levelsSpecial  = ","
)

// escapeValue escapes s for an OPTIONS file as RocksDB does: a backslash
// before '\\' and each character of special, and \n and \r for line breaks.
// Leading and trailing spaces and tabs are escaped too, so that the reader,
// which trims unescaped ones, keeps them.
func escapeValue(s, special string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		ch := s[i]
		switch {
		case ch == '\n':
			b.WriteString(`\n`)
		case ch == '\r':
			b.WriteString(`\r`)
		case ch == '\\' || strings.IndexByte(special, ch) >= 0,
			(ch == ' ' || ch == '\t') && (i == 0 || i == len(s)-1):
			b.WriteByte('\\')
			b.WriteByte(ch)
		default:
			b.WriteByte(ch)
		}
	}
	return b.String()
}

// unescapeTrim undoes escapeValue: it drops unescaped spaces and tabs at
// both ends and resolves \n, \r and \x (any other x stands for itself).
func unescapeTrim(s string) string {
	out := make([]byte, 0, len(s))
	start, end := -1, 0 // the kept range of out: from the first to past the last significant byte
	for i := 0; i < len(s); i++ {
		ch, escaped := s[i], false
		if ch == '\\' && i+1 < len(s) {
			i++
			ch, escaped = s[i], true
			switch ch {
			case 'n':
				ch = '\n'
			case 'r':
				ch = '\r'
			}
		}
		if escaped || (ch != ' ' && ch != '\t') {
			if start < 0 {
				start = len(out)
			}
			end = len(out) + 1
		}
		out = append(out, ch)
	}
	if start < 0 {
		return ""
	}
	return string(out[start:end])
}

// splitUnescaped splits s at each unescaped sep, keeping escapes.
func splitUnescaped(s string, sep byte) []string {
	var parts []string
	start := 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case sep:
			parts = append(parts, s[start:i])
			start = i + 1
		}
	}
	return append(parts, s[start:])
}

// lastUnescaped returns the index of the last unescaped sep in s, or -1.
func lastUnescaped(s string, sep byte) int {
	last := -1
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case sep:
			last = i
		}
	}
	return last
}

// clip shortens a piece of input quoted in an error message.
func clip(s string) string {
	const n = 60
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}
