package admin

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/stratadb/strata/config"
	"github.com/stratadb/strata/engine"
	"github.com/stratadb/strata/internal/cli"
	"github.com/stratadb/strata/internal/etcdfile"
	"github.com/stratadb/strata/internal/fsutil"
	"github.com/stratadb/strata/mvcc"
)

// fileOptions are the options of a command that reads or writes one FILE
// with a progress bar (restore, export-etcd).
type fileOptions struct {
	global   *globalOptions
	file     string
	progress cli.Progress
}

// AddFlags registers the progress flag.
func (o *fileOptions) AddFlags(fs *pflag.FlagSet) {
	cli.AddProgressFlag(fs, &o.progress, "progress bar on stderr, `MODE` auto (when stderr is a terminal and not --verbose), always or never")
}

// Validate takes the FILE argument and checks the flags.
func (o *fileOptions) Validate(cmd *cobra.Command, args []string) error {
	o.file = args[0]
	return errors.Join(cli.NonEmpty(cmd, "FILE", o.file), o.progress.Validate())
}

// restoreOptions are the options of restore.
type restoreOptions struct{ fileOptions }

func newRestoreCommand(g *globalOptions) *cobra.Command {
	o := &restoreOptions{fileOptions{global: g}}
	return cli.Command(&cobra.Command{
		Use:   "restore FILE",
		Short: "Create a server's database from a Strata backup, an etcd snapshot or an etcd member's db file",
		Long: `restore creates a new database for ` + "`strata serve`" + ` from FILE, which is one of:

  - a backup of a Strata server, taken with ` + "`etcdctl snapshot save FILE`" + `;
  - an etcd snapshot, taken with ` + "`etcdctl snapshot save FILE`" + ` from etcd;
  - an etcd member's bbolt file (member/snap/db of a stopped member).

Every key comes with its history since the last compaction, its revisions,
version and lease; the leases with their TTLs; the current and compacted
revisions: clients' revisions and watches carry on. It checks the file
(the SHA-256 at its end; a db file has none, so bbolt's page check instead)
before it writes anything, refuses a db_path that already holds files, and
streams the file into the database in batches. A restore that is killed
leaves a database that strata serve refuses to open; remove it and run
again. etcd's auth state (users with their password hashes, roles with
their permissions, whether auth is enabled, the auth revision) comes too;
its member list does not. The result is
a database for a single server (strata serve without a [cluster] section),
at the file's revision. See docs/migration.md.`,
		Example: `  ETCDCTL_API=3 etcdctl --endpoints=127.0.0.1:2379 snapshot save backup.snap
  strata --db /var/lib/strata-restored restore backup.snap
  strata serve --db /var/lib/strata-restored`,
		Args: cli.Args("FILE"),
	}, o.AddFlags, o.Validate, o.run)
}

// run checks the file, then loads it into a new database.
func (o *restoreOptions) run(cmd *cobra.Command, _ []string) (err error) {
	began := time.Now()
	cfg, err := o.global.loadConfig()
	if err != nil {
		return err
	}
	existed := false
	if fi, err := os.Lstat(cfg.DBPath); err == nil {
		if !fi.IsDir() {
			return fmt.Errorf("db_path = %q is not a directory: restore creates a new database, give an empty or missing directory", cfg.DBPath)
		}
		entries, err := os.ReadDir(cfg.DBPath)
		if err != nil {
			return err
		}
		if len(entries) > 0 {
			return fmt.Errorf("db_path = %q holds %d file(s): restore creates a new database, give an empty or missing directory", cfg.DBPath, len(entries))
		}
		existed = true
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
	head := make([]byte, 64)
	n, err := f.ReadAt(head, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	head = head[:n]

	w := cmd.ErrOrStderr()
	var load func(db *engine.DB) (*mvcc.Store, string, error)
	if etcdfile.IsBolt(head) {
		check := newByteBar(w, st.Size(), "checking", o.progress, o.global.verbose)
		ef, err := etcdfile.Open(o.file, check)
		if err != nil {
			return err
		}
		_ = check.Finish()
		defer ef.Close()
		load = func(db *engine.DB) (*mvcc.Store, string, error) {
			l, err := mvcc.NewLoader(db)
			if err != nil {
				return nil, "", err
			}
			bar := newByteBar(w, ef.Size(), "restoring", o.progress, o.global.verbose)
			s, rep, err := ef.Load(l, mvcc.Options{}, func(n int64) { _ = bar.Add64(n) })
			if err != nil {
				return nil, "", err
			}
			_ = bar.Finish()
			return s, fmt.Sprintf(" (%s: %d versions, %d leases)%s", ef.Kind(), rep.Versions, rep.Leases, authNote(rep)), nil
		}
	} else {
		check := newByteBar(w, st.Size(), "checking", o.progress, o.global.verbose)
		snap, err := mvcc.CheckBackup(f, st.Size(), check)
		if errors.Is(err, mvcc.ErrNotBackup) {
			return fmt.Errorf("%s: neither a Strata backup nor an etcd snapshot or db file: %w", o.file, err)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", o.file, err)
		}
		_ = check.Finish()
		load = func(db *engine.DB) (*mvcc.Store, string, error) {
			bar := newByteBar(w, snap.Size(), "restoring", o.progress, o.global.verbose)
			s, err := mvcc.LoadBackup(db, io.TeeReader(snap, bar), mvcc.Options{})
			_ = bar.Finish()
			return s, "", err
		}
	}

	rev, compacted, what, err := restoreInto(cfg, existed, o.global.logger(cmd), load)
	if err != nil {
		return fmt.Errorf("%s: %w", o.file, err)
	}
	_, err = fmt.Fprintf(cmd.OutOrStdout(), "restored revision %d (compacted at %d) from %s%s into %s in %s\n",
		rev, compacted, o.file, what, cfg.DBPath, formatElapsed(time.Since(began)))
	return err
}

// restoreInto creates the database of cfg and runs load on it. The new
// database is first made in a sibling directory, marked as an unfinished
// load (mvcc.MarkLoading) and then moved to db_path, so that a restore
// killed at any point leaves either nothing at db_path or a database
// mvcc refuses to open (mvcc.ErrIncompleteLoad) until load finishes. A
// load that fails removes what it wrote (db_path itself unless it
// existed, empty, before).
func restoreInto(cfg *config.Config, existed bool, logger engine.Logger, load func(*engine.DB) (*mvcc.Store, string, error)) (rev, compacted int64, what string, err error) {
	staging := filepath.Clean(cfg.DBPath) + ".restoring"
	// A former restore killed before its move leaves this directory; its
	// name is restore's own.
	if err := os.RemoveAll(staging); err != nil {
		return 0, 0, "", err
	}
	scfg := cfg.Clone()
	scfg.DBPath, scfg.WALDir, scfg.WALFailoverDir, scfg.DBPaths = staging, "", "", nil
	db, err := engine.Open(scfg, engine.Options{Logger: logger})
	if err != nil {
		return 0, 0, "", err
	}
	if err := errors.Join(mvcc.MarkLoading(db), db.Close()); err != nil {
		_ = os.RemoveAll(staging)
		return 0, 0, "", err
	}
	// rename(2) replaces an empty directory.
	if err := os.Rename(staging, cfg.DBPath); err != nil {
		_ = os.RemoveAll(staging)
		return 0, 0, "", err
	}
	defer func() {
		if err != nil {
			removeRestored(cfg.DBPath, existed)
		}
	}()
	if err := fsutil.SyncDir(vfs.Default, filepath.Dir(filepath.Clean(cfg.DBPath))); err != nil {
		return 0, 0, "", err
	}
	db, err = engine.Open(cfg, engine.Options{Logger: logger})
	if err != nil {
		return 0, 0, "", err
	}
	defer closeDB(db, &err)
	s, what, err := load(db)
	if err != nil {
		return 0, 0, "", err
	}
	rev, compacted = s.Rev(), s.CompactRev()
	return rev, compacted, what, s.Close()
}

// removeRestored removes what a failed restore wrote into dir: dir itself
// if it did not exist before, else its contents (it was empty).
func removeRestored(dir string, existed bool) {
	if !existed {
		_ = os.RemoveAll(dir)
		return
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		_ = os.RemoveAll(filepath.Join(dir, e.Name()))
	}
}

// authNote says what of etcd's auth state a restore carried over.
func authNote(rep etcdfile.Report) string {
	if !rep.AuthEnabled && rep.AuthUsers == 0 && rep.AuthRoles == 0 {
		return ""
	}
	state := "disabled"
	if rep.AuthEnabled {
		state = "enabled"
	}
	return fmt.Sprintf("; auth %s, %d users, %d roles", state, rep.AuthUsers, rep.AuthRoles)
}
