package admin

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/stratadb/strata/config"
	"github.com/stratadb/strata/internal/testport"
	"github.com/stratadb/strata/server"
)

// startServe starts a server on dir with a loopback port and a client of
// it; both end with the test.
func startServe(t *testing.T, dir string) (*server.Server, *clientv3.Client) {
	t.Helper()
	cfg := config.ServeDefault()
	cfg.DBPath = dir
	cfg.Server.Listen = testport.Addr(t)
	cfg.Server.MemoryBudgetMB = 16
	s, err := server.Start(cfg, server.Options{})
	if err != nil {
		t.Fatal(err)
	}
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{s.Addr().String()}, DialTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.Close()
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s, c
}

// TestSnapshotSaveAndRestore backs a server up through etcd's
// Maintenance.Snapshot (clientv3, and the stock etcdctl when installed),
// restores the backup into a new database with `strata restore` and
// serves it: the same revision, the same keys, the history since the
// compaction. A damaged backup and a target that holds files are refused.
func TestSnapshotSaveAndRestore(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, c := startServe(t, t.TempDir())
	for i := range 300 {
		if _, err := c.Put(ctx, fmt.Sprintf("k%03d", i%100), fmt.Sprintf("v%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Compact(ctx, 150); err != nil {
		t.Fatal(err)
	}
	last, err := c.Put(ctx, "last", "x")
	if err != nil {
		t.Fatal(err)
	}
	rev := last.Header.Revision

	backups := map[string]string{}
	rc, err := c.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	backups["clientv3"] = filepath.Join(t.TempDir(), "clientv3.snap")
	f, err := os.Create(backups["clientv3"])
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.ReadFrom(rc); err != nil {
		t.Fatal(err)
	}
	_ = f.Close()
	if bin, err := exec.LookPath("etcdctl"); err == nil {
		backups["etcdctl"] = filepath.Join(t.TempDir(), "etcdctl.snap")
		cmd := exec.Command(bin, "--endpoints="+c.Endpoints()[0], "snapshot", "save", backups["etcdctl"])
		cmd.Env = append(cmd.Environ(), "ETCDCTL_API=3")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("etcdctl snapshot save: %v\n%s", err, out)
		}
	} else {
		t.Log("etcdctl not installed: the clientv3 backup only")
	}

	for name, file := range backups {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "restored")
			out := mustRun(t, "--db", dir, "restore", file)
			if !strings.Contains(out, fmt.Sprintf("restored revision %d (compacted at 150)", rev)) {
				t.Errorf("restore printed %q", out)
			}
			if _, _, err := run(t, "--db", dir, "restore", file); err == nil || !strings.Contains(err.Error(), "holds") {
				t.Errorf("restore into a database: %v, want a refusal", err)
			}
			_, rc := startServe(t, dir)
			got, err := rc.Get(ctx, "k", clientv3.WithPrefix())
			if err != nil {
				t.Fatal(err)
			}
			if got.Header.Revision != rev || got.Count != 100 || string(got.Kvs[7].Value) != "v207" {
				t.Errorf("restored: revision %d, %d keys, k007 = %q; want %d, 100, v207", got.Header.Revision, got.Count, got.Kvs[7].Value, rev)
			}
			old, err := rc.Get(ctx, "k007", clientv3.WithRev(150))
			if err != nil || len(old.Kvs) != 1 || string(old.Kvs[0].Value) != "v107" {
				t.Errorf("at revision 150: %+v, %v; want v107", old, err)
			}
			if _, err := rc.Get(ctx, "k007", clientv3.WithRev(100)); err == nil {
				t.Error("below the compaction: no error")
			}
		})
	}

	damaged, err := os.ReadFile(backups["clientv3"])
	if err != nil {
		t.Fatal(err)
	}
	damaged[len(damaged)/3] ^= 0x40
	bad := filepath.Join(t.TempDir(), "bad.snap")
	if err := os.WriteFile(bad, damaged, 0o644); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "never")
	if _, _, err := run(t, "--db", dir, "restore", bad); err == nil || !strings.Contains(err.Error(), "checksum") {
		t.Errorf("a damaged backup: %v, want the checksum refusal", err)
	}
	if _, err := os.Stat(dir); err == nil {
		t.Error("a damaged backup created the database directory")
	}
}
