package admin

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/stratadb/strata/config"
	"github.com/stratadb/strata/engine"
	"github.com/stratadb/strata/internal/cli"
)

// NewRootCommand returns the strata command with every subcommand attached.
// Each call builds fresh commands and options, so a program (or a test) may
// build and execute any number of them.
func NewRootCommand() *cobra.Command {
	g := &globalOptions{}
	root := cli.Root(&cobra.Command{
		Use:   "strata",
		Short: "Administer a Strata database",
		Long: `strata administers a Strata database, in the spirit of RocksDB's ldb.

Select the database with --config FILE (TOML, YAML or JSON, chosen by the
extension) or --db DIR alone: the configuration the database recorded in
DIR/OPTIONS-rocksdb at its last open (db_paths, wal_dir, codecs, ...), or the
default one with db_path = DIR for a new database. With both, --db overrides
the file's db_path. Only put and load create a database; the other commands
need db_path to exist. get, scan, stats and check open the database read-only:
nothing on disk changes, not even the OPTIONS file.`,
		Example: `  strata --db /var/lib/strata put user:1 '{"name":"Ada"}'
  strata --config strata.toml scan --prefix user: --limit 10
  strata --config strata.toml load entities.jsonl --resume
  strata --config strata.toml options > OPTIONS-rocksdb`,
	})
	g.AddFlags(root.PersistentFlags())
	root.AddCommand(
		newPutCommand(g),
		newGetCommand(g),
		newDeleteCommand(g),
		newScanCommand(g),
		newLoadCommand(g),
		newFlushCommand(g),
		newCompactCommand(g),
		newCheckpointCommand(g),
		newRestoreCommand(g),
		newExportEtcdCommand(g),
		newStatsCommand(g),
		newCheckCommand(g),
		newOptionsCommand(g),
		newServeCommand(g),
		newEtcdCommand(),
		newBenchCommand(),
	)
	return root
}

// globalOptions are the flags every command shares: which database, and how
// chatty to be.
type globalOptions struct {
	configPath string
	dbPath     string
	verbose    bool
}

// AddFlags registers the global flags on fs (the root's persistent flags).
func (o *globalOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.configPath, "config", "", "configuration `FILE` (.toml, .yaml, .yml or .json)")
	fs.StringVar(&o.dbPath, "db", "", "database `DIR`: alone, the configuration recorded in DIR (default for a new database); with --config, overrides its db_path")
	fs.BoolVarP(&o.verbose, "verbose", "v", false, "log engine events and load progress to stderr")
}

// Validate checks that a database was selected.
func (o *globalOptions) Validate() error {
	if o.configPath == "" && o.dbPath == "" {
		return errors.New("need --config FILE or --db DIR")
	}
	return nil
}

// loadConfig returns the selected configuration: the file of --config with
// db_path replaced by --db if given, or with --db alone the configuration
// the database recorded (config.RecordedConfig: the default one with
// db_path = DIR when DIR holds none, as for a new database).
func (o *globalOptions) loadConfig() (*config.Config, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if o.configPath == "" {
		cfg, _, err := config.RecordedConfig(o.dbPath)
		if err != nil {
			return nil, fmt.Errorf("--db %s: %w", o.dbPath, err)
		}
		return cfg, nil
	}
	cfg, err := config.Load(o.configPath)
	if err != nil {
		return nil, fmt.Errorf("--config %s: %w", o.configPath, err)
	}
	if o.dbPath != "" {
		cfg.DBPath = o.dbPath
	}
	return cfg, nil
}

// openMode says how a command opens the database. Only the commands that
// write data may create one, so that a mistyped --db for get, scan or stats
// is an error instead of a new, empty database (RocksDB's ldb without
// --create_if_missing); the commands that only read open it read-only
// (RocksDB's OpenForReadOnly), so they change nothing on disk.
type openMode int

const (
	mustExist openMode = iota
	createIfMissing
	readOnly
)

// open loads the configuration and opens the database with log as its
// logger (nil is silent). Unless createIfMissing, db_path must exist.
func (o *globalOptions) open(log engine.Logger, mode openMode) (*engine.DB, error) {
	cfg, err := o.loadConfig()
	if err != nil {
		return nil, err
	}
	if mode != createIfMissing {
		if _, err := os.Stat(cfg.DBPath); errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("no database at db_path = %q: the directory does not exist (put and load create one)", cfg.DBPath)
		}
	}
	return engine.Open(cfg, engine.Options{Logger: log, ReadOnly: mode == readOnly})
}

// timed opens the existing database, runs op on it and prints "DONE in
// ELAPSED", the time op took: flush and compact.
func (o *globalOptions) timed(cmd *cobra.Command, done string, op func(*engine.DB) error) (err error) {
	db, err := o.open(o.logger(cmd), mustExist)
	if err != nil {
		return err
	}
	defer closeDB(db, &err)
	began := time.Now()
	if err := op(db); err != nil {
		return err
	}
	_, err = fmt.Fprintf(cmd.OutOrStdout(), "%s in %s\n", done, formatElapsed(time.Since(began)))
	return err
}

// logger returns the logger of --verbose, writing to the command's stderr,
// or nil (silent) without it.
func (o *globalOptions) logger(cmd *cobra.Command) engine.Logger {
	if !o.verbose {
		return nil
	}
	return &lineLogger{w: cmd.ErrOrStderr()}
}

// lineLogger writes one line per message. The engine logs from background
// goroutines, so writes are serialised.
type lineLogger struct {
	mu sync.Mutex
	w  io.Writer
}

// Infof writes one formatted line.
func (l *lineLogger) Infof(format string, args ...any) { l.line("", format, args...) }

// Errorf writes one formatted line starting "error: ".
func (l *lineLogger) Errorf(format string, args ...any) { l.line("error: ", format, args...) }

func (l *lineLogger) line(prefix, format string, args ...any) {
	msg := prefix + fmt.Sprintf(format, args...)
	if !strings.HasSuffix(msg, "\n") {
		msg += "\n"
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	_, _ = io.WriteString(l.w, msg)
}

// closeDB closes db and folds its error into *err, so a failed Close is not
// lost behind a successful command.
func closeDB(db *engine.DB, err *error) {
	if cerr := db.Close(); cerr != nil && *err == nil {
		*err = cerr
	}
}
