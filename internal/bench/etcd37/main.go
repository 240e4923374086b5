// Command etcd37 runs an etcd 3.7 member (go.etcd.io/etcd/server/v3 embed,
// the version in Strata's go.mod) as a process of its own, the peer of
// `strata bench` for the v3 API: a single-member cluster by default, or one
// member of the cluster --initial-cluster lists. etcd 3.7 ships no binary in Debian, and
// running it in the benchmark's process would mix its CPU time and memory
// with the load generator's.
//
//	go build -o /tmp/etcd37 ./internal/bench/etcd37
//	/tmp/etcd37 --data-dir /tmp/e37 --listen-client 127.0.0.1:2379 --listen-peer 127.0.0.1:2380
//
// A member of three, started beside e2 and e3 likewise:
//
//	/tmp/etcd37 --name e1 --data-dir /tmp/e1 --listen-client 127.0.0.1:2379 --listen-peer 127.0.0.1:2380 \
//	  --initial-cluster e1=http://127.0.0.1:2380,e2=http://127.0.0.1:2382,e3=http://127.0.0.1:2384
//
// A member added at run time (clientv3 MemberAdd, etcdctl member add)
// starts with every member in --initial-cluster, itself included, and
// --initial-cluster-state existing.
//
// It serves until SIGTERM or SIGINT, then closes the server (finishing
// in-flight requests) and exits; with STRATA_CPUPROFILE=FILE it writes a
// CPU profile of its run to FILE (package cpuprofile). Every setting not
// given here is embed's default, which is etcd's: fsync on every commit,
// snapshot-count 10000.
package main

import (
	"context"
	"flag"
	"fmt"
	"net/url"
	"os"
	"os/signal"
	"syscall"
	"time"

	"go.etcd.io/etcd/server/v3/embed"

	"github.com/stratadb/strata/internal/bench/cpuprofile"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "etcd37:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("etcd37", flag.ContinueOnError)
	dir := fs.String("data-dir", "", "data `DIR` (required; created if missing)")
	client := fs.String("listen-client", "127.0.0.1:2379", "client `HOST:PORT` (loopback)")
	peer := fs.String("listen-peer", "127.0.0.1:2380", "peer `HOST:PORT` (loopback)")
	quota := fs.Int64("quota-backend-bytes", 0, "backend quota in `BYTES`; 0 is etcd's default (2 GiB)")
	logLevel := fs.String("log-level", "warn", "etcd's log `LEVEL`: debug, info, warn or error")
	progress := fs.Duration("watch-progress-notify-interval", 0, "etcd's --experimental-watch-progress-notify-interval; 0 is etcd's default (10m)")
	noFsync := fs.Bool("unsafe-no-fsync", false, "etcd's --unsafe-no-fsync, as Kubernetes' storage tests run etcd")
	name := fs.String("name", "default", "this member's `NAME` (etcd's --name); with --initial-cluster, one of its names")
	initial := fs.String("initial-cluster", "", "every member's NAME=http://HOST:PORT peer URL, comma-separated (etcd's --initial-cluster); empty is a cluster of this member alone")
	token := fs.String("initial-cluster-token", "etcd-cluster", "etcd's --initial-cluster-token")
	snapshotCount := fs.Uint64("snapshot-count", 0, "etcd's --snapshot-count, `ENTRIES` applied between snapshots; 0 is etcd's default (10000)")
	catchUp := fs.Uint64("snapshot-catchup-entries", 0, "etcd's --snapshot-catchup-entries, `ENTRIES` kept behind a snapshot for slow followers; 0 is etcd's default (5000)")
	readyTimeout := fs.Duration("ready-timeout", 60*time.Second, "how long to wait for the member to be ready (a joining member: to catch up) before giving up; 0 waits as etcd does")
	state := fs.String("initial-cluster-state", embed.ClusterStateFlagNew, "etcd's --initial-cluster-state: new, or existing for a member added at run time (etcdctl member add) that joins a running cluster")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *dir == "" {
		return fmt.Errorf("--data-dir is required")
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q: etcd37 takes flags only", fs.Arg(0))
	}
	cu, err := url.Parse("http://" + *client)
	if err != nil {
		return fmt.Errorf("--listen-client %q: %w", *client, err)
	}
	pu, err := url.Parse("http://" + *peer)
	if err != nil {
		return fmt.Errorf("--listen-peer %q: %w", *peer, err)
	}

	cfg := embed.NewConfig()
	cfg.Dir = *dir
	cfg.LogLevel = *logLevel
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{*cu}, []url.URL{*cu}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{*pu}, []url.URL{*pu}
	cfg.Name = *name
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	if *initial != "" {
		cfg.InitialCluster = *initial
	}
	cfg.InitialClusterToken = *token
	if *snapshotCount > 0 {
		cfg.SnapshotCount = *snapshotCount
	}
	if *catchUp > 0 {
		cfg.SnapshotCatchUpEntries = *catchUp
	}
	switch *state {
	case embed.ClusterStateFlagNew, embed.ClusterStateFlagExisting:
		cfg.ClusterState = *state
	default:
		return fmt.Errorf("--initial-cluster-state %q: allowed are %s and %s", *state, embed.ClusterStateFlagNew, embed.ClusterStateFlagExisting)
	}
	if *quota > 0 {
		cfg.QuotaBackendBytes = *quota
	}
	if *progress < 0 {
		return fmt.Errorf("--watch-progress-notify-interval %v: must be 0 (the default) or more", *progress)
	}
	if *progress > 0 {
		cfg.WatchProgressNotifyInterval = *progress
	}
	cfg.UnsafeNoFsync = *noFsync

	stopProfile, err := cpuprofile.Start()
	if err != nil {
		return err
	}
	defer stopProfile()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return err
	}
	defer e.Close()
	var notReady <-chan time.Time // nil: never
	if *readyTimeout > 0 {
		notReady = time.After(*readyTimeout)
	}
	select {
	case <-e.Server.ReadyNotify():
	case <-notReady:
		e.Server.Stop()
		return fmt.Errorf("not ready after %s (--ready-timeout)", *readyTimeout)
	case <-ctx.Done():
		return nil
	}
	fmt.Fprintf(os.Stderr, "etcd37: serving http://%s\n", *client)
	select {
	case <-ctx.Done():
		return nil
	case err := <-e.Err():
		return err
	}
}
