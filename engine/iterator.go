package engine

import (
	"bytes"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
)

// IterOptions bound an iterator. A nil bound is open.
type IterOptions struct {
	// LowerBound is the inclusive lower bound.
	LowerBound []byte
	// UpperBound is the exclusive upper bound.
	UpperBound []byte
}

// Iterator walks keys in order, forward (First, SeekGE, Next) or in reverse
// (Last, SeekLT, Prev), within its bounds, over a consistent view taken when
// it was created. Key and Value are valid until the next positioning call.
// An Iterator is not safe for concurrent use; Close it when done.
type Iterator struct {
	it *pebble.Iterator
}

// NewIter returns an iterator over the latest state; opts may be nil.
func (db *DB) NewIter(opts *IterOptions) (*Iterator, error) {
	if err := db.check(); err != nil {
		return nil, err
	}
	return newIter(db.pdb, opts)
}

func newIter(r pebble.Reader, opts *IterOptions) (*Iterator, error) {
	po := &pebble.IterOptions{}
	if opts != nil {
		// Equal bounds make an empty iterator; inverted bounds are an error.
		if opts.LowerBound != nil && opts.UpperBound != nil && bytes.Compare(opts.LowerBound, opts.UpperBound) > 0 {
			return nil, fmt.Errorf("%w: iterator bounds [%q, %q): the lower bound sorts after the upper bound", ErrInvalidRange, opts.LowerBound, opts.UpperBound)
		}
		po.LowerBound, po.UpperBound = opts.LowerBound, opts.UpperBound
	}
	it, err := r.NewIter(po)
	if err != nil {
		return nil, err
	}
	return &Iterator{it: it}, nil
}

// First moves to the first key and reports whether there is one.
func (i *Iterator) First() bool { return i.it.First() }

// Last moves to the last key and reports whether there is one.
func (i *Iterator) Last() bool { return i.it.Last() }

// SeekGE moves to the first key >= key.
func (i *Iterator) SeekGE(key []byte) bool { return i.it.SeekGE(key) }

// SeekLT moves to the last key < key.
func (i *Iterator) SeekLT(key []byte) bool { return i.it.SeekLT(key) }

// Next moves forward one key.
func (i *Iterator) Next() bool { return i.it.Next() }

// Prev moves back one key.
func (i *Iterator) Prev() bool { return i.it.Prev() }

// Valid reports whether the iterator is at a key.
func (i *Iterator) Valid() bool { return i.it.Valid() }

// Key returns the current key; valid until the next positioning call.
func (i *Iterator) Key() []byte { return i.it.Key() }

// Value returns the current value; valid until the next positioning call.
func (i *Iterator) Value() []byte { return i.it.Value() }

// Error returns the error that stopped the iteration, if any.
func (i *Iterator) Error() error { return i.it.Error() }

// Close releases the iterator and returns its error, if any.
func (i *Iterator) Close() error { return i.it.Close() }

// Snapshot is a consistent read-only view of the database at the moment it
// was taken. Close it when done: while any snapshot is open, CompactAll does
// not rewrite tables into their level's codec (see CompactAll).
type Snapshot struct {
	db   *DB
	snap *pebble.Snapshot
}

// NewSnapshot takes a snapshot of the current state.
func (db *DB) NewSnapshot() (*Snapshot, error) {
	if err := db.check(); err != nil {
		return nil, err
	}
	// Taken and counted under writeMu, so a table rewrite (which holds it
	// exclusively and requires no open snapshot) never runs beside one.
	db.writeMu.RLock()
	defer db.writeMu.RUnlock()
	db.openSnapshots.Add(1)
	return &Snapshot{db: db, snap: db.pdb.NewSnapshot()}, nil
}

// Get returns a copy of key's value as of the snapshot, or ErrNotFound.
func (s *Snapshot) Get(key []byte) ([]byte, error) { return get(s.snap, key) }

// View is DB.View as of the snapshot.
func (s *Snapshot) View(key []byte, fn func(value []byte) error) error { return view(s.snap, key, fn) }

// NewIter returns an iterator over the snapshot; opts may be nil.
func (s *Snapshot) NewIter(opts *IterOptions) (*Iterator, error) { return newIter(s.snap, opts) }

// Close releases the snapshot.
func (s *Snapshot) Close() error {
	err := s.snap.Close()
	s.db.openSnapshots.Add(-1)
	return err
}
