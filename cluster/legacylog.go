package cluster

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stratadb/strata/config"
	"github.com/stratadb/strata/engine"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// legacyLog is the raft log as members kept it before raftwal: an
// engine.DB of its own (raft_dir/log). A member that finds one moves its
// state into raftwal at start (openLogStore) and removes it; these are
// the keys it had:
//
//	m/meta       JSON logMeta: cluster ID, member ID and name (written once)
//	m/hardstate  raftpb.HardState
//	m/snapshot   raftpb.Snapshot: index, term, ConfState; Data is the
//	             memberSet at that index (the state machine keeps its own data)
//	m/members    JSON memberSet, with the index it was applied up to
//	e/<index>    raftpb.Entry, index big-endian; entries after the
//	             compaction point, which is at or below the snapshot
type legacyLog struct {
	db *engine.DB
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

// openLegacyLog opens the legacy raft log in dir, on fs.
func openLegacyLog(dir string, fs vfs.FS) (*legacyLog, error) {
	cfg := config.Default()
	cfg.DBPath = dir
	cfg.Sync = true
	cfg.CompressionDefault = "none"
	db, err := engine.Open(cfg, engine.Options{FS: fs})
	if err != nil {
		return nil, fmt.Errorf("cluster: raft log %s: %w", dir, err)
	}
	return &legacyLog{db: db}, nil
}

func (s *legacyLog) close() error { return s.db.Close() }

// meta returns the member's identity, or ok=false in a fresh store.
func (s *legacyLog) meta() (m logMeta, ok bool, err error) {
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

// load reads the hard state, the snapshot, the entries after the snapshot
// and the member list.
func (s *legacyLog) load() (*loaded, error) {
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
		v, err := it.ValueAndErr()
		if err != nil {
			return nil, fmt.Errorf("cluster: raft log entry %x: %w", it.Key(), err)
		}
		e := &pb.Entry{}
		if err := proto.Unmarshal(v, e); err != nil {
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
	return l, nil
}

func (s *legacyLog) getProto(key []byte, m proto.Message) error {
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
