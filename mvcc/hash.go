package mvcc

import (
	"cmp"
	"fmt"
	"hash/crc32"
	"slices"

	"github.com/stratadb/strata/engine"
	"github.com/stratadb/strata/mvcc/keyindex"
)

// HashKV returns a CRC-32 (Castagnoli, as etcd's) of every version the
// store keeps at or below rev, deletions included, in revision order: the
// stored revision keys and records, which encode key, value, create and
// mod revision, version and lease (not the index records, see codec.go). It is what etcd's HashKV is for,
// comparing members' stores (`etcdctl endpoint hashkv --cluster`): members
// that applied the same log up to rev and compacted at the same revision
// give the same hash, so a difference means a member diverged. rev 0 is
// the current revision; hashRev is the revision hashed, compactRev the
// compacted revision (hashes are comparable only when both agree). It
// waits for a compaction in progress, which would change what is kept.
func (s *Store) HashKV(rev int64) (hash uint32, hashRev, compactRev int64, err error) {
	if h, ok := s.compactionHash(rev); ok {
		// Kept by a compaction at rev (HashCompactions): what HashKV(rev)
		// gave then, also once a later compaction dropped that history.
		return h.Hash, h.Revision, h.CompactRevision, nil
	}
	s.compactMu.Lock()
	defer s.compactMu.Unlock()
	if s.closed.Load() {
		return 0, 0, 0, ErrClosed
	}
	if err := s.finishLeftover(); err != nil {
		return 0, 0, 0, err
	}
	cur, compacted := s.Rev(), s.CompactRev()
	switch {
	case rev == 0:
		rev = cur
	case rev > cur:
		return 0, 0, 0, fmt.Errorf("%w: hash at %d, current revision is %d", ErrFutureRev, rev, cur)
	case rev < compacted:
		return 0, 0, 0, fmt.Errorf("%w: hash at %d, compacted at %d", ErrCompacted, rev, compacted)
	}
	h, err := s.hashAt(rev)
	if err != nil {
		return 0, 0, 0, err
	}
	return h, rev, compacted, nil
}

// hashAt hashes the versions kept at or below rev (see HashKV). The
// caller holds compactMu, so no compaction changes them meanwhile.
func (s *Store) hashAt(rev int64) (uint32, error) {
	snap, err := s.db.NewSnapshot()
	if err != nil {
		return 0, fmt.Errorf("mvcc: hash: %w", err)
	}
	defer snap.Close()
	it, err := snap.NewIter(&engine.IterOptions{
		LowerBound: revKey(keyindex.Revision{}),
		UpperBound: revKey(keyindex.Revision{Main: rev + 1}),
	})
	if err != nil {
		return 0, fmt.Errorf("mvcc: hash: %w", err)
	}
	defer it.Close()
	h := crc32.New(crc32.MakeTable(crc32.Castagnoli))
	for ok := it.First(); ok; ok = it.Next() {
		if isRevIndexKey(it.Key()) {
			// Derived from the record hashed: a member that wrote none
			// (before index records) hashes alike.
			continue
		}
		v, err := it.ValueAndErr()
		if err == nil {
			v, err = s.dicts.plain(v)
		}
		if err != nil {
			return 0, fmt.Errorf("mvcc: hash: revision key %x: %w", it.Key(), err)
		}
		h.Write(it.Key())
		h.Write(v)
	}
	if err := it.Error(); err != nil {
		return 0, fmt.Errorf("mvcc: hash: %w", err)
	}
	return h.Sum32(), nil
}

// CompactionHash is the hash of a store at the revision of one of its
// compactions, taken when the compaction finished (Options.HashCompactions):
// HashKV(Revision) then, with CompactRevision = Revision. Members that
// applied the same log keep equal hashes for the same compaction, whenever
// each ran it, which is what etcd's compact hash check compares.
type CompactionHash struct {
	Hash                      uint32
	Revision, CompactRevision int64
}

// maxCompactionHashes is how many compactions' hashes a store keeps, as
// etcd's hashStorage (hashStorageMaxSize).
const maxCompactionHashes = 10

// CompactionHashes returns the hashes kept of the last compactions (at
// most 10), in increasing revision order; none without
// Options.HashCompactions. They live in memory only: a reopened store
// starts with none, as etcd's.
func (s *Store) CompactionHashes() []CompactionHash {
	s.hashMu.Lock()
	defer s.hashMu.Unlock()
	return slices.Clone(s.hashes)
}

// compactionHash returns the hash kept for the compaction at rev.
func (s *Store) compactionHash(rev int64) (CompactionHash, bool) {
	if rev <= 0 {
		return CompactionHash{}, false
	}
	s.hashMu.Lock()
	defer s.hashMu.Unlock()
	for _, h := range s.hashes {
		if h.Revision == rev {
			return h, true
		}
	}
	return CompactionHash{}, false
}

// keepCompactionHash hashes the store at job's revision once the
// compaction finished, and keeps it (the last maxCompactionHashes). The
// caller holds compactMu. A failure to hash is logged and keeps nothing:
// the check then skips that revision.
func (s *Store) keepCompactionHash(rev int64) {
	h, err := s.hashAt(rev)
	if err != nil {
		s.logErrorf("mvcc: hash of the compaction at revision %d: %v", rev, err)
		return
	}
	s.logInfof("mvcc: storing new hash: hash %d, revision %d, compact-revision %d", h, rev, rev)
	s.hashMu.Lock()
	defer s.hashMu.Unlock()
	s.hashes = append(s.hashes, CompactionHash{Hash: h, Revision: rev, CompactRevision: rev})
	slices.SortFunc(s.hashes, func(a, b CompactionHash) int { return cmp.Compare(a.Revision, b.Revision) })
	if n := len(s.hashes); n > maxCompactionHashes {
		s.hashes = slices.Delete(s.hashes, 0, n-maxCompactionHashes)
	}
}

// forgetCompactionHashes drops the hashes kept: the store's history was
// replaced (a snapshot restored).
func (s *Store) forgetCompactionHashes() {
	s.hashMu.Lock()
	s.hashes = nil
	s.hashMu.Unlock()
}
