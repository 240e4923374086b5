package mvcc

// Entry is the store as seen by the apply loop of a replicated log: its
// writes store the entry's log index atomically with their data, and
// AppliedIndex returns the last one durable, so a member that restarts
// resumes the log after it. Every write of an Entry records its index,
// also one that changes nothing (a Txn whose branch writes nothing, a
// delete of a missing key) and one the store rejects for the request
// itself (a duplicate key, a compacted revision, an unknown lease): such
// an entry is applied, with the same error, on every member. Only a store
// failure, ErrClosed and ErrAlreadyApplied leave the index where it was.
//
// Indexes must increase: a write with an index at or below the last one
// fails with ErrAlreadyApplied and changes nothing, so replaying the log
// from an older position cannot apply an entry twice.
//
//	applied := s.AppliedIndex()
//	for _, e := range committedEntries {
//		if e.Index <= applied {
//			continue
//		}
//		switch req := decode(e.Data); req.kind {
//		case txn:
//			resp, err := s.Entry(e.Index).Txn(req.txn)
//		case compact:
//			err := s.Entry(e.Index).Compact(req.rev)
//		default: // a conf change, an empty entry
//			err := s.Entry(e.Index).Skip()
//		}
//	}
type Entry struct {
	s     *Store
	index uint64
}

// Entry returns the writes of the log entry at index (index 0: the
// Store's own writes, which record no index).
func (s *Store) Entry(index uint64) Entry { return Entry{s: s, index: index} }

// Txn is Store.Txn recording the entry's index. Even a Txn of only
// RangeOps goes through the write path, to record it.
func (e Entry) Txn(req TxnRequest) (TxnResponse, error) { return e.s.txn(e.index, req) }

// Compact is Store.Compact recording the entry's index, except that it
// returns once the compaction is scheduled, as etcd's apply does: the
// revisions below rev are gone from reads and from the index, and the
// schedule is durable, but their deletion from storage goes on in the
// background, so the apply loop does not hold every later entry up for
// it (a fifth of a second at 200,000 pods, docs/mvcc-compaction.md). WaitCompaction
// waits for it (etcd's physical compaction); the next Compact, HashKV,
// a snapshot restore and Close wait for it too, and Open resumes one cut
// short by a crash.
func (e Entry) Compact(rev int64) error { return e.s.compact(e.index, rev, true) }

// GrantLease is Store.GrantLease recording the entry's index.
func (e Entry) GrantLease(id, ttl int64) error { return e.s.grantLease(e.index, id, ttl) }

// RevokeLease is Store.RevokeLease recording the entry's index.
func (e Entry) RevokeLease(id int64) (rev int64, err error) { return e.s.revokeLease(e.index, id) }

// Skip records the entry's index with no other change, for entries that
// do not touch the store (configuration changes, a new leader's empty
// entry).
func (e Entry) Skip() error {
	return e.s.alone(func(b *Batch) error { return b.Skip(e.index) })
}
