package server

import (
	"bytes"
	"context"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/stratadb/strata/internal/workload"
)

// TestCompressValuesThroughClient checks server.compress_values through
// clientv3: the same 300 pods, twice each, put into a server with the
// default and one with compress_values = false, read back unchanged by
// Get, by a watch from the first revision with prev_kv and by a put's
// prev_kv; the default writes under a quarter of the bytes to the WAL and
// uses under half the disk (the engine compresses blocks of the values as
// sent).
func TestCompressValuesThroughClient(t *testing.T) {
	pods := workload.NewPods(11)
	const n = 300
	var wal, disk [2]uint64
	for i, compress := range []bool{true, false} {
		cfg := testConfig(t)
		cfg.Server.CompressValues = compress
		s := startServer(t, cfg)
		c := newClient(t, s, nil)
		ctx := testCtx(t)
		for gen := 1; gen <= 2; gen++ {
			for p := range n {
				if _, err := c.Put(ctx, pods.Key(p), string(pods.Pod(p, gen))); err != nil {
					t.Fatal(err)
				}
			}
		}
		for p := range n {
			resp, err := c.Get(ctx, pods.Key(p))
			if err != nil || len(resp.Kvs) != 1 || !bytes.Equal(resp.Kvs[0].Value, pods.Pod(p, 2)) {
				t.Fatalf("compress_values = %t: Get pod %d: %v, %d kvs, or a value that differs", compress, p, err, len(resp.Kvs))
			}
		}
		wctx, cancel := context.WithCancel(ctx)
		w := c.Watch(wctx, "/registry/pods/", clientv3.WithPrefix(), clientv3.WithRev(1), clientv3.WithPrevKV())
		seen := 0
		for seen < 2*n {
			wr, ok := <-w
			if !ok || wr.Err() != nil {
				t.Fatalf("compress_values = %t: watch ended after %d events: %v", compress, seen, wr.Err())
			}
			for _, ev := range wr.Events {
				p, gen := seen%n, seen/n+1
				if !bytes.Equal(ev.Kv.Value, pods.Pod(p, gen)) {
					t.Fatalf("compress_values = %t: watch event %d: value differs from pod %d generation %d", compress, seen, p, gen)
				}
				if gen == 2 && (ev.PrevKv == nil || !bytes.Equal(ev.PrevKv.Value, pods.Pod(p, 1))) {
					t.Fatalf("compress_values = %t: watch event %d: prev_kv differs from pod %d generation 1", compress, seen, p)
				}
				seen++
			}
		}
		cancel()
		put, err := c.Put(ctx, pods.Key(0), string(pods.Pod(0, 3)), clientv3.WithPrevKV())
		if err != nil || put.PrevKv == nil || !bytes.Equal(put.PrevKv.Value, pods.Pod(0, 2)) {
			t.Fatalf("compress_values = %t: put with prev_kv: %v, or prev_kv differs from generation 2", compress, err)
		}
		if err := s.db.Flush(); err != nil {
			t.Fatal(err)
		}
		m, err := s.db.Metrics()
		if err != nil {
			t.Fatal(err)
		}
		wal[i], disk[i] = m.UserBytesIn, m.DiskUsageBytes
	}
	t.Logf("compressed against a dictionary / as sent: WAL %d / %d bytes (%.1fx), disk %d / %d (%.1fx)",
		wal[0], wal[1], float64(wal[1])/float64(wal[0]), disk[0], disk[1], float64(disk[1])/float64(disk[0]))
	if wal[0]*4 > wal[1] || disk[0]*2 > disk[1] {
		t.Fatalf("compress_values: WAL %d bytes against %d as sent, disk %d against %d: want under a quarter and under half", wal[0], wal[1], disk[0], disk[1])
	}
}
