package pebbleconf

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stratadb/strata/config"
)

// fakeDB is the DB side of the scheduler: allowed compactions at once, a
// queue of waiting ones, and the grants Schedule was given.
type fakeDB struct {
	mu      sync.Mutex
	allowed int
	waiting []pebble.WaitingCompaction
	granted []pebble.CompactionGrantHandle
}

func (d *fakeDB) GetAllowedWithoutPermission() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.allowed
}

func (d *fakeDB) GetWaitingCompaction() (bool, pebble.WaitingCompaction) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.waiting) == 0 {
		return false, pebble.WaitingCompaction{}
	}
	return true, d.waiting[0]
}

func (d *fakeDB) Schedule(g pebble.CompactionGrantHandle) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.waiting) == 0 {
		return false
	}
	d.waiting = d.waiting[1:]
	d.granted = append(d.granted, g)
	return true
}

// newTestPacer returns a registered pacer whose rests are recorded, not
// slept.
func newTestPacer(t *testing.T, db *fakeDB) (*compactionPacer, *[]time.Duration) {
	p := newCompactionPacer()
	var mu sync.Mutex
	var rests []time.Duration
	p.sleep = func(d time.Duration) {
		mu.Lock()
		rests = append(rests, d)
		mu.Unlock()
	}
	p.Register(1, db)
	t.Cleanup(p.Unregister)
	return p, &rests
}

// TestPacerRestsUnlessBehind: a compaction that ran a slice rests three
// times as long (a quarter of the time running), and not at all while a
// compaction the engine needs waits for its slot; an optional one waiting
// does not count.
func TestPacerRestsUnlessBehind(t *testing.T) {
	db := &fakeDB{allowed: 1}
	p, rests := newTestPacer(t, db)
	ok, h := p.TrySchedule()
	if !ok {
		t.Fatal("TrySchedule refused the first compaction with a slot free")
	}
	g := h.(*pacedGrant)
	g.Started()
	g.CumulativeStats(pebble.CompactionGrantHandleStats{})
	if len(*rests) != 0 {
		t.Fatalf("rested %v before running a slice", *rests)
	}
	run := func(ran time.Duration) {
		g.since = time.Now().Add(-ran)
		g.CumulativeStats(pebble.CompactionGrantHandleStats{})
	}
	run(20 * time.Millisecond)
	if len(*rests) != 1 || (*rests)[0] < 60*time.Millisecond {
		t.Fatalf("after running 20 ms: rests %v, want one of at least 60 ms", *rests)
	}
	// A caller waiting for a compaction lifts the pacing (Hurry).
	opts := &pebble.Options{}
	opts.Experimental.CompactionScheduler = p
	done := Hurry(opts)
	run(20 * time.Millisecond)
	done()
	done() // twice is once
	if len(*rests) != 1 {
		t.Fatalf("rested %v while hurried, want no new rest", (*rests)[1:])
	}
	run(20 * time.Millisecond)
	if len(*rests) != 2 {
		t.Fatalf("rests %v after the hurry ended, want a second rest", *rests)
	}
	for _, tc := range []struct {
		optional bool
		behind   bool
	}{{optional: true, behind: false}, {optional: false, behind: true}} {
		db.mu.Lock()
		db.waiting = []pebble.WaitingCompaction{{Optional: tc.optional}}
		db.mu.Unlock()
		p.sample()
		before := len(*rests)
		run(20 * time.Millisecond)
		if rested := len(*rests) > before; rested == tc.behind {
			t.Errorf("with a compaction waiting (optional %v): rested %v, want %v", tc.optional, rested, !tc.behind)
		}
	}
}

// TestPacerAdmitsAsAllowed: compactions start while the DB allows more,
// and the end of one starts one that waits.
func TestPacerAdmitsAsAllowed(t *testing.T) {
	db := &fakeDB{allowed: 2}
	p, _ := newTestPacer(t, db)
	var grants []pebble.CompactionGrantHandle
	for i := range 3 {
		ok, g := p.TrySchedule()
		if want := i < 2; ok != want {
			t.Fatalf("TrySchedule %d: %v, want %v with %d allowed", i, ok, want, db.allowed)
		}
		if ok {
			grants = append(grants, g)
		}
	}
	db.mu.Lock()
	db.waiting = []pebble.WaitingCompaction{{}}
	db.mu.Unlock()
	grants[0].Done()
	db.mu.Lock()
	started := len(db.granted)
	db.mu.Unlock()
	if started != 1 {
		t.Fatalf("after a compaction ended, %d waiting ones started, want 1", started)
	}
	p.mu.Lock()
	running := p.running
	p.mu.Unlock()
	if running != 2 {
		t.Errorf("running %d, want 2", running)
	}
}

// TestPacerPacesRealCompactions: Pebble opened with the package's options
// admits its compactions through the pacer, which rests in them.
func TestPacerPacesRealCompactions(t *testing.T) {
	cfg := config.Default()
	cfg.DBPath = "db"
	r, err := cfg.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	opts := Options(r)
	defer opts.Cache.Unref()
	if _, ok := opts.Experimental.CompactionScheduler.(*compactionPacer); !ok {
		t.Fatalf("CompactionScheduler is %T, want the pacer", opts.Experimental.CompactionScheduler)
	}
	opts.FS = vfs.NewMem()
	db, err := pebble.Open("db", opts)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	// Written twice, flushed between, so that the compaction merges
	// overlapping tables instead of moving them down.
	value := make([]byte, 100)
	compactTwiceWritten := func() {
		for range 2 {
			for i := range 100_000 {
				if err := db.Set(fmt.Appendf(nil, "key%08d", i), value, pebble.NoSync); err != nil {
					t.Fatal(err)
				}
			}
			if err := db.Flush(); err != nil {
				t.Fatal(err)
			}
		}
		if err := db.Compact(t.Context(), []byte("key"), []byte("kez"), false); err != nil {
			t.Fatal(err)
		}
	}
	compactTwiceWritten()
	rested := Rests(opts)
	if rested == 0 {
		t.Fatal("a compaction of 100,000 keys written twice never rested")
	}
	done := Hurry(opts)
	compactTwiceWritten()
	done()
	if more := Rests(opts) - rested; more != 0 {
		t.Errorf("a hurried compaction rested %d times, want none", more)
	}
}
