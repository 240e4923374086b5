package engine

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/objstorage/objstorageprovider"
	"github.com/cockroachdb/pebble/v2/sstable"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// ErrKeyOrder is returned by ReplaceSpan's put for a key that does not sort
// after the key before it, or lies outside the span, and by DeleteSorted's
// del for a key that does not sort after the key before it.
var ErrKeyOrder = errors.New("engine: keys out of order")

// ReplaceSpan atomically replaces the contents of [start, end) (start not
// empty) with the pairs that fill passes to put, in strictly increasing key
// order, all within the span. It is how a whole store is restored from a snapshot
// stream of tens of gigabytes: its memory does not grow with the pairs
// and each byte is written once.
//
// The pairs go into tables (of the target file size, with the bottom
// level's writer options) in the database's directory, or with db_paths the
// path of the bottom level, and when fill returns nil, one ingestion with
// an excise of the span (pebble.DB.IngestAndExcise) puts them in place of
// everything in the span: one version edit, so a crash leaves the old
// contents or the new ones, never a mix. The tables are not written through
// the WAL nor held in a memtable.
//
// If fill returns an error, or put did (an out-of-order key is ErrKeyOrder,
// naming it), nothing is changed and ReplaceSpan returns fill's error. put
// returns ErrClosed once Close began. The temporary tables are removed on
// every path (Open removes those a crash left). Writes into the span that
// race ReplaceSpan land before its ingestion (and are replaced) or after
// it; a caller that wants neither holds its writes back. Compact and
// CompactAll wait for ReplaceSpan, and it for them.
func (db *DB) ReplaceSpan(start, end []byte, fill func(put func(key, value []byte) error) error) (err error) {
	if err := db.enterOp(); err != nil {
		return err
	}
	defer db.leaveOp()
	defer db.recoverFatal(&err)
	if err := db.writable("ReplaceSpan"); err != nil {
		return err
	}
	if err := checkSpanStart(start, end); err != nil {
		return err
	}
	// A codec rewrite reads a chunk and ingests it later with an excise:
	// between the two it must not meet our ingestion, or it would put the
	// old contents back.
	db.rewriteMu.Lock()
	defer db.rewriteMu.Unlock()
	sw := db.newSpanWriter(start, end)
	defer sw.removeAll()
	if err := sw.fill(fill); err != nil {
		return err
	}
	return sw.ingest()
}

// SpanTables are the tables WriteSpan wrote: ReplaceSpan in two steps, for
// a caller that writes the tables while the pairs arrive (a snapshot
// streamed from a raft leader) and decides later whether they replace the
// span. Exactly one of Ingest and Discard is to be called; Discard after
// Ingest does nothing.
type SpanTables struct {
	sw   *spanWriter
	used bool
}

// WriteSpan writes the pairs that fill passes to put into tables, as
// ReplaceSpan does, without changing the database: SpanTables.Ingest then
// puts them in place of everything in [start, end), as ReplaceSpan's
// ingestion. Its errors and checks are ReplaceSpan's; on an error every
// table written is removed. Tables a crash or a Close leaves before Ingest
// or Discard are removed by the next Open.
func (db *DB) WriteSpan(start, end []byte, fill func(put func(key, value []byte) error) error) (t *SpanTables, err error) {
	if err := db.enterOp(); err != nil {
		return nil, err
	}
	defer db.leaveOp()
	defer db.recoverFatal(&err)
	if err := db.writable("WriteSpan"); err != nil {
		return nil, err
	}
	if err := checkSpanStart(start, end); err != nil {
		return nil, err
	}
	sw := db.newSpanWriter(start, end)
	if err := sw.fill(fill); err != nil {
		sw.removeAll()
		return nil, err
	}
	return &SpanTables{sw: sw}, nil
}

// Ingest replaces the contents of the span with the tables, in one version
// edit, as ReplaceSpan does; writes into the span since WriteSpan began are
// replaced too. It may be called once; the tables are gone afterwards,
// whatever it returns.
func (t *SpanTables) Ingest() (err error) {
	if t.used {
		return errors.New("engine: SpanTables.Ingest: the tables were ingested or discarded already")
	}
	t.used = true
	db := t.sw.db
	defer t.sw.removeAll()
	if err := db.enterOp(); err != nil {
		return err
	}
	defer db.leaveOp()
	defer db.recoverFatal(&err)
	if err := db.writable("SpanTables.Ingest"); err != nil {
		return err
	}
	db.rewriteMu.Lock() // see ReplaceSpan
	defer db.rewriteMu.Unlock()
	return t.sw.ingest()
}

// Discard removes the tables without ingesting them.
func (t *SpanTables) Discard() {
	if !t.used {
		t.used = true
		t.sw.removeAll()
	}
}

// checkSpanStart checks ReplaceSpan's and WriteSpan's span.
func checkSpanStart(start, end []byte) error {
	if err := checkRange(start, end); err != nil {
		return err
	}
	if len(start) == 0 {
		// Pebble's columnar tables cannot hold the empty key alone in a block.
		return fmt.Errorf("%w: ReplaceSpan starting at the empty key: start must be at least one byte", ErrInvalidRange)
	}
	return nil
}

// newSpanWriter returns a spanWriter for the bottom level's tables.
func (db *DB) newSpanWriter(start, end []byte) *spanWriter {
	return &spanWriter{db: db, start: start, end: end, level: NumLevels - 1,
		tableSize: uint64(db.popts.TargetFileSizes[NumLevels-1])}
}

// fill writes fill's pairs and finishes the last table.
func (sw *spanWriter) fill(fill func(put func(key, value []byte) error) error) error {
	if err := fill(sw.put); err != nil {
		return err
	}
	return sw.finishTable()
}

// ingest puts the tables written in place of the span's contents (an
// excise alone if there are none).
func (sw *spanWriter) ingest() error {
	db := sw.db
	span := pebble.KeyRange{Start: sw.start, End: sw.end}
	if len(sw.paths) == 0 {
		if err := db.pdb.Excise(db.ctx, span); err != nil {
			return fmt.Errorf("engine: replace span: excise: %w", err)
		}
		return nil
	}
	if _, err := db.pdb.IngestAndExcise(db.ctx, sw.paths, nil, nil, span); err != nil {
		return fmt.Errorf("engine: replace span: ingest %d tables: %w", len(sw.paths), err)
	}
	return nil
}

// spanWriter writes ReplaceSpan's pairs into tables of about tableSize
// bytes each, and, if tableKeys is set, at most tableKeys keys; paths are
// the tables written so far, w the one being written, holding keys keys.
type spanWriter struct {
	db         *DB
	start, end []byte
	level      int
	tableSize  uint64
	tableKeys  int
	keys       int
	last       []byte // the last key put, if any
	any        bool   // a key was put
	paths      []string
	w          *sstable.Writer
}

func (sw *spanWriter) put(key, value []byte) error {
	if err := sw.checkNext(key); err != nil {
		return err
	}
	if bytes.Compare(key, sw.start) < 0 || bytes.Compare(key, sw.end) >= 0 {
		return fmt.Errorf("%w: key %q outside the span [%q, %q)", ErrKeyOrder, key, sw.start, sw.end)
	}
	return sw.write(key, func(w *sstable.Writer) error { return w.Set(key, value) })
}

// checkNext says whether key may be written next: the database is open
// and key sorts after the last key written.
func (sw *spanWriter) checkNext(key []byte) error {
	if sw.db.closed.Load() {
		return ErrClosed
	}
	if sw.any && bytes.Compare(key, sw.last) <= 0 {
		return fmt.Errorf("%w: key %q after %q: keys must be strictly increasing", ErrKeyOrder, key, sw.last)
	}
	return nil
}

// write adds key's entry, with add, into the table being written (a new
// one if none is), and finishes that table once it reaches tableSize or
// tableKeys.
func (sw *spanWriter) write(key []byte, add func(w *sstable.Writer) error) error {
	sw.last, sw.any = append(sw.last[:0], key...), true
	if sw.w == nil {
		path, w, err := sw.db.newTempTable(sw.level)
		if err != nil {
			return fmt.Errorf("engine: write table: %w", err)
		}
		sw.paths, sw.w = append(sw.paths, path), w
	}
	if err := add(sw.w); err != nil {
		return fmt.Errorf("engine: write %s: %w", sw.paths[len(sw.paths)-1], err)
	}
	sw.keys++
	if sw.w.Raw().EstimatedSize() >= sw.tableSize || sw.tableKeys > 0 && sw.keys >= sw.tableKeys {
		return sw.finishTable()
	}
	return nil
}

// finishTable closes the table being written, if any.
func (sw *spanWriter) finishTable() error {
	if sw.w == nil {
		return nil
	}
	err := sw.w.Close()
	sw.w, sw.keys = nil, 0
	if err != nil {
		return fmt.Errorf("engine: write %s: %w", sw.paths[len(sw.paths)-1], err)
	}
	return nil
}

// removeAll removes every table written. After a successful ingestion
// Pebble has removed them already (it hard-linked them into the LSM).
func (sw *spanWriter) removeAll() {
	if sw.w != nil {
		_ = sw.w.Close()
		sw.w = nil
	}
	for _, p := range sw.paths {
		sw.db.removeTempTable(p)
	}
	sw.paths = nil
}

// newTempTable creates a table to be ingested into level, named to be
// found and removed by Open should a crash leave it (see rewritePrefix),
// in the directory the level's tables belong in (rewriteTablePath), with
// the level's writer options and the codec of its values
// (config.Resolved.InlineProfile).
func (db *DB) newTempTable(level int) (string, *sstable.Writer, error) {
	path := db.rewriteTablePath(level, fmt.Sprintf("%s%d.sst", rewritePrefix, db.rewrite.nextID()))
	f, err := db.fs.Create(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		return "", nil, err
	}
	// As Pebble writes its own tables: written back as it goes
	// (bytes_per_sync), so that the sync that closes it waits for its last
	// stretch only, not for all of it.
	f = vfs.NewSyncingFile(f, vfs.SyncingFileOptions{BytesPerSync: db.popts.BytesPerSync})
	wo := db.popts.MakeWriterOptions(level, db.pdb.TableFormat())
	// The table holds its values (no blob files here): the level's codec
	// for values on every block, also under key_compression.
	wo.Compression = db.res.InlineProfile(level)
	w := sstable.NewWriter(objstorageprovider.NewFileWritable(f), wo)
	return path, w, nil
}

// removeTempTable removes a table newTempTable created; "" is none.
func (db *DB) removeTempTable(path string) {
	if path != "" {
		_ = db.fs.Remove(path)
	}
}
