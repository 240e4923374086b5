package clustertest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/stratadb/strata/config"
	"github.com/stratadb/strata/engine"
	"github.com/stratadb/strata/internal/admin"
	"github.com/stratadb/strata/internal/etcdfile"
	"github.com/stratadb/strata/mvcc"
)

// TestClusterFromSnapshot starts a three-member cluster whose members
// were each restored (`strata --config ... restore FILE`) from the same
// etcd snapshot (and then Strata backup) with history, a lease and a compaction: every member
// serves the snapshot's revision and keys, history from the compaction
// on, the lease; the next write is the next revision on all of them, and
// their stores hash alike.
func TestClusterFromSnapshot(t *testing.T) {
	etcdSnap, strataBackup, rev, compact := writeSnapshots(t)
	t.Run("etcd snapshot", func(t *testing.T) { clusterFromFile(t, etcdSnap, rev, compact) })
	t.Run("Strata backup", func(t *testing.T) { clusterFromFile(t, strataBackup, rev, compact) })
}

func clusterFromFile(t *testing.T, snap string, rev, compact int64) {
	c := newPreparedCluster(t, 3, 1000, func(m *member) {
		root := admin.NewRootCommand()
		var out, errb bytes.Buffer
		root.SetOut(&out)
		root.SetErr(&errb)
		root.SetArgs([]string{"--config", m.cfgPath, "restore", snap, "--progress", "never"})
		if err := root.Execute(); err != nil {
			t.Fatalf("restore for %s: %v\n%s", m.name, err, errb.String())
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, m := range c.members {
		cli := c.client(m)
		got, err := cli.Get(ctx, "k/", clientv3.WithPrefix(), clientv3.WithSerializable())
		if err != nil {
			t.Fatal(err)
		}
		if got.Header.Revision != rev || got.Count != 10 || string(got.Kvs[3].Value) != "v43" {
			t.Errorf("%s: revision %d, %d keys, k/3 = %q; want %d, 10, v43", m.name, got.Header.Revision, got.Count, got.Kvs[3].Value, rev)
		}
		old, err := cli.Get(ctx, "k/3", clientv3.WithRev(compact), clientv3.WithSerializable())
		if err != nil || len(old.Kvs) != 1 || old.Kvs[0].ModRevision > compact {
			t.Errorf("%s: k/3 at the compaction %d: %v %v", m.name, compact, old, err)
		}
		if _, err := cli.Get(ctx, "k/3", clientv3.WithRev(compact-1), clientv3.WithSerializable()); err == nil || !strings.Contains(err.Error(), "compacted") {
			t.Errorf("%s: below the compaction: %v, want compacted", m.name, err)
		}
		ttl, err := cli.TimeToLive(ctx, 77, clientv3.WithAttachedKeys())
		if err != nil || ttl.GrantedTTL != 900 || len(ttl.Keys) != 1 {
			t.Errorf("%s: lease 77: %+v %v, want TTL 900 with one key", m.name, ttl, err)
		}
	}
	put, err := c.client(c.members...).Put(ctx, "after", "x")
	if err != nil {
		t.Fatal(err)
	}
	if put.Header.Revision != rev+1 {
		t.Errorf("the first write in the cluster: revision %d, want %d", put.Header.Revision, rev+1)
	}
	checkSameStores(t, c, c.members...)
}

// writeSnapshots writes an etcd snapshot and a Strata backup of 50 puts
// over 10 keys, a key on lease 77 and a compaction, and returns their
// paths, the revision and the compaction.
func writeSnapshots(t *testing.T) (etcdSnap, strataBackup string, rev, compact int64) {
	t.Helper()
	cfg := config.Default()
	cfg.DBPath = t.TempDir()
	db, err := engine.Open(cfg, engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	s, err := mvcc.Open(db, mvcc.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.GrantLease(77, 900); err != nil {
		t.Fatal(err)
	}
	for i := range 50 {
		if _, err := s.Put(fmt.Appendf(nil, "k/%d", i%10), fmt.Appendf(nil, "v%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	op := mvcc.PutOp([]byte("leased"), []byte("x"))
	op.Lease = 77
	if _, err := s.Txn(mvcc.TxnRequest{Success: []mvcc.Op{op}}); err != nil {
		t.Fatal(err)
	}
	compact = 30
	if err := s.Compact(compact); err != nil {
		t.Fatal(err)
	}
	etcdSnap = filepath.Join(t.TempDir(), "etcd.snap")
	if _, err := etcdfile.WriteSnapshot(s, etcdSnap, nil); err != nil {
		t.Fatal(err)
	}
	strataBackup = filepath.Join(t.TempDir(), "strata.snap")
	f, err := os.Create(strataBackup)
	if err != nil {
		t.Fatal(err)
	}
	if err := errors.Join(s.WriteBackup(f), f.Close()); err != nil {
		t.Fatal(err)
	}
	return etcdSnap, strataBackup, s.Rev(), compact
}
