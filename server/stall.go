package server

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/stratadb/strata/engine"
)

// stallBound is how long an operation on the database's files (a WAL
// fsync, a flush's write or sync, a MANIFEST update) may stay in flight
// before /readyz's disk_stall check fails: ten times etcd's 1 s "slow
// fdatasync" warning, long enough that a loaded disk's hiccup does not
// take a member out of a load balancer, short enough that a stuck one
// does well before a client's request timeout piles up. A variable so
// tests can shorten it.
var stallBound = 10 * time.Second

// stallStale is how long after its last report an operation is taken to
// have ended: Pebble reports one in flight again every 2 s (its disk
// health checker's tick), so one not reported for 5 s returned.
// A variable so tests can shorten it.
var stallStale = 5 * time.Second

// slowSyncWarning is etcd's threshold of a "slow fdatasync" (its WAL's
// warnSyncDuration), named in the log line as etcd's expected-duration.
const slowSyncWarning = time.Second

// testEngineOptions, set only by tests, adjusts the engine's options
// (its file system) at Start.
var testEngineOptions func(*engine.Options)

// engineOptions are the engine's run-time hooks: the server's logger,
// damaged blocks to corruptWatch, and Pebble's slow-disk reports to
// stallWatch.
func (s *Server) engineOptions(opts Options) engine.Options {
	o := engine.Options{
		Logger:        opts.Logger,
		OnCorruption:  s.corrupt.seen,
		EventListener: &pebble.EventListener{DiskSlow: s.stall.diskSlow},
	}
	if testEngineOptions != nil {
		testEngineOptions(&o)
	}
	return o
}

// stallWatch keeps the engine's disk operations that are stuck, from
// Pebble's DiskSlow reports: Pebble's disk health checker (on for the
// OS file system) reports an operation on a file (a write, a sync, a
// create or rename) once it has been in flight for 5 s, and again every
// 2 s while it stays in flight, with how long it has been running. So:
//
//  1. An operation is in flight since the report's time minus its
//     duration, and while it is reported again within stallStale.
//  2. /readyz's disk_stall check (check) fails while one has been in
//     flight for stallBound or longer, and passes again once it is no
//     longer reported (it returned).
//  3. Each operation is logged once when first reported ("slow
//     fdatasync" for a sync, as etcd's WAL logs it, with how long it has
//     run), and counted once in strata_disk_stalls_total, logged again,
//     when it passes stallBound; its end is logged if it had.
//
// Pebble calls diskSlow on its monitoring goroutine, which must never
// wait on I/O: diskSlow takes a mutex that is never held across I/O and
// leaves the log lines to their own goroutines.
type stallWatch struct {
	log    engine.Logger
	stalls prometheus.Counter

	// raftSync, on a cluster member, reports the raft log's fsync in
	// flight (cluster.Instrumented.LogSyncInFlight): the log is not
	// Pebble's, so no DiskSlow report covers it.
	raftSync func() (time.Duration, bool)

	mu  sync.Mutex
	ops map[stallKey]*stallOp
	// raftStalled is when the raft log's fsync that passed stallBound
	// began (zero if none did): it is logged and counted once.
	raftStalled time.Time
}

// stallKey is a file and an operation on it.
type stallKey struct {
	path string
	op   vfs.OpType
}

// stallOp is an operation in flight past Pebble's threshold.
type stallOp struct {
	since, seen time.Time
	stalled     bool // past stallBound: counted and logged
}

func newStallWatch(log engine.Logger) *stallWatch {
	return &stallWatch{log: log, ops: map[stallKey]*stallOp{},
		stalls: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "strata", Subsystem: "disk", Name: "stalls_total",
			Help: "Operations on the database's files (WAL fsyncs, flush writes and syncs) found in flight for longer than the stall bound (10 s); /readyz fails disk_stall while one lasts."})}
}

// diskSlow is Pebble's EventListener.DiskSlow.
func (w *stallWatch) diskSlow(info pebble.DiskSlowInfo) {
	now := time.Now()
	k := stallKey{info.Path, info.OpType}
	since := now.Add(-info.Duration)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.pruneLocked(now)
	op := w.ops[k]
	if op == nil || since.Sub(op.since) > time.Second {
		// A new operation (on this file, after the last one returned).
		op = &stallOp{since: since}
		w.ops[k] = op
		w.logf("server: %s: %s of %s has been in flight for %.1fs (expected-duration %v)",
			slowWhat(k.op), k.op, k.path, info.Duration.Seconds(), slowSyncWarning)
	}
	op.seen = now
	w.stalledLocked(k, op, now)
}

// check is /readyz's disk_stall check.
func (w *stallWatch) check(context.Context) error {
	now := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	w.pruneLocked(now)
	var worst *stallOp
	var worstKey stallKey
	for k, op := range w.ops {
		if w.stalledLocked(k, op, now) && (worst == nil || op.since.Before(worst.since)) {
			worst, worstKey = op, k
		}
	}
	if worst == nil {
		return w.checkRaftLocked(now)
	}
	return fmt.Errorf("%s of %s in flight for %.1fs (bound %v)", worstKey.op, filepath.Base(worstKey.path),
		now.Sub(worst.since).Seconds(), stallBound)
}

// checkRaftLocked fails while the raft log's fsync has been in flight for
// stallBound, logging and counting it once.
func (w *stallWatch) checkRaftLocked(now time.Time) error {
	if w.raftSync == nil {
		return nil
	}
	d, ok := w.raftSync()
	if !ok || d < stallBound {
		return nil
	}
	since := now.Add(-d)
	if w.raftStalled.IsZero() || since.Sub(w.raftStalled) > time.Second {
		w.raftStalled = since
		w.stalls.Inc()
		w.logf("server: disk stall: the raft log's fdatasync has been in flight for %.1fs (bound %v)", d.Seconds(), stallBound)
	}
	return fmt.Errorf("the raft log's fdatasync in flight for %.1fs (bound %v)", d.Seconds(), stallBound)
}

// stalledLocked reports whether op has been in flight for stallBound,
// counting and logging it the first time.
func (w *stallWatch) stalledLocked(k stallKey, op *stallOp, now time.Time) bool {
	d := now.Sub(op.since)
	if d < stallBound {
		return false
	}
	if !op.stalled {
		op.stalled = true
		w.stalls.Inc()
		w.logf("server: disk stall: %s of %s in flight for %.1fs, past %v: /readyz fails disk_stall until it returns",
			k.op, k.path, d.Seconds(), stallBound)
	}
	return true
}

// pruneLocked forgets the operations no longer reported: they returned.
func (w *stallWatch) pruneLocked(now time.Time) {
	for k, op := range w.ops {
		if now.Sub(op.seen) > stallStale {
			delete(w.ops, k)
			if op.stalled {
				w.logf("server: disk stall ended: %s of %s returned after about %.1fs", k.op, k.path, op.seen.Sub(op.since).Seconds())
			}
		}
	}
}

// logf logs on a goroutine of its own: the caller may be Pebble's
// monitor, which must not wait on the log's I/O.
func (w *stallWatch) logf(format string, args ...any) {
	if w.log != nil {
		go w.log.Errorf(format, args...)
	}
}

// slowWhat names a slow operation as etcd's log does for a sync.
func slowWhat(op vfs.OpType) string {
	switch op {
	case vfs.OpTypeSync, vfs.OpTypeSyncData, vfs.OpTypeSyncTo:
		return "slow fdatasync"
	}
	return "slow disk operation"
}
