// Package mvcc is a revisioned key-value store on an engine.DB that
// behaves as etcd's server/storage/mvcc (with etcd's lessor's key sets):
// every write transaction makes a new revision, every version of every key
// stays readable until compacted, and watchers receive each change in
// revision order. A randomized test (mvcc/etcddiff) runs the same
// operations against etcd's own storage code and requires identical
// results.
//
//	db, _ := engine.Open(cfg) // cfg.Sync = true for durable writes
//	s, err := mvcc.Open(db, mvcc.Options{})
//	if err != nil { ... }
//	defer s.Close()
//	rev, _ := s.Put([]byte("k"), []byte("v1")) // 2: an empty store is at 1
//	_, _ = s.Put([]byte("k"), []byte("v2"))
//	old, _ := s.Range([]byte("k"), nil, mvcc.RangeOptions{Rev: rev}) // v1
//	_ = s.Compact(rev + 1)                                          // drops v1
//
// # How etcd's requests map onto the API
//
// Revisions: an empty store is at revision 1 and its first write makes 2.
// Store.Rev is etcd's header revision; a write that changes nothing (a
// delete of a missing key, a Txn whose branch writes nothing) makes no
// revision.
//
//   - Range: Store.Range(key, end, RangeOptions{Rev, Limit, KeysOnly,
//     CountOnly}). end nil is one key, "\x00" every key from key on (pass
//     etcd's range_end through unchanged), PrefixEnd builds a prefix's end.
//     RangeResult.Count counts every key in range (etcd's count; more is
//     Count > len(KVs)), RangeResult.Rev is the header revision. Sorting
//     and the min/max revision filters are the server's, on the result.
//   - Put: Txn with one PutOp, setting Op.Lease, Op.PrevKV, Op.IgnoreValue,
//     Op.IgnoreLease as in etcd's PutRequest; TxnResponse.Rev is the header
//     revision, OpResponse.PrevKV the prev_kv. (Store.Put is the plain
//     case.)
//   - DeleteRange: Txn with one DeleteOp (Op.PrevKV for prev_kvs);
//     OpResponse.Deleted, TxnResponse.Rev.
//   - Txn: TxnRequest{Compare, Success, Failure}. Compares cover a key or a
//     range (Compare.End) with etcd's targets (value, version, create,
//     mod, lease) and results. Each op sees the writes of the ops before it
//     in the same Txn, as in etcd; OpResponse.Rev is each op's header
//     revision. A nested txn (etcd's RequestOp_RequestTxn) is an OpTxn
//     (TxnOp): its compares, like the outer ones, see the state before
//     the whole Txn; its ops run where they stand, at the same revision;
//     OpResponse.Txn is its result.
//   - Compact: Store.Compact(rev). The first compaction may be at 0, even
//     on an empty store, as in etcd.
//   - Watch: Store.Watch(ctx, key, end, fromRev, WithPrevKV()) for one
//     watcher with its channel; Store.NewWatchStream for many watchers
//     sharing one consumer (the server's gRPC streams: no goroutine per
//     watcher; a write finds its watchers through an index). fromRev may
//     be the compacted revision itself; below it Watch returns
//     ErrCompacted, and the server answers etcd's created-then-canceled
//     response with compact_revision = Store.CompactRev().
//   - Leases: GrantLease(id, ttl), RevokeLease(id) (deletes every attached
//     key in one revision), Leases() and Lease(id) list them with their
//     keys. The store keeps no clock: the server decides when a lease has
//     expired and revokes it (through the log, in a cluster), and keeps
//     TTLs and keep-alives itself.
//   - Auth state (etcd's auth buckets): Entry.WriteAux writes the layer
//     above's small values in the aux key space (no revision, no watch
//     event), Store.ReadAux reads them by prefix; snapshots carry them.
//   - A replicated log: Batch stages the writes of many log entries
//     (Txn, Skip) in one engine commit recording the last index; a write
//     by itself is a batch of one, and Store.Entry(index) is that for the
//     writes that are never staged (Compact, GrantLease, RevokeLease,
//     WriteAux). Store.AppliedIndex is where to resume. See Batch.
//
// Errors are sentinels to test with errors.Is. Which of them is a
// request's own fault, and the etcd gRPC error each becomes, is written
// once, in the server's error table (server/errors.go).
//
// # Durability and group commit
//
// A write returns once it is durable (with the engine's sync = true) and
// visible: a Range after it sees it. Concurrent writers share WAL syncs:
// each takes the write lock only to assign its revision and apply its
// batch, then waits for the sync outside it, so all writes that arrive
// while a sync is in flight are made durable by the next one. Readers and
// watchers see a revision only once it is durable, and revisions in order
// (see commit.go).
//
// # Storage
//
// A revision is a main revision (one per write transaction) and a sub
// revision (one per key written in it). Each version is stored in the
// engine under its revision, big-endian, so writes append at the end of the
// key space and the LSM writes them sequentially. The value is a record
// holding the key, the value, create_revision, mod_revision, version, lease
// and a tombstone flag (see codec.go). The current revision, the
// compaction state, the applied index and the leases are written in the
// same batch as the data they go with, so every transaction and every
// compaction step is atomic.
//
// # Index
//
// The in-memory index (package keyindex) maps each key to its revision
// history, with etcd's generations (a key deleted and created again). It
// is rebuilt on Open by scanning the revision keys, and laid out for
// memory: the package doc of keyindex states the measured bytes per key
// and per version, and keyindex.Index how they are reached.
//
// # Stores written before etcd's numbering
//
// Stores written by earlier versions of this package started at revision 0
// with the first write at 1, and refused Compact(0) and a watch from the
// compacted revision. They open unchanged: an empty one is at revision 1,
// one with data keeps its revisions and continues from its current one
// (revisions stay unique and increasing; only the first write's number
// differs from etcd's). Records without a lease decode with lease 0. No
// rewrite is needed.
//
// # Differences from etcd
//
//   - After an engine write or WAL sync fails the store refuses writes
//     until reopened: the failed write may or may not have reached storage
//     (etcd panics).
//   - Two Txns that would write one key twice in a revision, which etcd
//     accepts, are ErrDuplicateKeyInTxn (see collectWrites and
//     docs/mvcc.md).
package mvcc
