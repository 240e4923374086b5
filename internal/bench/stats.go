package bench

import (
	"math"
	"time"
)

// percentile returns the p-th percentile (0 < p <= 100) of sorted by the
// nearest-rank method: the smallest value with at least p% of the values
// at or below it, as hey computes its latency distribution. It returns 0
// for no values.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	rank = min(max(rank, 1), len(sorted))
	return sorted[rank-1]
}

// ratio is a/b, or NaN when either is missing (NaN) or b is 0.
func ratio(a, b float64) float64 {
	if math.IsNaN(a) || math.IsNaN(b) || b == 0 {
		return math.NaN()
	}
	return a / b
}

// cell turns NaN (a missing measurement) into nil, an empty table cell.
func cell(x float64) any {
	if math.IsNaN(x) {
		return nil
	}
	return x
}
