package clustertest

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"testing"
	"time"

	"github.com/stratadb/strata/internal/mixin"
)

// TestEtcdMixinMetrics: every member of a 3-member cluster exports every
// metric etcd's alerts and dashboard query (internal/mixin's list, from
// etcd's contrib/mixin), the peer ones labelled by peer as etcd labels
// them, fed by the peer traffic: bytes both ways and a round-trip time to
// each peer, and send failures to a member that was killed.
func TestEtcdMixinMetrics(t *testing.T) {
	c := newProcCluster(t, 3, 10000)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cli := c.client(c.members...)
	for i := range 10 {
		if _, err := cli.Put(ctx, fmt.Sprintf("k%d", i), "v"); err != nil {
			t.Fatal(err)
		}
	}
	ids := map[*member]string{}
	for _, m := range c.members {
		st, err := c.client(m).Status(ctx, m.clientAddr)
		if err != nil {
			t.Fatal(err)
		}
		ids[m] = strconv.FormatUint(st.Header.MemberId, 16)
	}
	lead := c.leader()
	scrape := func(m *member) mixin.Scrape {
		t.Helper()
		s, err := mixin.Get("http://" + m.clientAddr + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	for _, m := range c.members {
		var s mixin.Scrape
		// Each peer's first round trip is timed once its peer server is up.
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			s = scrape(m)
			timed := 0
			for _, o := range c.others(m) {
				if s.Sum("etcd_network_peer_round_trip_time_seconds_count", "To", ids[o]) > 0 {
					timed++
				}
			}
			if timed == 2 || time.Now().After(deadline) {
				break
			}
		}
		for _, mm := range mixin.Metrics() {
			if !s.Has(mm.Series) && mm.Series != "etcd_network_peer_sent_failures_total" { // checked below
				t.Errorf("%s: no %s (etcd's %s)", m.name, mm.Series, mm.Where)
			}
		}
		for _, o := range c.others(m) {
			if v := s.Sum("etcd_network_peer_round_trip_time_seconds_count", "To", ids[o]); !(v > 0) {
				t.Errorf("%s: no round trip to %s timed", m.name, o.name)
			}
			if m != lead && o != lead {
				continue // followers exchange no messages once a leader is elected
			}
			if v := s.Sum("etcd_network_peer_sent_bytes_total", "To", ids[o]); !(v > 0) {
				t.Errorf("%s: etcd_network_peer_sent_bytes_total{To=%q} = %v, want > 0", m.name, ids[o], v)
			}
			if v := s.Sum("etcd_network_peer_received_bytes_total", "From", ids[o]); !(v > 0) {
				t.Errorf("%s: etcd_network_peer_received_bytes_total{From=%q} = %v, want > 0", m.name, ids[o], v)
			}
		}
		if v := s.Sum("etcd_disk_wal_fsync_duration_seconds_count"); !(v >= 10) {
			t.Errorf("%s: %v raft log fsyncs after 10 writes", m.name, v)
		}
	}

	// Kill a follower: the leader's writes to it now fail.
	gone := c.others(lead)[0]
	c.kill(gone)
	for deadline := time.Now().Add(30 * time.Second); ; {
		if _, err := c.client(lead).Put(ctx, "after-kill", "v"); err != nil {
			t.Fatal(err)
		}
		v := scrape(lead).Sum("etcd_network_peer_sent_failures_total", "To", ids[gone])
		if v > 0 && !math.IsNaN(v) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("etcd_network_peer_sent_failures_total{To=%q} on the leader = %v after the member was killed", ids[gone], v)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestStartupLineSaysWhatIsSynced: a cluster member's start-up line says
// that the raft log is fsynced and the store is not, whatever the file's
// sync says (the store's engine runs with sync off on a member).
func TestStartupLineSaysWhatIsSynced(t *testing.T) {
	c := newProcCluster(t, 1, 10000)
	m := c.members[0]
	if !m.logHas("sync: the raft log is fsynced, the store has no WAL") || m.logHas("sync true") {
		t.Errorf("start-up line does not say what is fsynced:\n%s", tail(m.logPath, 5))
	}
}
