package pebbleconf

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// Compaction pacing. A compaction runs at full speed on one goroutine, and
// on a server with one CPU it takes half of it from the requests for as
// long as it runs: after an etcd compaction, the rewrite of the bottom
// level over the dropped history took about a fifth of the server's CPU
// for 6 s, and the put p99 of those seconds rose by a quarter
// (docs/mvcc-compaction.md). That work is not urgent while the engine keeps up with
// the writes, so a compaction then runs at most pacerDuty of the time: it
// rests in Pebble's own hook for pacing (CompactionGrantHandle.
// CumulativeStats, which the compaction loop calls every 128 keys), and
// takes longer at a lower intensity. RocksDB's rate_limiter paces the
// bytes compactions write for the same reason; here the measure is time,
// since on one CPU time is what the requests lose.
//
// A compaction a caller waits for (engine.DB.CompactAll and Compact, a
// tool's full compaction) is not background work: Hurry lifts the pacing
// while it runs.
//
// Once a compaction the engine needs (not an optional one: Pebble's
// WaitingCompaction) waits for a slot, the engine is behind and no
// compaction rests until that passes, so pacing never lets L0 grow into a
// write stall. Flushes and blob file rewrites are not paced (Pebble gives
// neither a hook in its loop).
const (
	// pacerDuty is the share of its wall time a compaction runs while the
	// engine is not behind.
	pacerDuty = 0.25
	// pacerSlice is how long a compaction runs between rests.
	pacerSlice = 5 * time.Millisecond
	// pacerPoll is how often the scheduler samples whether the engine is
	// behind, and re-reads how many compactions may run (as Pebble's
	// default scheduler does).
	pacerPoll = 100 * time.Millisecond
)

// compactionPacer is Strata's pebble.CompactionScheduler. It admits as many
// compactions at once as Pebble allows (DBForCompaction.
// GetAllowedWithoutPermission, which follows CompactionConcurrencyRange),
// as Pebble's default ConcurrencyLimitScheduler does (Pebble exports no
// constructor of that one for a real DB), and paces each one it admits.
type compactionPacer struct {
	// sleep rests a compaction; tests replace it.
	sleep func(time.Duration)

	db pebble.DBForCompaction
	// behind is set while a compaction the engine needs waits for a slot.
	behind atomic.Bool
	// hurried counts the callers that asked for no pacing (Hurry).
	hurried atomic.Int64
	// rests counts the rests taken (Rests).
	rests atomic.Int64

	mu           sync.Mutex
	running      int
	unregistered bool
	// granting serializes grants from Done and the poll loop; Unregister
	// waits for it to end (as in Pebble's scheduler).
	granting     bool
	grantingDone *sync.Cond

	poke, stop, stopped chan struct{}
}

var _ pebble.CompactionScheduler = (*compactionPacer)(nil)

func newCompactionPacer() *compactionPacer {
	p := &compactionPacer{sleep: time.Sleep,
		poke: make(chan struct{}, 1), stop: make(chan struct{}), stopped: make(chan struct{})}
	p.grantingDone = sync.NewCond(&p.mu)
	return p
}

// Register starts the poll loop (pebble.CompactionScheduler).
func (p *compactionPacer) Register(_ int, db pebble.DBForCompaction) {
	p.db = db
	go p.poll()
}

// Unregister stops granting; Pebble calls it once, at Close.
func (p *compactionPacer) Unregister() {
	if p.db != nil { // the poll loop runs from Register on
		close(p.stop)
		<-p.stopped
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.unregistered = true
	for p.granting {
		p.grantingDone.Wait()
	}
}

// TrySchedule admits a compaction the DB wants to run if a slot is free.
func (p *compactionPacer) TrySchedule() (bool, pebble.CompactionGrantHandle) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.unregistered || p.db.GetAllowedWithoutPermission() <= p.running {
		return false, nil
	}
	p.running++
	return true, &pacedGrant{p: p}
}

// UpdateGetAllowedWithoutPermission tells the poll loop that more
// compactions may be allowed (a flush ended).
func (p *compactionPacer) UpdateGetAllowedWithoutPermission() {
	select {
	case p.poke <- struct{}{}:
	default:
	}
}

func (p *compactionPacer) poll() {
	defer close(p.stopped)
	t := time.NewTicker(pacerPoll)
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-t.C:
		case <-p.poke:
		}
		p.sample()
		p.grant()
	}
}

// sample sets behind: whether every slot is taken and a compaction the
// engine needs is waiting for one.
func (p *compactionPacer) sample() {
	p.mu.Lock()
	full := p.running > 0 && p.db.GetAllowedWithoutPermission() <= p.running
	p.mu.Unlock()
	if !full {
		p.behind.Store(false)
		return
	}
	// Asking costs Pebble a pick, which it keeps until the compaction
	// runs (and only while every slot is taken can one wait).
	waiting, wc := p.db.GetWaitingCompaction()
	p.behind.Store(waiting && !wc.Optional)
}

// grant starts waiting compactions while slots are free, as Pebble's
// ConcurrencyLimitScheduler does: GetWaitingCompaction is asked only
// when a slot is free, so that no pick is wasted.
func (p *compactionPacer) grant() {
	p.mu.Lock()
	for p.granting {
		p.grantingDone.Wait()
	}
	free := p.db.GetAllowedWithoutPermission() - p.running
	if p.unregistered || free <= 0 {
		p.mu.Unlock()
		return
	}
	p.granting = true
	p.mu.Unlock()
	for ; free > 0; free-- {
		if waiting, _ := p.db.GetWaitingCompaction(); !waiting {
			break
		}
		g := &pacedGrant{p: p}
		p.mu.Lock()
		p.running++ // before Schedule, whose compaction may end at once
		p.mu.Unlock()
		if !p.db.Schedule(g) {
			p.mu.Lock()
			p.running--
			p.mu.Unlock()
			break
		}
	}
	p.mu.Lock()
	p.granting = false
	p.grantingDone.Broadcast()
	p.mu.Unlock()
}

// pacedGrant is one admitted compaction (pebble.CompactionGrantHandle).
type pacedGrant struct {
	p *compactionPacer
	// since is when the compaction last started running after a rest;
	// only the compaction's own goroutine reads and writes it.
	since time.Time
}

// Started is called on the compaction's goroutine as it begins.
func (g *pacedGrant) Started() { g.since = time.Now() }

// MeasureCPU is Pebble's CPU accounting hook, unused.
func (g *pacedGrant) MeasureCPU(pebble.CompactionGoroutineKind) {}

// CumulativeStats is called by the compaction loop every 128 keys: after
// each slice of running it rests, unless the engine is behind.
func (g *pacedGrant) CumulativeStats(pebble.CompactionGrantHandleStats) {
	ran := time.Since(g.since)
	if ran < pacerSlice {
		return
	}
	if !g.p.behind.Load() && g.p.hurried.Load() == 0 {
		g.p.rests.Add(1)
		g.p.sleep(time.Duration(float64(ran) * (1/pacerDuty - 1)))
	}
	g.since = time.Now()
}

// Done frees the compaction's slot and starts a waiting one.
func (g *pacedGrant) Done() {
	g.p.mu.Lock()
	g.p.running--
	g.p.mu.Unlock()
	g.p.grant()
}

// Hurry lifts the pacing of the compactions of the DB opened with opts
// until done is called: for a compaction its caller waits for. With
// options not made by Options, it does nothing.
func Hurry(opts *pebble.Options) (done func()) {
	p, ok := opts.Experimental.CompactionScheduler.(*compactionPacer)
	if !ok {
		return func() {}
	}
	p.hurried.Add(1)
	var once sync.Once
	return func() { once.Do(func() { p.hurried.Add(-1) }) }
}

// Rests returns how many rests the compactions of the DB opened with
// opts took (0 with options not made by Options): what tests read.
func Rests(opts *pebble.Options) int64 {
	if p, ok := opts.Experimental.CompactionScheduler.(*compactionPacer); ok {
		return p.rests.Load()
	}
	return 0
}
