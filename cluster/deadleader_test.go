package cluster

import "testing"

// TestCampaignTurn: the voters other than the gone leader campaign one at
// a time, two ticks apart, in the order of their IDs; a learner never.
func TestCampaignTurn(t *testing.T) {
	voters := func(ids ...uint64) map[uint64]struct{} {
		m := map[uint64]struct{}{}
		for _, id := range ids {
			m[id] = struct{}{}
		}
		return m
	}
	for _, tc := range []struct {
		name            string
		voters          map[uint64]struct{}
		self, gone      uint64
		wantTicks       int
		wantCampaigning bool
	}{
		{"first of two", voters(10, 20, 30), 10, 20, 1, true},
		{"second of two", voters(10, 20, 30), 30, 20, 3, true},
		{"the gone leader had the lowest ID", voters(10, 20, 30), 20, 10, 1, true},
		{"third of four", voters(1, 2, 3, 4, 5), 4, 2, 5, true},
		{"last of four", voters(1, 2, 3, 4, 5), 5, 1, 7, true},
		{"a learner", voters(10, 20, 30), 40, 20, 0, false},
	} {
		ticks, ok := campaignTurn(tc.voters, tc.self, tc.gone)
		if ticks != tc.wantTicks || ok != tc.wantCampaigning {
			t.Errorf("%s: campaignTurn = %d, %v; want %d, %v", tc.name, ticks, ok, tc.wantTicks, tc.wantCampaigning)
		}
	}
}
