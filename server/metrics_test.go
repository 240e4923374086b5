package server

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/stratadb/strata/internal/mixin"
)

// scrape reads s's /metrics.
func scrape(t *testing.T, s *Server) mixin.Scrape {
	t.Helper()
	sc, err := mixin.Get("http://" + s.Addr().String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

// TestEtcdMixinMetrics: a single member exports every metric etcd's
// alerts and dashboard query (internal/mixin's list, from etcd's
// contrib/mixin) but the peer ones, and each moves with the event it
// counts: puts, a watch stream, the WAL fsyncs and engine commits they
// cause, the bytes clients send and receive.
func TestEtcdMixinMetrics(t *testing.T) {
	s := startServer(t, testConfig(t))
	c := newClient(t, s, nil)
	ctx := testCtx(t)
	before := scrape(t, s)
	const puts = 20
	value := strings.Repeat("v", 100)
	for i := range puts {
		if _, err := c.Put(ctx, fmt.Sprintf("k%d", i), value); err != nil {
			t.Fatal(err)
		}
	}
	wctx, cancelWatch := context.WithCancel(ctx)
	defer cancelWatch()
	wch := c.Watch(wctx, "k", clientv3.WithPrefix(), clientv3.WithRev(1))
	if wr := <-wch; len(wr.Events) == 0 {
		t.Fatalf("watch: %v", wr.Err())
	}
	after := scrape(t, s)

	for _, m := range mixin.Metrics() {
		if has := after.Has(m.Series); has == m.ClusterOnly {
			t.Errorf("%s (etcd's %s): exported = %v on a single member", m.Series, m.Where, has)
		}
	}
	grew := func(series string, min float64, labels ...string) {
		t.Helper()
		b, a := before.Sum(series, labels...), after.Sum(series, labels...)
		if math.IsNaN(b) {
			b = 0
		}
		if !(a-b >= min) {
			t.Errorf("%s%v went from %v to %v, want a rise of at least %v", series, labels, b, a, min)
		}
	}
	put := []string{"grpc_service", "etcdserverpb.KV", "grpc_method", "Put", "grpc_type", "unary"}
	grew("grpc_server_started_total", puts, put...)
	grew("grpc_server_handled_total", puts, append(put, "grpc_code", "OK")...)
	grew("grpc_server_handling_seconds_count", puts, put...)
	grew("grpc_server_msg_received_total", 1, "grpc_method", "Watch", "grpc_type", "bidi_stream")
	grew("etcd_server_proposals_committed_total", puts)
	grew("etcd_server_proposals_applied_total", puts)
	grew("etcd_network_client_grpc_received_bytes_total", float64(puts*len(value)))
	grew("etcd_network_client_grpc_sent_bytes_total", float64(puts*len(value))) // the watch's events
	grew("etcd_disk_wal_fsync_duration_seconds_count", 1)                       // sync = true: every put waits for one
	grew("etcd_disk_backend_commit_duration_seconds_count", puts)
	watch := []string{"grpc_service", "etcdserverpb.Watch", "grpc_type", "bidi_stream"}
	if open := after.Sum("grpc_server_started_total", watch...) - after.Sum("grpc_server_handled_total", watch...); open != 1 {
		t.Errorf("open watch streams (the dashboard's started - handled) = %v, want 1", open)
	}
	for series, want := range map[string]float64{"etcd_server_has_leader": 1, "etcd_server_proposals_pending": 0} {
		if got := after.Sum(series); got != want {
			t.Errorf("%s = %v, want %v", series, got, want)
		}
	}
	size, inUse, quota := after.Sum("etcd_mvcc_db_total_size_in_bytes"), after.Sum("etcd_mvcc_db_total_size_in_use_in_bytes"),
		after.Sum("etcd_server_quota_backend_bytes")
	if !(inUse > 0 && inUse <= size && size < quota) {
		t.Errorf("db size %v, in use %v, quota %v: want 0 < in use <= size < quota", size, inUse, quota)
	}
	// The disk histograms are in seconds: a fsync or a commit on a test
	// machine takes well under a minute each on average, and more than 0.
	for _, h := range []string{"etcd_disk_wal_fsync_duration_seconds", "etcd_disk_backend_commit_duration_seconds"} {
		if avg := after.Sum(h+"_sum") / after.Sum(h+"_count"); !(avg > 0 && avg < time.Minute.Seconds()) {
			t.Errorf("%s: average %v s", h, avg)
		}
	}
}

// TestCompactionMetrics: a compaction through clientv3 moves etcd's
// compaction metrics as it moves etcd's: one index pause and one total
// duration observed, the revisions deleted counted, the time of the last
// compaction set.
func TestCompactionMetrics(t *testing.T) {
	s := startServer(t, testConfig(t))
	c := newClient(t, s, nil)
	ctx := testCtx(t)
	const puts = 10
	var last int64
	for i := range puts {
		resp, err := c.Put(ctx, "k", fmt.Sprint(i))
		if err != nil {
			t.Fatal(err)
		}
		last = resp.Header.Revision
	}
	before := time.Now().Unix()
	if _, err := c.Compact(ctx, last, clientv3.WithCompactPhysical()); err != nil {
		t.Fatal(err)
	}
	sc := scrape(t, s)
	// Compacting at the last put keeps it and deletes the other puts,
	// as etcd counts them.
	for series, want := range map[string]float64{
		"etcd_debugging_mvcc_db_compaction_keys_total":                           puts - 1,
		"etcd_debugging_mvcc_index_compaction_pause_duration_milliseconds_count": 1,
		"etcd_debugging_mvcc_db_compaction_total_duration_milliseconds_count":    1,
	} {
		if got := sc.Sum(series); got != want {
			t.Errorf("%s = %v, want %v", series, got, want)
		}
	}
	if got := sc.Sum("etcd_debugging_mvcc_db_compaction_last"); got < float64(before) || got > float64(time.Now().Unix()) {
		t.Errorf("etcd_debugging_mvcc_db_compaction_last = %v, want the Unix time of the compaction (from %d)", got, before)
	}
}
