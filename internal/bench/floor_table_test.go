package bench

import (
	"strings"
	"testing"
)

// TestFloorTable checks the floor's shares and the room under each goal
// from made-up samples: a floor at 0.5x of etcd's CPU leaves no room
// under a v3 read goal of 0.4x.
func TestFloorTable(t *testing.T) {
	o := QPSOptions{Servers: []Kind{KindStrata, KindEtcd37, KindFloor}, APIs: []string{APIV3}, Ops: []string{OpRead, OpWrite}, ValueSizes: []int{256}, Clients: []int{64}, Passes: 1}
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	res := &QPSResult{Options: o, Rows: o.rows(), Names: map[Kind]string{KindStrata: "Strata", KindEtcd37: "etcd 3.7.3", KindFloor: "transport floor"}}
	for _, row := range res.Rows {
		for k, cpu := range map[Kind]float64{KindStrata: 0.8, KindEtcd37: 1.0, KindFloor: 0.5} {
			if row.Op == OpWrite && k == KindFloor {
				cpu = 0.25
			}
			res.Samples = append(res.Samples, QPSSample{Row: row, Kind: k, Requests: 1000, CPUSeconds: cpu, Result: Result{QPS: 1}})
		}
	}
	tab := res.FloorTable()
	want := [][]any{
		{"v3", "read", 256, 64, 1.0, 0.5, 0.8, "etcd 3.7.3", 1.0, 0.5, 0.625, 0.4, "none: floor is 0.50x", 0},
		{"v3", "write", 256, 64, 1.0, 0.25, 0.8, "etcd 3.7.3", 1.0, 0.25, 0.3125, 0.5, "0.25x", 0},
	}
	for i, w := range want {
		got := tab.Rows[i]
		if len(got) != len(w) {
			t.Fatalf("row %d: %v", i, got)
		}
		for j := range w {
			if got[j] != w[j] {
				t.Errorf("row %d, %s = %v, want %v", i, tab.Columns[j].Name, got[j], w[j])
			}
		}
	}
	if (&QPSResult{Options: QPSOptions{Servers: []Kind{KindStrata}}}).FloorTable() != nil {
		t.Error("a floor table without the floor")
	}
	o = QPSOptions{Servers: []Kind{KindStrata, KindEtcd37, KindFloor}, Members: 3}
	if err := o.Validate(); err == nil || !strings.Contains(err.Error(), "server floor with members 3") {
		t.Errorf("floor in a cluster: %v", err)
	}
}
