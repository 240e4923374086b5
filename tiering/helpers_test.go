package tiering

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// testShape sizes levels small so a few MB make a deep LSM.
func testPebbleOptions(l *Layout, walDir string, extra *pebble.EventListener) *pebble.Options {
	opts := &pebble.Options{
		FormatMajorVersion:    pebble.FormatNewest,
		MemTableSize:          512 << 10,
		L0CompactionThreshold: 2,
		LBaseMaxBytes:         1 << 20,
		WALDir:                walDir,
		Logger:                quietLogger{},
	}
	for i := range opts.TargetFileSizes {
		opts.TargetFileSizes[i] = 256 << 10
	}
	opts.CompactionConcurrencyRange = func() (int, int) { return 1, 3 }
	opts.FS = l.FS()
	el := l.EventListener()
	if extra != nil {
		el = pebble.TeeEventListener(el, *extra)
	}
	opts.EventListener = &el
	return opts
}

func testShape() LevelShape {
	s := LevelShape{LBaseMaxBytes: 1 << 20, LevelMultiplier: 10}
	for i := range s.TargetFileSizes {
		s.TargetFileSizes[i] = 256 << 10
	}
	return s
}

type quietLogger struct{}

func (quietLogger) Infof(string, ...any)  {}
func (quietLogger) Errorf(string, ...any) {}
func (quietLogger) Fatalf(format string, args ...any) {
	panic(fmt.Sprintf(format, args...))
}

// testLogger sends log lines to t.Logf.
type testLogger struct{ t testing.TB }

func (l testLogger) Infof(format string, args ...any)  { l.t.Logf(format, args...) }
func (l testLogger) Errorf(format string, args ...any) { l.t.Logf("ERROR "+format, args...) }

// testDB is a Pebble database over a layout, under root.
type testDB struct {
	t      testing.TB
	root   string
	dbDir  string
	layout *Layout
	db     *pebble.DB
}

// openTestDB opens the database in root/p0 with the given paths (relative
// to root) and targets, its WAL in root/p0 too (so the tree can be copied).
func openTestDB(t testing.TB, root string, paths []Path, o Options) *testDB {
	t.Helper()
	return openTestDBWAL(t, root, paths, o, "")
}

// openTestDBWAL is openTestDB with the WAL in walDir.
func openTestDBWAL(t testing.TB, root string, paths []Path, o Options, walDir string) *testDB {
	t.Helper()
	abs := make([]Path, len(paths))
	for i, p := range paths {
		abs[i] = Path{Dir: filepath.Join(root, p.Dir), TargetSize: p.TargetSize}
	}
	dbDir := filepath.Join(root, "p0")
	if o.Shape == (LevelShape{}) {
		o.Shape = testShape()
	}
	l, err := New(vfs.Default, dbDir, abs, o)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	db, err := pebble.Open(dbDir, testPebbleOptions(l, walDir, nil))
	if err != nil {
		t.Fatalf("pebble.Open: %v", err)
	}
	l.Attach(db)
	return &testDB{t: t, root: root, dbDir: dbDir, layout: l, db: db}
}

func (d *testDB) close() {
	d.t.Helper()
	if err := d.layout.Close(); err != nil {
		d.t.Fatalf("layout.Close: %v", err)
	}
	if err := d.db.Close(); err != nil {
		d.t.Fatalf("db.Close: %v", err)
	}
}

// key and value of the i-th record.
func key(i int) []byte { return fmt.Appendf(nil, "key%09d", i) }

func value(i, n int) []byte {
	r := rand.New(rand.NewPCG(uint64(i), 42))
	v := make([]byte, n)
	for j := 0; j < n; j += 8 {
		x := r.Uint64()
		for k := 0; k < 8 && j+k < n; k++ {
			v[j+k] = byte(x >> (8 * k))
		}
	}
	return v
}

const valueSize = 1000

// write puts records [from, to) in a random order, in batches.
func (d *testDB) write(from, to int, seed uint64) {
	d.t.Helper()
	idx := make([]int, 0, to-from)
	for i := from; i < to; i++ {
		idx = append(idx, i)
	}
	r := rand.New(rand.NewPCG(seed, 7))
	r.Shuffle(len(idx), func(i, j int) { idx[i], idx[j] = idx[j], idx[i] })
	b := d.db.NewBatch()
	for n, i := range idx {
		if err := b.Set(key(i), value(i, valueSize), nil); err != nil {
			d.t.Fatal(err)
		}
		if n%100 == 99 {
			if err := b.Commit(pebble.NoSync); err != nil {
				d.t.Fatal(err)
			}
			b = d.db.NewBatch()
		}
	}
	if err := b.Commit(pebble.NoSync); err != nil {
		d.t.Fatal(err)
	}
}

// verify reads back records [from, to).
func verifyKeys(t testing.TB, db *pebble.DB, from, to int) {
	t.Helper()
	for i := from; i < to; i++ {
		v, closer, err := db.Get(key(i))
		if err != nil {
			t.Fatalf("Get(%s): %v", key(i), err)
		}
		if string(v) != string(value(i, valueSize)) {
			closer.Close()
			t.Fatalf("Get(%s): wrong value", key(i))
		}
		closer.Close()
	}
}

// settle flushes and waits until no flush or compaction runs, then runs a
// mover pass.
func (d *testDB) settle() {
	d.t.Helper()
	if err := d.db.Flush(); err != nil {
		d.t.Fatal(err)
	}
	waitIdle(d.t, d.db)
	if err := d.layout.Rebalance(context.Background()); err != nil {
		d.t.Fatalf("Rebalance: %v", err)
	}
	waitIdle(d.t, d.db)
	if err := d.layout.Rebalance(context.Background()); err != nil {
		d.t.Fatalf("Rebalance: %v", err)
	}
}

func waitIdle(t testing.TB, db *pebble.DB) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	quiet := 0
	for quiet < 5 {
		if time.Now().After(deadline) {
			t.Fatalf("compactions did not finish")
		}
		m := db.Metrics()
		if m.Compact.NumInProgress == 0 && m.Flush.NumInProgress == 0 {
			quiet++
		} else {
			quiet = 0
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// physicalFiles lists the table and blob files of every location, and the
// temporary copies, straight from the base FS.
func physicalFiles(t testing.TB, l *Layout) (where map[string][]int, temps []string) {
	t.Helper()
	where = make(map[string][]int)
	for i, loc := range l.locs {
		names, err := l.base.List(loc.dir)
		if err != nil {
			continue
		}
		for _, n := range names {
			if strings.HasSuffix(n, tempSuffix) {
				temps = append(temps, filepath.Join(loc.dir, n))
			}
			if _, kind := parseName(n); kind != kindOther {
				where[n] = append(where[n], i)
			}
		}
	}
	return where, temps
}

// checkConsistent checks that every table Pebble references lives in
// exactly one location, the map agrees, no table is duplicated and no
// temporary copy is left.
func checkConsistent(t testing.TB, l *Layout, db *pebble.DB) {
	t.Helper()
	if db != nil {
		waitIdle(t, db) // a compaction creates and deletes files meanwhile
	}
	where, temps := physicalFiles(t, l)
	if len(temps) > 0 {
		t.Errorf("temporary copies left: %v", temps)
	}
	for name, locs := range where {
		if len(locs) != 1 {
			t.Errorf("%s is in %d locations: %v", name, len(locs), locs)
			continue
		}
		if loc, ok := l.lookup(name); !ok || loc != locs[0] {
			if _, err := l.base.Stat(l.physical(locs[0], name)); err != nil {
				continue // deleted since the listing
			}
			t.Errorf("%s: map says %d (known %v), disk says %d", name, loc, ok, locs[0])
		}
	}
	if db == nil {
		return
	}
	levels, err := db.SSTables()
	if err != nil {
		t.Fatal(err)
	}
	for level, tables := range levels {
		for _, tb := range tables {
			name := tableName(uint64(tb.BackingSSTNum))
			if len(where[name]) != 1 {
				t.Errorf("L%d table %s: found in %v", level, name, where[name])
			}
		}
	}
}

// checkPlacement checks every table is on a path its level has a share
// on, and each path but the last holds at most its target plus slack.
func checkPlacement(t testing.TB, l *Layout, db *pebble.DB, slack int64) {
	t.Helper()
	levels, err := db.SSTables()
	if err != nil {
		t.Fatal(err)
	}
	// The plan a strict pass (Rebalance, Settle) brings the tables in line
	// with: the plan as the LSM is. The background mover's lazy passes
	// install the plan ahead, which tables need not follow.
	plan := Compute(levelSizes(levels), l.shape, l.targets)
	for level, tables := range levels {
		for _, tb := range tables {
			name := tableName(uint64(tb.BackingSSTNum))
			loc, ok := l.lookup(name)
			if !ok {
				t.Errorf("L%d %s: not in the map", level, name)
				continue
			}
			if !plan.allows(level, loc) {
				t.Errorf("L%d %s in path %d; plan %s", level, name, loc, plan)
			}
		}
	}
	st := l.Stats()
	for i, p := range st.Paths {
		if p.Draining {
			if p.Files != 0 {
				t.Errorf("draining %s still holds %d files", p.Dir, p.Files)
			}
			continue
		}
		if i < len(l.targets)-1 && p.Bytes > int64(p.TargetSize)+slack {
			t.Errorf("path %d holds %d bytes, target %d (+%d slack)", i, p.Bytes, p.TargetSize, slack)
		}
	}
}
