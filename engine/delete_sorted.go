package engine

import (
	"fmt"

	"github.com/cockroachdb/pebble/v2/sstable"
)

// deleteTableKeys is the most tombstones DeleteSorted puts in one table.
// A store compaction at 200,000 pods drops about 120,000 revisions, two
// keys each, spread over the whole history: in one table their
// compaction rewrote every table of the history in one job of 0.7 s of
// CPU (docs/mvcc-compaction.md); in tables of 16,384 keys it is a job per table.
const deleteTableKeys = 1 << 14

// DeleteSorted deletes the keys that fill passes to del, given in strictly
// increasing order, by ingesting tables of their tombstones rather than
// committing a batch. It is for deleting many keys spread over a span that
// older data fills, while new writes go elsewhere: a revisioned store's
// dropped history. Tombstones committed in a batch share memtables with
// the new writes, so each flushed table spans from the oldest tombstone to
// the newest write, and the compaction that takes it down rewrites every
// table of the level below in between; an ingested table spans only its
// own keys, and its compaction rewrites only the tables they fall in.
//
// The tombstones go into tables of at most deleteTableKeys keys (or
// Pebble's level-0 target file size), ingested at once: an ingestion holds
// up every commit after it until its manifest edit is synced, so one is
// cheaper for writers than one per table. Small tables keep the
// compactions that carry them down small: each rewrites only the tables
// below its own span, and a caller compacting the span slice by slice
// (a store's history reclaim) can rest between the slices.
//
// The tombstones are durable when DeleteSorted returns (the tables and the
// manifest are synced), and they apply after every write committed before
// the call; a write committed earlier but not yet synced (sync = false)
// can still be lost in a crash that keeps the tombstones, so a caller that
// needs an order commits its earlier batch with CommitSync (or
// CommitSyncNoWait and SyncWait).
// Readers see all the tombstones at once. If fill or del fails (an
// out-of-order key is ErrKeyOrder, naming it), nothing is deleted and
// fill's error is returned. Like a batch, the ingestion is a write for a
// concurrent codec rewrite (CompactAll): a chunk it overlaps is read again.
func (db *DB) DeleteSorted(fill func(del func(key []byte) error) error) (err error) {
	if err := db.enterOp(); err != nil {
		return err
	}
	defer db.leaveOp()
	defer db.recoverFatal(&err)
	if err := db.writable("DeleteSorted"); err != nil {
		return err
	}
	// Tables of Pebble's level-0 target size, ingested together: one
	// ingestion holds up commits once (see above), however many tables.
	sw := &spanWriter{db: db, level: 0, tableSize: uint64(db.popts.TargetFileSizes[0]), tableKeys: deleteTableKeys}
	defer sw.removeAll()
	var first []byte
	n := 0
	del := func(key []byte) error {
		if err := sw.checkNext(key); err != nil {
			return err
		}
		if n == 0 {
			first = append(first, key...)
		}
		n++
		return sw.write(key, func(w *sstable.Writer) error { return w.Delete(key) })
	}
	if err := fill(del); err != nil {
		return err
	}
	if err := sw.finishTable(); err != nil {
		return err
	}
	if n == 0 {
		return nil
	}
	ticket, err := db.enterWrite(first, sw.last)
	if err != nil {
		return err
	}
	defer db.guard.leave(ticket)
	if err := db.pdb.Ingest(db.ctx, sw.paths); err != nil {
		return fmt.Errorf("engine: delete sorted: ingest %d tombstones: %w", n, err)
	}
	return nil
}
