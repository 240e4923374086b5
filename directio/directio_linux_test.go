//go:build linux

package directio

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"unsafe"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"golang.org/x/sys/unix"
)

// The test data: n keys "key%08d" with 1 KiB values, half random (seeded by
// the key's index) and half a copy of that half, so tables compress about 2x.
const valueSize = 1024

func testKey(i int) []byte { return fmt.Appendf(nil, "key%08d", i) }

func testValue(i int) []byte {
	v := make([]byte, valueSize)
	rng := rand.New(rand.NewPCG(uint64(i), 0x5eed))
	for j := 0; j < valueSize/2; j += 8 {
		binary.LittleEndian.PutUint64(v[j:], rng.Uint64())
	}
	copy(v[valueSize/2:], v)
	return v
}

// openTestDB opens a Pebble DB in dir through fs with a 1 MiB memtable, the
// newest format, no WAL (not under test) and a block cache of cacheSize.
func openTestDB(tb testing.TB, dir string, fs vfs.FS, cacheSize int64, l *pebble.EventListener, tweaks ...func(*pebble.Options)) *pebble.DB {
	tb.Helper()
	c := pebble.NewCache(cacheSize)
	defer c.Unref()
	opts := &pebble.Options{
		FS:                 fs,
		FormatMajorVersion: pebble.FormatNewest,
		MemTableSize:       1 << 20,
		Cache:              c,
		DisableWAL:         true,
		EventListener:      l,
		Logger:             quietLogger{tb},
	}
	for _, tweak := range tweaks {
		tweak(opts)
	}
	db, err := pebble.Open(dir, opts)
	if err != nil {
		tb.Fatal(err)
	}
	return db
}

// loadTestDB writes keys [0, n) and compacts everything (see writeTestDB).
func loadTestDB(tb testing.TB, db *pebble.DB, n int) {
	tb.Helper()
	writeTestDB(tb, db, n)
	compactTestDB(tb, db, n)
}

// writeTestDB writes keys [0, n) in a shuffled order, so that the tables of
// successive flushes overlap and a compaction rewrites them (keys in order
// would only be moved down the levels), and flushes.
func writeTestDB(tb testing.TB, db *pebble.DB, n int) {
	tb.Helper()
	b := db.NewBatch()
	for j, i := range rand.New(rand.NewPCG(uint64(n), 1)).Perm(n) {
		if err := b.Set(testKey(i), testValue(i), nil); err != nil {
			tb.Fatal(err)
		}
		if b.Len() > 1<<20 || j == n-1 {
			if err := b.Commit(pebble.NoSync); err != nil {
				tb.Fatal(err)
			}
			b = db.NewBatch()
		}
	}
	_ = b.Close()
	if err := db.Flush(); err != nil {
		tb.Fatal(err)
	}
}

// compactTestDB compacts keys [0, n) into the bottom level.
func compactTestDB(tb testing.TB, db *pebble.DB, n int) {
	tb.Helper()
	if err := db.Compact(context.Background(), testKey(0), testKey(n), true); err != nil {
		tb.Fatal(err)
	}
}

// verifyTestDB reads every key back through an iterator (Pebble checks the
// checksum of every block it reads from a file) and some with Get.
func verifyTestDB(tb testing.TB, db *pebble.DB, n int) {
	tb.Helper()
	it, err := db.NewIter(nil)
	if err != nil {
		tb.Fatal(err)
	}
	i := 0
	for valid := it.First(); valid; valid = it.Next() {
		if i >= n || !bytes.Equal(it.Key(), testKey(i)) || !bytes.Equal(it.Value(), testValue(i)) {
			tb.Fatalf("entry %d: key %q (len(value) %d), want %q", i, it.Key(), len(it.Value()), testKey(i))
		}
		i++
	}
	if err := it.Close(); err != nil {
		tb.Fatal(err)
	}
	if i != n {
		tb.Fatalf("iterated %d keys, want %d", i, n)
	}
	for i := 0; i < n; i += n/97 + 1 {
		v, closer, err := db.Get(testKey(i))
		if err != nil {
			tb.Fatalf("Get(%s): %v", testKey(i), err)
		}
		if !bytes.Equal(v, testValue(i)) {
			tb.Fatalf("Get(%s): wrong value", testKey(i))
		}
		_ = closer.Close()
	}
}

// liveTables lists the files of the tables in db's current version: right
// after a compaction, its input tables may still be on disk, waiting for
// Pebble's background deletion.
func liveTables(tb testing.TB, db *pebble.DB, dir string) []string {
	tb.Helper()
	levels, err := db.SSTables()
	if err != nil {
		tb.Fatal(err)
	}
	var paths []string
	for _, level := range levels {
		for _, info := range level {
			paths = append(paths, filepath.Join(dir, fmt.Sprintf("%06d.sst", uint64(info.BackingSSTNum))))
		}
	}
	return paths
}

// residentPages maps path read-only and counts, with mincore, how many of
// its pages are in the page cache. Mapping does not fault pages in.
func residentPages(tb testing.TB, path string) (resident, total int) {
	tb.Helper()
	f, err := os.Open(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		tb.Fatal(err)
	}
	if fi.Size() == 0 {
		return 0, 0
	}
	data, err := unix.Mmap(int(f.Fd()), 0, int(fi.Size()), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		tb.Fatal(err)
	}
	defer func() { _ = unix.Munmap(data) }()
	page := os.Getpagesize()
	vec := make([]byte, (len(data)+page-1)/page)
	// golang.org/x/sys/unix has no Mincore wrapper on Linux.
	if _, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&data[0])), uintptr(len(data)), uintptr(unsafe.Pointer(&vec[0]))); errno != 0 {
		tb.Fatal(errno)
	}
	for _, v := range vec {
		resident += int(v & 1)
	}
	return resident, len(vec)
}

// fdFlags returns the open flags of this process's descriptor fd, from
// /proc/self/fdinfo.
func fdFlags(fd string) (int, bool) {
	b, err := os.ReadFile("/proc/self/fdinfo/" + fd)
	if err != nil {
		return 0, false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "flags:"); ok {
			flags, err := strconv.ParseInt(strings.TrimSpace(v), 8, 64)
			return int(flags), err == nil
		}
	}
	return 0, false
}

// openFiles returns the flags of this process's descriptors whose target
// match reports true, by target.
func openFiles(match func(target string) bool) map[string][]int {
	out := make(map[string][]int)
	ents, _ := os.ReadDir("/proc/self/fd")
	for _, e := range ents {
		target, err := os.Readlink("/proc/self/fd/" + e.Name())
		if err != nil || !match(target) {
			continue
		}
		if flags, ok := fdFlags(e.Name()); ok {
			out[target] = append(out[target], flags)
		}
	}
	return out
}

// TestPageCache checks the effect on the page cache, with mincore on a
// mapping of every table file, in two phases:
//
//  1. Right after loading 20 MB (flushes, then a full compaction that
//     rewrites everything): with direct writes the tables have (almost) no
//     pages cached, with buffered writes most are. Pebble does not read its
//     new tables back after writing them here (table stats come from the
//     properties the writer already has), so with buffered reads too the
//     count stays near zero; if it did, each table would show the few pages
//     of its footer, metaindex and properties block.
//  2. After reading every key back (block cache 8 MiB, smaller than the
//     data): with direct reads the tables still have no pages cached; with
//     buffered reads they are cached again, whatever wrote them.
func TestPageCache(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 20 MiB three times")
	}
	n := 20 << 10 // 20 MiB of values
	if raceEnabled {
		n = 4 << 10
	}
	base := directDir(t)
	type bounds struct{ atLeast, atMost float64 } // resident fraction
	for _, tc := range []struct {
		mode        string
		opts        Options
		afterWrite  bounds
		afterReread bounds
	}{
		{"buffered", Options{}, bounds{0.5, 1}, bounds{0.5, 1}},
		{"direct-writes", Options{Writes: true}, bounds{0, 0.05}, bounds{0.5, 1}},
		{"direct", Options{Reads: true, Writes: true}, bounds{0, 0.05}, bounds{0, 0.05}},
	} {
		t.Run("mode="+tc.mode, func(t *testing.T) {
			dir := filepath.Join(base, tc.mode)
			fs := NewFS(vfs.Default, tc.opts)
			db := openTestDB(t, dir, fs, 8<<20, nil)
			defer db.Close()
			measure := func(phase string, want bounds) {
				t.Helper()
				resident, total := 0, 0
				tables := liveTables(t, db, dir)
				for _, path := range tables {
					r, tot := residentPages(t, path)
					resident += r
					total += tot
				}
				if total == 0 {
					t.Fatal("no table pages")
				}
				frac := float64(resident) / float64(total)
				st := fs.Stats()
				t.Logf("%s: %d tables, %d pages (%.1f MiB), %d resident (%.2f%%); direct writes %d (%.1f MiB), direct reads %d (%.1f MiB)",
					phase, len(tables), total, float64(total*os.Getpagesize())/(1<<20), resident, 100*frac,
					st.DirectWrites, float64(st.DirectWriteBytes)/(1<<20), st.DirectReads, float64(st.DirectReadBytes)/(1<<20))
				if frac < want.atLeast || frac > want.atMost {
					t.Errorf("%s: %.2f%% of table pages resident, want %.0f%% to %.0f%%", phase, 100*frac, 100*want.atLeast, 100*want.atMost)
				}
			}

			loadTestDB(t, db, n)
			measure("after compaction", tc.afterWrite)
			if st := fs.Stats(); tc.opts.Writes != (st.DirectWrites > 0) {
				t.Errorf("stats %+v do not match options %+v", st, tc.opts)
			}
			verifyTestDB(t, db, n)
			measure("after reading back", tc.afterReread)
			if st := fs.Stats(); tc.opts.Reads != (st.DirectReads > 0) {
				t.Errorf("stats %+v do not match options %+v", st, tc.opts)
			}
		})
	}
}

// TestCombinations runs Pebble with each combination of Reads and Writes:
// the descriptors of tables being written, and of tables open for reading,
// carry O_DIRECT exactly when the option says so (/proc/self/fdinfo); every
// key reads back, checksums verified, after the compaction and after a
// reopen; Stats count what went direct.
func TestCombinations(t *testing.T) {
	n := 6 << 10 // 6 MiB of values
	if testing.Short() || raceEnabled {
		n = 1 << 10
	}
	base := directDir(t)
	for _, opts := range []Options{{}, {Writes: true}, {Reads: true}, {Reads: true, Writes: true}} {
		t.Run(fmt.Sprintf("reads=%t/writes=%t", opts.Reads, opts.Writes), func(t *testing.T) {
			dir := filepath.Join(base, fmt.Sprintf("r%t-w%t", opts.Reads, opts.Writes))
			var mu sync.Mutex
			var created, createdDirect int
			l := &pebble.EventListener{TableCreated: func(info pebble.TableCreateInfo) {
				// Called right after the file is created, before it is written.
				for _, flags := range openFiles(func(target string) bool { return target == info.Path }) {
					mu.Lock()
					created++
					if flags[0]&unix.O_DIRECT != 0 {
						createdDirect++
					}
					mu.Unlock()
				}
			}}
			fs := NewFS(vfs.Default, opts)
			db := openTestDB(t, dir, fs, 1<<20, l)
			loadTestDB(t, db, n)
			verifyTestDB(t, db, n)

			mu.Lock()
			t.Logf("tables created: %d, with O_DIRECT: %d", created, createdDirect)
			if created == 0 {
				t.Error("saw no table being written")
			}
			if want := map[bool]int{true: created, false: 0}[opts.Writes]; createdDirect != want {
				t.Errorf("%d of %d tables were written with O_DIRECT, want %d", createdDirect, created, want)
			}
			mu.Unlock()
			checkOpenTables(t, dir, opts.Reads)
			st := fs.Stats()
			if opts.Writes != (st.DirectWrites > 0) || opts.Reads != (st.DirectReads > 0) {
				t.Errorf("stats %+v do not match options %+v", st, opts)
			}
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}

			fs = NewFS(vfs.Default, opts)
			db = openTestDB(t, dir, fs, 1<<20, nil)
			verifyTestDB(t, db, n)
			checkOpenTables(t, dir, opts.Reads)
			if st := fs.Stats(); opts.Reads != (st.DirectReads > 0) || st.DirectWrites != 0 {
				t.Errorf("after reopen: stats %+v do not match options %+v and no writes", st, opts)
			}
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// checkOpenTables requires table descriptors open under dir, all with
// O_DIRECT when direct, none otherwise.
func checkOpenTables(t *testing.T, dir string, direct bool) {
	t.Helper()
	open := openFiles(func(target string) bool {
		return strings.HasPrefix(target, dir+"/") && strings.HasSuffix(target, ".sst")
	})
	fds, withDirect := 0, 0
	for _, flags := range open {
		for _, f := range flags {
			fds++
			if f&unix.O_DIRECT != 0 {
				withDirect++
			}
		}
	}
	t.Logf("table descriptors open for reading: %d, with O_DIRECT: %d", fds, withDirect)
	if fds == 0 {
		t.Error("no table file is open")
	}
	if want := map[bool]int{true: fds, false: 0}[direct]; withDirect != want {
		t.Errorf("%d of %d open table descriptors have O_DIRECT, want %d", withDirect, fds, want)
	}
}

// quietLogger drops Pebble's informational lines.
type quietLogger struct{ tb testing.TB }

func (quietLogger) Infof(format string, args ...interface{})    {}
func (l quietLogger) Errorf(format string, args ...interface{}) { l.tb.Logf(format, args...) }
func (l quietLogger) Fatalf(format string, args ...interface{}) { panic(fmt.Sprintf(format, args...)) }

// testLogger records log lines.
type testLogger struct {
	mu    sync.Mutex
	lines []string
}

func (l *testLogger) Infof(format string, args ...interface{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, fmt.Sprintf(format, args...))
}

// TestTmpfsRefused checks that Probe refuses a tmpfs directory with an
// error naming it, that an FS without Fallback fails direct opens there, and
// that one with Fallback runs Pebble buffered there and reports it.
func TestTmpfsRefused(t *testing.T) {
	var sfs unix.Statfs_t
	if err := unix.Statfs("/dev/shm", &sfs); err != nil || uint32(sfs.Type) != unix.TMPFS_MAGIC {
		t.Skipf("/dev/shm is not a tmpfs here (%v), skipping", err)
	}
	dir, err := os.MkdirTemp("/dev/shm", "directio-test-")
	if err != nil {
		t.Skipf("cannot make a directory in /dev/shm, skipping: %v", err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })

	err = Probe(dir, 0)
	var pe *ProbeError
	if !errors.Is(err, ErrUnsupported) || !errors.As(err, &pe) || pe.Path != dir || !strings.Contains(err.Error(), dir) {
		t.Fatalf("Probe(%s) = %v, want a *ProbeError naming the directory", dir, err)
	}
	t.Logf("Probe: %v", err)

	strict := NewFS(vfs.Default, Options{Reads: true, Writes: true})
	if err := strict.Probe(dir); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("FS.Probe without Fallback = %v, want ErrUnsupported", err)
	}
	if _, err := strict.Create(filepath.Join(dir, "000001.sst"), "pebble-compaction"); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("Create of a table without Fallback = %v, want ErrUnsupported", err)
	}
	f, err := strict.Create(filepath.Join(dir, "000002.log"), "pebble-wal")
	if err != nil {
		t.Fatalf("Create of a WAL file (not direct) = %v", err)
	}
	_ = f.Close()

	var logs testLogger
	fs := NewFS(vfs.Default, Options{Reads: true, Writes: true, Fallback: true, Logger: &logs})
	if err := fs.Probe(dir); err != nil {
		t.Fatalf("FS.Probe with Fallback = %v", err)
	}
	// A table created there is staged and aligned like a direct one, without
	// O_DIRECT (see stagedWriter).
	f, err = fs.Create(filepath.Join(dir, "000003.sst"), "pebble-compaction")
	if err != nil {
		t.Fatal(err)
	}
	if w, ok := f.(*writer); !ok || w.stats != nil {
		t.Fatalf("Create in a fallen-back directory returned %T, want a staged writer without O_DIRECT", f)
	}
	if flags, _ := fdFlags(strconv.Itoa(int(f.Fd()))); flags&unix.O_DIRECT != 0 {
		t.Fatal("the fallen-back file has O_DIRECT")
	}
	_ = f.Close()

	dbDir := filepath.Join(dir, "db")
	if err := os.Mkdir(dbDir, 0o755); err != nil {
		t.Fatal(err)
	}
	const n = 2000
	db := openTestDB(t, dbDir, fs, 1<<20, nil)
	loadTestDB(t, db, n)
	verifyTestDB(t, db, n)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	st := fs.Stats()
	if want := []string{dir, dbDir}; !slices.Equal(st.FallbackPaths, want) {
		t.Errorf("FallbackPaths = %q, want %q", st.FallbackPaths, want)
	}
	if st.DirectReads != 0 || st.DirectWrites != 0 {
		t.Errorf("stats %+v: want no direct I/O", st)
	}
	if len(logs.lines) != 2 || !strings.Contains(logs.lines[1], dbDir) {
		t.Errorf("log lines %q: want one per directory", logs.lines)
	}
	t.Logf("log: %q", logs.lines)
}

// TestWhatGoesDirect checks which files and categories the FS opens direct.
func TestWhatGoesDirect(t *testing.T) {
	dir := directDir(t)
	fs := NewFS(vfs.Default, Options{Reads: true, Writes: true})
	for _, tc := range []struct {
		name     string
		category vfs.DiskWriteCategory
		direct   bool
	}{
		{"000001.sst", "pebble-memtable-flush", true},
		{"000002.sst", "pebble-compaction", true},
		{"000003.sst", "sql-row-spill", true},
		{"000004.sst", vfs.WriteCategoryUnspecified, false}, // ingestion copies, checkpoints
		{"000005.blob", "pebble-compaction", false},
		{"000006.log", "pebble-wal", false},
		{"MANIFEST-000007", "pebble-manifest", false},
	} {
		path := filepath.Join(dir, tc.name)
		f, err := fs.Create(path, tc.category)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := f.(*writer); ok != tc.direct {
			t.Errorf("Create(%s, %q): direct %t, want %t", tc.name, tc.category, ok, tc.direct)
		}
		if _, err := f.Write([]byte("hello")); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		r, err := fs.Open(path, vfs.RandomReadsOption)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := r.(*reader); ok != strings.HasSuffix(tc.name, ".sst") {
			t.Errorf("Open(%s): direct %t", tc.name, ok)
		}
		buf := make([]byte, 5)
		if n, err := r.ReadAt(buf, 0); n != 5 || err != nil || string(buf) != "hello" {
			t.Errorf("ReadAt(%s) = %d, %v, %q", tc.name, n, err, buf[:n])
		}
		_ = r.Close()
	}
	if err := fs.Probe(dir); err != nil {
		t.Fatal(err)
	}
	off := NewFS(vfs.Default, Options{})
	if err := off.Probe("/nonexistent"); err != nil {
		t.Errorf("Probe with nothing direct = %v, want nil", err)
	}
}

// TestBadAlignment checks that an invalid alignment is a configuration
// error, not a refusal that Fallback would hide.
func TestBadAlignment(t *testing.T) {
	dir := directDir(t)
	for _, a := range []int{-1, 100, 1000, 256, 2 << 20} {
		if err := Probe(dir, a); err == nil || errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), "alignment") {
			t.Errorf("Probe(alignment %d) = %v, want an alignment error", a, err)
		}
		fs := NewFS(vfs.Default, Options{Writes: true, Alignment: a, Fallback: true})
		if err := fs.Probe(dir); err == nil {
			t.Errorf("FS.Probe(alignment %d) = nil, want an error", a)
		}
	}
}
