package tune

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/stratadb/strata/config"
	"github.com/stratadb/strata/engine"
	"github.com/stratadb/strata/internal/pebbleconf"
)

// WriteBatchSize is the number of entities each write batch holds: the
// measured writes commit batches of 100 puts (NewBatch, Put x 100, Commit),
// as a bulk load does, on both Strata and raw Pebble.
const WriteBatchSize = 100

// progressChunk is how many reads or scanned entities pass between two
// progress reports.
const progressChunk = 256

// Implementation names the store a run measures.
type Implementation string

// The implementations a run can measure.
const (
	// Strata is engine.Open with the run's config.
	Strata Implementation = "strata"
	// Pebble is pebble.Open with pebbleconf.Options of the same config:
	// the raw-Pebble baseline with identical settings.
	Pebble Implementation = "pebble"
	// RocksDB is real RocksDB (librocksdb, a build with -tags rocksdb)
	// opened with the RocksDB OPTIONS file Strata writes for the same
	// config (see rocksdb.go).
	RocksDB Implementation = "rocksdb"
)

// errNoRocksDB says how to get a build that measures RocksDB.
var errNoRocksDB = errors.New("--rocksdb: this tune was built without RocksDB: build it with -tags rocksdb (needs librocksdb, Debian's librocksdb-dev)")

// opener returns the function that opens impl's store.
func (impl Implementation) opener() func(*config.Config) (store, error) {
	switch impl {
	case Pebble:
		return openPebble
	case RocksDB:
		return openRocksDB
	}
	return openStrata
}

// DefaultMinTime is the least wall time of each timed phase of a run
// (writes, point reads, reads of absent keys, the scan): the phase's work
// repeats until it has run this long, so that a figure is not a few
// milliseconds of a shared machine.
const DefaultMinTime = time.Second

// Run holds the figures of one measured run of one configuration. Each
// timed phase repeats its work (a pass) until it has run MinTime; the
// seconds are per pass, the mean over the passes.
type Run struct {
	// Impl is the store measured.
	Impl Implementation
	// Dir is the database directory (removed after the run unless --dir
	// was given).
	Dir string
	// PID is the process that measured the run: the tune process, or a
	// child of its own with CompressionOptions.ProcessPerRun.
	PID int
	// WriteSeconds is the wall time of the batched puts and the final
	// Flush; WriteCPUSeconds the process's CPU time (every thread) over
	// the same time; WritePasses the number of passes (the first writes
	// the run's database, each further one a fresh database, removed).
	WriteSeconds, WriteCPUSeconds float64
	WritePasses                   int
	// SizeBeforeBytes is the table bytes on disk after the flush, before the
	// full compaction.
	SizeBeforeBytes int64
	// AbsentReads is the number of reads of absent keys per pass (0 unless
	// asked for), made after the flush and before the full compaction;
	// AbsentSeconds and AbsentCPUSeconds their wall and CPU time per pass;
	// AbsentTables the tables per level (L0..L6) they met.
	AbsentReads                     int
	AbsentSeconds, AbsentCPUSeconds float64
	AbsentPasses                    int
	AbsentTables                    [7]int
	// CompactSeconds is the wall time of the full compaction,
	// CompactCPUSeconds its CPU time, per pass (each write pass after the
	// first compacts its database too, so that the phase runs MinTime).
	CompactSeconds, CompactCPUSeconds float64
	CompactPasses                     int
	// DBSizeBytes is the table bytes on disk after the full compaction,
	// measured once the database is closed (Close waits for obsolete tables
	// to be deleted), so it is what a listing of the directory shows.
	DBSizeBytes int64
	// WriteAmp is engine Metrics().WriteAmp after the compaction (Strata
	// only; 0 for Pebble).
	WriteAmp float64
	// TableCodecs lists the codecs the tables carry after the compaction,
	// with counts ("ZSTD:1").
	TableCodecs string
	// ReadSeconds is the wall time of one Get of every key, in a shuffled
	// order, after a reopen (each pass reopens); ReadCPUSeconds its CPU
	// time.
	ReadSeconds, ReadCPUSeconds float64
	ReadPasses                  int
	// ScanSeconds is the wall time of one forward scan over every key,
	// after the reads (0 when the run has no scan); ScanCPUSeconds its CPU
	// time.
	ScanSeconds, ScanCPUSeconds float64
	ScanPasses                  int
}

// AbsentInUpperLevels reports whether the reads of absent keys were made
// and met tables in L0-L5, where every Get consults the bloom filters.
func (r Run) AbsentInUpperLevels() bool {
	n := 0
	for _, t := range r.AbsentTables[:6] {
		n += t
	}
	return r.AbsentReads > 0 && n > 0
}

// runSpec describes one run.
type runSpec struct {
	impl  Implementation
	cfg   *config.Config // db_path is the run's fresh directory
	data  *Dataset
	order []int // read order, a permutation of the entity indexes
	// absent adds, after the flush and before the compaction, one read of
	// an absent key next to each present key (the key with a 0x00 byte
	// appended), in the same order.
	absent bool
	// noScan leaves out the scan.
	noScan bool
	// minTime is the least wall time of each timed phase; 0 means
	// DefaultMinTime.
	minTime  time.Duration
	progress Progress
}

// runUnits is the progress units of a run over n entities: each entity is
// written, read and scanned.
func runUnits(n int) int64 { return 3 * int64(n) }

// store is what a run does to a database; strataStore and pebbleStore
// implement it, so both run through the same measuring code.
type store interface {
	commit(keys, values [][]byte) error
	flush() error
	compact(first, last []byte) error
	// get reads key and checks its value equals want.
	get(key, want []byte) error
	// getAbsent reads key and checks it is absent.
	getAbsent(key []byte) error
	scan(fn func(k, v []byte) error) error
	writeAmp() (float64, error)
	tableCodecs() (map[string]int, error)
	// levels returns the number of tables on each level, L0 to L6.
	levels() ([7]int, error)
	close() error
}

// errMismatch reports a read that did not return what was written.
var errMismatch = errors.New("tune: read back a different value")

type strataStore struct{ db *engine.DB }

func openStrata(cfg *config.Config) (store, error) {
	db, err := engine.Open(cfg)
	if err != nil {
		return nil, err
	}
	return &strataStore{db: db}, nil
}

func (s *strataStore) commit(keys, values [][]byte) error {
	b := s.db.NewBatch()
	defer b.Close()
	for i := range keys {
		if err := b.Put(keys[i], values[i]); err != nil {
			return err
		}
	}
	return b.Commit()
}

func (s *strataStore) flush() error { return s.db.Flush() }

func (s *strataStore) compact(_, _ []byte) error { return s.db.CompactAll() }

// get compares the value in place through engine.DB.View, as the Pebble
// side does: neither copies the value.
func (s *strataStore) get(key, want []byte) error {
	return s.db.View(key, func(v []byte) error {
		if !bytes.Equal(v, want) {
			return mismatch(key, v, want)
		}
		return nil
	})
}

func (s *strataStore) getAbsent(key []byte) error {
	err := s.db.View(key, func([]byte) error { return nil })
	if errors.Is(err, engine.ErrNotFound) {
		return nil
	}
	if err == nil {
		return fmt.Errorf("%w: key %q was never written but is present", errMismatch, key)
	}
	return err
}

func (s *strataStore) scan(fn func(k, v []byte) error) error {
	it, err := s.db.NewIter(nil)
	if err != nil {
		return err
	}
	for valid := it.First(); valid; valid = it.Next() {
		v, err := it.ValueAndErr()
		if err == nil {
			err = fn(it.Key(), v)
		}
		if err != nil {
			_ = it.Close()
			return err
		}
	}
	return it.Close()
}

func (s *strataStore) writeAmp() (float64, error) {
	m, err := s.db.Metrics()
	if err != nil {
		return 0, err
	}
	return m.WriteAmp, nil
}

func (s *strataStore) tableCodecs() (map[string]int, error) {
	tables, err := s.db.Tables()
	if err != nil {
		return nil, err
	}
	out := map[string]int{}
	for _, t := range tables {
		out[t.Codec]++
	}
	return out, nil
}

func (s *strataStore) levels() ([7]int, error) {
	var out [7]int
	m, err := s.db.Metrics()
	if err != nil {
		return out, err
	}
	for l := range out {
		out[l] = int(m.Levels[l].Tables)
	}
	return out, nil
}

func (s *strataStore) close() error { return s.db.Close() }

// pebbleStore is raw Pebble opened with pebbleconf.Options of the run's
// config: the same options Strata opens Pebble with, without Strata's
// wrapping (WAL accounting, OPTIONS file, codec rewrites).
type pebbleStore struct {
	db   *pebble.DB
	opts *pebble.Options
	wo   *pebble.WriteOptions
}

func openPebble(cfg *config.Config) (store, error) {
	r, err := cfg.Resolve()
	if err != nil {
		return nil, err
	}
	opts := pebbleconf.Options(r)
	opts.WithFSDefaults()
	db, err := pebble.Open(cfg.DBPath, opts)
	opts.Cache.Unref()
	if err != nil {
		return nil, fmt.Errorf("pebble: open %s: %w", cfg.DBPath, err)
	}
	wo := pebble.NoSync
	if cfg.Sync {
		wo = pebble.Sync
	}
	return &pebbleStore{db: db, opts: opts, wo: wo}, nil
}

func (p *pebbleStore) commit(keys, values [][]byte) error {
	b := p.db.NewBatch()
	defer b.Close()
	for i := range keys {
		if err := b.Set(keys[i], values[i], nil); err != nil {
			return err
		}
	}
	return b.Commit(p.wo)
}

func (p *pebbleStore) flush() error { return p.db.Flush() }

// compact compacts the whole key space, as engine's CompactAll asks Pebble
// to, unpaced as CompactAll's; Pebble then moves a lone table down without
// rewriting it, so the tables may keep their L0 codec (see
// Run.TableCodecs).
func (p *pebbleStore) compact(first, last []byte) error {
	defer pebbleconf.Hurry(p.opts)()
	return p.db.Compact(context.Background(), first, append(bytes.Clone(last), 0), true)
}

// get compares the value in place, before releasing it, as a Pebble user
// would and as the Strata side does through engine.DB.View.
func (p *pebbleStore) get(key, want []byte) error {
	v, closer, err := p.db.Get(key)
	if err != nil {
		return err
	}
	var merr error
	if !bytes.Equal(v, want) {
		merr = mismatch(key, v, want)
	}
	return errors.Join(merr, closer.Close())
}

func (p *pebbleStore) getAbsent(key []byte) error {
	_, closer, err := p.db.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil
	}
	if err == nil {
		_ = closer.Close()
		return fmt.Errorf("%w: key %q was never written but is present", errMismatch, key)
	}
	return err
}

func (p *pebbleStore) scan(fn func(k, v []byte) error) error {
	it, err := p.db.NewIter(nil)
	if err != nil {
		return err
	}
	for valid := it.First(); valid; valid = it.Next() {
		v, err := it.ValueAndErr()
		if err == nil {
			err = fn(it.Key(), v)
		}
		if err != nil {
			_ = it.Close()
			return err
		}
	}
	return it.Close()
}

func (p *pebbleStore) writeAmp() (float64, error) { return 0, nil }

func (p *pebbleStore) tableCodecs() (map[string]int, error) {
	levels, err := p.db.SSTables(pebble.WithProperties())
	if err != nil {
		return nil, err
	}
	out := map[string]int{}
	for _, tables := range levels {
		for _, t := range tables {
			name := "unknown"
			if t.Properties != nil {
				name = t.Properties.CompressionName
			}
			out[name]++
		}
	}
	return out, nil
}

func (p *pebbleStore) levels() ([7]int, error) {
	var out [7]int
	levels, err := p.db.SSTables()
	if err != nil {
		return out, err
	}
	for l := range min(len(levels), len(out)) {
		out[l] = len(levels[l])
	}
	return out, nil
}

func (p *pebbleStore) close() error { return p.db.Close() }

func mismatch(key, got, want []byte) error {
	return fmt.Errorf("%w: key %q: got %d bytes %q, wrote %d bytes %q", errMismatch, key, len(got), clip(got), len(want), clip(want))
}

func clip(b []byte) []byte {
	if len(b) > 40 {
		return append(bytes.Clone(b[:40]), "..."...)
	}
	return b
}

// settle collects the garbage of earlier phases and runs, so that it is not
// collected inside the next timed phase.
func settle() { runtime.GC() }

// phaseClock adds up the passes of one timed phase: wall time and the
// process's CPU time (processCPU) of each pass, nothing between passes.
type phaseClock struct {
	wall, cpu time.Duration
	passes    int
}

// pass times f as one pass, after a garbage collection.
func (c *phaseClock) pass(f func() error) error {
	settle()
	cpu0, began := processCPU(), time.Now()
	err := f()
	c.wall += time.Since(began)
	c.cpu += processCPU() - cpu0
	c.passes++
	return err
}

// more reports whether the phase has not yet run minTime.
func (c *phaseClock) more(minTime time.Duration) bool { return c.wall < minTime }

// perPass returns the mean wall and CPU seconds of a pass.
func (c *phaseClock) perPass() (wall, cpu float64) {
	if c.passes == 0 {
		return 0, 0
	}
	return c.wall.Seconds() / float64(c.passes), c.cpu.Seconds() / float64(c.passes)
}

// measure performs one run in spec.cfg.DBPath, which must not exist yet.
// Each timed phase repeats (passes) until it has run spec.minTime:
//
//  1. open; write every entity in batches of WriteBatchSize; Flush. The
//     wall time of the puts and the Flush is WriteSeconds. Further passes
//     write the same entities into a fresh database each (opened and
//     removed outside the timing), so every pass does the same work, and
//     compact it, timed as a compaction pass (step 4).
//  2. SizeBeforeBytes: the *.sst bytes on disk.
//  3. With spec.absent: one read of an absent key per present key, in
//     spec.order, timed as AbsentSeconds, against the flushed tables
//     (AbsentTables says on which levels they are).
//  4. full compaction (CompactAll; raw Pebble: Compact over the key span),
//     timed; write amplification and the tables' codecs from the store.
//  5. Close; DBSizeBytes: the *.sst bytes on disk.
//  6. reopen (a new, cold block cache; the OS page cache stays warm, as
//     the files were just written); Get every key once in spec.order,
//     checking each value (a mismatch is an error); the wall time is
//     ReadSeconds. Each further pass reopens first, outside the timing.
//  7. unless spec.noScan, one forward scan, checking every key and value
//     in order, timed as ScanSeconds; Close.
//
// Before each pass the Go garbage collector runs (settle). CPU seconds are
// the process's user and system time over the same passes.
func measure(ctx context.Context, spec runSpec) (run Run, err error) {
	open := spec.impl.opener()
	d, cfg, p := spec.data, spec.cfg, orNop(spec.progress)
	minTime := spec.minTime
	if minTime == 0 {
		minTime = DefaultMinTime
	}
	run = Run{Impl: spec.impl, Dir: cfg.DBPath, PID: os.Getpid()}
	if d.Len() == 0 {
		return run, errors.New("tune: no entities to write")
	}
	sorted := d.scanOrder()
	if _, err := os.Stat(cfg.DBPath); err == nil {
		return run, fmt.Errorf("tune: run directory %s exists already", cfg.DBPath)
	}
	s, err := open(cfg)
	if err != nil {
		return run, err
	}
	defer func() {
		if s != nil {
			if cerr := s.close(); err == nil {
				err = cerr
			}
		}
	}()

	// 1. Write.
	write := func(s store, p Progress) error {
		for lo := 0; lo < d.Len(); lo += WriteBatchSize {
			if err := ctx.Err(); err != nil {
				return err
			}
			hi := min(lo+WriteBatchSize, d.Len())
			if err := s.commit(d.Keys[lo:hi], d.Values[lo:hi]); err != nil {
				return fmt.Errorf("write %s..%s: %w", d.Keys[lo], d.Keys[hi-1], err)
			}
			p.Add(int64(hi - lo))
		}
		if err := s.flush(); err != nil {
			return fmt.Errorf("flush: %w", err)
		}
		return nil
	}
	var clock, compactClock phaseClock
	if err := clock.pass(func() error { return write(s, p) }); err != nil {
		return run, err
	}
	// Further passes write and compact a fresh database each, until both
	// phases have run minTime (the run's own database is compacted below,
	// after the reads of absent keys, as one more compaction pass). A
	// compaction that is a move (a lone table relinked to L6, milliseconds)
	// stops repeating once the passes have run 2 x minTime in all: its
	// share of the time is negligible however it is measured.
	compactAll := func(s store) error {
		if err := s.compact(d.Keys[sorted[0]], d.Keys[sorted[len(sorted)-1]]); err != nil {
			return fmt.Errorf("compaction: %w", err)
		}
		return nil
	}
	for clock.more(minTime) || compactClock.more(minTime) && clock.wall+compactClock.wall < 2*minTime {
		extra := cfg.Clone()
		extra.DBPath = fmt.Sprintf("%s.pass%d", cfg.DBPath, clock.passes+1)
		err := extraPass(extra, open, func(s store) error {
			if err := clock.pass(func() error { return write(s, nopProgress{}) }); err != nil {
				return err
			}
			return compactClock.pass(func() error { return compactAll(s) })
		})
		if err != nil {
			return run, fmt.Errorf("write pass %d: %w", clock.passes+1, err)
		}
	}
	run.WriteSeconds, run.WriteCPUSeconds = clock.perPass()
	run.WritePasses = clock.passes

	// 2. Size before the compaction.
	if run.SizeBeforeBytes, err = TableBytes(cfg.DBPath); err != nil {
		return run, err
	}

	// 3. Reads of absent keys against the flushed tables.
	if spec.absent {
		absent := make([][]byte, len(spec.order))
		for n, i := range spec.order {
			absent[n] = append(bytes.Clone(d.Keys[i]), 0)
		}
		if run.AbsentTables, err = s.levels(); err != nil {
			return run, err
		}
		clock = phaseClock{}
		for clock.passes == 0 || clock.more(minTime) {
			err := clock.pass(func() error {
				for _, k := range absent {
					if err := s.getAbsent(k); err != nil {
						return fmt.Errorf("read of absent key %q: %w", k, err)
					}
				}
				return ctx.Err()
			})
			if err != nil {
				return run, err
			}
		}
		run.AbsentSeconds, run.AbsentCPUSeconds = clock.perPass()
		run.AbsentReads, run.AbsentPasses = len(absent), clock.passes
	}

	// 4. Compaction.
	if err := compactClock.pass(func() error { return compactAll(s) }); err != nil {
		return run, err
	}
	run.CompactSeconds, run.CompactCPUSeconds = compactClock.perPass()
	run.CompactPasses = compactClock.passes
	if run.WriteAmp, err = s.writeAmp(); err != nil {
		return run, err
	}
	codecs, err := s.tableCodecs()
	if err != nil {
		return run, err
	}
	run.TableCodecs = pebbleconf.FormatCodecCounts(codecs)

	// 5. Size after the compaction, once closed.
	err, s = s.close(), nil
	if err != nil {
		return run, err
	}
	if run.DBSizeBytes, err = TableBytes(cfg.DBPath); err != nil {
		return run, err
	}

	// 6. Point reads, each pass after a reopen.
	clock = phaseClock{}
	for clock.passes == 0 || clock.more(minTime) {
		if s != nil {
			err, s = s.close(), nil
			if err != nil {
				return run, err
			}
		}
		if s, err = open(cfg); err != nil {
			return run, fmt.Errorf("reopen: %w", err)
		}
		pp := p
		if clock.passes > 0 {
			pp = nopProgress{}
		}
		err := clock.pass(func() error {
			for n, i := range spec.order {
				if err := s.get(d.Keys[i], d.Values[i]); err != nil {
					return fmt.Errorf("read %s: %w", d.Keys[i], err)
				}
				if (n+1)%progressChunk == 0 {
					pp.Add(progressChunk)
					if err := ctx.Err(); err != nil {
						return err
					}
				}
			}
			pp.Add(int64(len(spec.order) % progressChunk))
			return nil
		})
		if err != nil {
			return run, err
		}
	}
	run.ReadSeconds, run.ReadCPUSeconds = clock.perPass()
	run.ReadPasses = clock.passes

	// 7. Scan.
	if spec.noScan {
		p.Add(int64(d.Len()))
		return run, nil
	}
	clock = phaseClock{}
	for clock.passes == 0 || clock.more(minTime) {
		pp := p
		if clock.passes > 0 {
			pp = nopProgress{}
		}
		if err := clock.pass(func() error { return scanAll(s, d, sorted, pp) }); err != nil {
			return run, err
		}
	}
	run.ScanSeconds, run.ScanCPUSeconds = clock.perPass()
	run.ScanPasses = clock.passes
	return run, nil
}

// extraPass opens a fresh database with cfg, runs work on it (which times
// its own phases), then closes and removes it (neither timed).
func extraPass(cfg *config.Config, open func(*config.Config) (store, error), work func(store) error) (err error) {
	if _, err := os.Stat(cfg.DBPath); err == nil {
		return fmt.Errorf("tune: run directory %s exists already", cfg.DBPath)
	}
	s, err := open(cfg)
	if err != nil {
		return err
	}
	defer func() {
		err = errors.Join(err, s.close(), os.RemoveAll(cfg.DBPath))
	}()
	return work(s)
}

// scanAll scans every key once, checking each key and value against d in
// key order (sorted).
func scanAll(s store, d *Dataset, sorted []int, p Progress) error {
	n := 0
	err := s.scan(func(k, v []byte) error {
		if n >= d.Len() {
			return fmt.Errorf("%w: scan found key %q after the last key written", errMismatch, k)
		}
		i := sorted[n]
		if !bytes.Equal(k, d.Keys[i]) {
			return fmt.Errorf("%w: scan found key %q where %q was written", errMismatch, k, d.Keys[i])
		}
		if !bytes.Equal(v, d.Values[i]) {
			return mismatch(k, v, d.Values[i])
		}
		n++
		if n%progressChunk == 0 {
			p.Add(progressChunk)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("scan: %w", err)
	}
	if n != d.Len() {
		return fmt.Errorf("%w: scan found %d keys, %d were written", errMismatch, n, d.Len())
	}
	p.Add(int64(n % progressChunk))
	return nil
}
