package tune

// MiB is the "MB" of every size and throughput tune prints: 1 MB = 1 MiB =
// 1,048,576 bytes, the unit of the config's *_mb keys. The THEMIS RocksDB
// tuning guide's table does not say which MB it means; tune says so under every table.
const MiB = 1 << 20

// mib converts bytes to MiB.
func mib(bytes int64) float64 { return float64(bytes) / MiB }

// mibPerSec returns bytes per second in MiB/s; 0 for a zero duration.
func mibPerSec(bytes int64, seconds float64) float64 {
	if seconds <= 0 {
		return 0
	}
	return float64(bytes) / MiB / seconds
}

// collect applies f to each element of runs.
func collect[T any](runs []T, f func(T) float64) []float64 {
	out := make([]float64, len(runs))
	for i, r := range runs {
		out[i] = f(r)
	}
	return out
}
