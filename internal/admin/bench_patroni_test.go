package admin

import (
	"strings"
	"testing"
)

// TestBenchPatroniFlagErrors checks that bad bench patroni flags are
// reported together, each naming the flag, the value and what is allowed,
// before any server starts.
func TestBenchPatroniFlagErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"bench", "patroni", "--servers", "strata,etcd37"}, []string{"--servers etcd37", "strata and etcd34"}},
		{[]string{"bench", "patroni", "--clusters", "0", "--members", "0", "--ttl", "1"},
			[]string{"--clusters 0: must be >= 1", "--members 0: must be >= 1", "--ttl 1: must be >= 2"}},
		{[]string{"bench", "patroni", "--retention", "1500ms"}, []string{"--retention 1.5s", "whole seconds"}},
		{[]string{"bench", "patroni", "--retention", "-1s", "--loop", "0s", "--duration", "0s"},
			[]string{"--retention -1s: must be >= 0", "--loop 0s: must be > 0", "--duration 0s: must be > 0"}},
		{[]string{"bench", "patroni", "--failover-every", "-5s", "--sample-every", "0s"}, []string{"--failover-every -5s: must be >= 0", "--sample-every 0s: must be > 0"}},
		{[]string{"bench", "patroni", "--quota-bytes", "-1"}, []string{"--quota-bytes -1: must be >= 0"}},
	} {
		_, _, err := run(t, c.args...)
		if err == nil {
			t.Errorf("%v: no error", c.args)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%v: error %q does not say %q", c.args, err, w)
			}
		}
	}
}
