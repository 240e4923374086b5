// Package stats holds the statistics Strata's measurements share, so that
// tune's tables and the server benchmarks (internal/bench) summarise their
// passes the same way.
package stats

import (
	"math"
	"slices"
)

// Median returns the median of xs, the mean of the middle two for an even
// count, or NaN for none: the figure reported over several passes of a
// noisy, shared machine, where one slow pass must not move it. xs is not
// modified.
func Median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}
