package tune

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/stratadb/strata/config"
	"github.com/stratadb/strata/internal/cli"
)

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

func newImportCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "import FILE",
		Short: "Turn a RocksDB OPTIONS file into a Strata TOML config",
		Long: `import reads a RocksDB OPTIONS file (RocksDB's own OPTIONS-NNNNNN, or the
OPTIONS-rocksdb Strata writes) and prints the Strata config it maps to, as TOML,
on standard output. Comment lines at the top list every setting that was not
taken over (or was changed), with its section and the reason. Settings the file
does not give keep their defaults.`,
		Example: `  tune import /var/lib/rocksdb/OPTIONS-000042 > strata.toml
  tune import data/strata/OPTIONS-rocksdb`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return fmt.Errorf("%s: takes exactly one argument, the OPTIONS FILE (usage: %s)", cmd.Name(), cmd.UseLine())
			}
			return cli.NonEmpty(cmd, "FILE", args[0])
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			f, err := os.Open(args[0])
			if err != nil {
				return err // "open FILE: ..."
			}
			defer f.Close()
			text, err := ImportOptions(f, args[0])
			if err != nil {
				return err
			}
			_, err = cmd.OutOrStdout().Write(text)
			return err
		},
	}
}
