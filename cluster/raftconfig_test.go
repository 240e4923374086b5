package cluster

import (
	"testing"
	"time"
)

// TestRequestTimeoutIsEtcds: a member's request timeout defaults to etcd's
// (5 s plus twice the election timeout), so the raft layer and the
// server's 7 s bound agree with the default ticks and follow a cluster's
// own election timeout; a set value is kept.
func TestRequestTimeoutIsEtcds(t *testing.T) {
	for _, tc := range []struct {
		cfg  RaftConfig
		want time.Duration
	}{
		{RaftConfig{}, 7 * time.Second},
		{RaftConfig{TickInterval: 200 * time.Millisecond, ElectionTicks: 25}, 15 * time.Second},
		{RaftConfig{RequestTimeout: 3 * time.Second}, 3 * time.Second},
	} {
		if got := tc.cfg.withDefaults().RequestTimeout; got != tc.want {
			t.Errorf("tick %s, election ticks %d, request timeout %s: default %s, want %s",
				tc.cfg.TickInterval, tc.cfg.ElectionTicks, tc.cfg.RequestTimeout, got, tc.want)
		}
	}
}
