package engine

import (
	"bytes"
	"errors"

	"github.com/cockroachdb/pebble/v2"
)

// Point reads and the bloom filters of the bottommost level.
//
// Pebble's DB.Get consults the bloom filter of every table in L0-L5 but
// never the filters of L6 tables (file_cache.go: filter blocks of L6 are
// skipped unless an iterator sets IterOptions.UseL6Filters), which is
// RocksDB's optimize_filters_for_hits = true. Once a database has grown,
// L6 holds most of the data, so a read of an absent key pays an index and a
// data block read in L6. RocksDB's default, optimize_filters_for_hits =
// false, consults the bottommost filters too; Strata delivers it with a
// prefix seek: an iterator with UseL6Filters, SeekPrefixGE(key). With
// Pebble's default comparer the prefix of a key is the whole key, which is
// what the filters hold, so a filter that rules the key out skips the
// table's data blocks on every level.
//
// Measured in engine/filters_bench_test.go (figures in docs/benchmarks.md):
// on a database larger than its block cache, absent-key reads through the
// L6 filters are several times faster than Pebble's Get, and present-key
// reads cost about the same.

// useL6Filters reports whether point reads go through the L6 filters:
// optimize_filters_for_hits = false and filters configured.
func (db *DB) useL6Filters() bool {
	return !db.cfg.OptimizeFiltersForHits && db.cfg.BloomBitsPerKey > 0
}

// pointIterOptions are the options of the prefix-seek point read: the
// bottommost filters consulted.
var pointIterOptions = pebble.IterOptions{UseL6Filters: true}

// lookup calls fn with the value of key in r, or returns ErrNotFound. With
// l6Filters the read is a prefix seek that consults the filters of every
// level, L6 included; without, Pebble's Get (no L6 filters). The value is
// valid only until fn returns.
func lookup(r pebble.Reader, key []byte, l6Filters bool, fn func(value []byte) error) error {
	if !l6Filters {
		v, closer, err := r.Get(key)
		if errors.Is(err, pebble.ErrNotFound) {
			return ErrNotFound
		}
		if err != nil {
			return err
		}
		return errors.Join(fn(v), closer.Close())
	}
	it, err := r.NewIter(&pointIterOptions)
	if err != nil {
		return err
	}
	return seekPoint(it, key, fn)
}

// seekPoint finds key with a prefix seek on it, calls fn with its value or
// returns ErrNotFound, and closes it.
func seekPoint(it *pebble.Iterator, key []byte, fn func(value []byte) error) error {
	if !it.SeekPrefixGE(key) || !bytes.Equal(it.Key(), key) {
		if err := it.Close(); err != nil {
			return err
		}
		return ErrNotFound
	}
	v, err := it.ValueAndErr()
	if err != nil {
		return errors.Join(err, it.Close())
	}
	return errors.Join(fn(v), it.Close())
}
