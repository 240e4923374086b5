package server

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"github.com/stratadb/strata/engine"
)

// errCorrupt is a write refused while a CORRUPT alarm is raised: etcd's
// ErrCorrupt, "etcdserver: corrupt cluster" (codes.DataLoss), which
// etcd's applierV3Corrupt answers. A read that meets a damaged block of
// this member's files is answered the same (engine.ErrCorruption's row of
// errorTable): etcd has no other error for damaged data, and clientv3
// knows this one (rpctypes.ErrCorrupt).
var errCorrupt = errors.New("server: corrupt cluster")

// corruptRefused reports whether r is refused while a CORRUPT alarm is
// raised, as etcd's applierV3Corrupt refuses it: every command that
// writes the keys or the leases (Put, DeleteRange, Txn, Compaction,
// LeaseGrant, LeaseRevoke; etcd's also refuses a Range, which Strata,
// as etcd 3.4+, never sends through the log). Alarms, auth and
// membership still apply, so `alarm disarm` works.
func corruptRefused(r *pb.InternalRaftRequest) bool {
	return r.Put != nil || r.DeleteRange != nil || r.Txn != nil || r.Compaction != nil ||
		r.LeaseGrant != nil || r.LeaseRevoke != nil
}

// corruptWatch turns the damaged blocks the engine meets into etcd's
// CORRUPT alarm for this member (engine.Options.OnCorruption is its seen):
//
//  1. seen, on the goroutine of the read or background job that met the
//     damage, only records it and wakes run: it never blocks or does I/O.
//  2. run logs each damaged file once (Pebble's error names it: "pebble:
//     file 000011: block ...: crc32c checksum mismatch"), then proposes
//     the alarm through the log, as the space guard proposes NOSPACE, so
//     it is replicated, persisted and listed by `etcdctl alarm list`.
//  3. A proposal that fails (no leader yet) is tried again every
//     corruptRetry while the alarm is not raised; damage seen after a
//     disarm raises it again, damage seen before does not.
//  4. Once the alarm is raised, a member of a cluster repairs its store
//     from the leader's state and disarms its alarm (repair.go); run
//     waits for that, so damage seen meanwhile is logged after it.
type corruptWatch struct {
	log engine.Logger

	mu sync.Mutex
	// files are the damaged files logged (by damagedFile), at most
	// maxCorruptFiles; pending the errors of files not logged yet.
	files   map[string]bool
	pending []error
	// first is the first damage seen, for the alarm's log line.
	first atomic.Pointer[string]
	// raise is set when damage was seen and the alarm not yet proposed.
	raise atomic.Bool
	// gaveUp is set when the last repair did not replace the store (a
	// single member, a store that still does not read cleanly).
	gaveUp atomic.Bool
	kicks  chan struct{}
	done   chan struct{}
}

// maxCorruptFiles bounds the damaged files remembered for logging once.
const maxCorruptFiles = 1024

// corruptRetry is the wait before a failed proposal of the alarm is
// tried again.
var corruptRetry = time.Second

func newCorruptWatch(log engine.Logger) *corruptWatch {
	return &corruptWatch{log: log, files: map[string]bool{}, kicks: make(chan struct{}, 1), done: make(chan struct{})}
}

// seen records a damage err the engine met; it never blocks.
func (w *corruptWatch) seen(err error) {
	file := damagedFile(err)
	w.mu.Lock()
	if !w.files[file] && len(w.files) < maxCorruptFiles {
		w.files[file] = true
		w.pending = append(w.pending, err)
	}
	w.mu.Unlock()
	if w.first.Load() == nil {
		msg := err.Error()
		w.first.CompareAndSwap(nil, &msg)
	}
	w.raise.Store(true)
	select {
	case w.kicks <- struct{}{}:
	default:
	}
}

// cause is the first damage seen, for the alarm's log line.
func (w *corruptWatch) cause() string {
	if c := w.first.Load(); c != nil {
		return "a read met a damaged file: " + *c
	}
	return ""
}

// run logs and raises until ctx ends (see corruptWatch); raise proposes
// the alarm, doing nothing if it is raised already.
func (w *corruptWatch) run(ctx context.Context, raise func() error) {
	defer close(w.done)
	var retry <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-w.kicks:
		case <-retry:
		}
		retry = nil
		w.mu.Lock()
		pending := w.pending
		w.pending = nil
		w.mu.Unlock()
		for _, err := range pending {
			if w.log != nil {
				w.log.Errorf("server: data corruption: file %s is damaged: %v; reads of its damaged blocks fail with \"etcdserver: corrupt cluster\" (see docs/operations.md, \"A damaged file seen by the server\")",
					damagedFile(err), err)
			}
		}
		if !w.raise.Swap(false) {
			continue
		}
		if err := raise(); err != nil {
			if ctx.Err() != nil {
				return
			}
			if w.log != nil {
				w.log.Errorf("server: raising the CORRUPT alarm failed (trying again in %v): %v", corruptRetry, err)
			}
			w.raise.Store(true)
			retry = time.After(corruptRetry)
		}
	}
}

// pebbleFile finds the file Pebble's read errors name ("pebble: file
// 000011: block ...").
var pebbleFile = regexp.MustCompile(`pebble: file ([0-9]+)`)

// damagedFile names the file a damage error is about: the path Pebble
// attaches when a table does not open (pebble.DataCorruptionInfo), else
// the file number its read errors name, else the whole message.
func damagedFile(err error) string {
	if info := pebble.ExtractDataCorruptionInfo(err); info != nil && info.Path != "" {
		return info.Path
	}
	if m := pebbleFile.FindStringSubmatch(err.Error()); m != nil {
		return m[1]
	}
	return err.Error()
}

// raiseCorrupt proposes this member's CORRUPT alarm, unless it is raised
// already, then repairs the store from the leader's state and disarms the
// alarm (repairDamage, repair.go), which a single member cannot do.
func (s *Server) raiseCorrupt() error {
	id := s.node.Status().MemberID
	raised := s.apply.alarms.has(id, pb.AlarmType_CORRUPT)
	if !raised {
		_, err := s.propose(s.streams, &pb.InternalRaftRequest{Alarm: &pb.AlarmRequest{
			Action: pb.AlarmRequest_ACTIVATE, MemberID: id, Alarm: pb.AlarmType_CORRUPT}})
		if err != nil {
			return fmt.Errorf("server: propose the CORRUPT alarm: %w", err)
		}
	}
	// Once a repair gave up, more damage under the same alarm does not
	// try again: a new alarm (after a disarm) does.
	if !raised || !s.corrupt.gaveUp.Load() {
		s.corrupt.gaveUp.Store(!s.repairDamage(s.streams))
	}
	return nil
}

// repaired forgets the damage seen: the store was replaced. Damage that
// reads of the old store met meanwhile raises no alarm after the repair;
// damage met from now on raises it again.
func (w *corruptWatch) repaired() {
	w.mu.Lock()
	w.files = map[string]bool{}
	w.pending = nil
	w.mu.Unlock()
	w.first.Store(nil)
	w.raise.Store(false)
	select {
	case <-w.kicks:
	default:
	}
}
