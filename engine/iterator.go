package engine

import (
	"bytes"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"

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
// it was created. Key and ValueAndErr's value are valid until the next
// positioning call. Read values with ValueAndErr: a value kept in a blob
// file is fetched there, and the fetch can fail. An Iterator is not safe
// for concurrent use; Close it when done. After the DB is closed,
// positioning calls return false and Error returns ErrClosed.
type Iterator struct {
	db *DB
	it *pebble.Iterator
	// state orders the iterator's calls against DB.Close releasing it: a
	// call moves it from iterIdle to iterBusy and back (two atomic
	// operations, no lock on the scan path); release waits for iterIdle.
	state atomic.Int32
	err   error
}

const (
	iterIdle int32 = iota
	iterBusy
	iterReleased
)

// NewIter returns an iterator over the latest state; opts may be nil.
func (db *DB) NewIter(opts *IterOptions) (*Iterator, error) {
	if err := db.enterOp(); err != nil {
		return nil, err
	}
	defer db.leaveOp()
	po, err := pebbleIterOptions(opts)
	if err != nil {
		return nil, err
	}
	it, err := db.pdb.NewIter(po)
	if err != nil {
		return nil, err
	}
	return db.newIterator(it), nil
}

func (db *DB) newIterator(it *pebble.Iterator) *Iterator {
	i := &Iterator{db: db, it: it}
	db.track(i)
	return i
}

func pebbleIterOptions(opts *IterOptions) (*pebble.IterOptions, error) {
	po := &pebble.IterOptions{}
	if opts != nil {
		// Equal bounds make an empty iterator; inverted bounds are an error.
		if opts.LowerBound != nil && opts.UpperBound != nil && bytes.Compare(opts.LowerBound, opts.UpperBound) > 0 {
			return nil, fmt.Errorf("%w: iterator bounds [%q, %q): the lower bound sorts after the upper bound", ErrInvalidRange, opts.LowerBound, opts.UpperBound)
		}
		po.LowerBound, po.UpperBound = opts.LowerBound, opts.UpperBound
	}
	return po, nil
}

// release closes the Pebble iterator for DB.Close, once no call of the
// iterator's owner is running.
func (i *Iterator) release() {
	for !i.state.CompareAndSwap(iterIdle, iterReleased) {
		if i.state.Load() == iterReleased {
			return
		}
		runtime.Gosched()
	}
	i.err = errors.Join(ErrClosed, i.it.Close())
}

// begin starts a call; false once the iterator is released.
func (i *Iterator) begin() bool { return i.state.CompareAndSwap(iterIdle, iterBusy) }

func (i *Iterator) end() { i.state.Store(iterIdle) }

// move runs a positioning call unless the iterator was released.
func (i *Iterator) move(f func(*pebble.Iterator) bool) bool {
	if !i.begin() {
		return false
	}
	defer i.end()
	return f(i.it)
}

// First moves to the first key and reports whether there is one.
func (i *Iterator) First() bool { return i.move((*pebble.Iterator).First) }

// Last moves to the last key and reports whether there is one.
func (i *Iterator) Last() bool { return i.move((*pebble.Iterator).Last) }

// SeekGE moves to the first key >= key.
func (i *Iterator) SeekGE(key []byte) bool {
	return i.move(func(it *pebble.Iterator) bool { return it.SeekGE(key) })
}

// SeekLT moves to the last key < key.
func (i *Iterator) SeekLT(key []byte) bool {
	return i.move(func(it *pebble.Iterator) bool { return it.SeekLT(key) })
}

// Next moves forward one key.
func (i *Iterator) Next() bool {
	if !i.begin() {
		return false
	}
	ok := i.it.Next()
	i.end()
	return ok
}

// Prev moves back one key.
func (i *Iterator) Prev() bool { return i.move((*pebble.Iterator).Prev) }

// Valid reports whether the iterator is at a key.
func (i *Iterator) Valid() bool { return i.move((*pebble.Iterator).Valid) }

// Key returns the current key; valid until the next positioning call.
func (i *Iterator) Key() []byte {
	if !i.begin() {
		return nil
	}
	k := i.it.Key()
	i.end()
	return k
}

// ValueAndErr returns the current value, valid until the next positioning
// call. A value kept in a blob file (enable_blob_files) is read from it
// here, so the read can fail: a damaged blob file returns an error that
// errors.Is finds ErrCorruption in (and Options.OnCorruption is told), a
// nil value, and leaves the iterator exhausted, its Error the same error.
// After DB.Close it returns ErrClosed.
func (i *Iterator) ValueAndErr() ([]byte, error) {
	if !i.begin() {
		if i.err != nil {
			return nil, i.err
		}
		return nil, ErrClosed
	}
	v, err := i.it.ValueAndErr()
	i.end()
	if err != nil {
		return nil, i.db.seen(err)
	}
	return v, nil
}

// Value returns the current value, or nil if it cannot be read.
//
// Deprecated: Value hides the error of reading a value kept in a blob
// file: on a damaged blob file it returns nil, which a caller takes for an
// empty value (the error shows only in a later Error). Use ValueAndErr.
func (i *Iterator) Value() []byte {
	v, _ := i.ValueAndErr()
	return v
}

// Error returns the error that stopped the iteration, if any.
func (i *Iterator) Error() error {
	if !i.begin() {
		return i.err
	}
	defer i.end()
	return i.db.seen(i.it.Error())
}

// Close releases the iterator and returns its error, if any. After
// DB.Close it returns nil: the DB released it.
func (i *Iterator) Close() error {
	if err := i.db.enterOp(); err != nil {
		return nil // DB.Close released it, or will
	}
	defer i.db.leaveOp()
	if !i.state.CompareAndSwap(iterIdle, iterReleased) {
		return nil // closed already
	}
	i.db.untrack(i)
	return i.db.seen(i.it.Close())
}

// Snapshot is a consistent read-only view of the database at the moment it
// was taken. It is safe for concurrent use. Close it when done: like an
// open iterator, a snapshot keeps the memtables and table files of its
// moment alive (it pins Pebble's read state), so a long-lived snapshot
// costs memory and disk. In return it is immune to table rewrites: a
// CompactAll running beside it neither waits for it nor changes what it
// reads.
type Snapshot struct {
	db *DB
	// pin is an iterator never positioned: its read state and sequence
	// number are the snapshot; reads clone it.
	pin      *pebble.Iterator
	mu       sync.Mutex
	released bool
}

// NewSnapshot takes a snapshot of the current state. It never waits for a
// rewrite or a write.
func (db *DB) NewSnapshot() (*Snapshot, error) {
	if err := db.enterOp(); err != nil {
		return nil, err
	}
	defer db.leaveOp()
	pin, err := db.pdb.NewIter(nil)
	if err != nil {
		return nil, err
	}
	s := &Snapshot{db: db, pin: pin}
	db.openSnapshots.Add(1)
	db.track(s)
	return s, nil
}

// clone returns a new Pebble iterator over the snapshot with opts.
func (s *Snapshot) clone(opts *pebble.IterOptions) (*pebble.Iterator, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.released {
		return nil, ErrClosed
	}
	return s.pin.Clone(pebble.CloneOptions{IterOptions: opts})
}

// Get returns a copy of key's value as of the snapshot, or ErrNotFound.
func (s *Snapshot) Get(key []byte) ([]byte, error) {
	var out []byte
	err := s.View(key, func(v []byte) error {
		out = append([]byte(nil), v...)
		return nil
	})
	return out, err
}

// View is DB.View as of the snapshot.
func (s *Snapshot) View(key []byte, fn func(value []byte) error) error {
	if err := s.db.enterOp(); err != nil {
		return err
	}
	defer s.db.leaveOp()
	it, err := s.clone(&pebble.IterOptions{
		LowerBound:   key,
		UpperBound:   append(bytes.Clone(key), 0),
		UseL6Filters: s.db.useL6Filters(),
	})
	if err != nil {
		return err
	}
	return s.db.seen(seekPoint(it, key, fn))
}

// NewIter returns an iterator over the snapshot; opts may be nil.
func (s *Snapshot) NewIter(opts *IterOptions) (*Iterator, error) {
	if err := s.db.enterOp(); err != nil {
		return nil, err
	}
	defer s.db.leaveOp()
	po, err := pebbleIterOptions(opts)
	if err != nil {
		return nil, err
	}
	it, err := s.clone(po)
	if err != nil {
		return nil, err
	}
	return s.db.newIterator(it), nil
}

// release closes the pinned iterator for DB.Close.
func (s *Snapshot) release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.released {
		s.released = true
		s.db.openSnapshots.Add(-1)
		_ = s.pin.Close()
	}
}

// Close releases the snapshot.
func (s *Snapshot) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.released {
		return nil
	}
	s.released = true
	s.db.openSnapshots.Add(-1)
	s.db.untrack(s)
	return s.pin.Close()
}
