package bench

import (
	"math"
	"testing"
	"time"
)

func TestPercentile(t *testing.T) {
	var ds []time.Duration
	for i := 1; i <= 10; i++ {
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	for _, c := range []struct {
		p    float64
		want time.Duration
	}{{90, 9 * time.Millisecond}, {100, 10 * time.Millisecond}, {50, 5 * time.Millisecond}, {1, time.Millisecond}, {91, 10 * time.Millisecond}} {
		if got := percentile(ds, c.p); got != c.want {
			t.Errorf("p%v = %v, want %v", c.p, got, c.want)
		}
	}
	if percentile(nil, 90) != 0 {
		t.Error("p90 of nothing is not 0")
	}
}

func TestRatioCell(t *testing.T) {
	if ratio(6, 3) != 2 || !math.IsNaN(ratio(1, 0)) || !math.IsNaN(ratio(math.NaN(), 1)) {
		t.Error("ratio")
	}
	if cell(math.NaN()) != nil || cell(1.5) != 1.5 {
		t.Error("cell")
	}
}
