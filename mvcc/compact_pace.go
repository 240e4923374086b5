package mvcc

import (
	"sync/atomic"
	"time"
)

// A compaction the server's apply path hands off (Entry.Compact) is
// background work, and on a server with one CPU its own CPU is what the
// puts of those seconds lose: at 1.1 million pods, the walk of the key
// index and the writing of a million tombstones into tables took the
// second a compaction came down to half its puts. So a background
// compaction rests between pieces of its work, as the engine's
// compactions do (internal/pebbleconf's pacer) and as etcd's does
// (--compaction-sleep-interval, 10 ms between batches of 1,000
// revisions): after each compactSlice of work, three times as long. A
// compaction a caller waits for (Store.Compact) does not rest, nor one
// that Close waits for; one Open resumes runs in the background and does.
const (
	// compactDuty is the share of its wall time a background
	// compaction's own work runs.
	compactDuty = 0.25
	// compactSlice is how long it works between rests.
	compactSlice = 5 * time.Millisecond
)

// compactPace rests a background compaction; nil never rests.
type compactPace struct {
	// sleep rests; tests replace it.
	sleep func(time.Duration)
	// closing is set once the store is closing: no more rests.
	closing *atomic.Bool
	// since is when the work since the last rest began.
	since time.Time
	// rested is the time spent resting, for the compaction's log line.
	rested time.Duration
}

func newCompactPace(sleep func(time.Duration), closing *atomic.Bool) *compactPace {
	if sleep == nil {
		sleep = time.Sleep
	}
	return &compactPace{sleep: sleep, closing: closing, since: time.Now()}
}

// point is called between pieces of work, holding no lock: once the work
// since the last rest reaches compactSlice, it rests.
func (p *compactPace) point() {
	if p == nil {
		return
	}
	ran := time.Since(p.since)
	if ran < compactSlice || p.closing.Load() {
		return
	}
	d := time.Duration(float64(ran) * (1/compactDuty - 1))
	p.sleep(d)
	p.rested += d
	p.since = time.Now()
}
