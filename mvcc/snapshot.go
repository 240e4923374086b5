package mvcc

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/stratadb/strata/engine"
	"github.com/stratadb/strata/mvcc/keyindex"
)

// A store snapshot is what a replicated member that fell behind the log,
// or a new member, receives instead of the entries it missed: every key of
// the store's key space (revisions, metadata, leases, aux) as of one point, in
// key order, each as uvarint key length, key, uvarint value length, value;
// then a zero key length. The applied index is among the metadata.

// WriteSnapshot writes the whole store, as of one consistent point, to w
// and returns the applied index of that point. It runs beside writes and
// reads (it reads an engine snapshot).
func (s *Store) WriteSnapshot(w io.Writer) (uint64, error) {
	if s.closed.Load() {
		return 0, ErrClosed
	}
	snap, err := s.db.NewSnapshot()
	if err != nil {
		return 0, fmt.Errorf("mvcc: snapshot: %w", err)
	}
	defer snap.Close()
	var applied int64
	if b, err := snap.Get(metaApplied); err == nil {
		if applied, err = decodeInt64(metaApplied, b); err != nil {
			return 0, err
		}
	} else if !errors.Is(err, engine.ErrNotFound) {
		return 0, fmt.Errorf("mvcc: snapshot: %w", err)
	}
	it, err := snap.NewIter(nil)
	if err != nil {
		return 0, fmt.Errorf("mvcc: snapshot: %w", err)
	}
	defer it.Close()
	bw := bufio.NewWriterSize(w, 256<<10)
	var lenBuf [binary.MaxVarintLen64]byte
	for ok := it.First(); ok; ok = it.Next() {
		k := it.Key()
		if isCheckpointToken(k) {
			continue // it names a file beside this engine only
		}
		v, err := it.ValueAndErr()
		if err != nil {
			return 0, fmt.Errorf("mvcc: snapshot: %w", err)
		}
		bw.Write(lenBuf[:binary.PutUvarint(lenBuf[:], uint64(len(k)))])
		bw.Write(k)
		bw.Write(lenBuf[:binary.PutUvarint(lenBuf[:], uint64(len(v)))])
		if _, err := bw.Write(v); err != nil {
			return 0, fmt.Errorf("mvcc: snapshot: %w", err)
		}
	}
	if err := it.Error(); err != nil {
		return 0, fmt.Errorf("mvcc: snapshot: %w", err)
	}
	bw.Write(lenBuf[:binary.PutUvarint(lenBuf[:], 0)])
	if err := bw.Flush(); err != nil {
		return 0, fmt.Errorf("mvcc: snapshot: %w", err)
	}
	return uint64(applied), nil
}

// RestoreSnapshot replaces the whole store with a snapshot written by
// WriteSnapshot: PrepareRestore, then PreparedRestore.Commit. Readers see
// the old state, then the new one. Watchers stay: each reads the new
// history from its next revision on, as after falling behind (or stops
// with ErrCompacted if the snapshot compacted past it). The new contents
// are written atomically: a snapshot that does not decode changes nothing
// (ErrCorrupt); a failed engine write fails the store, to be reopened.
func (s *Store) RestoreSnapshot(r io.Reader) error {
	p, err := s.PrepareRestore(r)
	if err != nil {
		if errors.Is(err, ErrCorrupt) || errors.Is(err, ErrClosed) {
			return err // nothing was written
		}
		return s.fail(fmt.Errorf("mvcc: store failed, reopen it: %w", err))
	}
	return p.Commit()
}

// PreparedRestore is a snapshot read and written into tables (with the key
// index of its revisions built as it went by), not yet in place of the
// store's contents: Commit puts it there, Discard drops it. A raft member
// prepares a snapshot while it arrives from the leader, and commits it once
// raft has taken the snapshot. Exactly one of Commit and Discard is to be
// called.
type PreparedRestore struct {
	s      *Store
	tables *engine.SpanTables
	built  *restorer
}

// PrepareRestore reads a snapshot written by WriteSnapshot from r into
// tables, checking it (every key a store key, in increasing order, the
// revisions consistent, the stream complete: else ErrCorrupt), without
// changing the store: it runs beside writes and reads, which Commit's
// ingestion then replaces. The snapshot is never held in memory nor
// written through the WAL. On an error nothing was changed and every table
// written is removed.
func (s *Store) PrepareRestore(r io.Reader) (*PreparedRestore, error) {
	if s.closed.Load() {
		return nil, ErrClosed
	}
	if err := s.failure(); err != nil && !errors.Is(err, engine.ErrCorruption) {
		return nil, err
	}
	built, err := newRestorer(keyindex.New(), nil)
	if err != nil {
		return nil, err
	}
	tables, err := s.db.WriteSpan([]byte{0}, []byte{0xff}, snapshotFill(bufio.NewReaderSize(r, 256<<10), built))
	if err != nil {
		return nil, fmt.Errorf("mvcc: restore snapshot: %w", err)
	}
	return &PreparedRestore{s: s, tables: tables, built: built}, nil
}

// Commit replaces every key of the store with the snapshot's, in one
// ingestion, so a crash leaves the old state or the new one, never a mix.
// Writes wait meanwhile. A failure fails the store, to be reopened.
func (p *PreparedRestore) Commit() error {
	s := p.s
	defer p.tables.Discard()
	s.compactMu.Lock()
	defer s.compactMu.Unlock()
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	if s.closed.Load() {
		return ErrClosed
	}
	// A store that failed on damaged data (a write that read a damaged
	// block) is repaired by the restore, which replaces every key and
	// what memory holds of them: the failure ends with it.
	failed := s.failed.Load()
	if failed != nil && !errors.Is(*failed, engine.ErrCorruption) {
		return *failed
	}
	s.drainLocked()
	if err := p.tables.Ingest(); err != nil {
		return s.fail(fmt.Errorf("mvcc: store failed, reopen it: restore snapshot: %w", err))
	}
	// Open reads the new contents as a restart would, but for the
	// revisions, whose index was built as they went by; its state replaces
	// ours (it has no watchers and nothing running).
	fresh, err := open(s.db, s.opts, false, p.built)
	if err != nil {
		return s.fail(fmt.Errorf("mvcc: store failed, reopen it: load restored snapshot: %w", err))
	}
	s.mu.Lock()
	s.leaseMu.Lock()
	s.ix, s.leases = fresh.ix, fresh.leases
	s.leaseMu.Unlock()
	s.rev, s.compactRev, s.applied = fresh.rev, fresh.compactRev, fresh.applied
	s.lastRev, s.lastIndex = fresh.lastRev, fresh.lastIndex
	s.rebuild, s.origin = fresh.rebuild, fresh.origin
	s.counts.reset()
	s.recs.reset()
	s.dicts.adopt(fresh.dicts)
	s.leftover = nil
	s.mu.Unlock()
	s.forgetCompactionHashes()
	s.watchMu.Lock()
	s.notified = s.rev
	s.rewindWatchersLocked()
	s.watchMu.Unlock()
	s.leaseChanged(LeaseChange{})
	if failed != nil {
		s.failed.CompareAndSwap(failed, nil)
	}
	return nil
}

// Discard drops a prepared snapshot; after Commit it does nothing.
func (p *PreparedRestore) Discard() { p.tables.Discard() }

// snapshotFill returns the WriteSpan fill that puts a snapshot's pairs,
// read from br, checking them as it goes: every key a store key, in
// increasing order (WriteSpan checks that), the stream complete; the
// revisions also go through built, a stream restorer, which checks them
// and returns holding the new contents' key index, so that Commit need not
// read a gigabyte of tables back (and decompress it) to build it. (A
// snapshot of a store in the layout before holds keys under the old
// prefixes; Open upgrades them.)
func snapshotFill(br *bufio.Reader, built *restorer) func(put func(k, v []byte) error) error {
	return func(put func(k, v []byte) error) error {
		var k, v []byte
		for {
			var err error
			if k, err = readChunk(br, k); err != nil {
				return err
			}
			if len(k) == 0 {
				return built.finish()
			}
			if v, err = readChunk(br, v); err != nil {
				return err
			}
			if !isStoreKeyPrefix(k[0]) {
				return fmt.Errorf("%w: snapshot holds key %q, not a store key", ErrCorrupt, k)
			}
			if isCheckpointToken(k) {
				continue // it named a file beside the sender's engine
			}
			if err := put(k, v); err != nil {
				if errors.Is(err, engine.ErrKeyOrder) {
					return fmt.Errorf("%w: snapshot: %w", ErrCorrupt, err)
				}
				return err
			}
			if k[0] == revPrefix {
				if err := built.step(streamPair{k, v}); err != nil {
					return err
				}
			}
		}
	}
}

// readChunk reads one uvarint-length-prefixed chunk (empty at the end
// marker) into buf's storage, growing it as needed.
func readChunk(br *bufio.Reader, buf []byte) ([]byte, error) {
	n, err := binary.ReadUvarint(br)
	if err != nil {
		return nil, fmt.Errorf("%w: truncated snapshot: %w", ErrCorrupt, err)
	}
	if n > 64<<20 {
		return nil, fmt.Errorf("%w: snapshot chunk of %d bytes", ErrCorrupt, n)
	}
	b := slices.Grow(buf[:0], int(n))[:n]
	if _, err := io.ReadFull(br, b); err != nil {
		return nil, fmt.Errorf("%w: truncated snapshot: %w", ErrCorrupt, err)
	}
	return b, nil
}

// Flush makes every write applied so far durable, whatever the engine's
// sync setting, by flushing the engine's memtables to tables. A cluster
// member whose store runs with sync = false (its raft log is the durable
// record) calls it before the raft log drops the entries behind it.
func (s *Store) Flush() error {
	if s.closed.Load() {
		return ErrClosed
	}
	return s.db.Flush()
}
