package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"github.com/stratadb/strata/cluster"
	"github.com/stratadb/strata/config"
	"github.com/stratadb/strata/mvcc"
)

// A member of a cluster whose own engine met a damaged block repairs
// itself once its CORRUPT alarm is raised (corruptWatch): the Node
// replaces its store with the leader's state and goes on applying its log
// (cluster.Node.RepairFromLeader), the server checks that the new store
// reads cleanly (a HashKV over every revision), and disarms this member's
// CORRUPT alarm through the log. Each step is logged with its reason.
//
// Only damage this member's engine reported is repaired so: a hash that
// differs from a peer's (corruptcheck.go) says which member differs, not
// which copy is right, and stays an operator's matter, as in etcd. A
// single member (no peer) keeps its alarm: its repair is a restore from
// a backup.

// Waits between repair attempts: repairRetry first, doubling up to
// repairRetryMax. Variables so tests can shorten them.
var repairRetry, repairRetryMax = 500 * time.Millisecond, 10 * time.Second

// repairDamage repairs this member's store from the leader's state after
// its engine met damage, then disarms this member's CORRUPT alarm; it
// tries again, with growing waits, while there is no leader or a fetch
// fails, and returns once repaired, or when ctx ends, or when the Node has
// no peer to repair from. It reports whether the store was replaced.
func (s *Server) repairDamage(ctx context.Context) (replaced bool) {
	id := s.node.Status().MemberID
	s.logInfof("server: repair: this member's engine met damaged data; asking the leader for its state to replace the store")
	wait := repairRetry
	retry := func(what string, err error) bool {
		if ctx.Err() != nil {
			return false
		}
		s.logErrorf("server: repair: %s failed (trying again in %v): %v", what, wait, err)
		select {
		case <-ctx.Done():
			return false
		case <-time.After(wait):
		}
		wait = min(2*wait, repairRetryMax)
		return true
	}
	var r cluster.Repair
	for {
		var err error
		r, err = s.node.RepairFromLeader(ctx)
		if err == nil {
			break
		}
		if errors.Is(err, cluster.ErrNoPeer) {
			s.logErrorf("server: repair: not possible: %v; the CORRUPT alarm stays: restore this member from a backup (see docs/operations.md)", err)
			return false
		}
		if errors.Is(err, cluster.ErrStopped) || !retry("fetching the leader's state", err) {
			return false
		}
	}
	hash, rev, _, err := s.store.HashKV(0)
	if err != nil {
		// The store the leader sent does not read cleanly here: a disk
		// that damages what it is given. The alarm stays.
		s.logErrorf("server: repair: the store taken from leader %x at index %d does not read cleanly (%v); the CORRUPT alarm stays", r.Leader, r.Index, err)
		return false
	}
	s.corrupt.repaired()
	s.logInfof("server: repaired from leader snapshot at index %d: %d bytes from leader %x in %.3fs, %d commands applied again after it; the store reads cleanly (hashkv %d at revision %d)",
		r.Index, r.Bytes, r.Leader, r.Took.Seconds(), r.Replayed, hash, rev)
	wait = repairRetry
	for {
		_, err := s.propose(ctx, &pb.InternalRaftRequest{Alarm: &pb.AlarmRequest{
			Action: pb.AlarmRequest_DEACTIVATE, MemberID: id, Alarm: pb.AlarmType_CORRUPT}})
		if err == nil {
			s.logInfof("server: repair: disarmed this member's CORRUPT alarm (%x): its store is the leader's", id)
			return true
		}
		if !retry("disarming this member's CORRUPT alarm", err) {
			return true
		}
	}
}

func (s *Server) logInfof(format string, args ...any) {
	if s.log != nil {
		s.log.Infof(format, args...)
	}
}

func (s *Server) logErrorf(format string, args ...any) {
	if s.log != nil {
		s.log.Errorf(format, args...)
	}
}

// repairAttemptsAtStart bounds the tries of repairAtStart (no leader yet,
// a peer down), repairRetry apart, doubling up to repairRetryMax.
const repairAttemptsAtStart = 8

// repairAtStart is the repair of a member of a cluster whose store does
// not open (openErr: Open met a damaged table, as when it rebuilds its key
// index from every revision): before the member starts, its store is
// replaced with the leader's state (cluster.FetchLeaderState,
// mvcc.ReplaceWithSnapshot), which it then opens and from which its raft
// log goes on as after any restart. It returns an error naming openErr
// when no peer gave its state.
func (s *Server) repairAtStart(cfg *config.Config, openErr error) error {
	s.logErrorf("server: repair: the store does not open: %v; replacing it with the leader's state before this member starts", openErr)
	rc, err := cluster.RaftConfigFrom(cfg)
	if err != nil {
		return errors.Join(openErr, err)
	}
	wait := repairRetry
	for attempt := 1; ; attempt++ {
		// No deadline: a big store takes as long as its bytes take (a
		// peer that does not answer in time is given up by the transport).
		r, err := cluster.FetchLeaderState(context.Background(), rc, func(r io.Reader) error { return mvcc.ReplaceWithSnapshot(s.db, r) })
		if err == nil {
			// Damage the engine met before (a compaction reading the
			// damaged table) is gone with the old contents.
			s.corrupt.repaired()
			s.logInfof("server: repaired from leader snapshot at index %d at start: %d bytes from leader %x in %.3fs",
				r.Index, r.Bytes, r.Leader, r.Took.Seconds())
			return nil
		}
		if attempt == repairAttemptsAtStart {
			return fmt.Errorf("%w; repairing it from the leader's state failed %d times, last: %w", openErr, attempt, err)
		}
		s.logErrorf("server: repair: fetching the leader's state failed (attempt %d of %d, trying again in %v): %v", attempt, repairAttemptsAtStart, wait, err)
		time.Sleep(wait)
		wait = min(2*wait, repairRetryMax)
	}
}
