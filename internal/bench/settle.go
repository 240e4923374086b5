package bench

import (
	"context"
	"time"
)

// A run leaves work behind it: a store flushes and compacts what the
// writes put in its memtables, a raft log truncates, a collector runs.
// Read at the moment the load ends, a write row's CPU would miss that
// work and the next row (reads, say) would be charged for it. So each
// run starts on quiet members and its CPU is counted until they are
// quiet again.
const (
	// quietWindow and quietShare define quiet: the members together used
	// less than quietShare of one CPU over quietWindow (their heartbeats
	// cost well under 1%).
	quietWindow = 500 * time.Millisecond
	quietShare  = 0.05
	// settleLimit bounds the wait; a cluster still busy then is
	// reported as such (Quiet false) with the CPU counted so far.
	settleLimit = 20 * time.Second
)

// settled is what settle found.
type settled struct {
	// CPU is the members' CPU times, in seconds, when they were quiet
	// (or when the wait ended).
	CPU []float64
	// Waited is the time from the call until then.
	Waited time.Duration
	// Quiet says the members went quiet within the limit.
	Quiet bool
}

// settle reads the members' CPU times (cpu) every window until in one
// window they used less than quietShare of a CPU, summed, or limit has
// passed.
func settle(ctx context.Context, cpu func() ([]float64, error), window, limit time.Duration) (settled, error) {
	start := time.Now()
	prev, err := cpu()
	if err != nil {
		return settled{}, err
	}
	quiet := quietShare * window.Seconds()
	tick := time.NewTicker(window)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return settled{}, ctx.Err()
		case <-tick.C:
		}
		now, err := cpu()
		if err != nil {
			return settled{}, err
		}
		used := 0.0
		for i := range now {
			used += now[i] - prev[i]
		}
		waited := time.Since(start)
		if used < quiet || waited >= limit {
			return settled{CPU: now, Waited: waited, Quiet: used < quiet}, nil
		}
		prev = now
	}
}
