package bench_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/stratadb/strata/internal/admin"
	"github.com/stratadb/strata/internal/bench"
)

// TestBenchMember runs `strata bench member` end to end on 400 pods, with
// a raft snapshot every 100 entries: a 3-member Strata cluster (and an
// etcd 3.7 one where it builds) loaded, a 4th member added and started
// joining. The command fails unless the new member, through a client of it
// alone, answers the last key written before the add and every pod, and
// its applied index reaches the leader's; the table must then say it
// received a snapshot, of at least the pods' size, before it served.
func TestBenchMember(t *testing.T) {
	var p bench.Programs
	if !selfAsStrata(t, &p) {
		t.Skip("this build has no `strata serve`")
	}
	const pods = 400
	args := []string{"bench", "member", "--pods", "400", "--clients", "8", "--conns", "2", "--snapshot-entries", "100",
		"--catchup-timeout", "2m", "--format", "json", "--runs", "--dir", t.TempDir(), "--servers", "strata"}
	etcd37 := os.Getenv("STRATA_ETCD37")
	if etcd37 == "" {
		var err error
		if etcd37, err = bench.BuildEtcd37(context.Background(), t.TempDir()); err != nil {
			t.Logf("etcd 3.7 not measured: ./internal/bench/etcd37 cannot be built here: %v; or set STRATA_ETCD37 to a binary built from it", err)
			etcd37 = ""
		}
	}
	want := []string{string(bench.KindStrata)}
	if etcd37 != "" {
		args[len(args)-1] += ",etcd37"
		args = append(args, "--etcd37", etcd37)
		want = append(want, string(bench.KindEtcd37))
	}
	// The command starts this test binary as `strata serve` (TestMain).
	t.Setenv(asStrata, "1")
	root := admin.NewRootCommand()
	var out, progress bytes.Buffer
	root.SetArgs(args)
	root.SetOut(&out)
	root.SetErr(&progress)
	if err := root.Execute(); err != nil {
		t.Fatalf("strata %s: %v\nprogress:\n%s", strings.Join(args, " "), err, progress.String())
	}
	dec := json.NewDecoder(&out)
	var catchUp, cost, runs []map[string]any
	for _, into := range []*[]map[string]any{&catchUp, &cost, &runs} {
		if err := dec.Decode(into); err != nil {
			t.Fatalf("the output is not three JSON tables: %v\n%s", err, out.String())
		}
	}
	if len(catchUp) != len(want) || len(runs) != len(want) {
		t.Fatalf("%d rows, %d runs; want one per server of %v:\n%v\n%v", len(catchUp), len(runs), want, catchUp, runs)
	}
	minMB := float64(pods) * 10_000 / (1 << 20)
	for i, row := range catchUp {
		if !strings.Contains(strings.ToLower(row["server"].(string)), strings.TrimSuffix(want[i], "37")) {
			t.Errorf("row %d is %v, want server %s", i, row["server"], want[i])
		}
		if row["received"] != "snapshot" {
			t.Errorf("%v: the new member received %v, want a snapshot (log truncated every 100 entries)", row["server"], row["received"])
		}
		if v, _ := row["data_mb"].(float64); v < minMB {
			t.Errorf("%v: data_mb = %v, want >= %.1f (%d pods of 10 KB or more)", row["server"], row["data_mb"], minMB, pods)
		}
		// Strata's snapshot holds the values as stored: compressed
		// against a dictionary, about 8x; 1 KB a pod at least.
		if v, _ := row["snapshot_mb"].(float64); v < minMB/10 {
			t.Errorf("%v: snapshot_mb = %v, want >= %.1f (%d pods, 1 KB or more compressed)", row["server"], row["snapshot_mb"], minMB/10, pods)
		}
		for _, col := range []string{"serves_after_s", "applied_after_s", "catch_up_mb_s", "snapshot_in_after_s"} {
			if v, _ := row[col].(float64); v <= 0 {
				t.Errorf("%v: %s = %v, want > 0", row["server"], col, row[col])
			}
		}
		// The snapshot is logged received before the member serves, give or
		// take the 50 ms between two reads of its log.
		in, _ := row["snapshot_in_after_s"].(float64)
		serves, _ := row["serves_after_s"].(float64)
		if in > serves+0.1 {
			t.Errorf("%v: snapshot received after %.2f s, but the member served after %.2f s", row["server"], in, serves)
		}
		if v, _ := cost[i]["new_member_cpu_s"].(float64); v <= 0 {
			t.Errorf("%v: new member CPU %v, want > 0", row["server"], cost[i]["new_member_cpu_s"])
		}
	}
	t.Logf("%v\n%v\nprogress:\n%s", catchUp, cost, progress.String())
}
