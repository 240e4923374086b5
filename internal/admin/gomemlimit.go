package admin

import (
	"context"
	"fmt"
	"math"
	"os"
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
	m := readGoMemory(samples)
	limit := m.limit()
	debug.SetMemoryLimit(limit)
	var gc gcPercentSetter
	if _, set := os.LookupEnv("GOGC"); !set {
		gc.set = debug.SetGCPercent
	}
	gc.follow(m)
	go func() {
		t := time.NewTicker(goMemoryLimitEvery)
		defer t.Stop()
		var idle idleReturn
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				m := readGoMemory(samples)
				if idle.tick(m.allocs, m.surplus()) {
					debug.FreeOSMemory()
					m = readGoMemory(samples)
				}
				debug.SetMemoryLimit(m.limit())
				gc.follow(m)
			}
		}
	}()
	return limit
}

// minGCHeadroomBytes is the least the heap may grow between two
// collections under the automatic limit. GOGC=100 lets a heap grow by its
// live size: a cluster member whose live heap is 5 MB (a small store)
// collects every 5 MB allocated, which under linearizable reads (about
// 6 KB allocated per read) was 28 collections a second and a sixth of the
// member's CPU. With 32 MB it collects a seventh as often; 16 MB left
// 10-26% more CPU per read than 32 (docs/data/gc-headroom.md). A live heap
// of 32 MB or more keeps GOGC=100. The members of `strata bench kube
// --members 3` hold 29 MB after 80,000 pods, a heap goal of 61 MB against
// GOGC=100's 58; at 20,000 pods 20 MB, 52 MB against 40, 18 MB more RSS
// each while busy. The idle return gives the headroom back once the
// requests stop.
const minGCHeadroomBytes = 32 << 20

// gcPercentSetter sets GOGC so that the heap may grow by at least
// minGCHeadroomBytes between collections. set is nil when the user's GOGC
// environment variable decides instead.
type gcPercentSetter struct {
	set  func(int) int
	last int
}

// follow sets GOGC for the live heap in m when it changed.
func (g *gcPercentSetter) follow(m goMemory) {
	if g.set == nil {
		return
	}
	if p := gcPercentFor(m.live); p != g.last {
		g.set(p)
		g.last = p
	}
}

// gcPercentFor returns the GOGC that lets a live heap of live bytes grow
// by minGCHeadroomBytes, and at least 100, GOGC's default. A live heap
// below 1 MB (before the first collection the runtime reports 0) counts
// as 1 MB, so the percentage stays finite.
func gcPercentFor(live uint64) int {
	const minLive = 1 << 20
	if live < minLive {
		live = minLive
	}
	p := uint64(minGCHeadroomBytes) * 100 / live
	if p < 100 {
		return 100
	}
	return int(p)
}

// Returning memory when the server goes idle. The limit bounds the heap
// while it is busy; once the requests stop, the heap still holds the
// garbage of the last burst (nothing allocates, so nothing triggers a
// collection) and the runtime returns free pages only slowly. When a tick
// of goMemoryLimitEvery allocated less than goMemoryIdleAllocBytes after a
// busy one, and the heap holds at least goMemoryIdleMinGainBytes more than
// its live bytes, the server collects once and returns the free pages
// (debug.FreeOSMemory): one full collection per busy-to-idle change, cheap
// even for a large key index, whose arenas hold no pointers for the
// collector to scan. (glibc's malloc_trim for the C heap, where cgo builds of Pebble
// keep memtables and cache, was tried too: it returned nothing measurable,
// as that memory is in use.)
const (
	goMemoryIdleAllocBytes   = 256 << 10
	goMemoryIdleMinGainBytes = 4 << 20
)

// idleReturn decides when to return memory: once per change from busy to
// idle.
type idleReturn struct {
	lastAllocs uint64
	// returned is set once memory was returned in this idle period.
	returned bool
}

// tick takes the bytes allocated since the program started and the heap's
// bytes beyond the live ones, once per goMemoryLimitEvery, and reports
// whether to return memory now.
func (r *idleReturn) tick(allocs, surplus uint64) bool {
	busy := allocs-r.lastAllocs >= goMemoryIdleAllocBytes
	r.lastAllocs = allocs
	if busy {
		r.returned = false
		return false
	}
	if r.returned || surplus < goMemoryIdleMinGainBytes {
		return false
	}
	r.returned = true
	return true
}

// The runtime/metrics the automatic limit reads, in goMemorySamples' order.
const (
	metricLive     = "/gc/heap/live:bytes"
	metricTotal    = "/memory/classes/total:bytes"
	metricObjects  = "/memory/classes/heap/objects:bytes"
	metricUnused   = "/memory/classes/heap/unused:bytes"
	metricFree     = "/memory/classes/heap/free:bytes"
	metricReleased = "/memory/classes/heap/released:bytes"
	metricAllocs   = "/gc/heap/allocs:bytes"
)

// goMemorySamples returns the samples readGoMemory reads.
func goMemorySamples() []metrics.Sample {
	names := []string{metricLive, metricTotal, metricObjects, metricUnused, metricFree, metricReleased, metricAllocs}
	samples := make([]metrics.Sample, len(names))
	for i, n := range names {
		samples[i].Name = n
	}
	return samples
}

// goMemory is what the automatic limit knows of the Go runtime's memory.
type goMemory struct {
	// live is the live heap after the last collection; total all memory
	// the runtime mapped; heap the heap's part of it, released or not;
	// resident the heap's part not released to the OS; allocs the bytes
	// allocated since the program started.
	live, total, heap, resident, allocs uint64
}

func readGoMemory(samples []metrics.Sample) goMemory {
	metrics.Read(samples)
	v := make([]uint64, len(samples))
	for i, s := range samples {
		if s.Value.Kind() == metrics.KindUint64 {
			v[i] = s.Value.Uint64()
		}
	}
	return goMemory{live: v[0], total: v[1], heap: v[2] + v[3] + v[4] + v[5], resident: v[2] + v[3] + v[4], allocs: v[6]}
}

// surplus is the heap memory not released to the OS beyond the live heap:
// garbage not yet collected and free pages.
func (m goMemory) surplus() uint64 {
	if m.resident > m.live {
		return m.resident - m.live
	}
	return 0
}

// limit is the automatic limit: the runtime's memory outside the heap
// (stacks, GC metadata, ...) plus the live heap plus a quarter of it plus
// config.AutoGoMemoryLimitSlackMB.
func (m goMemory) limit() int64 {
	var outside uint64
	if m.total > m.heap {
		outside = m.total - m.heap
	}
	want := outside + m.live + m.live/4 + config.AutoGoMemoryLimitSlackMB<<20
	if want > math.MaxInt64 {
		want = math.MaxInt64
	}
	return int64(want)
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
