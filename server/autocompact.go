package server

import (
	"context"
	"errors"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"github.com/stratadb/strata/config"
	"github.com/stratadb/strata/engine"
	"github.com/stratadb/strata/mvcc"
)

// revisionCompactInterval is how often revision mode compacts (etcd's
// v3compactor revInterval).
const revisionCompactInterval = 5 * time.Minute

// periodicSamples is how many times per period (at most an hour) the
// periodic mode samples the revision (etcd's retryDivisor).
const periodicSamples = 10

// compactClock is the time an autoCompactor runs on: the real clock, or a
// test's, so that hours of its logic run in milliseconds.
type compactClock interface {
	Now() time.Time
	After(d time.Duration) <-chan time.Time
}

type realClock struct{}

func (realClock) Now() time.Time                         { return time.Now() }
func (realClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// autoCompactor is etcd's v3compactor (server.auto_compaction_mode and
// auto_compaction_retention): it compacts the store by itself, so that
// the history stops growing without a client that compacts.
//
//  1. Periodic mode, retention P: every P/10 (P at most an hour for
//     this) it samples the store's revision, keeping the samples of the
//     last P. The first compaction comes P after the start, then one
//     every min(P, 1h), each to the oldest sample (the revision of about
//     P ago): the store keeps at least P of history.
//  2. Revision mode, retention N: every 5 minutes it compacts to the
//     current revision less N.
//  3. A revision compacted already (the last one, or one a client went
//     past: mvcc.ErrCompacted) counts as done; any other failure is
//     logged and tried again at the next tick.
//  4. Only the leader compacts: every member runs the loop (the samples
//     are kept on followers too, as etcd's paused compactor keeps them),
//     but one that does not lead skips the tick. The compaction is the
//     command a client's Compact proposes, so every member applies it.
type autoCompactor struct {
	policy config.AutoCompaction
	clock  compactClock
	log    engine.Logger // nil: silent
	// rev is the store's current revision; leads whether this member
	// leads; compact proposes a compaction to rev through the log.
	rev     func() int64
	leads   func() bool
	compact func(ctx context.Context, rev int64) error

	cancel context.CancelFunc
	done   chan struct{}
}

// newAutoCompactor returns the server's compactor, nil when
// auto-compaction is off.
func (s *Server) newAutoCompactor(policy config.AutoCompaction) *autoCompactor {
	if !policy.Enabled() {
		return nil
	}
	return &autoCompactor{
		policy: policy,
		clock:  realClock{},
		log:    s.log,
		rev:    s.store.Rev,
		leads:  func() bool { return s.node.Status().IsLeader },
		compact: func(ctx context.Context, rev int64) error {
			// The lessor's way: an internal request, as root once auth is on.
			_, err := s.propose(s.auth.WithRoot(ctx), &pb.InternalRaftRequest{Compaction: &pb.CompactionRequest{Revision: rev}})
			return err
		},
	}
}

// start runs the compactor until stop.
func (c *autoCompactor) start() {
	ctx, cancel := context.WithCancel(context.Background())
	c.cancel, c.done = cancel, make(chan struct{})
	go func() {
		defer close(c.done)
		if c.policy.Mode == config.AutoCompactionRevision {
			c.runRevision(ctx)
		} else {
			c.runPeriodic(ctx)
		}
	}()
}

// stop ends the loop (a compaction in flight is cancelled) and waits for
// it. A nil compactor (auto-compaction off) or one never started does
// nothing.
func (c *autoCompactor) stop() {
	if c == nil || c.cancel == nil {
		return
	}
	c.cancel()
	<-c.done
}

// sampleInterval is periodic mode's tick: a tenth of the period, of at
// most an hour (etcd's getRetryInterval).
func (c *autoCompactor) sampleInterval() time.Duration {
	return min(c.policy.Period, time.Hour) / periodicSamples
}

// runPeriodic is etcd's Periodic.Run.
func (c *autoCompactor) runPeriodic(ctx context.Context) {
	period := c.policy.Period
	interval := c.sampleInterval()
	compactEvery := min(period, time.Hour)
	// revs[0] is the revision of period ago: period/interval+1 samples.
	keep := int(period/interval) + 1
	revs := make([]int64, 0, keep)
	var lastRev int64
	lastSuccess := c.clock.Now()
	// The first compaction waits a whole period, the next ones
	// compactEvery.
	wait := period
	for {
		revs = append(revs, c.rev())
		if len(revs) > keep {
			revs = revs[1:]
		}
		select {
		case <-ctx.Done():
			return
		case <-c.clock.After(interval):
		}
		if !c.leads() {
			continue
		}
		rev := revs[0]
		if c.clock.Now().Sub(lastSuccess) < wait || rev == lastRev {
			continue
		}
		wait = compactEvery
		c.infof("server: starting auto periodic compaction: revision=%d compact-period=%s", rev, period)
		began := c.clock.Now()
		err := c.compact(ctx, rev)
		if err != nil && !errors.Is(err, mvcc.ErrCompacted) {
			if ctx.Err() != nil {
				return // stopped
			}
			c.errorf("server: failed auto periodic compaction: revision=%d compact-period=%s retry-interval=%s: %v", rev, period, interval, err)
			continue
		}
		c.infof("server: completed auto periodic compaction: revision=%d compact-period=%s took=%s", rev, period, c.clock.Now().Sub(began))
		lastRev, lastSuccess = rev, c.clock.Now()
	}
}

// runRevision is etcd's Revision.Run.
func (c *autoCompactor) runRevision(ctx context.Context) {
	retention := c.policy.Revisions
	var prev int64
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.clock.After(revisionCompactInterval):
		}
		if !c.leads() {
			continue
		}
		rev := c.rev() - retention
		if rev <= 0 || rev == prev {
			continue
		}
		c.infof("server: starting auto revision compaction: revision=%d revision-compaction-retention=%d", rev, retention)
		began := c.clock.Now()
		err := c.compact(ctx, rev)
		if err != nil && !errors.Is(err, mvcc.ErrCompacted) {
			if ctx.Err() != nil {
				return // stopped
			}
			c.errorf("server: failed auto revision compaction: revision=%d revision-compaction-retention=%d retry-interval=%s: %v",
				rev, retention, revisionCompactInterval, err)
			continue
		}
		prev = rev
		c.infof("server: completed auto revision compaction: revision=%d revision-compaction-retention=%d took=%s", rev, retention, c.clock.Now().Sub(began))
	}
}

func (c *autoCompactor) infof(format string, args ...any) {
	if c.log != nil {
		c.log.Infof(format, args...)
	}
}

func (c *autoCompactor) errorf(format string, args ...any) {
	if c.log != nil {
		c.log.Errorf(format, args...)
	}
}
