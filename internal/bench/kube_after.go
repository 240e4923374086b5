package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// KubeAfter is what a server costs to operate once it holds the load's
// data: a backup and a restart.
type KubeAfter struct {
	// SnapshotSeconds is the time of a snapshot over the maintenance API
	// (etcdctl snapshot save's call), written to a file and fsynced;
	// SnapshotBytes its size.
	SnapshotSeconds float64
	SnapshotBytes   int64
	// RestartSeconds is the time from starting the stopped server again
	// (every member of a cluster, stopped together) to its first answered
	// linearizable read.
	RestartSeconds float64
	// SettledDiskBytes is the disk after a compaction to the load's last
	// revision and KubeOptions.Settle's wait: what compaction alone gives
	// back (etcd reuses its freed pages and keeps the file's size; Strata
	// deletes what no revision references). 0 if not measured.
	SettledDiskBytes int64
}

// measureAfter, if settle > 0, compacts c to its last revision, waits
// settle and reads its disk (every member's, summed); then it takes a
// snapshot through c's leader into a file under dir, and restarts c (every
// member, stopped together) on its data, which must still hold pods pods.
func measureAfter(ctx context.Context, c *Cluster, dir string, pods int, settle time.Duration) (KubeAfter, error) {
	var a KubeAfter
	li, err := c.Leader(ctx)
	if err != nil {
		return a, err
	}
	leader := c.Members[li]
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{leader.Endpoint}, DialTimeout: 5 * time.Second, Logger: nopLogger})
	if err != nil {
		return a, fmt.Errorf("%w: connecting to %s: %w", ErrKubeLoad, leader.Endpoint, err)
	}
	defer cli.Close()
	if settle > 0 {
		if a.SettledDiskBytes, err = settledDisk(ctx, c.diskBytes, cli, settle); err != nil {
			return a, err
		}
	}
	a.SnapshotSeconds, a.SnapshotBytes, err = saveSnapshot(ctx, cli, dir)
	if err != nil {
		return a, err
	}
	took, n, err := restartServers(ctx, c.Members)
	a.RestartSeconds = took.Seconds()
	if err == nil && n != int64(pods) {
		err = fmt.Errorf("%w: %s holds %d pods after a restart, want %d", ErrKubeLoad, c.Name, n, pods)
	}
	return a, err
}

// settleCompactTimeout bounds the settling compaction. etcd answers a
// physical compaction once bbolt has deleted every dropped revision: after
// 1.1 million pods created and updated (30 GB written) that took etcd
// 3.7.3 over a minute, the bound before, and the run lost etcd's results.
const settleCompactTimeout = 15 * time.Minute

// settledDisk compacts c's server to its current revision, as the
// apiserver's next compaction would once the load is over, waits settle
// and returns what disk then reads.
func settledDisk(ctx context.Context, disk func() int64, c *clientv3.Client, settle time.Duration) (int64, error) {
	resp, err := c.Get(ctx, "compact_rev_key", clientv3.WithCountOnly())
	if err != nil {
		return 0, fmt.Errorf("%w: revision before the settling compaction: %w", ErrKubeLoad, err)
	}
	cctx, cancel := context.WithTimeout(ctx, settleCompactTimeout)
	_, err = c.Compact(cctx, resp.Header.Revision, clientv3.WithCompactPhysical())
	cancel()
	if err != nil {
		return 0, fmt.Errorf("%w: settling compaction to %d: %w", ErrKubeLoad, resp.Header.Revision, err)
	}
	select {
	case <-ctx.Done():
		return 0, ctx.Err()
	case <-time.After(settle):
	}
	return disk(), nil
}

// snapshotTimeout bounds a snapshot: etcd streams its whole bbolt file,
// tens of gigabytes at the 30 GB scale.
const snapshotTimeout = 30 * time.Minute

// saveSnapshot saves a snapshot of c's server as etcdctl snapshot save
// does (stream, write, fsync) into a file under dir that it removes, and
// returns its time and size.
func saveSnapshot(ctx context.Context, c *clientv3.Client, dir string) (float64, int64, error) {
	f, err := os.CreateTemp(dir, "snapshot-")
	if err != nil {
		return 0, 0, fmt.Errorf("%w: snapshot file: %w", ErrKubeLoad, err)
	}
	defer os.Remove(f.Name())
	defer f.Close()
	ctx, cancel := context.WithTimeout(ctx, snapshotTimeout)
	defer cancel()
	t0 := time.Now()
	rc, err := c.Snapshot(ctx)
	if err != nil {
		return 0, 0, fmt.Errorf("%w: snapshot: %w", ErrKubeLoad, err)
	}
	defer rc.Close()
	n, err := io.Copy(f, rc)
	if err == nil {
		err = f.Sync()
	}
	if err != nil {
		return 0, n, fmt.Errorf("%w: snapshot after %d bytes: %w", ErrKubeLoad, n, err)
	}
	return time.Since(t0).Seconds(), n, nil
}

// firstReadTry bounds one try of firstRead.
const firstReadTry = 500 * time.Millisecond

// restartReadyTimeout bounds a restart: etcd rebuilds its index from its
// bbolt file before it serves, tens of gigabytes at the 30 GB scale.
const restartReadyTimeout = 10 * time.Minute

// countTimeout bounds the count of the pods after a restart.
const countTimeout = 5 * time.Minute

// firstRead reads one pod key, linearizably, through a client of its own:
// the load's client, whose connection broke at the stop, would wait out
// gRPC's reconnect backoff (1 s, then 1.6 s, 2.6 s ...) and add it to the
// restart. A new client dials at once; each try is bounded by
// firstReadTry, the resolution of the restart time. It reads one key, not
// a count of the pods, so that the restart's time is the time to serve,
// not the time to count a million keys within one try.
func firstRead(ctx context.Context, endpoints []string) error {
	rctx, cancel := context.WithTimeout(ctx, firstReadTry)
	defer cancel()
	c, err := clientv3.New(clientv3.Config{Endpoints: endpoints, Context: rctx, Logger: nopLogger})
	if err != nil {
		return err
	}
	defer c.Close()
	_, err = c.Get(rctx, "/registry/pods/", clientv3.WithPrefix(), clientv3.WithLimit(1), clientv3.WithKeysOnly())
	return err
}

// restartServers stops every server of ss with SIGTERM, together (the
// members of a cluster), starts each again in place (Server.relaunch), and
// returns the time from the start to the first linearizable read answered
// at their endpoints (firstRead), and the number of pods they then hold.
func restartServers(ctx context.Context, ss []*Server) (time.Duration, int64, error) {
	stopped := make([]bool, len(ss))
	var wg sync.WaitGroup
	for i, s := range ss {
		wg.Go(func() { stopped[i] = s.terminate() })
	}
	wg.Wait()
	endpoints := make([]string, len(ss))
	for i, s := range ss {
		if !stopped[i] {
			return 0, 0, fmt.Errorf("%w: %s did not stop within %s of SIGTERM", ErrKubeLoad, s.Kind, stopTimeout)
		}
		endpoints[i] = s.Endpoint
	}
	t0 := time.Now()
	for _, s := range ss {
		if err := s.relaunch(); err != nil {
			return 0, 0, fmt.Errorf("%w: %w", ErrKubeLoad, err)
		}
	}
	deadline := time.Now().Add(restartReadyTimeout)
	for {
		err := firstRead(ctx, endpoints)
		if err == nil {
			took := time.Since(t0)
			count, err := countPodsLinearizable(ctx, endpoints, countTimeout)
			if err != nil {
				return took, 0, fmt.Errorf("%w: counting the pods after a restart of %s: %w", ErrKubeLoad, ss[0].Kind, err)
			}
			return took, count, nil
		}
		for _, s := range ss {
			select {
			case <-s.done:
				return 0, 0, fmt.Errorf("%w: %s exited after a restart (%v); its log:\n%s", ErrKubeLoad, s.Kind, s.waitErr, s.LogTail())
			default:
			}
		}
		if ctx.Err() != nil {
			return 0, 0, ctx.Err()
		}
		if time.Now().After(deadline) {
			return 0, 0, fmt.Errorf("%w: %s answered no read within %s of a restart (last: %w)", ErrKubeLoad, ss[0].Kind, restartReadyTimeout, err)
		}
		if !errors.Is(err, context.DeadlineExceeded) {
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// countPodsLinearizable counts the pods through a client of endpoints,
// linearizably, within the given time.
func countPodsLinearizable(ctx context.Context, endpoints []string, within time.Duration) (int64, error) {
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second, Logger: nopLogger})
	if err != nil {
		return 0, err
	}
	defer cli.Close()
	rctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	resp, err := cli.Get(rctx, "/registry/pods/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		return 0, err
	}
	return resp.Count, nil
}
