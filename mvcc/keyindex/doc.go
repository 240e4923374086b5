// Package keyindex is the in-memory index of package mvcc: for every key,
// its revision history (etcd's keyIndex, with generations), in an ordered
// structure that answers "which version of key k, or of the keys in
// [a, b), was visible at revision r".
//
//	ix := keyindex.New()
//	_ = ix.Put([]byte("a"), keyindex.Revision{Main: 1})
//	_ = ix.Put([]byte("a"), keyindex.Revision{Main: 2})
//	_, _ = ix.Tombstone([]byte("a"), keyindex.Revision{Main: 3})
//	kr, ok := ix.Get([]byte("a"), 2) // {Mod: 2, Create: 1, Version: 2}, true
//	ix.Compact(3, nil)               // "a" is gone: deleted at or below 3
//
// # Memory
//
// The layout is chosen for memory, measured with etcd's method (see
// internal/memtable; the rows and the fit are in docs/benchmarks.md,
// section 4): per key about 17 bytes of live heap beside the key itself,
// per version about 5 bytes, against etcd's 120 and 30 (113 and 28 measured on
// our machine) and 53 and 14 for a plain B-tree of {key []byte,
// revs []int64}. See Index for how. A key with history not yet compacted
// also has an 8-byte entry in the log that lets Compact visit only such
// keys (dueLog): in the benchmark's rows, which never compact, a version
// then costs 7.5 bytes (1,000,000 keys, 5 versions).
package keyindex
