package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/objstorage/objstorageprovider"
	"github.com/cockroachdb/pebble/v2/sstable"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// ErrSnapshotsOpen is returned by Compact and CompactAll when tables still
// carry another level's codec because snapshots were open: rewriting them
// would hide versions the snapshots read. The compaction itself has run.
var ErrSnapshotsOpen = errors.New("engine: snapshots are open")

// maxRewritePasses bounds how often Compact re-checks codecs after a
// rewrite; one pass normally suffices, a second catches a table that an
// ingestion placed on another level than expected.
const maxRewritePasses = 3

// rewritePrefix starts the names of the temporary tables a rewrite writes
// into db_path before ingesting them; Open removes leftovers.
const rewritePrefix = "strata-rewrite-"

// CompactAll compacts the whole key space down to the bottom of the LSM and
// then rewrites every table whose codec is not its level's, so after it the
// bottommost level carries compression_bottommost, as RocksDB's manual
// CompactRange with bottommost_level_compaction = kForce does.
//
// Pebble turns a compaction of a lone table into a move that keeps the
// table's old codec (an L0 table flushed with lz4 lands in L6 still lz4).
// Such tables are rewritten: their key span is read through an iterator,
// written into a new table with the level's writer options and ingested with
// an excise of the span, all while writes are held back, so no write can
// land in the span between the read and the ingestion. Reads go on.
func (db *DB) CompactAll() error {
	if err := db.check(); err != nil {
		return err
	}
	first, last, ok, err := db.keySpan()
	if err != nil || !ok {
		return err
	}
	return db.compact(first, append(last, 0))
}

// Compact compacts the keys in [start, end) and rewrites the tables in that
// span whose codec is not their level's (see CompactAll).
func (db *DB) Compact(start, end []byte) error {
	if err := db.check(); err != nil {
		return err
	}
	if err := checkRange(start, end); err != nil {
		return err
	}
	return db.compact(start, end)
}

func (db *DB) compact(start, end []byte) error {
	ctx := context.Background()
	if err := db.pdb.Compact(ctx, start, end, true); err != nil {
		return fmt.Errorf("engine: compact: %w", err)
	}
	for range maxRewritePasses {
		n, err := db.rewriteMismatched(ctx, start, end)
		if err != nil || n == 0 {
			return err
		}
	}
	return nil
}

// keySpan returns the smallest and largest keys in the database.
func (db *DB) keySpan() (first, last []byte, ok bool, err error) {
	it, err := db.pdb.NewIter(nil)
	if err != nil {
		return nil, nil, false, err
	}
	defer it.Close()
	if !it.First() {
		return nil, nil, false, it.Error()
	}
	first = bytes.Clone(it.Key())
	it.Last()
	last = bytes.Clone(it.Key())
	return first, last, true, it.Error()
}

// mismatchedTable is a table whose codec is not the one of its level.
type mismatchedTable struct {
	level      int
	start, end []byte // the excise span: [smallest, largest+"\x00")
	size       uint64
	codec      string
}

// mismatched lists the tables overlapping [start, end) whose codec differs
// from their level's.
func (db *DB) mismatched(start, end []byte) ([]mismatchedTable, error) {
	levels, err := db.pdb.SSTables(pebble.WithProperties())
	if err != nil {
		return nil, err
	}
	var out []mismatchedTable
	for level, tables := range levels {
		want := db.codecs[level].PebbleProfile().Name
		for _, t := range tables {
			if t.Properties == nil || t.Properties.CompressionName == want {
				continue
			}
			lo, hi := t.Smallest.UserKey, t.Largest.UserKey
			if bytes.Compare(hi, start) < 0 || bytes.Compare(lo, end) >= 0 {
				continue
			}
			out = append(out, mismatchedTable{
				level: level,
				start: bytes.Clone(lo),
				end:   append(bytes.Clone(hi), 0),
				size:  t.Size,
				codec: t.Properties.CompressionName,
			})
		}
	}
	return out, nil
}

// rewriteMismatched rewrites the mismatched tables overlapping [start, end)
// and returns how many it rewrote.
func (db *DB) rewriteMismatched(ctx context.Context, start, end []byte) (int, error) {
	db.writeMu.Lock()
	defer db.writeMu.Unlock()
	tables, err := db.mismatched(start, end)
	if err != nil || len(tables) == 0 {
		return 0, err
	}
	if n := db.openSnapshots.Load(); n > 0 {
		db.rewrite.skip(len(tables))
		return 0, fmt.Errorf("%w: %d snapshot(s) open: %d table(s) keep a codec other than their level's; close the snapshots and compact again", ErrSnapshotsOpen, n, len(tables))
	}
	for _, t := range tables {
		written, err := db.rewriteSpan(ctx, t)
		if err != nil {
			db.rewrite.fail()
			return 0, fmt.Errorf("engine: rewrite L%d table [%q, %q) from %s to %s: %w",
				t.level, t.start, t.end, t.codec, db.codecs[t.level].PebbleProfile().Name, err)
		}
		db.rewrite.done(t.size, written)
	}
	return len(tables), nil
}

// rewriteSpan replaces the contents of t's span by one table written with
// t's level's options. The caller holds writeMu exclusively.
func (db *DB) rewriteSpan(ctx context.Context, t mismatchedTable) (uint64, error) {
	it, err := db.pdb.NewIter(&pebble.IterOptions{LowerBound: t.start, UpperBound: t.end})
	if err != nil {
		return 0, err
	}
	path := db.rewriteTablePath(t.level, fmt.Sprintf("%s%d.sst", rewritePrefix, db.rewrite.nextID()))
	written, n, err := db.writeTable(it, path, t.level)
	if cerr := it.Close(); err == nil {
		err = cerr
	}
	defer func() { _ = db.fs.Remove(path) }()
	if err != nil {
		return 0, err
	}
	span := pebble.KeyRange{Start: t.start, End: t.end}
	if n == 0 {
		// Everything in the span is deleted: dropping it is the rewrite.
		return 0, db.pdb.Excise(ctx, span)
	}
	_, err = db.pdb.IngestAndExcise(ctx, []string{path}, nil, nil, span)
	return written, err
}

// writeTable writes the iterator's pairs into a new table at path with the
// writer options of level and returns its size and key count.
func (db *DB) writeTable(it *pebble.Iterator, path string, level int) (size uint64, keys int, err error) {
	f, err := db.fs.Create(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		return 0, 0, err
	}
	w := sstable.NewWriter(objstorageprovider.NewFileWritable(f), db.popts.MakeWriterOptions(level, db.pdb.TableFormat()))
	for valid := it.First(); valid; valid = it.Next() {
		if err := w.Set(it.Key(), it.Value()); err != nil {
			_ = w.Close()
			return 0, 0, err
		}
		keys++
	}
	if err := it.Error(); err != nil {
		_ = w.Close()
		return 0, 0, err
	}
	if err := w.Close(); err != nil {
		return 0, 0, err
	}
	st, err := db.fs.Stat(path)
	if err != nil {
		return 0, 0, err
	}
	return uint64(st.Size()), keys, nil
}

// rewriteCounter counts table rewrites into the level's codec.
type rewriteCounter struct {
	mu                      sync.Mutex
	id                      uint64
	tables, skipped, failed int64
	bytesIn, bytesOut       uint64
}

func (r *rewriteCounter) nextID() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.id++
	return r.id
}

func (r *rewriteCounter) done(in, out uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.tables++
	r.bytesIn += in
	r.bytesOut += out
}

func (r *rewriteCounter) skip(n int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.skipped += int64(n)
}

func (r *rewriteCounter) fail() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failed++
}

// RewriteMetrics counts the tables CompactAll and Compact rewrote into their
// level's codec.
type RewriteMetrics struct {
	// Tables is the number of tables rewritten.
	Tables int64
	// BytesIn and BytesOut are the sizes of the tables before and after.
	BytesIn, BytesOut uint64
	// Skipped counts tables left with another codec because snapshots were
	// open; Failed counts rewrites that returned an error.
	Skipped, Failed int64
}

func (r *rewriteCounter) load() RewriteMetrics {
	r.mu.Lock()
	defer r.mu.Unlock()
	return RewriteMetrics{Tables: r.tables, BytesIn: r.bytesIn, BytesOut: r.bytesOut, Skipped: r.skipped, Failed: r.failed}
}
