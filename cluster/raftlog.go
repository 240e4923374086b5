package cluster

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stratadb/strata/cluster/raftwal"
	pb "go.etcd.io/raft/v3/raftpb"
)

// logStore is a member's durable raft state: a raftwal.Log in raft_dir/wal,
// which raft also reads as its Storage. This file turns the member's
// records (its identity, its member list) into the log's opaque bytes.
type logStore struct {
	wal *raftwal.Log
}

// logMeta is what a member is: written at bootstrap, checked at restart.
type logMeta struct {
	ClusterID uint64 `json:"cluster_id"`
	MemberID  uint64 `json:"member_id"`
	Name      string `json:"name"`
	Token     string `json:"token"`
}

// How much log a member keeps. A snapshot here costs no copy of the data
// (the state machine keeps its own, streamed only to a follower that needs
// it), so the log is truncated by bytes as well as by entries: Kubernetes
// objects of 14 KB would otherwise keep 10,000 entries, 140 MB, per member.
const (
	// snapshotBytes: a snapshot (and a truncation) once the entries since
	// the last one pass this size, whatever SnapshotEntries says. A
	// snapshot here costs one sync of the store's WAL, so taking them
	// often is cheap, and the log holds less between them.
	snapshotBytes = 16 << 20
	// catchUpBytes bounds the entries kept behind a snapshot for followers
	// a little behind (with CatchUpEntries); one further behind gets the
	// state machine's snapshot.
	catchUpBytes = 16 << 20
	// segmentBytes is the raft log's segment size: the granularity of
	// truncation (a member's log holds up to one segment more than it
	// needs).
	segmentBytes = 4 << 20
	// cacheBytes bounds the newest entries the log keeps in memory for the
	// apply and the followers' appends, which read them within
	// milliseconds of their write.
	cacheBytes = 2 << 20
	// idleSnapshotBytes: a member whose apply has had nothing to do for
	// idleSnapshotAfter takes a snapshot once this much came since the
	// last, so a log does not keep up to snapshotBytes when writes stop.
	idleSnapshotBytes = 1 << 20
)

const idleSnapshotAfter = time.Second

// openLogStore opens (creating if needed) the member's raft log under
// raftDir, on fs (nil: the OS file system). A raft log kept by an earlier
// Strata in raftDir/log (an engine database) is moved into the new log
// first.
func openLogStore(raftDir string, fs vfs.FS) (*logStore, error) {
	if fs == nil {
		fs = vfs.Default
	}
	if err := raftwal.MkdirAllSynced(fs, raftDir); err != nil {
		return nil, fmt.Errorf("cluster: raft log %s: %w", raftDir, err)
	}
	dir := fs.PathJoin(raftDir, "wal")
	if err := migrateLegacyLog(fs, raftDir, dir); err != nil {
		return nil, err
	}
	w, err := raftwal.Open(fs, dir, raftwal.Options{SegmentBytes: segmentBytes, CacheBytes: cacheBytes})
	if err != nil {
		return nil, fmt.Errorf("cluster: raft log: %w", err)
	}
	return &logStore{wal: w}, nil
}

// migrateLegacyLog moves an engine-database raft log (raftDir/log) into a
// raftwal log at dir: it is written whole into dir.tmp, renamed to dir,
// then the old database is removed. A crash anywhere leaves either the old
// log or the new one complete.
func migrateLegacyLog(fs vfs.FS, raftDir, dir string) error {
	old := fs.PathJoin(raftDir, "log")
	if _, err := fs.Stat(old); err != nil {
		return nil // none
	}
	if _, err := fs.Stat(dir); err == nil {
		// Moved already; the removal was interrupted.
		return removeAllSynced(fs, raftDir, old)
	}
	tmp := dir + ".tmp"
	if err := removeAllSynced(fs, raftDir, tmp); err != nil {
		return err
	}
	meta, ok, l, err := readLegacyLog(old, fs)
	if err != nil {
		return err
	}
	if !ok {
		return removeAllSynced(fs, raftDir, old) // its bootstrap never finished
	}
	w, err := raftwal.Open(fs, tmp, raftwal.Options{SegmentBytes: segmentBytes, CacheBytes: cacheBytes})
	if err != nil {
		return fmt.Errorf("cluster: moving the raft log: %w", err)
	}
	ls := &logStore{wal: w}
	err = ls.bootstrap(meta, l.members)
	if err == nil {
		err = w.Restore(l.hs, l.snapshot, l.entries)
	}
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("cluster: moving the raft log: %w", err)
	}
	if err := fs.Rename(tmp, dir); err != nil {
		return fmt.Errorf("cluster: moving the raft log: %w", err)
	}
	if err := syncDirOf(fs, raftDir); err != nil {
		return err
	}
	return removeAllSynced(fs, raftDir, old)
}

// readLegacyLog reads a legacy raft log's identity and state.
func readLegacyLog(dir string, fs vfs.FS) (meta logMeta, ok bool, l *loaded, err error) {
	ll, err := openLegacyLog(dir, fs)
	if err != nil {
		return meta, false, nil, err
	}
	defer func() {
		if cerr := ll.close(); err == nil && cerr != nil {
			err = fmt.Errorf("cluster: raft log %s: %w", dir, cerr)
		}
	}()
	if meta, ok, err = ll.meta(); err != nil || !ok {
		return meta, ok, nil, err
	}
	l, err = ll.load()
	return meta, ok, l, err
}

// removeAllSynced removes path (in parent) and fsyncs parent.
func removeAllSynced(fs vfs.FS, parent, path string) error {
	if err := fs.RemoveAll(path); err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	return syncDirOf(fs, parent)
}

func syncDirOf(fs vfs.FS, dir string) error {
	d, err := fs.OpenDir(dir)
	if err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("cluster: sync %s: %w", dir, err)
	}
	return nil
}

func (s *logStore) close() error { return s.wal.Close() }

// meta returns the member's identity, or ok=false in a fresh log.
func (s *logStore) meta() (m logMeta, ok bool, err error) {
	b := s.wal.Meta()
	if b == nil {
		return m, false, nil
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return m, false, fmt.Errorf("cluster: raft log meta: %w", err)
	}
	return m, true, nil
}

// bootstrap records the member's identity and the initial member list,
// fsynced before raft starts.
func (s *logStore) bootstrap(m logMeta, members *memberSet) error {
	mb, err := json.Marshal(m)
	if err != nil {
		return err
	}
	if err := s.wal.Bootstrap(mb, members.marshal()); err != nil {
		return fmt.Errorf("cluster: raft log bootstrap: %w", err)
	}
	return nil
}

// loaded is what a restart starts from: the newest hard state, snapshot
// and member list (raft reads the entries from the log itself), and,
// from a legacy log only, the entries after the snapshot.
type loaded struct {
	hs       *pb.HardState
	snapshot *pb.Snapshot
	entries  []*pb.Entry
	members  *memberSet
}

// load returns the state a restart starts from.
func (s *logStore) load() (*loaded, error) {
	members, err := unmarshalMemberSet(s.wal.Members())
	if err != nil {
		return nil, err
	}
	snap, err := s.wal.Snapshot()
	if err != nil {
		return nil, err
	}
	return &loaded{hs: s.wal.HardState(), snapshot: snap, members: members}, nil
}

// saveMembers records the member list (fsynced).
func (s *logStore) saveMembers(m *memberSet) error {
	if err := s.wal.SaveMembers(m.marshal()); err != nil {
		return fmt.Errorf("cluster: raft log members: %w", err)
	}
	return nil
}
