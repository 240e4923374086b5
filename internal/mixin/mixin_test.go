package mixin

import (
	"math"
	"strings"
	"testing"
)

func TestMetricsList(t *testing.T) {
	ms := Metrics()
	if len(ms) != 21 {
		t.Fatalf("%d metrics listed, want the 21 of etcd's mixin", len(ms))
	}
	cluster := 0
	for _, m := range ms {
		if !strings.HasPrefix(m.Series, "etcd_") && !strings.HasPrefix(m.Series, "grpc_") && !strings.HasPrefix(m.Series, "process_") {
			t.Errorf("%q: not a metric name", m.Series)
		}
		if m.Where == "" {
			t.Errorf("%s: no source", m.Series)
		}
		if m.ClusterOnly {
			cluster++
		}
	}
	if cluster != 4 {
		t.Errorf("%d peer metrics, want 4", cluster)
	}
}

func TestParse(t *testing.T) {
	s, err := Parse(strings.NewReader(`# TYPE h histogram
h_bucket{To="a",le="0.1"} 2
h_bucket{To="a",le="+Inf"} 3
h_sum{To="a"} 0.5
h_count{To="a"} 3
# TYPE c counter
c{grpc_method="Put",grpc_code="OK"} 7
c{grpc_method="Range",grpc_code="OK"} 1
`))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		series string
		labels []string
		want   float64
	}{
		{"h_count", []string{"To", "a"}, 3},
		{"h_bucket", []string{"le", "0.1"}, 2},
		{"h_bucket", []string{"le", "+Inf"}, 3},
		{"h_sum", nil, 0.5},
		{"c", nil, 8},
		{"c", []string{"grpc_method", "Put"}, 7},
	} {
		if got := s.Sum(tc.series, tc.labels...); got != tc.want {
			t.Errorf("Sum(%s, %v) = %v, want %v", tc.series, tc.labels, got, tc.want)
		}
	}
	if !math.IsNaN(s.Sum("c", "grpc_method", "Txn")) || s.Has("nope") {
		t.Error("a missing series is found")
	}
}
