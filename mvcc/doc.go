// Package mvcc is a revisioned key-value store on an engine.DB, after
// etcd's server/storage/mvcc: every write transaction makes a new revision,
// every version of every key stays readable until compacted, and watchers
// receive each change in revision order.
//
//	db, _ := engine.Open(cfg) // cfg.Sync = true for durable writes
//	s, err := mvcc.Open(db, mvcc.Options{})
//	if err != nil { ... }
//	defer s.Close()
//	rev, _ := s.Put([]byte("k"), []byte("v1"))
//	_, _ = s.Put([]byte("k"), []byte("v2"))
//	old, _ := s.Range([]byte("k"), nil, mvcc.RangeOptions{Rev: rev}) // v1
//	_ = s.Compact(rev + 1)                                          // drops v1
//
// # Storage
//
// A revision is a main revision (one per write transaction) and a sub
// revision (one per key written in it). Each version is stored in the
// engine under its revision, big-endian, so writes append at the end of the
// key space and the LSM writes them sequentially. The value is a record
// holding the key, the value, create_revision, mod_revision, version and a
// tombstone flag (see codec.go). The current revision and the compaction
// state are metadata keys written in the same batch as the data, so every
// transaction and every compaction step is atomic.
//
// # Index
//
// The in-memory index (package keyindex) maps each key to its revision
// history, with etcd's generations (a key deleted and created again). It
// is rebuilt on Open by scanning the revision keys, and laid out for
// memory: about 20 bytes per key plus the key itself, and about 5 bytes per
// version (see keyindex.Index and internal/memtable for the measurement).
//
// # Differences from etcd
//
//   - Watch from the compacted revision itself fails with ErrCompacted
//     (etcd accepts it and may miss a deletion at that revision).
//   - RangeOps in a Txn read the store as of the start of the Txn.
//   - After an engine write fails the store refuses writes until reopened:
//     the failed write may or may not have reached storage.
package mvcc
