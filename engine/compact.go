package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/sstable"
	"github.com/stratadb/strata/internal/pebbleconf"
)

// ErrCodecsRemain is returned by Compact and CompactAll when, after their
// passes, tables that existed when they began still carry another level's
// codec or other table options (block size, index block size, filter; see
// levelMismatch). The compaction itself has run; the error says how many
// tables and what differs in the first.
var ErrCodecsRemain = errors.New("engine: tables still carry another level's codec")

// maxRewritePasses bounds how often Compact re-checks codecs after a
// rewrite; one pass normally suffices, a second catches a table that a
// background compaction moved while the first ran.
const maxRewritePasses = 3

// rewriteChunkBytes is how much data (keys plus values, uncompressed) one
// ingestion of a rewrite replaces. A chunk is also the most a writer can
// wait for: when optimistic attempts keep finding writes in a chunk, the
// chunk is rewritten under a gate on its span, which lasts about the time
// to read, compress and ingest this many bytes (a few milliseconds).
const rewriteChunkBytes = 512 << 10

// rewriteChunkKeys caps a chunk's keys too: many small values cost more
// per byte to read and write than their size says.
const rewriteChunkKeys = 4096

// rewriteGatedBytes and rewriteGatedKeys bound a chunk rewritten under a
// gate, smaller than an optimistic one: writers into it wait while it is
// read, written and ingested.
const (
	rewriteGatedBytes = 128 << 10
	rewriteGatedKeys  = 1024
)

// optimisticAttempts is how often a chunk is rewritten without a gate
// before the rewrite gates the chunk's span (see writeGuard).
const optimisticAttempts = 1

// rewritePrefix starts the names of the temporary tables a rewrite or
// ReplaceSpan writes before ingesting them; Open removes leftovers (see
// removeLeftovers).
const rewritePrefix = "strata-rewrite-"

// CompactAll compacts the whole LSM down to its bottom and then rewrites
// every table not written with its level's options (codec, data and index
// block size, filter; see levelMismatch), so after it the bottommost level
// carries its codec (compression_bottommost, or the last of compression_levels) and bottommost_block_size, as RocksDB's
// manual CompactRange with bottommost_level_compaction = kForce does. Last, with db_paths, it
// lets the tiering mover settle every table into its level's path.
//
// The range is the span of the tables themselves (after a flush), not of
// the live keys, so deleted data anywhere, a database whose keys are all
// deleted included, is compacted away and its space reclaimed.
//
// Pebble turns a compaction of a lone table into a move that keeps the
// table's codec (an L0 table flushed with lz4 lands in L6 still lz4). Such
// tables are rewritten chunk by chunk (rewriteChunkBytes): a chunk's span is
// read through an iterator, written into a new table with the level's
// writer options and ingested with an excise of the span. Writers are not
// held back: a write guard records writes into the span under rewrite, a
// chunk is ingested only if none touched it (under a gate that lasts the
// ingestion), and after optimisticAttempts dirty attempts the chunk alone
// is gated while it is rewritten. Reads, snapshots and writes elsewhere go
// on. If tables that existed when CompactAll began still carry another
// level's codec after maxRewritePasses, it returns ErrCodecsRemain.
func (db *DB) CompactAll() (err error) {
	if err := db.enterOp(); err != nil {
		return err
	}
	defer db.leaveOp()
	defer db.interruptedByClose(&err)
	defer db.recoverFatal(&err)
	if err := db.writable("CompactAll"); err != nil {
		return err
	}
	ctx := db.ctx
	db.rewriteMu.Lock()
	defer db.rewriteMu.Unlock()
	defer pebbleconf.Hurry(db.popts)() // the caller waits: not background work
	if err := db.pdb.Flush(); err != nil {
		return fmt.Errorf("engine: compact: %w", err)
	}
	start, end, ok, err := db.tableBounds()
	if err != nil {
		return fmt.Errorf("engine: compact: %w", err)
	}
	defer db.placeForSettle()()
	if ok {
		if err := db.compact(ctx, start, end); err != nil {
			return err
		}
	}
	if err := db.settleLayout(ctx); err != nil {
		return fmt.Errorf("engine: compact: settle the tiered layout: %w", err)
	}
	return nil
}

// Compact compacts the keys in [start, end) and rewrites the tables in that
// span whose codec is not their level's (see CompactAll).
func (db *DB) Compact(start, end []byte) error {
	return db.CompactContext(context.Background(), start, end)
}

// CompactContext is Compact for a caller that may give up: once ctx ends,
// the compactions of the span not yet started are dropped and it returns
// ctx's error (those already running finish in the background, as Close's
// do). Its compactions run at full speed, as CompactAll's: the caller
// waits for them.
func (db *DB) CompactContext(ctx context.Context, start, end []byte) error {
	return db.compactSpan(ctx, start, end, true)
}

// CompactBackground is CompactContext for work nobody waits on (the
// store's history reclaim): its compactions rest as the engine's own do
// while the engine keeps up with the writes (internal/pebbleconf's
// pacing), instead of taking the CPU from the requests.
func (db *DB) CompactBackground(ctx context.Context, start, end []byte) error {
	return db.compactSpan(ctx, start, end, false)
}

// compactSpan is CompactContext, with the pacing lifted if hurry.
func (db *DB) compactSpan(ctx context.Context, start, end []byte, hurry bool) (err error) {
	if err := db.enterOp(); err != nil {
		return err
	}
	defer db.leaveOp()
	defer db.interruptedByClose(&err)
	defer db.recoverFatal(&err)
	if err := db.writable("Compact"); err != nil {
		return err
	}
	if err := checkRange(start, end); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(db.ctx, cancel)()
	db.rewriteMu.Lock()
	defer db.rewriteMu.Unlock()
	if hurry {
		defer pebbleconf.Hurry(db.popts)()
	}
	return db.compact(ctx, start, end)
}

// CompactionsBehind reports whether L0 holds as many sublevels as make the
// engine compact it (Pebble's L0CompactionThreshold) or more: its own
// compactions are behind the writes, and optional work (a manual
// compaction) would take the compaction slot writes are about to need.
// A closed database is not behind.
func (db *DB) CompactionsBehind() bool {
	if db.enterOp() != nil {
		return false
	}
	defer db.leaveOp()
	return db.pdb.Metrics().Levels[0].Sublevels >= int32(db.popts.L0CompactionThreshold)
}

// interruptedByClose turns the error of a compaction that Close cancelled
// into ErrClosed.
func (db *DB) interruptedByClose(err *error) {
	if *err != nil && db.closed.Load() && errors.Is(*err, context.Canceled) {
		*err = fmt.Errorf("%w: compaction interrupted (%v)", ErrClosed, *err)
	}
}

func (db *DB) compact(ctx context.Context, start, end []byte) error {
	if err := db.pdb.Compact(ctx, start, end, true); err != nil {
		return fmt.Errorf("engine: compact: %w", err)
	}
	// Tables written from here on hold writes that raced the compaction;
	// they are the background compactions' business, not this call's.
	cutoff, err := db.maxBackingNum()
	if err != nil {
		return fmt.Errorf("engine: compact: %w", err)
	}
	if err := db.descend(ctx, start, end, cutoff); err != nil {
		return err
	}
	if db.testBeforeRewrite != nil {
		db.testBeforeRewrite()
	}
	for pass := range maxRewritePasses {
		tables, err := db.mismatched(start, end, cutoff)
		if err != nil {
			return fmt.Errorf("engine: compact: %w", err)
		}
		if len(tables) == 0 {
			return nil
		}
		if db.testNoRewrites {
			continue
		}
		if pass < touchPasses && !db.testChunksOnly {
			if err := db.touchAndCompact(ctx, tables); err != nil {
				return fmt.Errorf("engine: compact: %w", err)
			}
			continue
		}
		for _, t := range tables {
			if err := db.rewriteTable(ctx, t); err != nil {
				db.rewrite.fail()
				return fmt.Errorf("engine: rewrite L%d table %d [%q, %q) (%s): %w",
					t.level, t.num, t.start, t.end, t.why, err)
			}
			db.rewrite.table(t.size)
		}
	}
	left, err := db.mismatched(start, end, cutoff)
	if err != nil {
		return fmt.Errorf("engine: compact: %w", err)
	}
	if len(left) > 0 {
		return fmt.Errorf("%w: %d table(s) after %d passes, the first L%d table %d (%s)",
			ErrCodecsRemain, len(left), maxRewritePasses, left[0].level, left[0].num, left[0].why)
	}
	return nil
}

// maxDescentPasses bounds how many more manual compactions descend
// compacts the span with; one normally suffices.
const maxDescentPasses = 3

// ErrTablesAboveBottom is returned by Compact and CompactAll when tables of
// the span that existed when its compaction ended are still above the
// bottommost level after maxDescentPasses more compactions.
var ErrTablesAboveBottom = errors.New("engine: tables remain above the bottommost level")

// descend compacts [start, end) again until no table of it that is not
// newer than cutoff lies above the bottommost level. Pebble's manual
// compaction walks the levels once, down to the deepest one that held the
// span when it began: a store whose tables were all in L0 then (a load
// faster than the background compactions) has its L0 compacted into the
// levels below and stops there, leaving what landed in L5 in L5, with L5's
// codec (2 GB of 2 KB documents kept a fifth of their bytes there, in lz4).
// The next manual compaction starts from those levels and carries them to
// the bottom, as RocksDB's CompactRange with bottommost_level_compaction =
// kForce does in one call.
func (db *DB) descend(ctx context.Context, start, end []byte, cutoff uint64) error {
	for range maxDescentPasses {
		above, err := db.tablesAboveBottom(start, end, cutoff)
		if err != nil || above == 0 {
			return err
		}
		if err := db.pdb.Compact(ctx, start, end, true); err != nil {
			return fmt.Errorf("engine: compact: %w", err)
		}
	}
	above, err := db.tablesAboveBottom(start, end, cutoff)
	if err == nil && above > 0 {
		err = fmt.Errorf("%w: %d table(s) after %d more compactions", ErrTablesAboveBottom, above, maxDescentPasses)
	}
	return err
}

// tablesAboveBottom counts the tables overlapping [start, end) above the
// bottommost level whose backing file is not newer than cutoff.
func (db *DB) tablesAboveBottom(start, end []byte, cutoff uint64) (int, error) {
	levels, err := db.pdb.SSTables()
	if err != nil {
		return 0, fmt.Errorf("engine: compact: %w", err)
	}
	n := 0
	for _, tables := range levels[:len(levels)-1] {
		for _, t := range tables {
			if uint64(t.BackingSSTNum) <= cutoff && overlapsSpan(t.Smallest.UserKey, t.Largest.UserKey, start, end) {
				n++
			}
		}
	}
	return n, nil
}

// overlapsSpan reports whether a table of keys [lo, hi] overlaps [start, end).
func overlapsSpan(lo, hi, start, end []byte) bool {
	return bytes.Compare(hi, start) >= 0 && bytes.Compare(lo, end) < 0
}

// touchPasses is how many passes let Pebble itself rewrite the tables that
// kept another level's codec (see touchAndCompact) before the remaining
// ones are rewritten chunk by chunk.
const touchPasses = 2

// touchAndCompact makes Pebble rewrite tables that a move left with another
// level's codec, with no excise and so nothing for a racing write to lose:
// a range-key deletion over each table's span (our reads and writes never
// use range keys, so it deletes nothing) is flushed into an L0 table that
// overlaps the table, and a manual compaction of the span must then merge
// the two instead of moving the table, writing the output with its level's
// options. Writers, readers and snapshots go on as beside any compaction.
func (db *DB) touchAndCompact(ctx context.Context, tables []mismatchedTable) error {
	b := db.pdb.NewBatch()
	defer b.Close()
	lo, hi := tables[0].start, tables[0].end
	for _, t := range tables {
		if err := b.RangeKeyDelete(t.start, t.end, nil); err != nil {
			return err
		}
		if bytes.Compare(t.start, lo) < 0 {
			lo = t.start
		}
		if bytes.Compare(t.end, hi) > 0 {
			hi = t.end
		}
	}
	if err := b.Commit(pebble.NoSync); err != nil {
		return err
	}
	before := db.pdb.Metrics().Compact.Count
	if err := db.pdb.Compact(ctx, lo, hi, true); err != nil {
		return err
	}
	db.rewrite.update(func(m *RewriteMetrics) {
		m.Tables += int64(len(tables))
		m.ByCompaction += int64(len(tables))
		for _, t := range tables {
			m.BytesIn += t.size
		}
		m.Compactions += db.pdb.Metrics().Compact.Count - before
	})
	return nil
}

// tableBounds returns the span of every table in the LSM: from the
// smallest user key of any table to just past the largest, range deletions
// included. ok is false when there are no tables.
func (db *DB) tableBounds() (start, end []byte, ok bool, err error) {
	levels, err := db.pdb.SSTables()
	if err != nil {
		return nil, nil, false, err
	}
	for _, tables := range levels {
		for _, t := range tables {
			lo, hi := t.Smallest.UserKey, t.Largest.UserKey
			if !ok || bytes.Compare(lo, start) < 0 {
				start = bytes.Clone(lo)
			}
			if !ok || bytes.Compare(hi, end) >= 0 {
				end = append(bytes.Clone(hi), 0)
			}
			ok = true
		}
	}
	return start, end, ok, nil
}

// maxBackingNum is the largest file number of any table's backing file.
func (db *DB) maxBackingNum() (uint64, error) {
	levels, err := db.pdb.SSTables()
	if err != nil {
		return 0, err
	}
	var n uint64
	for _, tables := range levels {
		for _, t := range tables {
			n = max(n, uint64(t.BackingSSTNum))
		}
	}
	return n, nil
}

// mismatchedTable is a table not written with its level's options.
type mismatchedTable struct {
	level      int
	num        uint64
	start, end []byte // the table's span: [smallest, largest+"\x00")
	size       uint64
	why        string // what differs (levelMismatch)
}

// mismatched lists the tables overlapping [start, end) that were not
// written with their level's options (codec, block size, index block size,
// filter: see levelMismatch) and whose backing file is not newer than
// cutoff.
func (db *DB) mismatched(start, end []byte, cutoff uint64) ([]mismatchedTable, error) {
	levels, err := db.pdb.SSTables(pebble.WithProperties())
	if err != nil {
		return nil, err
	}
	var out []mismatchedTable
	for level, tables := range levels {
		codec, inline := db.res.Profile(level).Name, db.res.InlineProfile(level).Name
		for _, t := range tables {
			if t.Properties == nil || uint64(t.BackingSSTNum) > cutoff {
				continue
			}
			why := levelMismatch(t.Properties, &db.popts.Levels[level], codec, inline)
			if why == "" {
				continue
			}
			lo, hi := t.Smallest.UserKey, t.Largest.UserKey
			if !overlapsSpan(lo, hi, start, end) {
				continue
			}
			out = append(out, mismatchedTable{
				level: level,
				num:   uint64(t.FileNum),
				start: bytes.Clone(lo),
				end:   append(bytes.Clone(hi), 0),
				size:  t.Size,
				why:   why,
			})
		}
	}
	return out, nil
}

// rewriteTable replaces t's span chunk by chunk with tables written with
// t's level's options.
func (db *DB) rewriteTable(ctx context.Context, t mismatchedTable) error {
	for cursor := t.start; bytes.Compare(cursor, t.end) < 0; {
		if err := ctx.Err(); err != nil {
			return err
		}
		next, err := db.rewriteChunk(ctx, t.level, cursor, t.end)
		if err != nil {
			return err
		}
		cursor = next
	}
	return nil
}

// rewriteChunk rewrites the first chunk of [lo, end) and returns where the
// chunk ended. See writeGuard for why no write into the chunk is lost.
func (db *DB) rewriteChunk(ctx context.Context, level int, lo, end []byte) ([]byte, error) {
	span := db.guard.watch(lo, end)
	defer db.guard.unwatch(span)
	hi := end
	for range optimisticAttempts {
		c, err := db.writeChunk(level, lo, end, rewriteChunkBytes, rewriteChunkKeys)
		if err != nil {
			return nil, err
		}
		hi = c.hi
		if db.guard.gateIfClean(span, lo, c.hi) {
			err := db.ingestChunk(ctx, c, lo)
			db.guard.ungate(span)
			return c.hi, err
		}
		db.removeChunk(c)
		db.rewrite.retry()
	}
	// Writers keep landing in the chunk: gate its span (and only it) while
	// it is read, written and ingested. The chunk may end before hi (more
	// keys arrived); the rest is the next chunk.
	db.guard.gate(span, lo, hi)
	defer db.guard.ungate(span)
	db.rewrite.gated()
	c, err := db.writeChunk(level, lo, hi, rewriteGatedBytes, rewriteGatedKeys)
	if err != nil {
		return nil, err
	}
	return c.hi, db.ingestChunk(ctx, c, lo)
}

// chunk is a table written by writeChunk, holding the pairs of [lo, hi).
type chunk struct {
	path string
	hi   []byte
	keys int
}

// writeChunk writes the pairs of [lo, end), up to maxBytes (keys plus
// values) or maxKeys, into a new table with the writer options of level.
// The chunk ends at hi: end, or the first key not written.
func (db *DB) writeChunk(level int, lo, end []byte, maxBytes, maxKeys int) (c chunk, err error) {
	it, err := db.pdb.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: end})
	if err != nil {
		return c, err
	}
	defer func() {
		if cerr := it.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			db.removeChunk(c)
		}
	}()
	c.hi = end
	var w *sstable.Writer
	if c.path, w, err = db.newTempTable(level); err != nil {
		return c, err
	}
	bytesIn := 0
	for valid := it.First(); valid; valid = it.Next() {
		if bytesIn >= maxBytes || c.keys >= maxKeys {
			c.hi = bytes.Clone(it.Key())
			break
		}
		v, verr := it.ValueAndErr()
		if verr != nil {
			_ = w.Close()
			return c, verr
		}
		if err := w.Set(it.Key(), v); err != nil {
			_ = w.Close()
			return c, err
		}
		bytesIn += len(it.Key()) + len(v)
		c.keys++
	}
	if err := it.Error(); err != nil {
		_ = w.Close()
		return c, err
	}
	return c, w.Close()
}

func (db *DB) removeChunk(c chunk) { db.removeTempTable(c.path) }

// ingestChunk replaces [lo, c.hi) by c's table; an empty chunk means
// everything there is deleted, and dropping it is the rewrite.
func (db *DB) ingestChunk(ctx context.Context, c chunk, lo []byte) error {
	defer db.removeChunk(c)
	span := pebble.KeyRange{Start: lo, End: c.hi}
	if c.keys == 0 {
		return db.pdb.Excise(ctx, span)
	}
	st, err := db.fs.Stat(c.path)
	if err != nil {
		return err
	}
	if _, err := db.pdb.IngestAndExcise(ctx, []string{c.path}, nil, nil, span); err != nil {
		return err
	}
	db.rewrite.chunk(uint64(st.Size()))
	return nil
}

// rewriteCounter counts table rewrites into the level's codec.
type rewriteCounter struct {
	mu sync.Mutex
	id uint64
	m  RewriteMetrics
}

func (r *rewriteCounter) nextID() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.id++
	return r.id
}

func (r *rewriteCounter) update(f func(m *RewriteMetrics)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	f(&r.m)
}

func (r *rewriteCounter) table(in uint64) {
	r.update(func(m *RewriteMetrics) { m.Tables++; m.BytesIn += in })
}
func (r *rewriteCounter) chunk(out uint64) {
	r.update(func(m *RewriteMetrics) { m.Chunks++; m.BytesOut += out })
}
func (r *rewriteCounter) retry() { r.update(func(m *RewriteMetrics) { m.Retries++ }) }
func (r *rewriteCounter) gated() { r.update(func(m *RewriteMetrics) { m.Gated++ }) }
func (r *rewriteCounter) fail()  { r.update(func(m *RewriteMetrics) { m.Failed++ }) }

// RewriteMetrics counts the tables CompactAll and Compact rewrote into their
// level's codec.
type RewriteMetrics struct {
	// Tables is the number of tables rewritten into their level's codec;
	// ByCompaction those of them Pebble's own compaction rewrote (see
	// touchAndCompact), in Compactions compactions; the others were
	// rewritten chunk by chunk, in Chunks ingestions.
	Tables, ByCompaction, Compactions, Chunks int64
	// BytesIn is the size of the tables before; BytesOut the size of the
	// chunks that replaced them (Pebble's compaction output is not
	// separated from its other work).
	BytesIn, BytesOut uint64
	// Retries counts chunks read again because a write landed in them while
	// they were rewritten; Gated counts chunks rewritten under a gate on
	// their span after optimisticAttempts such retries.
	Retries, Gated int64
	// Failed counts rewrites that returned an error.
	Failed int64
}

func (r *rewriteCounter) load() RewriteMetrics {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.m
}

// WaitForCompactions leaves the LSM in shape after a bulk load: it waits
// until the background compactions have brought L0 below Pebble's
// compaction threshold (its L0 score under 1) with no compaction running,
// and then, if L0 still holds L0CompactionThreshold tables or more (tables
// of ascending keys never overlap, so Pebble's score stays low however many
// there are), compacts L0's span down, which mostly moves the tables. It
// polls every interval and calls progress (if not nil) with each reading.
// A short-lived process calls it before Close: nothing later is long enough
// to work off such a backlog. It returns the last metrics, with ctx's error
// if ctx ended first.
func (db *DB) WaitForCompactions(ctx context.Context, interval time.Duration, progress func(*Metrics)) (*Metrics, error) {
	if err := db.writable("WaitForCompactions"); err != nil {
		return nil, err
	}
	compacted := false
	for {
		m, err := db.Metrics()
		if err != nil {
			return m, err
		}
		if progress != nil {
			progress(m)
		}
		idle := m.Levels[0].Score < 1 && m.Compaction.InProgress == 0
		if idle && (compacted || m.Levels[0].Tables < int64(db.popts.L0CompactionThreshold)) {
			return m, nil
		}
		if idle {
			compacted = true
			if err := db.compactL0(ctx, interval, progress); err != nil {
				return m, err
			}
			continue
		}
		select {
		case <-ctx.Done():
			return m, ctx.Err()
		case <-db.ctx.Done():
			return m, ErrClosed
		case <-time.After(interval):
		}
	}
}

// compactL0 compacts the span of L0's tables, reporting progress meanwhile.
func (db *DB) compactL0(ctx context.Context, interval time.Duration, progress func(*Metrics)) error {
	if err := db.enterOp(); err != nil {
		return err
	}
	defer db.leaveOp()
	levels, err := db.pdb.SSTables()
	if err != nil {
		return err
	}
	var start, end []byte
	for i, t := range levels[0] {
		if i == 0 || bytes.Compare(t.Smallest.UserKey, start) < 0 {
			start = bytes.Clone(t.Smallest.UserKey)
		}
		if i == 0 || bytes.Compare(t.Largest.UserKey, end) >= 0 {
			end = append(bytes.Clone(t.Largest.UserKey), 0)
		}
	}
	if start == nil {
		return nil
	}
	done := make(chan error, 1)
	go func() { done <- db.pdb.Compact(ctx, start, end, true) }()
	for {
		select {
		case err := <-done:
			return err
		case <-time.After(interval):
			if progress != nil {
				if m, err := db.metrics(); err == nil {
					progress(m)
				}
			}
		}
	}
}
