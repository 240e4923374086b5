package admin

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"github.com/stratadb/strata/internal/cli"
	"github.com/stratadb/strata/internal/etcdfile"
	"github.com/stratadb/strata/mvcc"
)

// exportEtcdOptions are the options of export-etcd.
type exportEtcdOptions struct{ fileOptions }

func newExportEtcdCommand(g *globalOptions) *cobra.Command {
	o := &exportEtcdOptions{fileOptions{global: g}}
	return cli.Command(&cobra.Command{
		Use:   "export-etcd FILE",
		Short: "Write the database as an etcd snapshot, for etcdctl snapshot restore",
		Long: `export-etcd writes the database (of a stopped server) to FILE as etcd's
` + "`etcdctl snapshot save`" + ` would: etcd's bbolt file with every key's history since
the last compaction (revisions, versions, leases), the leases with their TTLs,
the compaction revision and the auth state (users with their password hashes,
roles, whether auth is enabled, the auth revision), followed by its SHA-256. ` + "`etcdctl snapshot restore`" + `
(etcd 3.4 and later) turns it into a data directory that etcd serves at the
same revision. FILE must not exist; it appears only once complete. See
docs/migration.md, "Going back".`,
		Example: `  strata --db /var/lib/strata export-etcd strata.snap
  ETCDCTL_API=3 etcdctl snapshot restore strata.snap --data-dir /var/lib/etcd`,
		Args: cli.Args("FILE"),
	}, o.AddFlags, o.Validate, o.run)
}

// run opens the database read-only and writes the snapshot.
func (o *exportEtcdOptions) run(cmd *cobra.Command, _ []string) (err error) {
	began := time.Now()
	db, err := o.global.open(o.global.logger(cmd), readOnly)
	if err != nil {
		return err
	}
	defer closeDB(db, &err)
	s, err := mvcc.Open(db, mvcc.Options{})
	if err != nil {
		return err
	}
	defer func() {
		if cerr := s.Close(); err == nil {
			err = cerr
		}
	}()
	bar := newByteBar(cmd.ErrOrStderr(), -1, "exporting", o.progress, o.global.verbose)
	exp, err := etcdfile.WriteSnapshot(s, o.file, func(n int64) { _ = bar.Add64(n) })
	if err != nil {
		return err
	}
	_ = bar.Finish()
	_, err = fmt.Fprintf(cmd.OutOrStdout(), "exported revision %d (compacted at %d, %d leases) to %s in %s\n",
		exp.Rev, max(exp.CompactScheduled, 0), len(exp.Leases), o.file, formatElapsed(time.Since(began)))
	return err
}
