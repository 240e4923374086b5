package bench

import (
	"math"
	"time"
)

// Result is what one load run measured.
type Result struct {
	// Requests is the number of requests that succeeded.
	Requests int `json:"requests"`
	// Errors counts the requests that failed: transport errors, timeouts
	// and unexpected HTTP statuses.
	Errors int `json:"errors"`
	// Seconds is the wall time of the run.
	Seconds float64 `json:"seconds"`
	// QPS is successful requests per second of wall time.
	QPS float64 `json:"qps"`
	// P90 is the 90th percentile of the latency of the successful
	// requests.
	P90 time.Duration `json:"p90_ns"`
	// P99 is the 99th percentile, likewise.
	P99 time.Duration `json:"p99_ns"`
	// LoadCPUSeconds is the CPU time (user + system) the load tool used:
	// wrk's process, or this process for the v3 generator. On a machine
	// shared by the load tool and the server it bounds what any server
	// could reach: QPS <= cores / (load + server CPU per request).
	LoadCPUSeconds float64 `json:"load_cpu_seconds"`
}

// percentile returns the p-th percentile (0 < p <= 100) of sorted by the
// nearest-rank method: the smallest value with at least p% of the values
// at or below it. It returns 0
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
