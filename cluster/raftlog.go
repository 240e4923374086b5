package cluster

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"sync"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stratadb/strata/config"
	"github.com/stratadb/strata/engine"
	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// logStore is a member's durable raft state, kept in an engine.DB of its
// own (dir/raft) opened with sync = true:
//
//	m/meta       JSON logMeta: cluster ID, member ID and name (written once)
//	m/hardstate  raftpb.HardState
//	m/snapshot   raftpb.Snapshot: index, term, ConfState; Data is the
//	             memberSet at that index (the state machine keeps its own data)
//	m/members    JSON memberSet, with the index it was applied up to
//	e/<index>    raftpb.Entry, index big-endian; entries after the
//	             compaction point, which is at or below the snapshot
//
// Why the engine and not etcd's storage/wal: one storage technology (the
// same Pebble WAL, the same fault-injection tests), entries written by one
// atomic, fsynced batch per Ready (group commit for every proposal raft
// batched into it), and truncation is a range deletion instead of segment
// bookkeeping.
//
// save is called from the Ready loop only; saveSnapshot, compact and
// saveMembers from the apply goroutine. Their keys are disjoint except the
// hard state, which mu guards.
type logStore struct {
	db *engine.DB

	mu sync.Mutex
	// hs is the newest hard state raft gave us, written or not: a
	// commit-only change (MustSync false) is not fsynced by itself but is
	// written with the next batch.
	hs      *pb.HardState
	hsDirty bool
	// last is the index of the last entry stored; entries after a new
	// batch's last index are deleted (a new leader overwrote them).
	last uint64
}

// logMeta is what a member is: written at bootstrap, checked at restart.
type logMeta struct {
	ClusterID uint64 `json:"cluster_id"`
	MemberID  uint64 `json:"member_id"`
	Name      string `json:"name"`
	Token     string `json:"token"`
}

var (
	keyMeta      = []byte("m/meta")
	keyHardState = []byte("m/hardstate")
	keySnapshot  = []byte("m/snapshot")
	keyMembers   = []byte("m/members")
	entryPrefix  = []byte("e/")
)

func entryKey(index uint64) []byte {
	k := make([]byte, len(entryPrefix)+8)
	copy(k, entryPrefix)
	binary.BigEndian.PutUint64(k[len(entryPrefix):], index)
	return k
}

// openLogStore opens (creating if needed) the raft log store in dir, on
// fs (nil: the OS file system).
func openLogStore(dir string, fs vfs.FS) (*logStore, error) {
	if fs == nil {
		fs = vfs.Default
	}
	if err := mkdirAllSynced(fs, dir); err != nil {
		return nil, fmt.Errorf("cluster: raft log %s: %w", dir, err)
	}
	cfg := config.Default()
	cfg.DBPath = dir
	cfg.Sync = true // the raft log is acknowledged to peers: fsync every batch
	cfg.MemtableSizeMB = 16
	cfg.MaxWriteBufferNumber = 2
	cfg.BlockCacheSizeMB = 8
	cfg.CompressionDefault = "none" // entries are read back once, at restart
	db, err := engine.Open(cfg, engine.Options{FS: fs})
	if err != nil {
		return nil, fmt.Errorf("cluster: raft log %s: %w", dir, err)
	}
	s := &logStore{db: db, hs: &pb.HardState{}}
	return s, nil
}

// mkdirAllSynced creates dir and its missing parents, fsyncing each new
// directory's parent: a member that bootstraps and then loses power must
// still find its raft log (the engine syncs only its own directory).
func mkdirAllSynced(fs vfs.FS, dir string) error {
	var created []string
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		if _, err := fs.Stat(d); err == nil {
			break
		}
		created = append(created, d)
		if filepath.Dir(d) == d {
			break
		}
	}
	if err := fs.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, d := range created {
		pd, err := fs.OpenDir(filepath.Dir(d))
		if err != nil {
			return err
		}
		err = pd.Sync()
		if cerr := pd.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func (s *logStore) close() error { return s.db.Close() }

// meta returns the member's identity, or ok=false in a fresh store.
func (s *logStore) meta() (m logMeta, ok bool, err error) {
	b, err := s.db.Get(keyMeta)
	if errors.Is(err, engine.ErrNotFound) {
		return m, false, nil
	}
	if err != nil {
		return m, false, fmt.Errorf("cluster: raft log: %w", err)
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
	b := s.db.NewBatch()
	defer b.Close()
	if err := b.Put(keyMeta, mb); err != nil {
		return err
	}
	if err := b.Put(keyMembers, members.marshal()); err != nil {
		return err
	}
	if err := b.Commit(); err != nil {
		return fmt.Errorf("cluster: raft log bootstrap: %w", err)
	}
	return nil
}

// loaded is what a restart rebuilds raft's MemoryStorage from.
type loaded struct {
	hs       *pb.HardState
	snapshot *pb.Snapshot
	entries  []*pb.Entry
	members  *memberSet
}

// load reads the hard state, the snapshot, the entries after the snapshot
// and the member list.
func (s *logStore) load() (*loaded, error) {
	l := &loaded{hs: &pb.HardState{}, snapshot: pb.EnsureSnapshot(nil)}
	if err := s.getProto(keyHardState, l.hs); err != nil {
		return nil, err
	}
	if err := s.getProto(keySnapshot, l.snapshot); err != nil {
		return nil, err
	}
	l.snapshot = pb.EnsureSnapshot(l.snapshot)
	mb, err := s.db.Get(keyMembers)
	if err != nil && !errors.Is(err, engine.ErrNotFound) {
		return nil, fmt.Errorf("cluster: raft log: %w", err)
	}
	if l.members, err = unmarshalMemberSet(mb); err != nil {
		return nil, err
	}
	snapIndex := l.snapshot.GetMetadata().GetIndex()
	it, err := s.db.NewIter(&engine.IterOptions{LowerBound: entryKey(snapIndex + 1), UpperBound: entryKey(math.MaxUint64)})
	if err != nil {
		return nil, fmt.Errorf("cluster: raft log: %w", err)
	}
	defer it.Close()
	next := snapIndex + 1
	for ok := it.First(); ok; ok = it.Next() {
		e := &pb.Entry{}
		if err := proto.Unmarshal(it.Value(), e); err != nil {
			return nil, fmt.Errorf("cluster: raft log entry %x: %w", it.Key(), err)
		}
		if e.GetIndex() != next {
			return nil, fmt.Errorf("cluster: raft log: entry %d found where %d was expected: the log has a gap", e.GetIndex(), next)
		}
		next++
		l.entries = append(l.entries, e)
	}
	if err := it.Error(); err != nil {
		return nil, fmt.Errorf("cluster: raft log: %w", err)
	}
	s.mu.Lock()
	s.hs = proto.Clone(l.hs).(*pb.HardState)
	s.last = next - 1
	s.mu.Unlock()
	return l, nil
}

func (s *logStore) getProto(key []byte, m proto.Message) error {
	b, err := s.db.Get(key)
	if errors.Is(err, engine.ErrNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("cluster: raft log: %w", err)
	}
	if err := proto.Unmarshal(b, m); err != nil {
		return fmt.Errorf("cluster: raft log %s: %w", key, err)
	}
	return nil
}

// saveAppends writes raft's MsgStorageAppend messages, in order, in one
// batch: their entries (a later message's entries replace the tail they
// overwrite), the newest hard state and a snapshot. The batch is fsynced
// when raft's rule asks for it (entries, a snapshot, or a new term or
// vote: raft.MustSync); a batch that only moves the commit index is not
// written on its own (raft allows the commit index to lag on disk), the
// next batch carries it. It returns the newest hard state, or nil.
func (s *logStore) saveAppends(msgs []*pb.Message) (*pb.HardState, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var newest *pb.HardState
	mustSync := false
	b := s.db.NewBatch()
	defer b.Close()
	for _, m := range msgs {
		if hs := (&pb.HardState{Term: new(m.GetTerm()), Vote: new(m.GetVote()), Commit: new(m.GetCommit())}); !raft.IsEmptyHardState(hs) {
			if hs.GetTerm() != s.hs.GetTerm() || hs.GetVote() != s.hs.GetVote() {
				mustSync = true
			}
			s.hs, s.hsDirty, newest = hs, true, hs
		}
		if snap := m.GetSnapshot(); !raft.IsEmptySnap(snap) {
			mustSync = true
			sb, err := proto.Marshal(snap)
			if err != nil {
				return nil, err
			}
			if err := b.Put(keySnapshot, sb); err != nil {
				return nil, err
			}
			// The log up to the snapshot is replaced by it.
			if err := b.DeleteRange(entryKey(0), entryKey(snap.GetMetadata().GetIndex()+1)); err != nil {
				return nil, err
			}
			if s.last < snap.GetMetadata().GetIndex() {
				s.last = snap.GetMetadata().GetIndex()
			}
		}
		ents := m.GetEntries()
		for _, e := range ents {
			eb, err := proto.Marshal(e)
			if err != nil {
				return nil, err
			}
			if err := b.Put(entryKey(e.GetIndex()), eb); err != nil {
				return nil, err
			}
		}
		if n := len(ents); n > 0 {
			mustSync = true
			last := ents[n-1].GetIndex()
			if last < s.last { // a new leader's entries replaced a longer tail
				if err := b.DeleteRange(entryKey(last+1), entryKey(math.MaxUint64)); err != nil {
					return nil, err
				}
			}
			s.last = last
		}
	}
	if !mustSync {
		return newest, nil
	}
	if err := s.putHardState(b); err != nil {
		return nil, err
	}
	if err := b.Commit(); err != nil {
		return nil, fmt.Errorf("cluster: raft log write: %w", err)
	}
	return newest, nil
}

// putHardState adds the newest hard state to b if it was not written yet.
// Called with mu held.
func (s *logStore) putHardState(b *engine.Batch) error {
	if !s.hsDirty {
		return nil
	}
	hb, err := proto.Marshal(s.hs)
	if err != nil {
		return err
	}
	s.hsDirty = false
	return b.Put(keyHardState, hb)
}

// saveSnapshot records a snapshot this member took at its applied index,
// with the newest hard state (whose commit index is at least the
// snapshot's: a restart must not find a commit index below its snapshot).
func (s *logStore) saveSnapshot(snap *pb.Snapshot) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	sb, err := proto.Marshal(snap)
	if err != nil {
		return err
	}
	b := s.db.NewBatch()
	defer b.Close()
	if err := b.Put(keySnapshot, sb); err != nil {
		return err
	}
	s.hsDirty = true
	if err := s.putHardState(b); err != nil {
		return err
	}
	if err := b.Commit(); err != nil {
		return fmt.Errorf("cluster: raft log snapshot: %w", err)
	}
	return nil
}

// compact deletes the entries up to and including index.
func (s *logStore) compact(index uint64) error {
	if err := s.db.DeleteRange(entryKey(0), entryKey(index+1)); err != nil {
		return fmt.Errorf("cluster: raft log compaction: %w", err)
	}
	return nil
}

// saveMembers records the member list (fsynced).
func (s *logStore) saveMembers(m *memberSet) error {
	if err := s.db.Put(keyMembers, m.marshal()); err != nil {
		return fmt.Errorf("cluster: raft log members: %w", err)
	}
	return nil
}
