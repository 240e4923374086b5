package server

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/stratadb/strata/config"
	"github.com/stratadb/strata/mvcc"
)

func TestKV(t *testing.T) {
	s := startServer(t, testConfig(t))
	c := newClient(t, s, nil)
	ctx := testCtx(t)

	// An empty store is at revision 1; the first write makes 2, as etcd.
	r, err := c.Get(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	if r.Header.Revision != 1 || r.Count != 0 || r.Header.MemberId == 0 || r.Header.ClusterId == 0 {
		t.Fatalf("empty store: header %+v count %d", r.Header, r.Count)
	}
	for i, k := range []string{"a", "b/1", "b/2", "b/3", "c"} {
		p, err := c.Put(ctx, k, fmt.Sprintf("v%d", i))
		if err != nil {
			t.Fatal(err)
		}
		if p.Header.Revision != int64(i+2) {
			t.Fatalf("put %s: revision %d, want %d", k, p.Header.Revision, i+2)
		}
	}
	// Put with prev_kv returns the replaced version.
	p, err := c.Put(ctx, "a", "v9", clientv3.WithPrevKV())
	if err != nil || p.PrevKv == nil || string(p.PrevKv.Value) != "v0" || p.PrevKv.ModRevision != 2 {
		t.Fatalf("put prev_kv: %+v, %v", p, err)
	}

	// Prefix, limit, keys-only, count-only, revision.
	g, err := c.Get(ctx, "b/", clientv3.WithPrefix(), clientv3.WithLimit(2))
	if err != nil || len(g.Kvs) != 2 || !g.More || g.Count != 3 || string(g.Kvs[1].Key) != "b/2" {
		t.Fatalf("prefix limit 2: %+v, %v", g, err)
	}
	g, err = c.Get(ctx, "b/", clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil || len(g.Kvs) != 3 || g.Kvs[0].Value != nil {
		t.Fatalf("keys only: %+v, %v", g, err)
	}
	g, err = c.Get(ctx, "", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil || g.Count != 5 || len(g.Kvs) != 0 {
		t.Fatalf("count only: %+v, %v", g, err)
	}
	g, err = c.Get(ctx, "a", clientv3.WithRev(2))
	if err != nil || len(g.Kvs) != 1 || string(g.Kvs[0].Value) != "v0" || g.Header.Revision != 7 {
		t.Fatalf("get at revision 2: %+v, %v", g, err)
	}
	g, err = c.Get(ctx, "b/", clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByKey, clientv3.SortDescend), clientv3.WithLimit(1))
	if err != nil || len(g.Kvs) != 1 || string(g.Kvs[0].Key) != "b/3" || !g.More {
		t.Fatalf("sorted descending: %+v, %v", g, err)
	}
	g, err = c.Get(ctx, "a", clientv3.WithSerializable())
	if err != nil || string(g.Kvs[0].Value) != "v9" {
		t.Fatalf("serializable get: %+v, %v", g, err)
	}

	// Delete with prev_kv.
	d, err := c.Delete(ctx, "b/", clientv3.WithPrefix(), clientv3.WithPrevKV())
	if err != nil || d.Deleted != 3 || len(d.PrevKvs) != 3 || d.Header.Revision != 8 {
		t.Fatalf("delete prefix: %+v, %v", d, err)
	}

	// Txn: compares on value, version, create and mod revision.
	for _, tt := range []struct {
		cmp  clientv3.Cmp
		want bool
	}{
		{clientv3.Compare(clientv3.Value("a"), "=", "v9"), true},
		{clientv3.Compare(clientv3.Value("a"), "=", "v0"), false},
		{clientv3.Compare(clientv3.Value("missing"), "=", ""), false},
		{clientv3.Compare(clientv3.Version("a"), "=", 2), true},
		{clientv3.Compare(clientv3.Version("missing"), "=", 0), true},
		{clientv3.Compare(clientv3.CreateRevision("a"), "=", 2), true},
		{clientv3.Compare(clientv3.ModRevision("a"), ">", 6), true},
		{clientv3.Compare(clientv3.ModRevision("a"), "<", 7), false},
	} {
		tr, err := c.Txn(ctx).If(tt.cmp).Then(clientv3.OpGet("a")).Else(clientv3.OpGet("c")).Commit()
		if err != nil {
			t.Fatal(err)
		}
		key := string(tr.Responses[0].GetResponseRange().Kvs[0].Key)
		if tr.Succeeded != tt.want || (key == "a") != tt.want {
			t.Errorf("txn %v: succeeded %v (read %s), want %v", tt.cmp, tr.Succeeded, key, tt.want)
		}
	}
	// A writing txn reads its own writes and makes one revision.
	tr, err := c.Txn(ctx).If(clientv3.Compare(clientv3.Value("c"), "=", "v4")).
		Then(clientv3.OpPut("x", "1"), clientv3.OpPut("y", "2"), clientv3.OpGet("x")).Commit()
	if err != nil || !tr.Succeeded || tr.Header.Revision != 9 {
		t.Fatalf("txn put: %+v, %v", tr, err)
	}
	if kvs := tr.Responses[2].GetResponseRange().Kvs; len(kvs) != 1 || string(kvs[0].Value) != "1" {
		t.Errorf("txn get after put in the same txn: %v", kvs)
	}
	if _, err := c.Txn(ctx).Then(clientv3.OpPut("x", "1"), clientv3.OpPut("x", "2")).Commit(); !errors.Is(err, rpctypes.ErrDuplicateKey) {
		t.Errorf("txn putting a key twice: %v, want %v", err, rpctypes.ErrDuplicateKey)
	}
	ops := make([]clientv3.Op, 128+1) // etcd's default --max-txn-ops, 128
	for i := range ops {
		ops[i] = clientv3.OpPut(fmt.Sprint(i), "")
	}
	if _, err := c.Txn(ctx).Then(ops...).Commit(); !errors.Is(err, rpctypes.ErrTooManyOps) {
		t.Errorf("txn of %d ops: %v, want %v", len(ops), err, rpctypes.ErrTooManyOps)
	}

	// Compact; then reads below it are compacted, above the head future.
	if _, err := c.Compact(ctx, 5); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Get(ctx, "a", clientv3.WithRev(4)); !errors.Is(err, rpctypes.ErrCompacted) {
		t.Errorf("get below the compaction: %v, want %v", err, rpctypes.ErrCompacted)
	}
	if _, err := c.Get(ctx, "a", clientv3.WithRev(100)); !errors.Is(err, rpctypes.ErrFutureRev) {
		t.Errorf("get at a future revision: %v, want %v", err, rpctypes.ErrFutureRev)
	}
	if _, err := c.Compact(ctx, 5); !errors.Is(err, rpctypes.ErrCompacted) {
		t.Errorf("compact twice: %v, want %v", err, rpctypes.ErrCompacted)
	}
	if _, err := c.Put(ctx, "", "v"); !errors.Is(err, rpctypes.ErrEmptyKey) {
		t.Errorf("put of an empty key: %v, want %v", err, rpctypes.ErrEmptyKey)
	}
}

func TestKVLimits(t *testing.T) {
	cfg := testConfig(t)
	cfg.Server.MaxValueBytes = 100
	cfg.Server.MaxRequestBytes = 4096
	s := startServer(t, cfg)
	c := newClient(t, s, nil)
	ctx := testCtx(t)
	_, err := c.Put(ctx, "k", strings.Repeat("x", 101))
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "max_value_bytes = 100") {
		t.Errorf("put of 101 bytes over a 100-byte limit: %v", err)
	}
	_, err = c.Put(ctx, "k", strings.Repeat("x", 100))
	if err != nil {
		t.Errorf("put at the limit: %v", err)
	}
	_, err = c.Get(ctx, strings.Repeat("k", 4096+grpcOverheadBytes))
	if status.Code(err) != codes.ResourceExhausted {
		t.Errorf("request over max_request_bytes: %v, want ResourceExhausted", err)
	}
	if g, err := c.Get(ctx, "k"); err != nil || g.Count != 1 {
		t.Errorf("get after the refused writes: %+v, %v", g, err)
	}
}

func TestMaxValueBytesLimitIsTheStoresLimit(t *testing.T) {
	if config.MaxValueBytesLimit != mvcc.MaxValueSize {
		t.Errorf("config.MaxValueBytesLimit = %d, mvcc.MaxValueSize = %d", config.MaxValueBytesLimit, mvcc.MaxValueSize)
	}
}

// TestMaxConcurrentStreams: with max_concurrent_streams = 1 a connection
// busy with an open watch stream cannot start a call until it ends.
func TestMaxConcurrentStreams(t *testing.T) {
	cfg := testConfig(t)
	cfg.Server.MaxConcurrentStreams = 1
	s := startServer(t, cfg)
	c := newClient(t, s, nil)
	ctx := testCtx(t)
	wctx, cancelWatch := context.WithCancel(ctx)
	wc := c.Watch(wctx, "k")
	c.RequestProgress(ctx) // the watch stream is open once its progress reply comes
	if r := nextResponse(t, wc); !r.IsProgressNotify() {
		t.Fatalf("first watch response: %+v", r)
	}
	short, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	if _, err := c.Get(short, "k"); status.Code(err) != codes.DeadlineExceeded && !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a second stream on the connection: %v, want it to wait past its deadline", err)
	}
	cancelWatch()
	deadline := time.Now().Add(10 * time.Second)
	for {
		g, err := c.Get(ctx, "k")
		if err == nil && g.Count == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("get after the watch ended: %v", err)
		}
	}
}

// TestMaxTxnOps: server.max_txn_ops (etcd's --max-txn-ops) is the limit a
// txn is checked against, with etcd's error over it; a nested txn counts
// against what its parent left.
func TestMaxTxnOps(t *testing.T) {
	cfg := testConfig(t)
	cfg.Server.MaxTxnOps = 200
	s := startServer(t, cfg)
	c := newClient(t, s, nil)
	ctx := testCtx(t)
	puts := func(n int) []clientv3.Op {
		ops := make([]clientv3.Op, n)
		for i := range ops {
			ops[i] = clientv3.OpPut(fmt.Sprint("k", i), "v")
		}
		return ops
	}
	if _, err := c.Txn(ctx).Then(puts(200)...).Commit(); err != nil {
		t.Fatalf("txn of 200 ops with max_txn_ops = 200: %v", err)
	}
	if _, err := c.Txn(ctx).Then(puts(201)...).Commit(); !errors.Is(err, rpctypes.ErrTooManyOps) {
		t.Fatalf("txn of 201 ops: %v, want %v", err, rpctypes.ErrTooManyOps)
	}
	nested := clientv3.OpTxn(nil, puts(101), nil)
	if _, err := c.Txn(ctx).Then(append(puts(99), nested)...).Commit(); !errors.Is(err, rpctypes.ErrTooManyOps) {
		t.Fatalf("a txn of 100 ops nesting one of 101: %v, want %v", err, rpctypes.ErrTooManyOps)
	}
}
