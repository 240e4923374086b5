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

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/stratadb/strata/config"
	"github.com/stratadb/strata/internal/cli"
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

// optionsFlags are the options of tune options: the config or the
// database whose OPTIONS file is printed.
type optionsFlags struct {
	configPath string
	dbDir      string
}

// addFlags registers options' flags.
func (o *optionsFlags) addFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.configPath, "config", "", "print the OPTIONS file of the config `FILE`")
	fs.StringVar(&o.dbDir, "db", "", "print the options of the existing database in `DIR`, without opening it")
}

// validate checks that at most one source is given.
func (o *optionsFlags) validate(*cobra.Command, []string) error {
	if o.configPath != "" && o.dbDir != "" {
		return errors.New("--config and --db are exclusive: give one")
	}
	return nil
}

func newOptionsCommand() *cobra.Command {
	o := &optionsFlags{}
	return cli.Command(&cobra.Command{
		Use:   "options",
		Short: "Print the RocksDB-format OPTIONS file of a config or a database",
		Long: `options prints the RocksDB-format OPTIONS file that a config produces
(--config FILE; without flags, the default config), the file Strata writes
into db_path on every open.

With --db DIR it prints the effective options of an existing database without
opening it: the OPTIONS-rocksdb file Strata wrote at the last open, then
Pebble's newest OPTIONS-NNNNNN file. A directory with neither is not a
database. To turn the database's options back into a config, run
"tune import DIR/OPTIONS-rocksdb".`,
		Example: `  tune options --config strata.toml > OPTIONS-rocksdb
  tune options --db data/strata | grep compression
  tune options                                   # the default config`,
		Args: cli.Args(),
	}, o.addFlags, o.validate, o.run)
}

// run prints the database's OPTIONS files, or the config's.
func (o *optionsFlags) run(cmd *cobra.Command, _ []string) error {
	if o.dbDir != "" {
		files, err := ReadDBOptions(o.dbDir)
		if err != nil {
			return err
		}
		return WriteDBOptions(cmd.OutOrStdout(), files)
	}
	cfg, err := loadBase(o.configPath)
	if err != nil {
		return err
	}
	_, err = io.WriteString(cmd.OutOrStdout(), cfg.RocksDBOptions())
	return err
}
