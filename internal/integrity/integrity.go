// Package integrity checks a Strata database offline, as `etcdutl check` and
// Pebble's `sstable check` do: it opens the database read-only and reads
// every block of every table and blob file, so that a checksum mismatch, a
// truncated file or a table the MANIFEST lists but no directory holds is
// found before a read or a compaction meets it.
//
//	r, err := integrity.Check(cfg, integrity.Options{})
//	if err != nil { ... } // the check could not run: no database, locked
//	for _, d := range r.Damaged {
//		fmt.Println(d.Path, d.Err)
//	}
//	fmt.Println(r.Summary())
//
// Nothing on disk changes: the database is opened as engine.Options.ReadOnly
// opens it (a shared lock, no OPTIONS rewrite, no cleanup), and every file
// is opened for reading only.
//
// What is checked, and how:
//
//  1. The database opens: its MANIFEST and WAL decode and every file the
//     MANIFEST lists exists (Pebble refuses to open otherwise, naming the
//     file; this is reported as damage to the database, Kind "database").
//  2. Every table the MANIFEST lists is in db_path, a db_paths entry or a
//     table directory of the tiering record.
//  3. Every table file (.sst) in those directories: each block the
//     table's layout names (data, index, filter, range deletion, range
//     key, properties, metaindex, blob reference index, value blocks) is
//     read and its checksum verified, through Pebble's
//     sstable.Reader.ValidateBlockChecksums.
//  4. Every blob file (.blob): the index block and each value block it
//     lists are read and their checksums verified.
//
// Pebble's DB-level check of the LSM's ordering invariants
// (pebble.DB.CheckLevels) needs the Pebble handle, which the engine does
// not expose; a damaged block is what the checksums find.
package integrity

import (
	"context"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"slices"
	"strconv"
	"strings"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/sstable"
	"github.com/cockroachdb/pebble/v2/sstable/blob"
	"github.com/cockroachdb/pebble/v2/sstable/block"
	"github.com/cockroachdb/pebble/v2/sstable/colblk"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stratadb/strata/config"
	"github.com/stratadb/strata/engine"
	"github.com/stratadb/strata/internal/fsutil"
	"github.com/stratadb/strata/internal/pebbleconf"
)

// ErrDamaged is wrapped by the error a caller returns for a Report that
// found damage; Report.Err builds it.
var ErrDamaged = errors.New("integrity: damaged files found")

// ErrNoDatabase is returned by Check when db_path holds no database (no
// MANIFEST) or does not exist.
var ErrNoDatabase = errors.New("integrity: no database")

// Kind is what a checked file is.
type Kind string

// The kinds of Damage.
const (
	// KindTable is a table file, NNNNNN.sst.
	KindTable Kind = "table"
	// KindBlob is a blob file, NNNNNN.blob (enable_blob_files).
	KindBlob Kind = "blob file"
	// KindDatabase is the database as a whole: its MANIFEST or WAL did not
	// decode, so no file list could be read.
	KindDatabase Kind = "database"
)

// Damage is one damaged file.
type Damage struct {
	// Path is the file's path (db_path itself for KindDatabase).
	Path string
	// Kind is what the file is.
	Kind Kind
	// Level is the table's LSM level, or -1 when it is not in the MANIFEST's
	// current version (a blob file, an obsolete table, KindDatabase).
	Level int
	// Smallest and Largest are the table's first and last user keys, nil
	// when unknown.
	Smallest, Largest []byte
	// Err is what reading the file met.
	Err error
}

// Report is the result of Check.
type Report struct {
	// DBPath is the database checked.
	DBPath string
	// Tables and BlobFiles count the files read.
	Tables, BlobFiles int
	// Bytes is the total size of the files read.
	Bytes int64
	// Damaged lists the damaged files, tables by level then path, then
	// blob files by path.
	Damaged []Damage
}

// OK reports whether nothing was damaged.
func (r *Report) OK() bool { return len(r.Damaged) == 0 }

// Summary is one line: what was read and how much of it is damaged.
func (r *Report) Summary() string {
	s := fmt.Sprintf("checked %d %s and %d %s (%s) in %s: ",
		r.Tables, plural(r.Tables, "table", "tables"), r.BlobFiles, plural(r.BlobFiles, "blob file", "blob files"),
		formatBytes(r.Bytes), r.DBPath)
	if r.OK() {
		return s + "no damage found"
	}
	return s + fmt.Sprintf("%d damaged", len(r.Damaged))
}

// Err returns nil for a clean report, else an error wrapping ErrDamaged that
// names the damaged files.
func (r *Report) Err() error {
	if r.OK() {
		return nil
	}
	names := make([]string, 0, len(r.Damaged))
	for _, d := range r.Damaged {
		names = append(names, d.Path)
	}
	return fmt.Errorf("%w: %d in %s: %s", ErrDamaged, len(r.Damaged), r.DBPath, strings.Join(names, ", "))
}

// Options are the run-time hooks of Check.
type Options struct {
	// FS is the file system the database is read through. nil means the
	// operating system's.
	FS vfs.FS
	// Progress, if set, is called after each file is read, with its path.
	Progress func(path string)
}

// Check opens the database cfg describes read-only and reads every block of
// every table and blob file. Its error is for a check that could not run
// (ErrNoDatabase, engine.ErrLocked, an unreadable directory); what is
// damaged is in the Report.
func Check(cfg *config.Config, opts Options) (*Report, error) {
	fs := opts.FS
	if fs == nil {
		fs = vfs.Default
	}
	res, err := cfg.Resolve()
	if err != nil {
		return nil, err
	}
	cfg = res.Config
	if _, err := fs.Stat(cfg.DBPath); errors.Is(err, iofs.ErrNotExist) {
		return nil, fmt.Errorf("%w at db_path = %q: the directory does not exist", ErrNoDatabase, cfg.DBPath)
	} else if err != nil {
		return nil, fmt.Errorf("%w at db_path = %q: %w", ErrNoDatabase, cfg.DBPath, err)
	}
	rep := &Report{DBPath: cfg.DBPath}

	// The engine's read-only open holds a shared lock while the files are
	// read, so no writer can change them meanwhile, and gives the MANIFEST's
	// view: each table's level and key range.
	db, err := engine.Open(cfg, engine.Options{ReadOnly: true, FS: opts.FS})
	switch {
	case errors.Is(err, pebble.ErrDBDoesNotExist):
		return nil, fmt.Errorf("%w at db_path = %q: the directory holds no MANIFEST (%w)", ErrNoDatabase, cfg.DBPath, pebble.ErrDBDoesNotExist)
	case err != nil && (pebble.IsCorruptionError(err) || errors.Is(err, iofs.ErrNotExist)):
		// db_path exists, so a file that does not is one the MANIFEST
		// lists: Pebble refuses to open without it, and names it.
		rep.Damaged = append(rep.Damaged, Damage{Path: cfg.DBPath, Kind: KindDatabase, Level: -1, Err: err})
		return rep, nil
	case err != nil:
		return nil, err
	}
	defer func() { _ = db.Close() }() // read-only: there is nothing to lose
	tables, err := db.Tables()
	if err != nil {
		if pebble.IsCorruptionError(err) {
			rep.Damaged = append(rep.Damaged, Damage{Path: cfg.DBPath, Kind: KindDatabase, Level: -1, Err: err})
			return rep, nil
		}
		return nil, err
	}
	byNum := make(map[uint64]engine.TableInfo, len(tables))
	for _, t := range tables {
		byNum[t.FileNum] = t
	}

	rec, err := config.ReadRecorded(cfg.DBPath, func(name string) (io.ReadCloser, error) { return fs.Open(name) })
	if err != nil {
		return nil, err
	}
	files, err := listFiles(fs, tableDirs(cfg, rec))
	if err != nil {
		return nil, err
	}

	popts := pebbleconf.Options(res)
	popts.Cache.Unref() // blocks are read past the cache
	ro := popts.MakeReaderOptions()

	var tableDamage, blobDamage []Damage
	seen := make(map[uint64]bool)
	for _, f := range files {
		size := int64(0)
		if info, err := fs.Stat(f.path); err == nil {
			size = info.Size()
		}
		rep.Bytes += size
		switch f.kind {
		case KindTable:
			rep.Tables++
			seen[f.num] = true
			d := Damage{Path: f.path, Kind: KindTable, Level: -1}
			if t, ok := byNum[f.num]; ok {
				d.Level, d.Smallest, d.Largest = t.Level, t.Smallest, t.Largest
			}
			if d.Err = guard(func() error { return checkTable(fs, f.path, readerOptions(ro, f.num)) }); d.Err != nil {
				tableDamage = append(tableDamage, d)
			}
		case KindBlob:
			rep.BlobFiles++
			d := Damage{Path: f.path, Kind: KindBlob, Level: -1}
			if d.Err = guard(func() error { return checkBlob(fs, f.path, readerOptions(ro, f.num)) }); d.Err != nil {
				blobDamage = append(blobDamage, d)
			}
		}
		if opts.Progress != nil {
			opts.Progress(f.path)
		}
	}
	for _, t := range tables {
		if !seen[t.FileNum] {
			tableDamage = append(tableDamage, Damage{
				Path: fs.PathJoin(cfg.DBPath, tableName(t.FileNum)), Kind: KindTable,
				Level: t.Level, Smallest: t.Smallest, Largest: t.Largest,
				Err: errors.New("missing: the MANIFEST lists this table but no table directory holds it"),
			})
		}
	}
	slices.SortStableFunc(tableDamage, func(a, b Damage) int {
		if a.Level != b.Level {
			return a.Level - b.Level
		}
		return strings.Compare(a.Path, b.Path)
	})
	rep.Damaged = append(tableDamage, blobDamage...)
	return rep, nil
}

// readerOptions returns ro for the file numbered num, so that Pebble's
// errors name the file ("pebble: file 000011: block ...").
func readerOptions(ro sstable.ReaderOptions, num uint64) sstable.ReaderOptions {
	setUint(&ro.CacheOpts.FileNum, num)
	return ro
}

// setUint sets *p to v. The field's type (base.DiskFileNum) is in a Pebble
// internal package, so it can be named only by inference.
func setUint[T ~uint64](p *T, v uint64) { *p = T(v) }

// guard runs fn, turning a panic of Pebble's decoders on a damaged file
// into an error.
func guard(fn func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("decoding panicked: %v", r)
		}
	}()
	return fn()
}

// checkTable reads every block of the table at path and verifies its
// checksum.
func checkTable(fs vfs.FS, path string, ro sstable.ReaderOptions) error {
	f, err := fs.Open(path)
	if err != nil {
		return err
	}
	readable, err := sstable.NewSimpleReadable(f)
	if err != nil {
		_ = f.Close()
		return err
	}
	r, err := sstable.NewReader(context.Background(), readable, ro)
	if err != nil {
		_ = readable.Close()
		return err
	}
	defer func() { _ = r.Close() }() // closes readable
	// Data, index, filter, range deletion, range key, properties,
	// metaindex and blob reference index blocks.
	if err := r.ValidateBlockChecksums(); err != nil {
		return err
	}
	// ValidateBlockChecksums leaves out the value blocks (older versions
	// of a key, in tables written without blob files).
	l, err := r.Layout()
	if err != nil {
		return err
	}
	for _, h := range l.ValueBlock {
		b, err := r.ReadValueBlockExternal(context.Background(), h)
		if err != nil {
			return err
		}
		b.Release()
	}
	return nil
}

// Pebble's blob file index block (sstable/blob/blocks.go): a 4-byte count
// of virtual blocks, then a columnar block whose column 1 holds the offset
// of each value block and, last, the end of the last one. The package does
// not export its decoder; TestBlobIndexMatchesLayout holds these to what
// blob.FileReader.Layout prints.
const (
	blobIndexHeaderSize   = 4
	blobIndexOffsetColumn = 1
)

// checkBlob reads the index block and every value block of the blob file
// at path and verifies their checksums.
func checkBlob(fs vfs.FS, path string, ro sstable.ReaderOptions) error {
	handles, r, err := blobBlocks(fs, path, ro)
	if err != nil {
		return err
	}
	defer func() { _ = r.Close() }()
	for _, h := range handles {
		b, err := r.ReadValueBlock(context.Background(), block.NoReadEnv, nil, h)
		if err != nil {
			return err
		}
		b.Release()
	}
	return nil
}

// blobBlocks opens the blob file at path, reads its index block and returns
// the handles of its value blocks and the open reader.
func blobBlocks(fs vfs.FS, path string, ro sstable.ReaderOptions) ([]block.Handle, *blob.FileReader, error) {
	f, err := fs.Open(path)
	if err != nil {
		return nil, nil, err
	}
	readable, err := sstable.NewSimpleReadable(f)
	if err != nil {
		_ = f.Close()
		return nil, nil, err
	}
	r, err := blob.NewFileReader(context.Background(), readable, blob.FileReaderOptions{ReaderOptions: ro.ReaderOptions})
	if err != nil {
		_ = readable.Close()
		return nil, nil, err
	}
	ih, err := r.ReadIndexBlock(context.Background(), block.NoReadEnv, nil)
	if err != nil {
		_ = r.Close()
		return nil, nil, err
	}
	defer ih.Release()
	data := ih.BlockData()
	if len(data) < blobIndexHeaderSize {
		_ = r.Close()
		return nil, nil, fmt.Errorf("blob file index block of %d bytes: shorter than its header", len(data))
	}
	var bd colblk.BlockDecoder
	bd.Init(data, blobIndexHeaderSize)
	rows := bd.Rows()
	offsets := colblk.DecodeColumn(&bd, blobIndexOffsetColumn, rows+1, colblk.DataTypeUint, colblk.DecodeUnsafeUints)
	index := r.IndexHandle()
	handles := make([]block.Handle, rows)
	for i := range rows {
		lo, hi := offsets.At(i), offsets.At(i+1)
		if hi < lo+block.TrailerLen || hi > index.Offset {
			_ = r.Close()
			return nil, nil, fmt.Errorf("blob file index: block %d spans [%d, %d), outside the value blocks [0, %d)", i, lo, hi, index.Offset)
		}
		handles[i] = block.Handle{Offset: lo, Length: hi - lo - block.TrailerLen}
	}
	return handles, r, nil
}

// file is a table or blob file found in a table directory.
type file struct {
	path string
	kind Kind
	num  uint64
}

// tableDirs are the directories that may hold the database's tables:
// db_path, the db_paths and the table directories the tiering record lists
// (as a read-only open of the engine finds them).
func tableDirs(cfg *config.Config, rec *config.Recorded) []string {
	dirs := []string{cfg.DBPath}
	add := func(d string) {
		if d != "" && !slices.ContainsFunc(dirs, func(x string) bool { return fsutil.SamePath(x, d) }) {
			dirs = append(dirs, d)
		}
	}
	for _, p := range cfg.DBPaths {
		add(p.Path)
	}
	for _, d := range rec.TableDirs {
		add(d)
	}
	return dirs
}

// listFiles returns the table and blob files in dirs, by path. A table
// directory other than db_path that does not exist holds none.
func listFiles(fs vfs.FS, dirs []string) ([]file, error) {
	var out []file
	for i, dir := range dirs {
		names, err := fs.List(dir)
		if err != nil {
			if i > 0 {
				if _, serr := fs.Stat(dir); serr != nil {
					continue
				}
			}
			return nil, fmt.Errorf("integrity: list %s: %w", dir, err)
		}
		slices.Sort(names)
		for _, n := range names {
			kind, num, ok := parseName(n)
			if ok {
				out = append(out, file{path: fs.PathJoin(dir, n), kind: kind, num: num})
			}
		}
	}
	return out, nil
}

// parseName parses Pebble's names of tables (000011.sst) and blob files
// (000012.blob).
func parseName(name string) (Kind, uint64, bool) {
	for _, k := range []struct {
		ext  string
		kind Kind
	}{{".sst", KindTable}, {".blob", KindBlob}} {
		if stem, ok := strings.CutSuffix(name, k.ext); ok {
			n, err := strconv.ParseUint(stem, 10, 64)
			return k.kind, n, err == nil
		}
	}
	return "", 0, false
}

// tableName is Pebble's name of table num.
func tableName(num uint64) string { return fmt.Sprintf("%06d.sst", num) }

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// formatBytes prints n in MB (1 MB = 1,000,000 bytes), or in bytes under
// one MB.
func formatBytes(n int64) string {
	if n < 1_000_000 {
		return fmt.Sprintf("%d bytes", n)
	}
	return fmt.Sprintf("%.1f MB", float64(n)/1e6)
}
