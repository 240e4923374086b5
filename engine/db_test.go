package engine

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stratadb/strata/config"
)

// testConfig returns a default config rooted in a fresh temporary directory,
// with a small cache so tests stay light.
func testConfig(t testing.TB) *config.Config {
	t.Helper()
	cfg := config.Default()
	cfg.DBPath = filepath.Join(t.TempDir(), "db")
	cfg.BlockCacheSizeMB = 8
	cfg.MemtableSizeMB = 64
	return cfg
}

func mustOpen(t testing.TB, cfg *config.Config) *DB {
	t.Helper()
	db, err := Open(cfg)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return db
}

// doc returns a compressible JSON-like value of about size bytes for key i.
func doc(i, size int) []byte {
	words := []string{"storage", "engine", "level", "compaction", "table", "the", "of", "and", "write", "read",
		"memory", "cache", "bloom", "filter", "block", "index", "value", "key", "durable", "log"}
	r := rand.New(rand.NewPCG(uint64(i), 7))
	var b bytes.Buffer
	fmt.Fprintf(&b, `{"id":%d,"kind":"entity","score":%d,"text":"`, i, r.IntN(1000))
	for b.Len() < size-2 {
		b.WriteString(words[r.IntN(len(words))])
		b.WriteByte(' ')
	}
	b.WriteString(`"}`)
	return b.Bytes()
}

func key(i int) []byte { return []byte(fmt.Sprintf("entity:%08d", i)) }

func TestCRUD(t *testing.T) {
	db := mustOpen(t, testConfig(t))
	defer db.Close()

	if _, err := db.Get([]byte("missing")); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Get(missing) = %v, want ErrNotFound", err)
	}
	for i := range 10 {
		if err := db.Put(key(i), []byte(fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	v, err := db.Get(key(3))
	if err != nil || string(v) != "3" {
		t.Fatalf("Get = %q, %v; want 3", v, err)
	}
	if err := db.Put(key(3), []byte("three")); err != nil {
		t.Fatal(err)
	}
	if v, _ := db.Get(key(3)); string(v) != "three" {
		t.Fatalf("overwrite: got %q", v)
	}
	if err := db.Delete(key(3)); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Get(key(3)); !errors.Is(err, ErrNotFound) {
		t.Fatalf("after Delete: %v", err)
	}
	if err := db.DeleteRange(key(5), key(8)); err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		_, err := db.Get(key(i))
		gone := i == 3 || (i >= 5 && i < 8)
		if gone != errors.Is(err, ErrNotFound) {
			t.Errorf("key %d: err %v, want gone=%v", i, err, gone)
		}
	}
	if err := db.DeleteRange(key(8), key(5)); !errors.Is(err, ErrInvalidRange) {
		t.Errorf("DeleteRange(end < start) = %v, want ErrInvalidRange", err)
	}
	// The value returned by Get is the caller's to keep.
	v, _ = db.Get(key(1))
	_ = db.Put(key(1), []byte("X"))
	if string(v) != "1" {
		t.Errorf("Get result changed under the caller: %q", v)
	}
}

func TestClosed(t *testing.T) {
	db := mustOpen(t, testConfig(t))
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if err := db.Put([]byte("a"), nil); !errors.Is(err, ErrClosed) {
		t.Errorf("Put after Close = %v, want ErrClosed", err)
	}
	if _, err := db.Get([]byte("a")); !errors.Is(err, ErrClosed) {
		t.Errorf("Get after Close = %v", err)
	}
	if err := db.Close(); !errors.Is(err, ErrClosed) {
		t.Errorf("second Close = %v", err)
	}
}

func TestBatchAtomicity(t *testing.T) {
	db := mustOpen(t, testConfig(t))
	defer db.Close()

	b := db.NewBatch()
	for i := range 100 {
		_ = b.Put(key(i), []byte("v"))
	}
	_ = b.Delete(key(7))
	if _, err := db.Get(key(1)); !errors.Is(err, ErrNotFound) {
		t.Fatal("uncommitted batch is visible")
	}
	if b.Count() != 101 {
		t.Fatalf("Count = %d", b.Count())
	}
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	_ = b.Close()
	if _, err := db.Get(key(99)); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Get(key(7)); !errors.Is(err, ErrNotFound) {
		t.Fatal("delete in batch not applied")
	}

	discarded := db.NewBatch()
	_ = discarded.Put([]byte("never"), []byte("x"))
	_ = discarded.Close()
	if _, err := db.Get([]byte("never")); !errors.Is(err, ErrNotFound) {
		t.Fatal("closed batch was applied")
	}

	// A reader sees a batch wholly or not at all.
	var wg sync.WaitGroup
	stop := make(chan struct{})
	var torn error
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			it, err := db.NewIter(&IterOptions{LowerBound: []byte("pair/"), UpperBound: []byte("pair0")})
			if err != nil {
				torn = err
				return
			}
			var vals []string
			for it.First(); it.Valid(); it.Next() {
				vals = append(vals, string(it.Value()))
			}
			_ = it.Close()
			if len(vals) == 2 && vals[0] != vals[1] {
				torn = fmt.Errorf("torn batch: %v", vals)
				return
			}
		}
	}()
	for i := range 300 {
		b := db.NewBatch()
		_ = b.Put([]byte("pair/a"), []byte(fmt.Sprint(i)))
		_ = b.Put([]byte("pair/b"), []byte(fmt.Sprint(i)))
		if err := b.Commit(); err != nil {
			t.Fatal(err)
		}
		_ = b.Close()
	}
	close(stop)
	wg.Wait()
	if torn != nil {
		t.Fatal(torn)
	}
}

func TestIteratorBoundsAndDirection(t *testing.T) {
	db := mustOpen(t, testConfig(t))
	defer db.Close()
	for _, k := range []string{"a", "b", "c", "d", "e", "f"} {
		_ = db.Put([]byte(k), []byte(strings.ToUpper(k)))
	}
	_ = db.Flush()
	_ = db.Put([]byte("cc"), []byte("CC")) // one key in the memtable, the rest in a table

	collect := func(it *Iterator, forward bool) string {
		var keys []string
		if forward {
			for it.First(); it.Valid(); it.Next() {
				keys = append(keys, string(it.Key()))
			}
		} else {
			for it.Last(); it.Valid(); it.Prev() {
				keys = append(keys, string(it.Key()))
			}
		}
		if err := it.Close(); err != nil {
			t.Fatal(err)
		}
		return strings.Join(keys, ",")
	}
	cases := []struct {
		name    string
		opts    *IterOptions
		forward bool
		want    string
	}{
		{"all forward", nil, true, "a,b,c,cc,d,e,f"},
		{"all reverse", nil, false, "f,e,d,cc,c,b,a"},
		{"bounded forward", &IterOptions{LowerBound: []byte("b"), UpperBound: []byte("e")}, true, "b,c,cc,d"},
		{"bounded reverse", &IterOptions{LowerBound: []byte("b"), UpperBound: []byte("e")}, false, "d,cc,c,b"},
		{"lower only", &IterOptions{LowerBound: []byte("d")}, true, "d,e,f"},
		{"upper only", &IterOptions{UpperBound: []byte("b")}, false, "a"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			it, err := db.NewIter(c.opts)
			if err != nil {
				t.Fatal(err)
			}
			if got := collect(it, c.forward); got != c.want {
				t.Errorf("got %s, want %s", got, c.want)
			}
		})
	}

	it, _ := db.NewIter(&IterOptions{LowerBound: []byte("b"), UpperBound: []byte("f")})
	if !it.SeekGE([]byte("ca")) || string(it.Key()) != "cc" || string(it.Value()) != "CC" {
		t.Errorf("SeekGE(ca) at %q", it.Key())
	}
	if !it.SeekLT([]byte("c")) || string(it.Key()) != "b" {
		t.Errorf("SeekLT(c) at %q", it.Key())
	}
	if it.SeekLT([]byte("b")) {
		t.Errorf("SeekLT(b) found %q below the lower bound", it.Key())
	}
	if it.SeekGE([]byte("f")) {
		t.Errorf("SeekGE(f) found %q at the exclusive upper bound", it.Key())
	}
	_ = it.Close()

	if _, err := db.NewIter(&IterOptions{LowerBound: []byte("z"), UpperBound: []byte("a")}); !errors.Is(err, ErrInvalidRange) {
		t.Errorf("inverted bounds: %v", err)
	}
}

func TestSnapshotIsolation(t *testing.T) {
	db := mustOpen(t, testConfig(t))
	defer db.Close()
	_ = db.Put([]byte("k"), []byte("old"))
	_ = db.Put([]byte("gone"), []byte("here"))
	snap, err := db.NewSnapshot()
	if err != nil {
		t.Fatal(err)
	}
	_ = db.Put([]byte("k"), []byte("new"))
	_ = db.Delete([]byte("gone"))
	_ = db.Put([]byte("added"), []byte("x"))
	_ = db.Flush()
	_ = db.Compact([]byte("a"), []byte("z"))

	if v, err := snap.Get([]byte("k")); err != nil || string(v) != "old" {
		t.Errorf("snapshot Get(k) = %q, %v; want old", v, err)
	}
	if v, err := snap.Get([]byte("gone")); err != nil || string(v) != "here" {
		t.Errorf("snapshot Get(gone) = %q, %v", v, err)
	}
	if _, err := snap.Get([]byte("added")); !errors.Is(err, ErrNotFound) {
		t.Errorf("snapshot sees a later key: %v", err)
	}
	it, _ := snap.NewIter(nil)
	var keys []string
	for it.First(); it.Valid(); it.Next() {
		keys = append(keys, string(it.Key())+"="+string(it.Value()))
	}
	_ = it.Close()
	if got := strings.Join(keys, ","); got != "gone=here,k=old" {
		t.Errorf("snapshot iteration: %s", got)
	}
	if v, _ := db.Get([]byte("k")); string(v) != "new" {
		t.Errorf("latest Get(k) = %q", v)
	}
	if err := snap.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestReopenWithChangedConfig(t *testing.T) {
	cfg := testConfig(t)
	cfg.WALDir = filepath.Join(t.TempDir(), "wal-a")
	db := mustOpen(t, cfg)
	for i := range 1000 {
		_ = db.Put(key(i), doc(i, 200))
	}
	// Not flushed: these writes live only in wal-a.
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	changed := cfg.Clone()
	changed.WALDir = filepath.Join(t.TempDir(), "wal-b")
	changed.CompressionDefault = "snappy"
	changed.CompressionBottommost = "zstd:9"
	changed.BloomBitsPerKey = 16
	changed.BlockSize = 16 << 10
	db = mustOpen(t, changed)
	for i := range 1000 {
		v, err := db.Get(key(i))
		if err != nil || !bytes.Equal(v, doc(i, 200)) {
			t.Fatalf("key %d after reopen with a new wal_dir: %v", i, err)
		}
	}
	if err := db.CompactAll(); err != nil {
		t.Fatal(err)
	}
	tables, _ := db.Tables()
	for _, tb := range tables {
		if tb.Level == 6 && tb.Codec != "ZSTD9" {
			t.Errorf("L6 table %d carries %s, want ZSTD9", tb.FileNum, tb.Codec)
		}
	}
	if got := db.Config(); got.BloomBitsPerKey != 16 || got.WALDir != changed.WALDir {
		t.Errorf("Config() = %+v", got)
	}
	_ = db.Close()

	// And back, with defaults again.
	db = mustOpen(t, cfg)
	defer db.Close()
	if v, err := db.Get(key(999)); err != nil || !bytes.Equal(v, doc(999, 200)) {
		t.Fatalf("after second reopen: %v", err)
	}
}

func TestOpenRejects(t *testing.T) {
	cases := []struct {
		name   string
		change func(*config.Config)
		is     error
		key    string
	}{
		{"universal", func(c *config.Config) { c.UseUniversalCompaction = true }, ErrCannotDeliver, "use_universal_compaction"},
		{"db_paths not writable", func(c *config.Config) {
			blocker := filepath.Join(filepath.Dir(c.DBPath), "a-file")
			_ = os.WriteFile(blocker, nil, 0o644)
			c.DBPaths = []config.DBPath{{Path: c.DBPath, TargetSizeBytes: 1 << 30}, {Path: filepath.Join(blocker, "cold"), TargetSizeBytes: 1 << 30}}
		}, nil, "db_paths[1]"},
		{"invalid", func(c *config.Config) { c.MemtableSizeMB = -4 }, nil, "memtable_size_mb"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := testConfig(t)
			c.change(cfg)
			db, err := Open(cfg)
			if err == nil {
				db.Close()
				t.Fatal("Open succeeded")
			}
			if c.is != nil && !errors.Is(err, c.is) {
				t.Errorf("error %v is not %v", err, c.is)
			}
			if !strings.Contains(err.Error(), c.key) {
				t.Errorf("error %q does not name %s", err, c.key)
			}
			if _, statErr := os.Stat(filepath.Join(cfg.DBPath, "MANIFEST-000001")); statErr == nil {
				t.Error("a rejected Open created a database")
			}
		})
	}
	if _, err := Open(nil); err == nil {
		t.Error("Open(nil) succeeded")
	}
	// One db_paths entry equal to db_path is the plain layout and is accepted.
	cfg := testConfig(t)
	cfg.DBPaths = []config.DBPath{{Path: cfg.DBPath, TargetSizeBytes: 1 << 30}}
	db := mustOpen(t, cfg)
	_ = db.Close()
}

func TestOpenDoesNotMutateConfig(t *testing.T) {
	cfg := testConfig(t)
	before := *cfg
	db := mustOpen(t, cfg)
	_ = db.Close()
	if fmt.Sprint(before) != fmt.Sprint(*cfg) {
		t.Errorf("Open changed the config:\n%+v\n%+v", before, *cfg)
	}
}

func TestCheckpoint(t *testing.T) {
	cfg := testConfig(t)
	cfg.WALDir = filepath.Join(t.TempDir(), "wal")
	db := mustOpen(t, cfg)
	for i := range 500 {
		_ = db.Put(key(i), doc(i, 100))
	}
	_ = db.Flush()
	for i := 500; i < 600; i++ { // these only in the WAL
		_ = db.Put(key(i), doc(i, 100))
	}
	dir := filepath.Join(t.TempDir(), "ckpt")
	if err := db.Checkpoint(dir); err != nil {
		t.Fatal(err)
	}
	if err := db.Checkpoint(dir); err == nil || !strings.Contains(err.Error(), "exists") {
		t.Errorf("checkpoint into an existing dir: %v", err)
	}
	_ = db.Put(key(1000), []byte("after"))
	_ = db.Close()

	ccfg := testConfig(t)
	ccfg.DBPath = dir
	cdb := mustOpen(t, ccfg)
	defer cdb.Close()
	for i := range 600 {
		if v, err := cdb.Get(key(i)); err != nil || !bytes.Equal(v, doc(i, 100)) {
			t.Fatalf("checkpoint key %d: %v", i, err)
		}
	}
	if _, err := cdb.Get(key(1000)); !errors.Is(err, ErrNotFound) {
		t.Error("checkpoint holds a write made after it")
	}
}

func TestView(t *testing.T) {
	db := mustOpen(t, testConfig(t))
	defer db.Close()
	_ = db.Put([]byte("k"), []byte("value"))
	var got string
	if err := db.View([]byte("k"), func(v []byte) error { got = string(v); return nil }); err != nil || got != "value" {
		t.Fatalf("View = %q, %v", got, err)
	}
	if err := db.View([]byte("absent"), func([]byte) error { t.Fatal("fn called for an absent key"); return nil }); !errors.Is(err, ErrNotFound) {
		t.Fatalf("View(absent) = %v", err)
	}
	sentinel := errors.New("from fn")
	if err := db.View([]byte("k"), func([]byte) error { return sentinel }); !errors.Is(err, sentinel) {
		t.Fatalf("View does not return fn's error: %v", err)
	}
	snap, _ := db.NewSnapshot()
	defer snap.Close()
	_ = db.Put([]byte("k"), []byte("newer"))
	_ = snap.View([]byte("k"), func(v []byte) error { got = string(v); return nil })
	if got != "value" {
		t.Fatalf("snapshot View = %q", got)
	}
}
