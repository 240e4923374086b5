package admin

import (
	"fmt"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/stratadb/strata/cluster"
	"github.com/stratadb/strata/config"
	"github.com/stratadb/strata/engine"
	"github.com/stratadb/strata/internal/cli"
	"github.com/stratadb/strata/internal/cmalloc"
	"github.com/stratadb/strata/server"
)

// serveOptions are the options of serve.
type serveOptions struct {
	global *globalOptions
	listen string
}

// AddFlags registers serve's flags.
func (o *serveOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.listen, "listen", "", "`HOST:PORT` to listen on, overriding [server] listen (port 0 picks a free port)")
}

// loadConfig returns the server's configuration: --config over the
// server's defaults (sync = true), or, with --db alone, the engine
// configuration recorded in the database (as the other commands use it)
// with the server's defaults for sync and [server]; --db and --listen
// override the file.
func (o *serveOptions) loadConfig() (*config.Config, error) {
	if err := o.global.Validate(); err != nil {
		return nil, err
	}
	cfg := config.ServeDefault()
	if o.global.configPath == "" {
		rec, found, err := config.RecordedConfig(o.global.dbPath)
		if err != nil {
			return nil, fmt.Errorf("--db %s: %w", o.global.dbPath, err)
		}
		if found {
			rec.Sync, rec.Server = cfg.Sync, cfg.Server
			cfg = rec
		}
	}
	if o.global.configPath != "" {
		c, err := config.LoadServe(o.global.configPath)
		if err != nil {
			return nil, fmt.Errorf("--config %s: %w", o.global.configPath, err)
		}
		cfg = c
	}
	if o.global.dbPath != "" {
		cfg.DBPath = o.global.dbPath
	}
	if o.listen != "" {
		cfg.Server.Listen = o.listen
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return cfg, nil
}

func newServeCommand(g *globalOptions) *cobra.Command {
	o := &serveOptions{global: g}
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve the database over etcd's v2 keys and v3 gRPC APIs",
		Long: `serve opens the database as an etcd-style revisioned store and serves etcd's
v2 keys API (HTTP/1.1) and v3 gRPC API (KV, Watch, Lease, Maintenance,
Cluster) on one port, with /metrics, /health and /version, so etcdctl,
clientv3 and hey work unchanged. The [server] section of the configuration
sets the address (default 127.0.0.1:2379), limits, TLS and the memory
budget; the server defaults to sync = true. It prints the address once it
listens, and on SIGTERM or SIGINT stops accepting, finishes the requests
in flight and closes the database. See docs/server.md.`,
		Example: `  strata serve --config strata.toml
  strata serve --db /var/lib/strata --listen 127.0.0.1:2379
  ETCDCTL_API=3 etcdctl --endpoints=127.0.0.1:2379 put foo bar`,
		Args: cli.Args(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := o.loadConfig()
			if err != nil {
				return err
			}
			return runServer(cmd, cfg, g.logger(cmd))
		},
	}
	o.AddFlags(cmd.Flags())
	return cmd
}

// runServer serves cfg (validated) until SIGTERM or SIGINT, the member
// stops or the server fails: what serve and etcd run, with log as the
// server's logger (nil is silent).
func runServer(cmd *cobra.Command, cfg *config.Config, log engine.Logger) error {
	ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	procs := raiseGOMAXPROCS(cfg.Cluster.Enabled())
	// A fixed Go memory limit bounds the start too. The automatic
	// one follows the live heap, which grows from nothing while the
	// store rebuilds its key index: set before, it trails the heap
	// by up to a tick and the collector runs back to back (a
	// quarter of a restart's CPU at 30 GB), so it starts once the
	// store is open.
	var goLimit int64
	if cfg.Server.GoMemoryLimitMB != 0 {
		goLimit = applyGoMemoryLimit(ctx, cfg.Server)
	}
	mallocSet := cmalloc.Tune(cmalloc.ServerSettings) + ", " + cmalloc.HugePages()
	began := time.Now()
	srv, err := server.Start(cfg, server.Options{Logger: log})
	if err != nil {
		return err
	}
	if cfg.Server.GoMemoryLimitMB == 0 {
		goLimit = applyGoMemoryLimit(ctx, cfg.Server)
	}
	origin, indexTook := srv.IndexOrigin()
	scheme := "http"
	if cfg.Server.CertFile != "" {
		scheme = "https"
	}
	eff := cfg.Clone()
	eff.ApplyMemoryBudget()
	out := cmd.OutOrStdout()
	if _, err := fmt.Fprintf(out, "strata: serving etcd v2 and v3 APIs on %s://%s (db_path %s, %s, memtable %d MB x %d, block cache %d MB, Go memory limit %s, %s, %s; started in %s, key index %s in %s)\n",
		scheme, srv.Addr(), cfg.DBPath, describeSync(cfg), eff.MemtableSizeMB, eff.MaxWriteBufferNumber, eff.BlockCacheSizeMB,
		describeGoMemoryLimit(cfg.Server.GoMemoryLimitMB, goLimit), mallocSet, procs, formatElapsed(time.Since(began)),
		origin, formatElapsed(indexTook)); err != nil {
		_ = srv.Close()
		return err
	}
	for _, u := range srv.ClientURLs() {
		fmt.Fprintf(out, "strata: serving clients also on %s\n", u)
	}
	for _, u := range srv.MetricsURLs() {
		fmt.Fprintf(out, "strata: serving /metrics, /health, /livez and /readyz on %s\n", u)
	}
	if cfg.Cluster.Enabled() {
		st := srv.Node().Status()
		fmt.Fprintf(out, "strata: cluster member %s (%x) of cluster %x, peer traffic on %s, raft log in %s\n",
			cfg.Cluster.Name, st.MemberID, st.ClusterID, cfg.Cluster.ListenPeer, cfg.Cluster.RaftDirFor(cfg.DBPath))
	}
	// A cluster member may stop by itself (removed from the
	// cluster): then the process ends with the reason.
	var memberStopped <-chan struct{}
	stopper, _ := srv.Node().(cluster.Stopper)
	if stopper != nil {
		memberStopped = stopper.Done()
	}
	select {
	case <-ctx.Done():
	case <-memberStopped:
		_ = srv.Close()
		return fmt.Errorf("cluster member stopped: %w", stopper.Err())
	case <-srv.Failed():
		_ = srv.Close()
		return srv.Err()
	}
	fmt.Fprintln(cmd.ErrOrStderr(), "strata: shutting down: finishing requests in flight")
	began = time.Now()
	if err := srv.Close(); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	_, err = fmt.Fprintf(out, "strata: stopped in %s (%s)\n", formatElapsed(time.Since(began)), srv.ClosingCheckpoint())
	return err
}

// describeSync says what is fsynced before a write is acknowledged. On a
// cluster member the raft log is (on a majority), and the store's engine
// runs without a WAL whatever the file says: a restart replays the log
// into it (see docs/cluster-internals.md).
func describeSync(cfg *config.Config) string {
	if cfg.Cluster.Enabled() {
		return "sync: the raft log is fsynced, the store has no WAL (the log replays it)"
	}
	return fmt.Sprintf("sync %v", cfg.Sync)
}
