package bench

import (
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestQPSDefaultsAndRows(t *testing.T) {
	o := QPSOptions{}
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	rows := o.rows()
	if len(rows) != 24 {
		t.Fatalf("%d rows, want 24 (2 APIs x 2 ops x 2 sizes x 3 client counts)", len(rows))
	}
	if rows[0] != (QPSRow{APIV2, OpRead, 64, 1, 1, ""}) || rows[23] != (QPSRow{APIV3, OpWrite, 256, 256, 1, ""}) {
		t.Errorf("first %v, last %v", rows[0], rows[23])
	}
	for _, r := range rows {
		if r.API == APIV2 {
			if _, ok := etcd21[seedKey{r.Op, r.ValueSize, r.Clients}]; !ok {
				t.Errorf("no 2015 figure for %v", r)
			}
		}
	}
	if got := o.targets(APIV2); !slices.Equal(got, []Kind{KindStrata, KindEtcd34}) {
		t.Errorf("v2 targets %v", got)
	}
	if got := o.targets(APIV3); !slices.Equal(got, []Kind{KindStrata, KindEtcd37}) {
		t.Errorf("v3 targets %v", got)
	}
	// etcd alone: no v3 rows without its peer selected.
	o = QPSOptions{Servers: []Kind{KindEtcd34}}
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	if n := len(o.rows()); n != 12 {
		t.Errorf("etcd34 alone: %d rows, want the 12 v2 rows", n)
	}
}

func TestQPSValidate(t *testing.T) {
	o := QPSOptions{APIs: []string{"v4"}, Ops: []string{"scan"}, ValueSizes: []int{0}, Clients: []int{0, 512}, Passes: -1, Requests: 100, V3Peer: KindStrata, RunTimeout: -time.Second, Duration: 1500 * time.Millisecond}
	err := o.Validate()
	if !errors.Is(err, ErrOptions) {
		t.Fatalf("err = %v", err)
	}
	for _, want := range []string{`api "v4"`, `op "scan"`, "value size 0", "clients 0", "requests 100: must be >= clients (512)", `v3 peer "strata"`, "passes -1", "run timeout -1s", "duration 1.5s"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
}

// TestQPSClusterRows checks the rows and defaults of the three-member
// table and what it refuses.
func TestQPSClusterRows(t *testing.T) {
	o := QPSOptions{Members: 3, ValueSizes: []int{256}, Clients: []int{64, 256}}
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	rows := o.rows()
	if len(rows) != 12 {
		t.Fatalf("%d rows, want 12 (3 ops x 2 client counts x leader and follower): %v", len(rows), rows)
	}
	if rows[0] != (QPSRow{APIV3, OpWrite, 256, 64, 3, ViaLeader}) || rows[1] != (QPSRow{APIV3, OpWrite, 256, 64, 3, ViaFollower}) ||
		rows[11] != (QPSRow{APIV3, OpReadSerializable, 256, 256, 3, ViaFollower}) {
		t.Errorf("rows %v", rows)
	}
	if got := o.targets(APIV3); !slices.Equal(got, []Kind{KindStrata, KindEtcd37}) {
		t.Errorf("v3 targets %v", got)
	}
	if g := goalCPU(rows[4]); g != GoalCPUCluster {
		t.Errorf("goal of %v: %v", rows[4], g)
	}
	// The v2 rows leave the serializable read out.
	o = QPSOptions{Ops: []string{OpReadSerializable, OpRead}, ValueSizes: []int{64}, Clients: []int{1}}
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	if got := o.rows(); len(got) != 3 || got[0] != (QPSRow{APIV2, OpRead, 64, 1, 1, ""}) {
		t.Errorf("rows %v, want v2 read, v3 read-serializable, v3 read", got)
	}

	o = QPSOptions{Members: 2, APIs: []string{APIV2, APIV3}, V3Peer: KindEtcd34, Via: []string{"middle"}}
	err := o.Validate()
	for _, want := range []string{"members 2: allowed are 1", "api v2 with members 2", `v3 peer "etcd34" with members 2`, `via "middle"`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not say %q", err, want)
		}
	}
	o = QPSOptions{Via: []string{ViaLeader}}
	if err := o.Validate(); err == nil || !strings.Contains(err.Error(), `via "leader" with members 1`) {
		t.Errorf("via without a cluster: %v", err)
	}
}

func TestRotate(t *testing.T) {
	ks := []Kind{KindStrata, KindEtcd34}
	if got := rotate(ks, 1); !slices.Equal(got, []Kind{KindEtcd34, KindStrata}) {
		t.Errorf("rotate 1: %v", got)
	}
	if got := rotate(ks, 2); !slices.Equal(got, ks) {
		t.Errorf("rotate 2: %v", got)
	}
	if ks[0] != KindStrata {
		t.Error("rotate changed its input")
	}
}

func TestGoal(t *testing.T) {
	for _, c := range []struct {
		row    QPSRow
		qr, cr float64
		want   string
	}{
		{QPSRow{APIV2, OpRead, 64, 1, 1, ""}, 1, 0.8, "met"},
		{QPSRow{APIV2, OpWrite, 64, 64, 1, ""}, 0.9, 0.81, "no: QPS < 1.0x, CPU > 0.8x"},
		{QPSRow{APIV3, OpRead, 64, 64, 1, ""}, 2, 0.41, "no: CPU > 0.4x"},
		{QPSRow{APIV3, OpWrite, 64, 256, 1, ""}, 1.5, 0.5, "met"},
		{QPSRow{APIV3, OpWrite, 64, 256, 1, ""}, 1.5, 0.51, "no: CPU > 0.5x"},
		{QPSRow{APIV3, OpWrite, 64, 256, 1, ""}, math.NaN(), math.NaN(), ""},
		{QPSRow{APIV3, OpWrite, 256, 64, 3, ViaFollower}, 1.2, 0.8, "met"},
		{QPSRow{APIV3, OpWrite, 256, 64, 3, ViaFollower}, 1.1, 0.8, "no: QPS < 1.2x"},
		{QPSRow{APIV3, OpReadSerializable, 256, 64, 3, ViaLeader}, 1.2, 0.81, "no: CPU > 0.8x"},
	} {
		if got := goal(c.row, c.qr, c.cr); got != c.want {
			t.Errorf("goal(%v, %v, %v) = %q, want %q", c.row, c.qr, c.cr, got, c.want)
		}
	}
}

// TestQPSTable checks medians and ratios from made-up samples.
func TestQPSTable(t *testing.T) {
	o := QPSOptions{Servers: []Kind{KindStrata, KindEtcd34}, APIs: []string{APIV2}, Ops: []string{OpRead}, ValueSizes: []int{64}, Clients: []int{64}, Passes: 3}
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	row := o.rows()[0]
	res := &QPSResult{Options: o, Rows: o.rows(), Names: map[Kind]string{KindStrata: "Strata", KindEtcd34: "etcd 3.4.23"}}
	for p, q := range []float64{300, 100, 200} {
		res.Samples = append(res.Samples,
			QPSSample{Pass: p, Row: row, Kind: KindStrata, Result: Result{QPS: q, P90: 2 * time.Millisecond, P99: 3 * time.Millisecond, LoadCPUSeconds: 0.5}, Requests: 1000, CPUSeconds: 1},
			QPSSample{Pass: p, Row: row, Kind: KindEtcd34, Result: Result{QPS: q / 4, P90: 4 * time.Millisecond, P99: 8 * time.Millisecond, Errors: 1, LoadCPUSeconds: 1.5}, Requests: 1000, CPUSeconds: 2})
	}
	tab := res.Table()
	got := tab.Rows[0]
	want := []any{"v2", "read", 64, 64, 200.0, "etcd 3.4.23", 50.0, 4.0, 2.0, 4.0, 3.0, 8.0, 1.0, 2.0, 0.5, 1.0, "met", 10125.0, 9.1, 3}
	if len(got) != len(want) {
		t.Fatalf("row %v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("column %s = %v, want %v", tab.Columns[i].Name, got[i], want[i])
		}
	}
	var b strings.Builder
	if err := tab.Render(&b, "markdown"); err != nil {
		t.Fatal(err)
	}
	if err := res.RunsTable().Render(&b, "csv"); err != nil {
		t.Fatal(err)
	}
}
