package engine

import (
	"errors"
	"fmt"
	"runtime"
	"sync"

	"github.com/cockroachdb/pebble/v2"
)

// ErrReadOnly is returned by writes, flushes, compactions and checkpoints on
// a database opened with Options.ReadOnly.
var ErrReadOnly = errors.New("engine: opened read-only")

// ErrLocked is returned by Open when another process has the database open
// for writing (a writer's lock excludes every other open, a reader's
// excludes writers): typically a server (`strata serve`) or a running
// `strata load`. The lock is per database directory.
var ErrLocked = errors.New("engine: database locked by another process, such as a running `strata serve` or `strata load` (stop it first, or go through the server: etcdctl)")

// opGate makes Close safe against every other call: operations hold it
// shared while they use Pebble, Close takes it exclusively after marking
// the DB closed, so an operation either finishes before Pebble closes or
// returns ErrClosed, and none touches a closed Pebble. Writes are counted
// by the write guard, which Close drains first.
type opGate struct {
	mu sync.RWMutex
	// iters and snaps are the iterators and snapshots not yet closed; Close
	// releases them, so later calls on them return ErrClosed.
	open map[openResource]struct{}
}

// openResource is an iterator or snapshot Close must release.
type openResource interface{ release() }

// enterOp admits a non-write operation; the caller must leaveOp.
func (db *DB) enterOp() error {
	db.ops.mu.RLock()
	if db.closed.Load() {
		db.ops.mu.RUnlock()
		return ErrClosed
	}
	if fe := db.fatal.Load(); fe != nil {
		db.ops.mu.RUnlock()
		return fmt.Errorf("%w: %w", ErrFatal, fe)
	}
	return nil
}

// ErrFatal is returned once Pebble met an error it cannot continue after
// (a failed WAL or MANIFEST write): the call that met it and every later
// call except Close return it, wrapping the *FatalError. Reopen the
// database; what was acknowledged before is there (as after a crash).
var ErrFatal = errors.New("engine: fatal storage error, reopen the database")

// FatalError is Pebble's fatal report: its message and, when it named one,
// the underlying error.
type FatalError struct {
	msg string
	err error
}

func (e *FatalError) Error() string { return e.msg }

// Unwrap returns the error Pebble reported, if any.
func (e *FatalError) Unwrap() error { return e.err }

// recoverFatal turns Pebble's fatal panic (pebbleLogger.Fatalf) in the
// calling goroutine into an ErrFatal error and makes the DB refuse every
// later call but Close. Other panics go on.
func (db *DB) recoverFatal(err *error) {
	r := recover()
	if r == nil {
		return
	}
	fe := asFatal(r)
	db.fatal.CompareAndSwap(nil, fe)
	*err = fmt.Errorf("%w: %w", ErrFatal, fe)
}

// asFatal returns the panic value r as a *FatalError: Pebble's Fatalf, or
// an I/O error Pebble panics with directly (a failed marker move). Any
// other panic, a runtime error included, is not ours to hide and goes on.
func asFatal(r any) *FatalError {
	switch v := r.(type) {
	case *FatalError:
		return v
	case runtime.Error:
	case error:
		return &FatalError{msg: "pebble: " + v.Error(), err: v}
	}
	panic(r)
}

// openPebble is pebble.Open with a fatal panic turned into an error.
func openPebble(dir string, opts *pebble.Options) (pdb *pebble.DB, err error) {
	defer func() {
		if r := recover(); r != nil {
			pdb, err = nil, fmt.Errorf("%w: %w", ErrFatal, asFatal(r))
		}
	}()
	return pebble.Open(dir, opts)
}

func (db *DB) leaveOp() { db.ops.mu.RUnlock() }

// track registers r for release at Close; the caller holds the op gate.
func (db *DB) track(r openResource) {
	db.resMu.Lock()
	defer db.resMu.Unlock()
	if db.ops.open == nil {
		db.ops.open = make(map[openResource]struct{})
	}
	db.ops.open[r] = struct{}{}
}

func (db *DB) untrack(r openResource) {
	db.resMu.Lock()
	defer db.resMu.Unlock()
	delete(db.ops.open, r)
}

// writable returns ErrReadOnly, naming the call, on a read-only database,
// and ErrNoSpace while the disk guard is tripped.
func (db *DB) writable(call string) error {
	if db.readOnly {
		return fmt.Errorf("%w: %s", ErrReadOnly, call)
	}
	return db.disk.admit(call)
}

// enterWrite admits a write whose keys lie within [lo, hi] (see
// writeGuard.enter); the caller must db.guard.leave(ticket).
func (db *DB) enterWrite(lo, hi []byte) (int, error) {
	if db.readOnly {
		return 0, fmt.Errorf("%w: write", ErrReadOnly)
	}
	if fe := db.fatal.Load(); fe != nil {
		return 0, fmt.Errorf("%w: %w", ErrFatal, fe)
	}
	if err := db.disk.admit("write"); err != nil {
		return 0, err
	}
	ticket, ok := db.guard.enter(lo, hi)
	if !ok {
		return 0, ErrClosed
	}
	return ticket, nil
}

// Close closes the database. It is safe to call concurrently with any other
// method: calls that began before it finish first (writes in flight are
// acknowledged or fail, never lost half-way; a running CompactAll is
// cancelled), calls after it return ErrClosed, and iterators and snapshots
// still open are released (their later calls return ErrClosed). Writes
// acknowledged before Close are in the WAL (or, with enable_wal = false,
// lost unless flushed). A second Close returns ErrClosed.
func (db *DB) Close() (err error) {
	if !db.closed.CompareAndSwap(false, true) {
		return ErrClosed
	}
	defer db.recoverFatal(&err)
	defer db.disk.stop()
	db.disk.beginClose()
	db.cancel()
	db.guard.close()
	db.ops.mu.Lock()
	defer db.ops.mu.Unlock()
	db.resMu.Lock()
	open := db.ops.open
	db.ops.open = nil
	db.resMu.Unlock()
	for r := range open {
		r.release()
	}
	db.closeLayout()
	return db.pdb.Close()
}
