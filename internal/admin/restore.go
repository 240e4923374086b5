package admin

import (
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/stratadb/strata/engine"
	"github.com/stratadb/strata/internal/cli"
	"github.com/stratadb/strata/mvcc"
)

// restoreOptions are the options of restore.
type restoreOptions struct {
	global   *globalOptions
	file     string
	progress cli.Progress
}

// AddFlags registers restore's flags.
func (o *restoreOptions) AddFlags(fs *pflag.FlagSet) {
	cli.AddProgressFlag(fs, &o.progress, "progress bar on stderr, `MODE` auto (when stderr is a terminal and not --verbose), always or never")
}

// Validate takes the FILE argument and checks the flags.
func (o *restoreOptions) Validate(cmd *cobra.Command, args []string) error {
	o.file = args[0]
	return errors.Join(cli.NonEmpty(cmd, "FILE", o.file), o.progress.Validate())
}

func newRestoreCommand(g *globalOptions) *cobra.Command {
	o := &restoreOptions{global: g}
	return cli.Command(&cobra.Command{
		Use:   "restore FILE",
		Short: "Create a server's database from a backup that etcdctl snapshot save took",
		Long: `restore creates a new database for ` + "`strata serve`" + ` from FILE, a backup of a
Strata server's store taken with ` + "`etcdctl snapshot save FILE`" + ` (etcd's
Maintenance.Snapshot): every key with its history since the last compaction,
its revision and leases. It checks the SHA-256 at the end of FILE before it
writes anything, and refuses a db_path that already holds files. The
result is a new database for a single server (strata serve without a
[cluster] section), at the backup's revision. See docs/server.md.`,
		Example: `  ETCDCTL_API=3 etcdctl --endpoints=127.0.0.1:2379 snapshot save backup.snap
  strata --db /var/lib/strata-restored restore backup.snap
  strata serve --db /var/lib/strata-restored`,
		Args: cli.Args("FILE"),
	}, o.AddFlags, o.Validate, o.run)
}

// run checks the backup, then loads it into a new database.
func (o *restoreOptions) run(cmd *cobra.Command, _ []string) (err error) {
	began := time.Now()
	cfg, err := o.global.loadConfig()
	if err != nil {
		return err
	}
	if entries, err := os.ReadDir(cfg.DBPath); err == nil && len(entries) > 0 {
		return fmt.Errorf("db_path = %q holds %d file(s): restore creates a new database, give an empty or missing directory", cfg.DBPath, len(entries))
	}
	f, err := os.Open(o.file)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	snap, err := mvcc.CheckBackup(f, st.Size())
	if err != nil {
		return fmt.Errorf("%s: %w", o.file, err)
	}
	db, err := engine.Open(cfg, engine.Options{Logger: o.global.logger(cmd)})
	if err != nil {
		return err
	}
	defer closeDB(db, &err)
	store, err := mvcc.Open(db, mvcc.Options{})
	if err != nil {
		return err
	}
	defer func() {
		if cerr := store.Close(); err == nil {
			err = cerr
		}
	}()
	bar := newByteBar(cmd.ErrOrStderr(), snap.Size(), "restoring", o.progress, o.global.verbose)
	if err := store.RestoreSnapshot(io.TeeReader(snap, bar)); err != nil {
		return fmt.Errorf("%s: %w", o.file, err)
	}
	_ = bar.Finish()
	// The engine may run with sync = false: the restored store is made
	// durable before the command says it is done.
	if err := store.Flush(); err != nil {
		return err
	}
	_, err = fmt.Fprintf(cmd.OutOrStdout(), "restored revision %d (compacted at %d) from %s into %s in %s\n",
		store.Rev(), store.CompactRev(), o.file, cfg.DBPath, formatElapsed(time.Since(began)))
	return err
}
