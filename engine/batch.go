package engine

import (
	"bytes"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// Batch collects writes that Commit applies atomically: after a crash either
// all of them are present or none. A Batch is not safe for concurrent use.
type Batch struct {
	db *DB
	b  *pebble.Batch
	// syncPending is set by CommitNoSyncWait until SyncWait.
	syncPending bool
	// flushPending is set by CommitSyncNoWait without a WAL until
	// SyncWait, which flushes the memtables to make the batch durable.
	flushPending bool
	// commitStart is when CommitNoSyncWait began (DB.CommitLatency).
	commitStart time.Time
	// lo and hi bound the keys the batch writes (hi is a range deletion's
	// exclusive end when that is largest), for the write guard.
	lo, hi []byte
	keyed  bool
}

// cover widens the batch's key bounds to [lo, hi].
func (b *Batch) cover(lo, hi []byte) {
	if !b.keyed || bytes.Compare(lo, b.lo) < 0 {
		b.lo = append(b.lo[:0], lo...)
	}
	if !b.keyed || bytes.Compare(hi, b.hi) > 0 {
		b.hi = append(b.hi[:0], hi...)
	}
	b.keyed = true
}

// NewBatch returns an empty batch.
func (db *DB) NewBatch() *Batch {
	return &Batch{db: db, b: db.pdb.NewBatch()}
}

// Put adds key=value to the batch.
func (b *Batch) Put(key, value []byte) error {
	b.cover(key, key)
	return b.b.Set(key, value, nil)
}

// Delete adds a deletion of key to the batch.
func (b *Batch) Delete(key []byte) error {
	b.cover(key, key)
	return b.b.Delete(key, nil)
}

// DeleteRange adds a deletion of every key in [start, end) to the batch.
func (b *Batch) DeleteRange(start, end []byte) error {
	if err := checkRange(start, end); err != nil {
		return err
	}
	b.cover(start, end)
	return b.b.DeleteRange(start, end, nil)
}

// Count returns the number of operations in the batch.
func (b *Batch) Count() uint32 { return b.b.Count() }

// Len returns the encoded size of the batch in bytes.
func (b *Batch) Len() int { return b.b.Len() }

// Empty reports whether the batch holds no operations.
func (b *Batch) Empty() bool { return b.b.Empty() }

// Commit applies the batch atomically, with the database's sync setting: with
// sync = true it returns only once the batch is durable. The batch may not be
// used afterwards except for Close.
func (b *Batch) Commit() error { return b.commit(b.db.wo) }

// CommitSync is Commit made durable before it returns whatever the
// database's sync setting (with the WAL disabled, durable once flushed):
// for the rare write whose durability orders other files (mvcc's key index
// checkpoint token).
func (b *Batch) CommitSync() error {
	if !b.db.cfg.EnableWAL {
		// Pebble refuses pebble.Sync without a WAL ("pebble: WAL
		// disabled"); the memtable flush is what makes the batch durable.
		if err := b.commit(pebble.NoSync); err != nil {
			return err
		}
		return b.db.Flush()
	}
	return b.commit(pebble.Sync)
}

func (b *Batch) commit(wo *pebble.WriteOptions) (err error) {
	defer b.db.observeCommit(time.Now())
	ticket, err := b.db.enterWrite(b.lo, b.hi)
	if err != nil {
		return err
	}
	defer b.db.guard.leave(ticket)
	defer b.db.recoverFatal(&err)
	return b.b.Commit(wo)
}

// CommitNoSyncWait applies the batch and makes it visible to readers like
// Commit, but with sync = true returns before the WAL sync: call SyncWait
// to wait for it. Writers that commit this way while a sync is in flight
// share the next one (group commit), where Commit would wait for each
// sync in turn while holding the caller's locks. With sync = false it is
// Commit and SyncWait returns at once.
func (b *Batch) CommitNoSyncWait() error { return b.commitNoSyncWait(b.db.wo) }

// CommitSyncNoWait is CommitNoSyncWait for a batch that must be durable
// whatever the database's sync setting, as CommitSync: SyncWait then
// waits for its WAL sync, which writers committing meanwhile share (mvcc's
// compaction marker, which its ingested deletions must not outlive).
func (b *Batch) CommitSyncNoWait() error {
	if !b.db.cfg.EnableWAL {
		// Durable once flushed: SyncWait flushes, outside the caller's
		// locks as a WAL sync would be waited for.
		if err := b.commit(pebble.NoSync); err != nil {
			return err
		}
		b.flushPending = true
		return nil
	}
	return b.commitNoSyncWait(pebble.Sync)
}

func (b *Batch) commitNoSyncWait(wo *pebble.WriteOptions) (err error) {
	start := time.Now()
	ticket, err := b.db.enterWrite(b.lo, b.hi)
	if err != nil {
		return err
	}
	defer b.db.recoverFatal(&err)
	// Leaving the guard once the batch is applied (visible, sequenced) is
	// enough: the WAL sync does not change what a rewrite reads.
	defer b.db.guard.leave(ticket)
	if !wo.Sync {
		defer b.db.observeCommit(start)
		return b.b.Commit(wo)
	}
	if err := b.db.pdb.ApplyNoSyncWait(b.b, wo); err != nil {
		return err
	}
	b.syncPending, b.commitStart = true, start
	return nil
}

// SyncWait waits until a batch committed with CommitNoSyncWait is durable
// and returns the WAL sync's error, if any.
func (b *Batch) SyncWait() error {
	if b.flushPending {
		b.flushPending = false
		return b.db.Flush()
	}
	if !b.syncPending {
		return nil
	}
	b.syncPending = false
	defer b.db.observeCommit(b.commitStart)
	return b.b.SyncWait()
}

// Close releases the batch; an uncommitted batch is discarded. It waits
// for a pending WAL sync first (Pebble requires it).
func (b *Batch) Close() error {
	if b.syncPending {
		_ = b.SyncWait()
	}
	return b.b.Close()
}
