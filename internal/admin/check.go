package admin

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"unicode/utf8"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/stratadb/strata/internal/cli"
	"github.com/stratadb/strata/internal/integrity"
	"github.com/stratadb/strata/internal/report"
)

// checkOptions are the flags of check.
type checkOptions struct {
	format report.Format
}

// AddFlags registers check's flags.
func (o *checkOptions) AddFlags(fs *pflag.FlagSet) {
	o.format = report.FormatTable
	fs.Var(&o.format, "format", "output `FORMAT`: table or json")
}

// Validate checks the flags.
func (o *checkOptions) Validate() error {
	if o.format != report.FormatTable && o.format != report.FormatJSON {
		return fmt.Errorf("--format %s: check prints table or json", o.format)
	}
	return nil
}

func newCheckCommand(g *globalOptions) *cobra.Command {
	o := &checkOptions{}
	return cli.Command(&cobra.Command{
		Use:   "check",
		Short: "Read every block of every table and blob file and report damage",
		Long: `check is an offline integrity check, like etcdutl check and Pebble's
sstable check: it opens the database read-only (nothing on disk changes)
and reads every block of every table (.sst) and blob file (.blob) in
db_path, the db_paths and the recorded table directories, verifying each
block's checksum; a table the MANIFEST lists but no directory holds is
damage too. It prints each damaged file with its level and key range when
the MANIFEST knows them, the error met, and a summary line.

The exit status is 0 when nothing is damaged and 1 otherwise. The database
must not be open read-write (stop the server first); see
docs/operations.md, "A damaged file", for what to do with a damaged file.`,
		Example: `  strata --db /var/lib/strata check
  strata --db /var/lib/strata check --format json`,
		Args: cli.Args(),
	}, o.AddFlags, func(*cobra.Command, []string) error { return o.Validate() },
		func(cmd *cobra.Command, _ []string) error {
			cfg, err := g.loadConfig()
			if err != nil {
				return err
			}
			var opts integrity.Options
			if g.verbose {
				opts.Progress = func(path string) { _, _ = fmt.Fprintf(cmd.ErrOrStderr(), "read %s\n", path) }
			}
			rep, err := integrity.Check(cfg, opts)
			if err != nil {
				return fmt.Errorf("%s: %w", g.dbSource(cfg.DBPath), err)
			}
			if err := writeCheckReport(cmd.OutOrStdout(), rep, o.format); err != nil {
				return err
			}
			return rep.Err()
		})
}

// dbSource names where db_path came from, for errors: "--db DIR", or
// "db_path = DIR (--config FILE)".
func (o *globalOptions) dbSource(dbPath string) string {
	if o.dbPath != "" {
		return "--db " + o.dbPath
	}
	return fmt.Sprintf("db_path = %s (--config %s)", dbPath, o.configPath)
}

// writeCheckReport prints rep: for a table, the damaged files (if any) and
// the summary line; for JSON, one object with the counts and the damaged
// files.
func writeCheckReport(w io.Writer, rep *integrity.Report, f report.Format) error {
	if f == report.FormatJSON {
		type damage struct {
			File     string  `json:"file"`
			Kind     string  `json:"kind"`
			Level    *int    `json:"level"`
			Smallest *string `json:"smallest"`
			Largest  *string `json:"largest"`
			Error    string  `json:"error"`
		}
		out := struct {
			DBPath    string   `json:"db_path"`
			Tables    int      `json:"tables"`
			BlobFiles int      `json:"blob_files"`
			Bytes     int64    `json:"bytes"`
			OK        bool     `json:"ok"`
			Damaged   []damage `json:"damaged"`
		}{DBPath: rep.DBPath, Tables: rep.Tables, BlobFiles: rep.BlobFiles, Bytes: rep.Bytes, OK: rep.OK(), Damaged: []damage{}}
		for _, d := range rep.Damaged {
			j := damage{File: d.Path, Kind: string(d.Kind), Error: d.Err.Error()}
			if d.Level >= 0 {
				j.Level = &d.Level
			}
			if d.Smallest != nil || d.Largest != nil {
				s, l := printableKey(d.Smallest), printableKey(d.Largest)
				j.Smallest, j.Largest = &s, &l
			}
			out.Damaged = append(out.Damaged, j)
		}
		b, err := json.MarshalIndent(out, "", "  ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, "%s\n", b)
		return err
	}
	if rep.OK() {
		_, err := fmt.Fprintln(w, rep.Summary())
		return err
	}
	t := report.Table{
		Columns: []report.Column{{Name: "File"}, {Name: "Kind"}, {Name: "Level"}, {Name: "Smallest"}, {Name: "Largest"}, {Name: "Error"}},
		Notes:   []string{rep.Summary()},
	}
	for _, d := range rep.Damaged {
		level, smallest, largest := "-", "-", "-"
		if d.Level >= 0 {
			level = "L" + strconv.Itoa(d.Level)
		}
		if d.Smallest != nil || d.Largest != nil {
			smallest, largest = shortKey(printableKey(d.Smallest)), shortKey(printableKey(d.Largest))
		}
		t.Rows = append(t.Rows, []any{d.Path, string(d.Kind), level, smallest, largest, d.Err.Error()})
	}
	return t.Write(w, report.FormatTable)
}

// printableKey is key as text when it is printable UTF-8, else Go-quoted.
func printableKey(key []byte) string {
	s := string(key)
	if utf8.ValidString(s) && strconv.Quote(s) == `"`+s+`"` {
		return s
	}
	return strconv.Quote(s)
}

// shortKey cuts a key for a table cell.
func shortKey(s string) string {
	const limit = 40
	if utf8.RuneCountInString(s) <= limit {
		return s
	}
	r := []rune(s)
	return string(r[:limit-1]) + "…"
}
