package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// etcdProc is a running etcd (Debian's etcd 3.4) on loopback ports.
type etcdProc struct {
	cmd      *exec.Cmd
	endpoint string
	done     chan error
}

// loopbackPort returns a 127.0.0.1 port below 32768 (outside the kernel's
// ephemeral range, so no client connection takes it meanwhile) that was
// free a moment ago.
func loopbackPort(t *testing.T) int {
	t.Helper()
	for range 100 {
		p := 20000 + rand.IntN(12000)
		if ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p)); err == nil {
			_ = ln.Close()
			return p
		}
	}
	t.Fatal("no free loopback port below 32768")
	return 0
}

// etcdBinaries returns the paths of etcd and etcdctl, or skips the test.
func etcdBinaries(t *testing.T) (etcd, etcdctl string) {
	t.Helper()
	etcd, err1 := exec.LookPath("etcd")
	etcdctl, err2 := exec.LookPath("etcdctl")
	if err1 != nil || err2 != nil {
		t.Skip("etcd and etcdctl (Debian's etcd-server and etcd-client) are not installed")
	}
	return etcd, etcdctl
}

// etcdPeerURL is the peer URL of a single etcd member named default.
func etcdPeerURL(port int) string { return fmt.Sprintf("http://127.0.0.1:%d", port) }

// startEtcd starts a single etcd member on dataDir (peerPort: the one its
// data directory was restored for, or 0 for a new one) and waits until it
// answers.
func startEtcd(t *testing.T, dataDir string, peerPort int) *etcdProc {
	t.Helper()
	bin, _ := etcdBinaries(t)
	if peerPort == 0 {
		peerPort = loopbackPort(t)
	}
	client := fmt.Sprintf("http://127.0.0.1:%d", loopbackPort(t))
	return launchEtcd(t, client, exec.Command(bin, "--name", "default", "--data-dir", dataDir,
		"--listen-client-urls", client, "--advertise-client-urls", client,
		"--listen-peer-urls", etcdPeerURL(peerPort), "--initial-advertise-peer-urls", etcdPeerURL(peerPort),
		"--initial-cluster", "default="+etcdPeerURL(peerPort), "--log-level", "error", "--logger", "zap"))
}

// startEtcd37 starts etcd 3.7 (the embed program internal/bench/etcd37,
// built beforehand and named by STRATA_ETCD37) on a new dataDir, or skips
// the test.
func startEtcd37(t *testing.T, dataDir string) *etcdProc {
	t.Helper()
	bin := os.Getenv("STRATA_ETCD37")
	if bin == "" {
		t.Skip("etcd 3.7: build it with `go build -o /tmp/etcd37 ./internal/bench/etcd37` and set STRATA_ETCD37=/tmp/etcd37")
	}
	client := fmt.Sprintf("127.0.0.1:%d", loopbackPort(t))
	return launchEtcd(t, "http://"+client, exec.Command(bin, "--data-dir", dataDir,
		"--listen-client", client, "--listen-peer", fmt.Sprintf("127.0.0.1:%d", loopbackPort(t)), "--log-level", "error"))
}

// launchEtcd starts cmd, an etcd serving client, and waits until it
// answers; it is stopped with the test.
func launchEtcd(t *testing.T, client string, cmd *exec.Cmd) *etcdProc {
	t.Helper()
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &etcdProc{cmd: cmd, endpoint: client, done: make(chan error, 1)}
	go func() { p.done <- cmd.Wait() }()
	t.Cleanup(func() { p.stop(t) })
	c := newClient(t, client)
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err := c.Get(ctx, "health")
		cancel()
		// (An etcd with auth enabled answers a request without a user.)
		if err == nil || strings.Contains(err.Error(), "user name is empty") {
			return p
		}
		select {
		case err := <-p.done:
			t.Fatalf("etcd exited: %v\n%s", err, logs.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("etcd did not answer within 30s: %v\n%s", err, logs.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// stop ends etcd with SIGTERM and waits for it.
func (p *etcdProc) stop(t *testing.T) {
	if p.cmd.ProcessState != nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
	p.cmd.ProcessState = &os.ProcessState{}
}

// newClient returns a clientv3 client of endpoint, closed with the test.
func newClient(t *testing.T, endpoint string) *clientv3.Client {
	t.Helper()
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// etcdctl runs the stock etcdctl with args and returns its stdout.
func etcdctl(t *testing.T, args ...string) []byte {
	t.Helper()
	_, bin := etcdBinaries(t)
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "ETCDCTL_API=3")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("etcdctl %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return out
}

// writeHistory writes keys with history through c: puts over 20 keys, a
// txn writing three keys (sub revisions), deletions, two leases (one with
// keys), a compaction, then more puts. It returns the compaction revision.
func writeHistory(t *testing.T, c *clientv3.Client) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for i := range 120 {
		if _, err := c.Put(ctx, fmt.Sprintf("k/%02d", i%20), fmt.Sprintf("v%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Txn(ctx).Then(clientv3.OpPut("t/a", "1"), clientv3.OpPut("t/b", "2"), clientv3.OpDelete("k/05")).Commit(); err != nil {
		t.Fatal(err)
	}
	l1, err := c.Grant(ctx, 600)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Grant(ctx, 300); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"leased/1", "leased/2"} {
		if _, err := c.Put(ctx, k, "x", clientv3.WithLease(l1.ID)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Delete(ctx, "k/1", clientv3.WithPrefix()); err != nil {
		t.Fatal(err)
	}
	mid, err := c.Put(ctx, "k/07", "mid")
	if err != nil {
		t.Fatal(err)
	}
	compact := mid.Header.Revision - 30
	if _, err := c.Compact(ctx, compact); err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		if _, err := c.Put(ctx, fmt.Sprintf("k/1%d", i%4), fmt.Sprintf("after%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	return compact
}

// getJSON is what `etcdctl get -w json` prints, without the IDs that
// differ between servers.
type getJSON struct {
	Header struct {
		Revision int64 `json:"revision"`
	} `json:"header"`
	Kvs []struct {
		Key            []byte `json:"key"`
		CreateRevision int64  `json:"create_revision"`
		ModRevision    int64  `json:"mod_revision"`
		Version        int64  `json:"version"`
		Value          []byte `json:"value"`
		Lease          int64  `json:"lease"`
	} `json:"kvs"`
	Count int64 `json:"count"`
}

// answers is what a client sees of a server's data: every key by
// `etcdctl get --prefix "" -w json` now and at the compaction, by clientv3
// at every revision from the compaction on, a read below the compaction, the leases with their
// granted TTLs and keys, and a watch from the compaction to now.
type answers struct {
	Now        getJSON
	AtCompact  getJSON
	AtRev      map[int64]string
	BelowError string
	Leases     map[int64]string
	Events     []string
}

func capture(t *testing.T, endpoint string, compact int64) answers {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	get := func(args ...string) getJSON {
		var g getJSON
		out := etcdctl(t, append([]string{"--endpoints", endpoint, "get", "", "--prefix", "-w", "json"}, args...)...)
		if err := json.Unmarshal(out, &g); err != nil {
			t.Fatalf("etcdctl get -w json: %v: %s", err, out)
		}
		return g
	}
	a := answers{Now: get(), AtRev: map[int64]string{}, Leases: map[int64]string{}}
	a.AtCompact = get("--rev", strconv.FormatInt(compact, 10))
	c := newClient(t, endpoint)
	for rev := compact; rev <= a.Now.Header.Revision; rev++ {
		resp, err := c.Get(ctx, "", clientv3.WithPrefix(), clientv3.WithRev(rev))
		if err != nil {
			t.Fatal(err)
		}
		a.AtRev[rev] = fmt.Sprint(resp.Kvs)
	}
	if _, err := c.Get(ctx, "k/", clientv3.WithPrefix(), clientv3.WithRev(compact-1)); err != nil {
		a.BelowError = err.Error()
	}
	ls, err := c.Leases(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range ls.Leases {
		ttl, err := c.TimeToLive(ctx, l.ID, clientv3.WithAttachedKeys())
		if err != nil {
			t.Fatal(err)
		}
		// etcd lists a lease's keys in no particular order.
		slices.SortFunc(ttl.Keys, bytes.Compare)
		a.Leases[int64(l.ID)] = fmt.Sprintf("granted %d keys %q", ttl.GrantedTTL, ttl.Keys)
	}
	wctx, wcancel := context.WithCancel(ctx)
	defer wcancel()
	for resp := range c.Watch(wctx, "", clientv3.WithPrefix(), clientv3.WithRev(compact), clientv3.WithPrevKV()) {
		if err := resp.Err(); err != nil {
			t.Fatalf("watch from %d: %v", compact, err)
		}
		for _, ev := range resp.Events {
			a.Events = append(a.Events, fmt.Sprintf("%s %s=%s c%d m%d v%d l%d prev %v", ev.Type, ev.Kv.Key, ev.Kv.Value, ev.Kv.CreateRevision, ev.Kv.ModRevision, ev.Kv.Version, ev.Kv.Lease, ev.PrevKv))
			if ev.Kv.ModRevision == a.Now.Header.Revision {
				wcancel()
			}
		}
	}
	return a
}

// requireSameAnswers compares two servers' answers field by field.
func requireSameAnswers(t *testing.T, got, want answers) {
	t.Helper()
	if !reflect.DeepEqual(got.Now, want.Now) {
		t.Errorf("get --prefix -w json:\n got %+v\nwant %+v", got.Now, want.Now)
	}
	if !reflect.DeepEqual(got.AtCompact, want.AtCompact) {
		t.Errorf("get --prefix -w json --rev (the compaction):\n got %+v\nwant %+v", got.AtCompact, want.AtCompact)
	}
	for rev, w := range want.AtRev {
		if g := got.AtRev[rev]; g != w {
			t.Errorf("get --rev %d:\n got %s\nwant %s", rev, g, w)
		}
	}
	if !strings.Contains(got.BelowError, "compacted") || !strings.Contains(want.BelowError, "compacted") {
		t.Errorf("below the compaction: %q and %q, want compacted errors", got.BelowError, want.BelowError)
	}
	if !reflect.DeepEqual(got.Leases, want.Leases) {
		t.Errorf("leases %v, want %v", got.Leases, want.Leases)
	}
	if !reflect.DeepEqual(got.Events, want.Events) {
		t.Errorf("watch from the compaction: %d events, want %d:\n got %q\nwant %q", len(got.Events), len(want.Events), got.Events, want.Events)
	}
}

// TestRestoreFromEtcd migrates a running etcd 3.4 with history, leases
// and a compaction into Strata, from `etcdctl snapshot save` and from the
// member's db file: the restored server gives the same `get --prefix -w
// json` (revisions included) now and at every revision from the
// compaction on, refuses below it, has the same leases and keys, replays
// the same watch events from the compaction, and a watch from the old
// revision carries on with the next write. A wrong file, a truncated
// snapshot and a flipped byte are refused with nothing written.
func TestRestoreFromEtcd(t *testing.T) {
	etcdBinaries(t)
	etcdDir := filepath.Join(t.TempDir(), "etcd")
	restoreFromEtcd(t, etcdDir, startEtcd(t, etcdDir, 0))
}

// TestRestoreFromEtcd37 is TestRestoreFromEtcd with etcd 3.7 (embed, in a
// process of its own); it runs when STRATA_ETCD37 names that program.
func TestRestoreFromEtcd37(t *testing.T) {
	etcdBinaries(t) // etcdctl compares the answers
	etcdDir := filepath.Join(t.TempDir(), "etcd37")
	restoreFromEtcd(t, etcdDir, startEtcd37(t, etcdDir))
}

func restoreFromEtcd(t *testing.T, etcdDir string, e *etcdProc) {
	compact := writeHistory(t, newClient(t, e.endpoint))
	want := capture(t, e.endpoint, compact)
	snap := filepath.Join(t.TempDir(), "etcd.snap")
	etcdctl(t, "--endpoints", e.endpoint, "snapshot", "save", snap)
	e.stop(t)
	memberDB := filepath.Join(etcdDir, "member", "snap", "db")

	for name, file := range map[string]string{"snapshot": snap, "member db": memberDB} {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "restored")
			out := mustRun(t, "--db", dir, "restore", file)
			if !strings.Contains(out, fmt.Sprintf("restored revision %d (compacted at %d)", want.Now.Header.Revision, compact)) {
				t.Errorf("restore printed %q", out)
			}
			s, c := startServe(t, dir)
			requireSameAnswers(t, capture(t, s.Addr().String(), compact), want)

			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			w := c.Watch(ctx, "k/", clientv3.WithPrefix(), clientv3.WithRev(compact+1))
			if _, err := c.Put(ctx, "k/new", "n"); err != nil {
				t.Fatal(err)
			}
			var last int64
			for resp := range w {
				for _, ev := range resp.Events {
					if ev.Kv.ModRevision < last {
						t.Fatalf("watch from %d: revision %d after %d", compact+1, ev.Kv.ModRevision, last)
					}
					last = ev.Kv.ModRevision
				}
				if last == want.Now.Header.Revision+1 {
					break
				}
			}
		})
	}

	t.Run("refused", func(t *testing.T) {
		good, err := os.ReadFile(snap)
		if err != nil {
			t.Fatal(err)
		}
		flipped := bytes.Clone(good)
		flipped[len(flipped)/2] ^= 0x10
		for name, tc := range map[string]struct {
			body []byte
			want string
		}{
			"truncated":    {good[:len(good)-1000], "truncated"},
			"flipped byte": {flipped, "SHA-256"},
			"text":         {[]byte("not a backup, not a snapshot\n"), `neither a Strata backup nor an etcd snapshot or db file`},
		} {
			file := filepath.Join(t.TempDir(), "bad")
			if err := os.WriteFile(file, tc.body, 0o600); err != nil {
				t.Fatal(err)
			}
			dir := filepath.Join(t.TempDir(), "never")
			_, _, err := run(t, "--db", dir, "restore", file)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s: %v, want an error saying %q", name, err, tc.want)
			}
			if _, serr := os.Stat(dir); !errors.Is(serr, os.ErrNotExist) {
				t.Errorf("%s: the database directory was created", name)
			}
			t.Logf("%s: %v", name, err)
		}
		notDir := filepath.Join(t.TempDir(), "a-file")
		if err := os.WriteFile(notDir, []byte("keep me"), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, _, err := run(t, "--db", notDir, "restore", snap); err == nil || !strings.Contains(err.Error(), "not a directory") {
			t.Errorf("db_path a file: %v, want a refusal", err)
		}
		if b, err := os.ReadFile(notDir); err != nil || string(b) != "keep me" {
			t.Errorf("db_path a file: now %q, %v", b, err)
		}
	})
}

// TestExportToEtcd goes back: a Strata database with history, leases and
// a compaction, written out by `strata export-etcd`, restored by the
// stock `etcdctl snapshot restore` and served by etcd 3.4, gives the same
// answers as Strata did. The export refuses to overwrite a file.
func TestExportToEtcd(t *testing.T) {
	etcdBinaries(t)
	dir := t.TempDir()
	s, c := startServe(t, dir)
	compact := writeHistory(t, c)
	want := capture(t, s.Addr().String(), compact)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	out := filepath.Join(t.TempDir(), "strata.snap")
	printed := mustRun(t, "--db", dir, "export-etcd", out)
	if !strings.Contains(printed, fmt.Sprintf("exported revision %d (compacted at %d, 2 leases)", want.Now.Header.Revision, compact)) {
		t.Errorf("export-etcd printed %q", printed)
	}
	if _, _, err := run(t, "--db", dir, "export-etcd", out); err == nil || !strings.Contains(err.Error(), "exists") {
		t.Errorf("export over an existing file: %v, want a refusal", err)
	}
	status := etcdctl(t, "snapshot", "status", out, "-w", "json")
	if !strings.Contains(string(status), fmt.Sprintf(`"revision":%d`, want.Now.Header.Revision)) {
		t.Errorf("etcdctl snapshot status: %s, want revision %d", status, want.Now.Header.Revision)
	}

	peer := loopbackPort(t)
	etcdDir := filepath.Join(t.TempDir(), "etcd")
	etcdctl(t, "snapshot", "restore", out, "--data-dir", etcdDir, "--name", "default",
		"--initial-cluster", "default="+etcdPeerURL(peer), "--initial-advertise-peer-urls", etcdPeerURL(peer))
	e := startEtcd(t, etcdDir, peer)
	requireSameAnswers(t, capture(t, e.endpoint, compact), want)
}
