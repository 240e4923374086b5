package admin

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// TestRestoreLargeEtcdSnapshot is the measurement in docs/migration.md,
// run by hand: etcd 3.4 is loaded through clientv3 with STRATA_MIGRATE_MB
// megabytes of puts (4 KiB values over 50000 keys, so every key has
// history) with a compaction after each quarter, `etcdctl snapshot save`
// takes the snapshot, and `strata restore` runs as a process of its own
// (its wall time and peak RSS are logged). Both servers are then read in
// pages at the current revision and at the last compaction and the
// answers compared (keys, revisions, versions, leases and a SHA-256 of the
// values).
//
//	STRATA_MIGRATE_MB=1024 go test ./internal/admin -run TestRestoreLargeEtcdSnapshot -v -timeout 60m
func TestRestoreLargeEtcdSnapshot(t *testing.T) {
	mb, _ := strconv.Atoi(os.Getenv("STRATA_MIGRATE_MB"))
	if mb <= 0 {
		t.Skip("a measurement: set STRATA_MIGRATE_MB (1024 for docs/migration.md's row)")
	}
	etcdBinaries(t)
	etcdDir := filepath.Join(t.TempDir(), "etcd")
	bin, _ := etcdBinaries(t)
	peer, client := loopbackPort(t), fmt.Sprintf("http://127.0.0.1:%d", loopbackPort(t))
	e := launchEtcd(t, client, exec.Command(bin, "--name", "default", "--data-dir", etcdDir,
		"--listen-client-urls", client, "--advertise-client-urls", client,
		"--listen-peer-urls", etcdPeerURL(peer), "--initial-advertise-peer-urls", etcdPeerURL(peer),
		"--initial-cluster", "default="+etcdPeerURL(peer), "--quota-backend-bytes", strconv.Itoa(8<<30),
		"--log-level", "error", "--logger", "zap"))
	c := newClient(t, e.endpoint)
	ctx := context.Background()

	const keys, valueSize, writers = 50000, 4096, 32
	puts := mb << 20 / valueSize
	value := []byte(strings.Repeat("x", valueSize-8))
	began := time.Now()
	var compact int64
	for q := range 4 {
		var wg sync.WaitGroup
		for w := range writers {
			wg.Go(func() {
				for i := q*puts/4 + w; i < (q+1)*puts/4; i += writers {
					v := binary.BigEndian.AppendUint64(append([]byte(nil), value...), uint64(i))
					if _, err := c.Put(ctx, fmt.Sprintf("key/%06d", i%keys), string(v)); err != nil {
						t.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		if t.Failed() {
			t.FailNow()
		}
		resp, err := c.Get(ctx, "key/000000")
		if err != nil {
			t.Fatal(err)
		}
		compact = resp.Header.Revision - int64(puts/8)
		if _, err := c.Compact(ctx, compact); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("etcd: %d puts of %d bytes over %d keys in %s, compacted at %d", puts, valueSize, keys, time.Since(began).Round(time.Second), compact)

	snap := filepath.Join(t.TempDir(), "etcd.snap")
	etcdctl(t, "--endpoints", e.endpoint, "snapshot", "save", snap)
	st, err := os.Stat(snap)
	if err != nil {
		t.Fatal(err)
	}

	dir := filepath.Join(t.TempDir(), "restored")
	cmd := exec.Command(os.Args[0], "-test.run=^TestRestoreCrashChild$", "-test.v")
	cmd.Env = append(os.Environ(), restoreChildEnv+"="+snap+" "+dir)
	restoreBegan := time.Now()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("restore: %v\n%s", err, out)
	}
	took := time.Since(restoreBegan)
	rss := cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss // KiB
	t.Logf("strata restore of a %.0f MB snapshot: %s, peak RSS %.0f MB", float64(st.Size())/(1<<20), took.Round(100*time.Millisecond), float64(rss)/1024)

	s, sc := startServe(t, dir)
	_ = s
	for _, rev := range []int64{0, compact} {
		want, n := digest(t, c, rev)
		got, m := digest(t, sc, rev)
		if got != want || n != m {
			t.Errorf("at revision %d: %d keys digest %x, etcd %d keys digest %x", rev, m, got, n, want)
		} else {
			t.Logf("at revision %d: %d keys, the same digest on both", rev, n)
		}
	}
}

// digest reads every key at rev (0: now) in pages and returns a SHA-256
// of every key, revision, version, lease and value, and the key count.
func digest(t *testing.T, c *clientv3.Client, rev int64) ([32]byte, int) {
	t.Helper()
	h := sha256.New()
	n := 0
	from := "\x00"
	for {
		resp, err := c.Get(context.Background(), from, clientv3.WithRange("\x00"), clientv3.WithLimit(2000), clientv3.WithRev(rev))
		if err != nil {
			t.Fatal(err)
		}
		if rev == 0 {
			rev = resp.Header.Revision
		}
		for _, kv := range resp.Kvs {
			fmt.Fprintf(h, "%q %d %d %d %d %x\n", kv.Key, kv.CreateRevision, kv.ModRevision, kv.Version, kv.Lease, sha256.Sum256(kv.Value))
			n++
		}
		if !resp.More {
			break
		}
		from = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
	var sum [32]byte
	copy(sum[:], h.Sum(nil))
	return sum, n
}
