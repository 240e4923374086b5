package server

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"github.com/stratadb/strata/config"
)

// spaceGuard is etcd's backend quota (storage/quota.go, v3rpc/quota.go)
// with a free-space floor beside it: it refuses a write that would take
// the database to quota_backend_bytes, or any write while a file system
// of the member's is below min_free_disk_bytes, with errNoSpace, and
// raises this member's NOSPACE alarm through the log (raise).
//
// The sizes come from a sample, not from each request: the database's
// size is the engine's metrics (dbSizes, what Status reports), which read
// every table's properties and are not for a hot path, and the free space
// is a statfs per directory. A sample is taken when asked (kick): by a
// request checked or a batch applied, at most every spaceSampleInterval,
// so an idle member costs nothing and a busy one is refused within that
// interval of crossing a limit. Every member samples its own disks as it
// applies the log, so a follower that runs short raises the alarm for the
// whole cluster, as etcd's members do.
type spaceGuard struct {
	// quota is quota_backend_bytes resolved, -1 if off; minFree is
	// min_free_disk_bytes, 0 if off.
	quota, minFree int64
	// dirs are the directories whose file systems the floor covers.
	dirs []string
	// size returns the database's size; avail a directory's free bytes.
	size  func() int64
	avail func(dir string) (uint64, error)

	last atomic.Pointer[spaceSample]
	// sampling makes one sample at a time.
	sampling sync.Mutex
	// refused is the largest cost of the requests refused since the last
	// sample: the sample raises the alarm if such a request still does
	// not fit, even if the database alone is under the quota (etcd
	// raises it on such a request).
	refused atomic.Int64
	kicks   chan struct{}
}

// spaceSampleInterval is the least time between two samples.
var spaceSampleInterval = 250 * time.Millisecond

// spaceFresh is the age under which a sample that refuses a request is
// trusted; an older one is taken again first, so that a request after
// the space came back (a defragmentation, files deleted) is not refused
// on a stale sample, and a storm of refused requests samples at most
// once per spaceFresh.
const spaceFresh = 50 * time.Millisecond

// spaceSample is what one sample found.
type spaceSample struct {
	at   time.Time
	size int64
	// short names a directory below the floor, "" if none.
	short string
}

// kvOverhead is etcd's estimate of a key's metadata, charged with its key
// and value against the quota (storage/quota.go); leaseOverhead a lease's.
const (
	kvOverhead    = 256
	leaseOverhead = 64
)

func newSpaceGuard(cfg *config.Config, size func() int64) *spaceGuard {
	g := &spaceGuard{
		quota: cfg.Server.QuotaBytes(), minFree: cfg.Server.MinFreeDiskBytes, size: size,
		avail: diskAvail, kicks: make(chan struct{}, 1),
	}
	seen := map[string]bool{}
	for _, d := range []string{cfg.DBPath, cfg.WALDir, raftDir(cfg)} {
		if d != "" && !seen[d] {
			seen[d] = true
			g.dirs = append(g.dirs, d)
		}
	}
	return g
}

// raftDir is where a cluster member keeps its raft log, "" for a single
// member.
func raftDir(cfg *config.Config) string {
	if !cfg.Cluster.Enabled() {
		return ""
	}
	return cfg.Cluster.RaftDirFor(cfg.DBPath)
}

// diskAvail is the space an unprivileged process may still use on dir's
// file system (statfs's f_bavail times the block size, through Pebble's
// portable vfs).
func diskAvail(dir string) (uint64, error) {
	du, err := vfs.Default.GetDiskUsage(dir)
	return du.AvailBytes, err
}

// off reports whether neither limit is set.
func (g *spaceGuard) off() bool { return g.quota < 0 && g.minFree <= 0 }

// sample measures the database and the free space now.
func (g *spaceGuard) sample() *spaceSample {
	g.sampling.Lock()
	defer g.sampling.Unlock()
	smp := &spaceSample{at: time.Now()}
	if g.quota >= 0 {
		smp.size = g.size()
	}
	if g.minFree > 0 {
		for _, d := range g.dirs {
			free, err := g.avail(d)
			if err == nil && free < uint64(g.minFree) {
				smp.short = fmt.Sprintf("%s has %d bytes free, under min_free_disk_bytes = %d", d, free, g.minFree)
				break
			}
		}
	}
	g.last.Store(smp)
	return smp
}

// exceeded says why a request of cost bytes is refused by smp, "" if it
// is not: etcd's rule, size + cost must stay under the quota, and the
// floor.
func (g *spaceGuard) exceeded(smp *spaceSample, cost int64) string {
	switch {
	case smp == nil:
		return ""
	case smp.short != "":
		return smp.short
	case g.quota >= 0 && smp.size+cost >= g.quota:
		return fmt.Sprintf("database size %d bytes + %d for the request reaches quota_backend_bytes = %d", smp.size, cost, g.quota)
	}
	return ""
}

// check refuses a write of cost bytes (etcd's quota cost, 0 for one that
// adds nothing: it always passes) with errNoSpace when the last sample
// says it does not fit, and asks for the alarm.
func (g *spaceGuard) check(cost int64) error {
	if cost == 0 || g.off() {
		return nil
	}
	g.kick()
	smp := g.last.Load()
	why := g.exceeded(smp, cost)
	if why == "" {
		return nil
	}
	if time.Since(smp.at) > spaceFresh {
		if why = g.exceeded(g.sample(), cost); why == "" {
			return nil
		}
	}
	for {
		r := g.refused.Load()
		if r >= cost || g.refused.CompareAndSwap(r, cost) {
			break
		}
	}
	return errNoSpace
}

// kick asks for a sample; it never blocks.
func (g *spaceGuard) kick() {
	select {
	case g.kicks <- struct{}{}:
	default:
	}
}

// run samples when kicked, at most every spaceSampleInterval, until ctx
// ends, and calls raise with the reason when a limit is crossed or a
// request was refused (raise does nothing when the alarm is up already).
func (g *spaceGuard) run(ctx context.Context, raise func(why string)) {
	if g.off() {
		return
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-g.kicks:
		}
		if why := g.exceeded(g.sample(), max(kvOverhead, g.refused.Swap(0))); why != "" {
			raise(why)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(spaceSampleInterval):
		}
	}
}

// putCost is etcd's quota cost of a put.
func putCost(r *pb.PutRequest) int64 { return int64(kvOverhead + len(r.Key) + len(r.Value)) }

// txnCost is etcd's quota cost of a txn: its costlier branch's puts,
// nested txns included; 0 for a txn that puts nothing.
func txnCost(r *pb.TxnRequest) int64 {
	branch := func(ops []*pb.RequestOp) (c int64) {
		for _, op := range ops {
			if p := op.GetRequestPut(); p != nil {
				c += putCost(p)
			} else if t := op.GetRequestTxn(); t != nil {
				c += txnCost(t)
			}
		}
		return c
	}
	return max(branch(r.Success), branch(r.Failure))
}

// checkSpace is the guard's check of a write of cost bytes.
func (s *Server) checkSpace(cost int64) error { return s.space.check(cost) }

// raiseNoSpace proposes this member's NOSPACE alarm, as etcd's server
// does when a request exceeds the quota, unless it is raised already;
// the reason is kept for the alarm's log line.
func (s *Server) raiseNoSpace(why string) {
	id := s.node.Status().MemberID
	if s.apply.alarms.has(id, pb.AlarmType_NOSPACE) {
		return
	}
	s.spaceCause.Store(&why)
	_, err := s.propose(s.streams, &pb.InternalRaftRequest{Alarm: &pb.AlarmRequest{
		Action: pb.AlarmRequest_ACTIVATE, MemberID: id, Alarm: pb.AlarmType_NOSPACE}})
	if err != nil && s.streams.Err() == nil && s.log != nil {
		s.log.Errorf("server: %s; raising the NOSPACE alarm failed: %v", why, err)
	}
}

// alarmCause is the reason this member raised an alarm, for its log line.
func (s *Server) alarmCause(member uint64, at pb.AlarmType) string {
	if member != s.selfID.Load() {
		return ""
	}
	if at == pb.AlarmType_CORRUPT {
		return s.corrupt.cause()
	}
	if c := s.spaceCause.Load(); c != nil {
		return *c
	}
	return ""
}

// quotaGauge is quota_backend_bytes as etcd reports it (Status's
// DbSizeQuota, etcd_server_quota_backend_bytes): the quota, the default
// for 0, a negative value (off) as configured.
func quotaGauge(cfg *config.Config) int64 {
	if q := cfg.Server.QuotaBackendBytes; q < 0 {
		return q
	}
	return cfg.Server.QuotaBytes()
}
