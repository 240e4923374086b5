package tune

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/stratadb/strata/config"
)

// ErrNotDatabase is returned for a directory that holds no Strata or
// Pebble database.
var ErrNotDatabase = errors.New("tune: not a Strata database")

// OptionsFile is one OPTIONS file of a database directory.
type OptionsFile struct {
	// Path is the file's path.
	Path string
	// Pebble is true for Pebble's own OPTIONS-NNNNNN file, false for the
	// RocksDB-format file Strata writes (config.RocksDBOptionsFileName).
	Pebble bool
	// Text is the file's content.
	Text string
}

// ReadDBOptions reads the options of the database in dir without opening
// it: the RocksDB-format file Strata wrote at its last open, then Pebble's
// newest OPTIONS-NNNNNN file, whichever exist. A directory with neither is
// ErrNotDatabase.
func ReadDBOptions(dir string) ([]OptionsFile, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("--db: %w", err)
	}
	var out []OptionsFile
	newest, newestNum := "", int64(-1)
	for _, e := range entries {
		name := e.Name()
		if name == config.RocksDBOptionsFileName {
			out = append(out, OptionsFile{Path: filepath.Join(dir, name)})
			continue
		}
		digits, ok := strings.CutPrefix(name, "OPTIONS-")
		if !ok || digits == "" || strings.Trim(digits, "0123456789") != "" {
			continue
		}
		if n, err := strconv.ParseInt(digits, 10, 64); err == nil && n > newestNum {
			newest, newestNum = name, n
		}
	}
	if newest != "" {
		out = append(out, OptionsFile{Path: filepath.Join(dir, newest), Pebble: true})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: %s holds neither %s nor a Pebble OPTIONS-NNNNNN file", ErrNotDatabase, dir, config.RocksDBOptionsFileName)
	}
	for i := range out {
		data, err := os.ReadFile(out[i].Path)
		if err != nil {
			return nil, err
		}
		out[i].Text = string(data)
	}
	return out, nil
}

// WriteDBOptions writes files under "# ==> path <==" headers that say what
// each file is. Strata's file comes first; importing it (tune import) gives
// the database's config.
func WriteDBOptions(w io.Writer, files []OptionsFile) error {
	var b bytes.Buffer
	hasStrata := false
	for _, f := range files {
		hasStrata = hasStrata || !f.Pebble
	}
	if !hasStrata && len(files) > 0 {
		fmt.Fprintf(&b, "# (no %s in %s: the database was not opened by Strata)\n\n", config.RocksDBOptionsFileName, filepath.Dir(files[0].Path))
	}
	for i, f := range files {
		if i > 0 {
			b.WriteString("\n")
		}
		what := "the RocksDB-format options Strata wrote at the last open; `tune import` reads it"
		if f.Pebble {
			what = "Pebble's own options, its newest OPTIONS file"
		}
		fmt.Fprintf(&b, "# ==> %s: %s <==\n", f.Path, what)
		b.WriteString(f.Text)
		if !strings.HasSuffix(f.Text, "\n") {
			b.WriteString("\n")
		}
	}
	_, err := w.Write(b.Bytes())
	return err
}

// ImportOptions converts the RocksDB OPTIONS file read from r (named name
// in messages) with config.ImportRocksDBOptions and returns a TOML config
// (config.Marshal): comment lines first, one per setting not taken over
// ("# [section] key=value: reason"), then every key. An empty file, a
// malformed one or one whose values give an invalid config is an error.
func ImportOptions(r io.Reader, name string) ([]byte, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, fmt.Errorf("%s: the file is empty: not a RocksDB OPTIONS file", name)
	}
	cfg, unmapped, err := config.ImportRocksDBOptions(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	text, err := cfg.Marshal(config.FormatTOML)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "# Strata config imported from the RocksDB OPTIONS file %s.\n", oneLine(name))
	if len(unmapped) == 0 {
		b.WriteString("# Every setting was taken over.\n")
	} else {
		fmt.Fprintf(&b, "# %d setting(s) not taken over (or changed), with the reason:\n", len(unmapped))
		for _, u := range unmapped {
			fmt.Fprintf(&b, "#   %s\n", oneLine(u.String()))
		}
	}
	b.WriteString("\n")
	b.Write(text)
	return b.Bytes(), nil
}

// oneLine escapes line breaks, so that text stays within one comment line.
func oneLine(s string) string {
	return strings.NewReplacer("\r", `\r`, "\n", `\n`).Replace(s)
}
