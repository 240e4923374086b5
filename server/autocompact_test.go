package server

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/stratadb/strata/cluster"
	"github.com/stratadb/strata/config"
	"github.com/stratadb/strata/mvcc"
)

// fakeClock is a compactClock the test moves: tick fires the compactor's
// one wait and returns when it waits again, its tick's work done.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
	// waits receives each After of the compactor (one at a time).
	waits   chan fakeWait
	pending *fakeWait // the test goroutine's
}

type fakeWait struct {
	d  time.Duration
	ch chan time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Unix(1e9, 0), waits: make(chan fakeWait, 1)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) After(d time.Duration) <-chan time.Time {
	ch := make(chan time.Time, 1)
	c.waits <- fakeWait{d, ch}
	return ch
}

// next returns the wait the compactor is blocked in.
func (c *fakeClock) next(t *testing.T) fakeWait {
	t.Helper()
	if c.pending != nil {
		w := *c.pending
		c.pending = nil
		return w
	}
	select {
	case w := <-c.waits:
		return w
	case <-time.After(10 * time.Second):
		t.Fatal("the compactor does not wait on its clock")
		return fakeWait{}
	}
}

// tick moves the clock to the end of the compactor's wait, which must be
// of d, and returns once the compactor waits again.
func (c *fakeClock) tick(t *testing.T, d time.Duration) {
	t.Helper()
	w := c.next(t)
	if w.d != d {
		t.Fatalf("the compactor waits %s, want %s", w.d, d)
	}
	c.mu.Lock()
	c.now = c.now.Add(w.d)
	now := c.now
	c.mu.Unlock()
	w.ch <- now
	next := c.next(t)
	c.pending = &next
}

// fakeStore is the compactor's view of the server: etcd's fakeRevGetter
// (each read of the revision returns one more, unless frozen), the
// leadership, and the compactions proposed, with the error each gets.
type fakeStore struct {
	rev      atomic.Int64
	frozen   atomic.Bool
	follower atomic.Bool

	mu       sync.Mutex
	proposed []int64
	fail     []error // the errors of the next compactions, in order
}

func (f *fakeStore) Rev() int64 {
	if f.frozen.Load() {
		return f.rev.Load()
	}
	return f.rev.Add(1)
}

func (f *fakeStore) compact(_ context.Context, rev int64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.proposed = append(f.proposed, rev)
	if len(f.fail) > 0 {
		err := f.fail[0]
		f.fail = f.fail[1:]
		return err
	}
	return nil
}

// take returns the compactions proposed since the last take.
func (f *fakeStore) take() []int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	p := f.proposed
	f.proposed = nil
	return p
}

// startFake runs a compactor of policy on a fake clock and store.
func startFake(t *testing.T, policy config.AutoCompaction) (*fakeClock, *fakeStore) {
	t.Helper()
	clock, store := newFakeClock(), &fakeStore{}
	c := &autoCompactor{policy: policy, clock: clock, rev: store.Rev,
		leads: func() bool { return !store.follower.Load() }, compact: store.compact}
	c.start()
	t.Cleanup(c.stop)
	return clock, store
}

// ticks runs n ticks of d and checks the compactions they proposed.
func ticks(t *testing.T, clock *fakeClock, store *fakeStore, n int, d time.Duration, want ...int64) {
	t.Helper()
	for range n {
		clock.tick(t, d)
	}
	if got := store.take(); !slices.Equal(got, want) {
		t.Fatalf("after %d more ticks of %s: compacted to %v, want %v", n, d, got, want)
	}
}

// TestAutoCompactPeriodic replays etcd's TestPeriodicHourly and
// TestPeriodicMinutes (v3compactor/periodic_test.go), with their
// revisions: the store's revision is read once per tick and grows by one
// each time. The first compaction comes a whole retention after the
// start, to the first revision read; then one every min(retention, 1h),
// to the revision read a retention before.
func TestAutoCompactPeriodic(t *testing.T) {
	for _, tt := range []struct {
		period time.Duration
		first  int // ticks to the first compaction
	}{
		{5 * time.Minute, 10},
		{2 * time.Hour, 20},
		{72 * time.Hour, 720},
	} {
		t.Run(fmt.Sprintf("retention=%s", tt.period), func(t *testing.T) {
			clock, store := startFake(t, config.AutoCompaction{Mode: config.AutoCompactionPeriodic, Period: tt.period})
			tick := min(tt.period, time.Hour) / 10
			ticks(t, clock, store, tt.first-1, tick)
			ticks(t, clock, store, 1, tick, 1)
			for i := range int64(3) {
				ticks(t, clock, store, 9, tick)
				ticks(t, clock, store, 1, tick, (i+1)*10)
			}
		})
	}
}

// TestAutoCompactPeriodicFollower replays etcd's TestPeriodicPause: a
// member that does not lead samples the revision but never compacts; once
// it leads, it compacts at its next tick to the revision of a retention
// ago.
func TestAutoCompactPeriodicFollower(t *testing.T) {
	clock, store := startFake(t, config.AutoCompaction{Mode: config.AutoCompactionPeriodic, Period: time.Hour})
	store.follower.Store(true)
	const n = 11 // samples per retention: an hour / 6 minutes + 1
	ticks(t, clock, store, 3*n, 6*time.Minute)
	store.follower.Store(false)
	ticks(t, clock, store, 1, 6*time.Minute, 1+2*n+1)
}

// TestAutoCompactPeriodicErrors: a failed compaction is tried again at
// the next tick, to the revision then a retention old; ErrCompacted (a
// client compacted further) counts as done, as in etcd; and the revision
// compacted last is not proposed again (etcd's
// TestPeriodicSkipRevNotChange).
func TestAutoCompactPeriodicErrors(t *testing.T) {
	periodic := config.AutoCompaction{Mode: config.AutoCompactionPeriodic, Period: 5 * time.Minute}
	const tick = 30 * time.Second
	t.Run("failure", func(t *testing.T) {
		clock, store := startFake(t, periodic)
		store.fail = []error{errors.New("injected"), errors.New("injected")}
		ticks(t, clock, store, 10, tick, 1)
		ticks(t, clock, store, 1, tick, 1) // the window has not moved yet
		ticks(t, clock, store, 1, tick, 2) // done
		ticks(t, clock, store, 9, tick)
		ticks(t, clock, store, 1, tick, 12)
	})
	t.Run("compacted", func(t *testing.T) {
		clock, store := startFake(t, periodic)
		store.fail = []error{fmt.Errorf("apply: %w", mvcc.ErrCompacted)}
		ticks(t, clock, store, 10, tick, 1)
		ticks(t, clock, store, 9, tick)
		ticks(t, clock, store, 1, tick, 10)
	})
	t.Run("unchanged", func(t *testing.T) {
		clock, store := startFake(t, periodic)
		store.rev.Store(100)
		store.frozen.Store(true)
		ticks(t, clock, store, 10, tick, 100)
		ticks(t, clock, store, 50, tick)
		store.frozen.Store(false)
		// 101, read after the next tick, is the oldest of the 11
		// samples 11 ticks after that.
		ticks(t, clock, store, 11, tick)
		ticks(t, clock, store, 1, tick, 101)
	})
}

// TestAutoCompactRevision replays etcd's TestRevision and
// TestRevisionPause: every 5 minutes, a compaction to the revision less
// the retention, unless that is not positive, the one compacted last, or
// this member does not lead; a failure is tried again 5 minutes later.
func TestAutoCompactRevision(t *testing.T) {
	clock, store := startFake(t, config.AutoCompaction{Mode: config.AutoCompactionRevision, Revisions: 10})
	const every = 5 * time.Minute
	ticks(t, clock, store, 1, every) // revision 1: nothing to compact
	store.rev.Store(99)              // read as 100
	ticks(t, clock, store, 1, every, 90)
	store.rev.Store(99)
	ticks(t, clock, store, 1, every) // 90 again: skipped
	store.rev.Store(199)
	ticks(t, clock, store, 1, every, 190)

	store.follower.Store(true)
	store.rev.Store(299)
	ticks(t, clock, store, 36, every)
	store.follower.Store(false)
	store.rev.Store(299)
	store.fail = []error{errors.New("injected")}
	ticks(t, clock, store, 1, every, 290)
	store.rev.Store(299)
	ticks(t, clock, store, 1, every, 290) // retried
	store.rev.Store(399)
	store.fail = []error{mvcc.ErrCompacted}
	ticks(t, clock, store, 1, every, 390)
	store.rev.Store(399)
	ticks(t, clock, store, 1, every) // ErrCompacted counted as done
}

// notLeader is a single member that says it does not lead: a follower, as
// far as the compactor can tell.
type notLeader struct{ cluster.Node }

func (n notLeader) Status() cluster.Status {
	st := n.Node.Status()
	st.IsLeader = false
	return st
}

// logLines records a server's log.
type logLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *logLines) Infof(format string, args ...any)  { l.add(format, args) }
func (l *logLines) Errorf(format string, args ...any) { l.add(format, args) }
func (l *logLines) add(format string, args []any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, fmt.Sprintf(format, args...))
}

func (l *logLines) count(s string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, line := range l.lines {
		if strings.Contains(line, s) {
			n++
		}
	}
	return n
}

// TestAutoCompactServer runs periodic auto-compaction with a retention of
// 2 s on a real server: with no client calling Compact, an old revision
// becomes compacted for clientv3 (etcd's "mvcc: required revision has
// been compacted"), while the last second of history stays readable. A
// second server, started first with the same settings, whose node says
// it does not lead, compacts nothing.
func TestAutoCompactServer(t *testing.T) {
	start := func(opts Options) (*Server, *clientv3.Client) {
		cfg := testConfig(t)
		cfg.Server.AutoCompactionRetention = "2s"
		s, err := Start(cfg, opts)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := s.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
		})
		return s, newClient(t, s, nil)
	}
	follower, fc := start(Options{NewNode: func(sm cluster.StateMachine, ids IDs) (cluster.Node, error) {
		n, err := cluster.NewLocal(sm, cluster.LocalConfig{ClusterID: ids.ClusterID, MemberID: ids.MemberID, Name: ids.Name})
		return notLeader{n}, err
	}})
	log := &logLines{}
	leader, lc := start(Options{Logger: log})
	ctx := testCtx(t)

	var olds [2]int64
	for i, c := range []*clientv3.Client{lc, fc} {
		resp, err := c.Put(ctx, "k", "v0")
		if err != nil {
			t.Fatal(err)
		}
		olds[i] = resp.Header.Revision
	}
	old := olds[0]
	deadline := time.Now().Add(15 * time.Second)
	for i := 1; ; i++ {
		if time.Now().After(deadline) {
			t.Fatalf("revision %d is not compacted after 15 s (compacted to %d)", old, leader.store.CompactRev())
		}
		for _, c := range []*clientv3.Client{lc, fc} {
			if _, err := c.Put(ctx, "k", fmt.Sprint("v", i)); err != nil {
				t.Fatal(err)
			}
		}
		_, err := lc.Get(ctx, "k", clientv3.WithRev(old))
		if errors.Is(err, rpctypes.ErrCompacted) {
			break
		}
		if err != nil {
			t.Fatalf("Get at revision %d: %v", old, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := rpctypes.ErrCompacted; err.Error() != "etcdserver: mvcc: required revision has been compacted" {
		t.Errorf("ErrCompacted says %q", err)
	}
	// About 2 s of history is kept: the revision of half a second ago
	// is still there.
	resp, err := lc.Get(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	if _, err := lc.Get(ctx, "k", clientv3.WithRev(resp.Header.Revision)); err != nil {
		t.Errorf("Get at revision %d of 0.5 s ago (compacted to %d): %v", resp.Header.Revision, leader.store.CompactRev(), err)
	}
	if n := log.count("completed auto periodic compaction: revision="); n == 0 {
		t.Errorf("no \"completed auto periodic compaction\" in the log: %q", log.lines)
	}
	if got := follower.store.CompactRev(); got != 0 {
		t.Errorf("the member that does not lead compacted to %d", got)
	}
	if _, err := fc.Get(ctx, "k", clientv3.WithRev(olds[1])); err != nil {
		t.Errorf("the member that does not lead: Get at revision %d: %v", olds[1], err)
	}
}
