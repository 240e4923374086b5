package admin

import (
	"context"
	"fmt"
	"math"
	"runtime/debug"
	"runtime/metrics"
	"time"

	"github.com/stratadb/strata/config"
)

// goMemoryLimitEvery is how often the automatic Go memory limit follows the
// live heap: often enough that a load cannot outgrow the limit by much
// between two settings (and if it does, the runtime caps the collector's
// CPU at half), rarely enough to cost nothing.
const goMemoryLimitEvery = 500 * time.Millisecond

// applyGoMemoryLimit sets the Go runtime's soft memory limit from
// [server] go_memory_limit_mb (see config.ServerConfig.GoMemoryLimitMB):
// a fixed limit for N > 0, nothing for -1, and for 0 a limit that follows
// the live heap until ctx ends. It returns the limit it set first, in
// bytes (0 when it set none), so that serve can print it.
func applyGoMemoryLimit(ctx context.Context, s config.ServerConfig) int64 {
	switch {
	case s.GoMemoryLimitMB < 0:
		return 0
	case s.GoMemoryLimitMB > 0:
		limit := s.GoMemoryLimitMB << 20
		debug.SetMemoryLimit(limit)
		return limit
	}
	samples := goMemorySamples()
	limit := autoGoMemoryLimit(samples)
	debug.SetMemoryLimit(limit)
	go func() {
		t := time.NewTicker(goMemoryLimitEvery)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				debug.SetMemoryLimit(autoGoMemoryLimit(samples))
			}
		}
	}()
	return limit
}

// The runtime/metrics the automatic limit reads, in goMemorySamples' order.
const (
	metricLive     = "/gc/heap/live:bytes"
	metricTotal    = "/memory/classes/total:bytes"
	metricObjects  = "/memory/classes/heap/objects:bytes"
	metricUnused   = "/memory/classes/heap/unused:bytes"
	metricFree     = "/memory/classes/heap/free:bytes"
	metricReleased = "/memory/classes/heap/released:bytes"
)

// goMemorySamples returns the samples autoGoMemoryLimit reads.
func goMemorySamples() []metrics.Sample {
	names := []string{metricLive, metricTotal, metricObjects, metricUnused, metricFree, metricReleased}
	samples := make([]metrics.Sample, len(names))
	for i, n := range names {
		samples[i].Name = n
	}
	return samples
}

// autoGoMemoryLimit reads samples and returns the automatic limit: the
// runtime's memory outside the heap (stacks, GC metadata, ...) plus the
// live heap plus a quarter of it plus config.AutoGoMemoryLimitSlackMB, but
// at least config.AutoGoMemoryLimitFloorMB.
func autoGoMemoryLimit(samples []metrics.Sample) int64 {
	metrics.Read(samples)
	v := make([]uint64, len(samples))
	for i, s := range samples {
		if s.Value.Kind() == metrics.KindUint64 {
			v[i] = s.Value.Uint64()
		}
	}
	live, total := v[0], v[1]
	heap := v[2] + v[3] + v[4] + v[5]
	var outside uint64
	if total > heap {
		outside = total - heap
	}
	want := outside + live + live/4 + config.AutoGoMemoryLimitSlackMB<<20
	if want > math.MaxInt64 {
		want = math.MaxInt64
	}
	return max(int64(want), config.AutoGoMemoryLimitFloorMB<<20)
}

// describeGoMemoryLimit says on serve's startup line which limit
// go_memory_limit_mb = setting set first (applyGoMemoryLimit's result).
func describeGoMemoryLimit(setting, limit int64) string {
	switch {
	case setting < 0:
		return "unchanged"
	case setting == 0:
		return fmt.Sprintf("automatic (%d MB now)", limit>>20)
	}
	return fmt.Sprintf("%d MB", limit>>20)
}
