package mvcc

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"

	"github.com/stratadb/strata/engine"
	"github.com/stratadb/strata/mvcc/keyindex"
)

// A load fills an empty database with a store's contents: a backup
// (LoadBackup) or a history read from another system (Loader: etcd's
// bbolt file, see internal/etcdfile). Unlike RestoreSnapshot it never
// holds the contents in memory: it commits them in batches of about
// loadBatchBytes. To make that safe against a crash, the first batch
// writes metaLoading and the last step deletes it; Open refuses a
// database that still holds it (ErrIncompleteLoad), so a load killed
// halfway never looks like a complete store.

// metaLoading marks a database whose load has not finished.
var metaLoading = []byte("z/load_incomplete")

// loadBatchBytes is the size at which a load commits its batch.
const loadBatchBytes = 4 << 20

// ErrIncompleteLoad is returned by Open for a database a load (a restore)
// began and did not finish.
var ErrIncompleteLoad = errors.New("mvcc: the database holds an unfinished restore; remove it and restore again")

// Version is one version of a key at its revision, as a migration reads
// or writes history: KV as Range returns it (KV.ModRevision is the main
// revision), or, for a deletion, as a DELETE event has it (only Key and
// ModRevision set).
type Version struct {
	KV KeyValue
	// Sub is the sub revision: the version's place among the keys its
	// transaction wrote, from 0.
	Sub int64
	// Tombstone marks a deletion.
	Tombstone bool
}

// History is the state a history ends in, besides its versions and
// leases.
type History struct {
	// Rev is the current revision (etcd's header revision): at least the
	// last version's, more if later writes were compacted away.
	Rev int64
	// CompactScheduled and CompactFinished are the revisions of the last
	// compaction begun and the last finished (-1 for none), etcd's
	// scheduledCompactRev and finishedCompactRev: a load whose compaction
	// is scheduled but not finished finishes it when opened.
	CompactScheduled, CompactFinished int64
}

// Loader writes a history into an empty database: Lease for each lease,
// Aux for each aux write, Put for each version in revision order, then
// Finish. Nothing it writes
// is a store until Finish returns (see ErrIncompleteLoad).
type Loader struct {
	db     *engine.DB
	b      *engine.Batch
	last   keyindex.Revision
	leases map[int64]bool
	// scratch and key hold a record's encoding and engine key.
	scratch, key []byte
}

// MarkLoading marks db, which must hold nothing, as holding an
// unfinished load, durably (in a table, whatever the engine's sync and
// WAL settings). A restore marks a database in a new directory before it
// moves it where the database belongs, so that no moment exists at which
// an unmarked, empty database is there to be taken for a restored one.
func MarkLoading(db *engine.DB) error {
	if _, err := NewLoader(db); err != nil {
		return err
	}
	if err := db.Flush(); err != nil {
		return fmt.Errorf("mvcc: load: %w", err)
	}
	return nil
}

// NewLoader starts a load into db, which must hold nothing but a mark
// from MarkLoading.
func NewLoader(db *engine.DB) (*Loader, error) {
	it, err := db.NewIter(nil)
	if err != nil {
		return nil, err
	}
	var other []byte
	for ok := it.First(); ok && other == nil; ok = it.Next() {
		if !bytes.Equal(it.Key(), metaLoading) {
			other = bytes.Clone(it.Key())
		}
	}
	if err := errors.Join(it.Error(), it.Close()); err != nil {
		return nil, fmt.Errorf("mvcc: load: %w", err)
	}
	if other != nil {
		return nil, fmt.Errorf("mvcc: load: the database holds data (key %q); a load needs an empty one", other)
	}
	l := &Loader{db: db, b: db.NewBatch(), leases: map[int64]bool{}}
	if err := l.b.Put(metaLoading, encodeInt64(1)); err != nil {
		return nil, err
	}
	// The marker is committed before any data.
	if err := l.commit(); err != nil {
		return nil, err
	}
	return l, nil
}

// Lease records lease id with ttl seconds; every lease a key's latest
// version names must be loaded.
func (l *Loader) Lease(id, ttl int64) error {
	if err := checkLeaseGrant(id, ttl); err != nil {
		return fmt.Errorf("mvcc: load lease %d: %w", id, err)
	}
	if l.leases[id] {
		return fmt.Errorf("mvcc: load lease %d: %w", id, ErrLeaseExists)
	}
	l.leases[id] = true
	return l.put(leaseKey(id), encodeInt64(ttl))
}

// Put records one version. Versions come in increasing revision order;
// each must be a version the store could have written (create_revision,
// version and lease consistent with a put, or a bare tombstone), checked
// by the same decoder Open uses.
func (l *Loader) Put(v Version) error {
	rev := keyindex.Revision{Main: v.KV.ModRevision, Sub: v.Sub}
	if rev.Main < 1 || rev.Main > keyindex.MaxMain || rev.Sub < 0 {
		return fmt.Errorf("mvcc: load: revision %d.%d out of range", rev.Main, rev.Sub)
	}
	if !l.last.Less(rev) {
		return fmt.Errorf("mvcc: load: revision %d.%d after %d.%d: versions must come in increasing revision order", rev.Main, rev.Sub, l.last.Main, l.last.Sub)
	}
	if err := errors.Join(checkKey(v.KV.Key), checkValue(v.KV.Value)); err != nil {
		return fmt.Errorf("mvcc: load: revision %d.%d: %w", rev.Main, rev.Sub, err)
	}
	rec := record{key: v.KV.Key, value: v.KV.Value, create: v.KV.CreateRevision, mod: rev.Main, version: v.KV.Version, lease: v.KV.Lease, tomb: v.Tombstone}
	l.scratch = appendRecord(l.scratch[:0], &rec)
	if _, err := decodeRecord(l.scratch); err != nil {
		return fmt.Errorf("mvcc: load: revision %d.%d of %q: %w", rev.Main, rev.Sub, v.KV.Key, err)
	}
	l.last = rev
	// The record and its index record go in one batch (a put commits
	// only after both).
	var err error
	if l.key, err = putRevision(l.b, l.key, rev, &rec, l.scratch); err != nil {
		return fmt.Errorf("mvcc: load: %w", err)
	}
	return l.commitIfLarge()
}

// Aux records one aux write (see AuxWrite): the state the layer above
// keeps beside the key-value data, as etcd keeps its auth buckets. value
// must not be nil (a load has nothing to delete).
func (l *Loader) Aux(key, value []byte) error {
	if len(key) == 0 {
		return fmt.Errorf("mvcc: load aux: %w", ErrEmptyKey)
	}
	if value == nil {
		return fmt.Errorf("mvcc: load aux %q: nil value: a load writes, it does not delete", key)
	}
	return l.put(auxKey(key), value)
}

// put adds one key to the batch, committing it once it is large.
func (l *Loader) put(k, v []byte) error {
	if err := l.b.Put(k, v); err != nil {
		return fmt.Errorf("mvcc: load: %w", err)
	}
	return l.commitIfLarge()
}

// commitIfLarge commits the batch once it is large.
func (l *Loader) commitIfLarge() error {
	if l.b.Len() >= loadBatchBytes {
		return l.commit()
	}
	return nil
}

func (l *Loader) commit() error {
	err := l.b.Commit()
	_ = l.b.Close()
	l.b = l.db.NewBatch()
	if err != nil {
		return fmt.Errorf("mvcc: load: %w", err)
	}
	return nil
}

// Finish records h, opens the loaded store with opts (which checks every
// version and lease, as any Open does), makes it durable and marks it
// complete. The caller closes the Store.
func (l *Loader) Finish(h History, opts Options) (*Store, error) {
	switch {
	case h.Rev < max(l.last.Main, 1):
		return nil, fmt.Errorf("mvcc: load: current revision %d is below the last version's, %d", h.Rev, l.last.Main)
	case h.CompactScheduled > h.Rev || h.CompactFinished > h.CompactScheduled || h.CompactFinished < -1:
		return nil, fmt.Errorf("mvcc: load: compaction scheduled at %d, finished at %d, current revision %d: want finished <= scheduled <= current", h.CompactScheduled, h.CompactFinished, h.Rev)
	}
	if err := l.put(metaRev, encodeInt64(h.Rev)); err != nil {
		return nil, err
	}
	if h.CompactScheduled >= 0 {
		if err := l.put(metaCompactScheduled, encodeInt64(h.CompactScheduled)); err != nil {
			return nil, err
		}
	}
	if h.CompactFinished >= 0 {
		if err := l.put(metaCompactFinished, encodeInt64(h.CompactFinished)); err != nil {
			return nil, err
		}
	}
	return l.finish(opts)
}

// finish commits what is left, opens the store, makes it durable and
// deletes the marker.
func (l *Loader) finish(opts Options) (*Store, error) {
	if err := l.commit(); err != nil {
		return nil, err
	}
	_ = l.b.Close()
	s, err := open(l.db, opts, true, nil)
	if err != nil {
		return nil, fmt.Errorf("mvcc: load: %w", err)
	}
	// Everything is durable before the marker goes, whatever the
	// engine's sync setting; then the deletion is made durable too.
	err = l.db.Flush()
	if err == nil {
		b := l.db.NewBatch()
		err = b.Delete(metaLoading)
		if err == nil {
			err = b.Commit()
		}
		_ = b.Close()
	}
	if err == nil {
		err = l.db.Flush()
	}
	if err != nil {
		_ = s.Close()
		return nil, fmt.Errorf("mvcc: load: %w", err)
	}
	return s, nil
}

// LoadBackup writes the snapshot of a backup (CheckBackup's reader) into
// db, which must hold nothing, in batches, and opens the result, with no
// applied log index (see Store.AppliedIndex). A
// snapshot that does not decode is ErrCorrupt and leaves db marked
// incomplete.
func LoadBackup(db *engine.DB, r io.Reader, opts Options) (*Store, error) {
	l, err := NewLoader(db)
	if err != nil {
		return nil, err
	}
	br := bufio.NewReaderSize(r, 256<<10)
	var k, v []byte
	for {
		k, err = readChunk(br, k)
		if err != nil {
			return nil, fmt.Errorf("mvcc: load backup: %w", err)
		}
		if len(k) == 0 {
			break
		}
		v, err = readChunk(br, v)
		if err != nil {
			return nil, fmt.Errorf("mvcc: load backup: %w", err)
		}
		if !isStoreKeyPrefix(k[0]) || bytes.Equal(k, metaLoading) {
			return nil, fmt.Errorf("mvcc: load backup: %w: snapshot holds key %q, not a store key", ErrCorrupt, k)
		}
		// (A backup of a store in the layout before leases and metadata
		// sorted after the revisions holds them under the old prefixes;
		// Open moves them.)
		if isCheckpointToken(k) {
			// It named a checkpoint file beside the backed-up engine.
			continue
		}
		if (k[0] == metaPrefix || k[0] == oldMetaPrefix) && bytes.Equal(k[1:], metaApplied[1:]) {
			// The index of the backed-up member's log: the new database
			// starts a log of its own (a single server, or each member of
			// a new cluster).
			continue
		}
		if err := l.put(k, v); err != nil {
			return nil, err
		}
	}
	return l.finish(opts)
}
