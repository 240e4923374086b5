package admin

import (
	"strings"
	"testing"
)

// TestBenchFlagErrors checks that bad bench flags are reported, naming the
// flag and the value, before any server starts.
func TestBenchFlagErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"bench", "qps", "--servers", "strata,etcd9"}, []string{"--servers", `"etcd9"`, "strata, etcd34, etcd37"}},
		{[]string{"bench", "qps", "--servers", ""}, []string{"--servers: empty"}},
		{[]string{"bench", "qps", "--v3-peer", "strata"}, []string{"v3 peer", `"strata"`}},
		{[]string{"bench", "qps", "--apis", "v4", "--passes", "0", "--clients", "0"}, []string{`api "v4"`, "clients 0"}},
		{[]string{"bench", "qps", "--passes", "0"}, []string{"--passes 0: must be >= 1"}},
		{[]string{"bench", "qps", "--wrk", "/nonexistent/wrk", "--servers", "etcd34"}, []string{"/nonexistent/wrk", "apt-get install wrk"}},
		{[]string{"bench", "qps", "--duration", "500ms", "--server-cpus", "0", "--load-cpus", "0"}, []string{"--duration 500ms: must be >= 1s", `--server-cpus "0", --load-cpus "0"`, "share CPU 0"}},
		{[]string{"bench", "qps", "--server-cpus", "99"}, []string{`--server-cpus "99"`, "CPU 99 is not available"}},
		{[]string{"bench", "qps", "--format", "yaml"}, []string{`"yaml"`, "table, markdown, json, csv"}},
		{[]string{"bench", "qps", "extra"}, []string{`unexpected argument "extra"`}},
		{[]string{"bench", "qps", "--members", "0"}, []string{"--members 0: must be >= 1"}},
		{[]string{"bench", "qps", "--members", "3", "--apis", "v2,v3", "--via", "middle"}, []string{"api v2 with members 3", `via "middle"`}},
		{[]string{"bench", "qps", "--via", "follower"}, []string{`via "follower" with members 1`}},
		{[]string{"bench", "memory", "--keys", "0", "--key-sizes", "8", "--clients", "0"}, []string{"keys 0", "key size 8", "--clients 0"}},
		{[]string{"bench", "member", "--servers", "etcd34", "--pods", "0", "--catchup-timeout", "0s"}, []string{"--pods 0: must be >= 1", "--catchup-timeout 0s: must be > 0"}},
		{[]string{"bench", "member", "--servers", "strata,etcd34"}, []string{`server "etcd34"`, "strata and etcd37 only"}},
		{[]string{"bench", "memory", "--etcd", "/nonexistent/etcd"}, []string{"/nonexistent/etcd", "etcd-server"}},
		{[]string{"bench", "memory", "--servers", "strata,floor"}, []string{"--servers floor", "`strata bench watch` only"}},
		{[]string{"bench", "qps", "--servers", "floor", "--floor", "/nonexistent/floor"}, []string{"/nonexistent/floor", "./internal/bench/floor"}},
		{[]string{"bench", "qps", "--servers", "floor", "--members", "3"}, []string{"server floor with members 3"}},
		{[]string{"bench", "kube", "--members", "2", "--passes", "0", "--kill-leader-at", "-1s"}, []string{"members 2: allowed are 1", "passes 0: must be >= 1", "kill leader at -1s"}},
		{[]string{"bench", "kube", "--members", "3", "--servers", "strata,etcd34"}, []string{"server etcd34 with members 3", "strata and etcd37 only"}},
		{[]string{"bench", "kube", "--members", "3", "--endpoint", "127.0.0.1:1,127.0.0.1:2"}, []string{"--endpoint with --members"}},
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
