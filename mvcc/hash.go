package mvcc

import (
	"fmt"
	"hash/crc32"

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
	snap, err := s.db.NewSnapshot()
	if err != nil {
		return 0, 0, 0, fmt.Errorf("mvcc: hash: %w", err)
	}
	defer snap.Close()
	it, err := snap.NewIter(&engine.IterOptions{
		LowerBound: revKey(keyindex.Revision{}),
		UpperBound: revKey(keyindex.Revision{Main: rev + 1}),
	})
	if err != nil {
		return 0, 0, 0, fmt.Errorf("mvcc: hash: %w", err)
	}
	defer it.Close()
	h := crc32.New(crc32.MakeTable(crc32.Castagnoli))
	for ok := it.First(); ok; ok = it.Next() {
		if isRevIndexKey(it.Key()) {
			// Derived from the record hashed: a member that wrote none
			// (before index records) hashes alike.
			continue
		}
		v, err := s.dicts.plain(it.Value())
		if err != nil {
			return 0, 0, 0, fmt.Errorf("mvcc: hash: revision key %x: %w", it.Key(), err)
		}
		h.Write(it.Key())
		h.Write(v)
	}
	if err := it.Error(); err != nil {
		return 0, 0, 0, fmt.Errorf("mvcc: hash: %w", err)
	}
	return h.Sum32(), rev, compacted, nil
}
