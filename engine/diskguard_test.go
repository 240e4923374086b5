package engine

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/stratadb/strata/config"
)

// spaceFault makes the file system answer ENOSPC to writes and syncs of one
// kind of file, from the n-th such operation on, until lifted.
type spaceFault struct {
	match func(path string) bool
	armed atomic.Bool
	after atomic.Int64 // operations to let through once armed
	hits  atomic.Int64 // operations failed
}

func (f *spaceFault) MaybeError(op errorfs.Op) error {
	if !f.armed.Load() || !f.match(op.Path) {
		return nil
	}
	switch op.Kind {
	case errorfs.OpFileWrite, errorfs.OpFileWriteAt, errorfs.OpFileSync, errorfs.OpFileSyncData, errorfs.OpFileSyncTo:
	default:
		return nil
	}
	if f.after.Add(-1) >= 0 {
		return nil
	}
	f.hits.Add(1)
	return &os.PathError{Op: "write", Path: op.Path, Err: syscall.ENOSPC}
}

func (f *spaceFault) String() string { return "ENOSPC" }

// arm starts failing from the n-th (0-based) matching operation.
func (f *spaceFault) arm(n int) { f.after.Store(int64(n)); f.armed.Store(true) }
func (f *spaceFault) lift()     { f.armed.Store(false) }

// fileKinds are the files whose writes Pebble handles differently (see
// diskGuard).
var fileKinds = []struct {
	name  string
	match func(string) bool
	// nth is the operation the fault starts at once armed.
	nth int
}{
	{"wal", func(p string) bool { return strings.HasSuffix(p, ".log") }, 2},
	{"sstable", func(p string) bool { return strings.HasSuffix(p, ".sst") }, 0},
	{"blob", func(p string) bool { return strings.HasSuffix(p, ".blob") }, 1},
	{"manifest", func(p string) bool { return strings.HasPrefix(filepath.Base(p), "MANIFEST-") }, 0},
}

func diskFullConfig(dir string) *config.Config {
	cfg := config.Default()
	cfg.DBPath = dir
	cfg.Sync = true
	cfg.MemtableSizeMB, cfg.MaxWriteBufferNumber, cfg.BlockCacheSizeMB = 1, 2, 1
	cfg.EnableBlobFiles, cfg.MinBlobSize = true, 64
	return cfg
}

// transitions records what OnDiskFull reported.
type transitions struct {
	mu   sync.Mutex
	full []bool
}

func (tr *transitions) record(st DiskStatus) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.full = append(tr.full, st.Full)
}

func (tr *transitions) get() []bool {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return append([]bool(nil), tr.full...)
}

// waitFor polls cond every 5 ms until it holds or d passes.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(d); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %s", d, what)
		}
	}
}

// TestDiskFullFaultInjection fails every write and sync of one kind of
// file (WAL, table, blob file, MANIFEST) with ENOSPC, from the n-th on,
// while writers and a flush run: the process must not panic (Pebble panics
// on a failed blob file Finish and on WAL and MANIFEST errors; see
// diskGuard), the guard trips, new writes are refused at once with
// ErrNoSpace wrapping ENOSPC, reads work, and once the fault is lifted the
// guard clears by itself, the flush finishes, writes are accepted, and
// after a reopen every acknowledged write is there.
func TestDiskFullFaultInjection(t *testing.T) {
	for _, kind := range fileKinds {
		t.Run(kind.name, func(t *testing.T) {
			mem := vfs.NewMem()
			fault := &spaceFault{match: kind.match}
			var tr transitions
			log := &recordingLogger{}
			cfg := diskFullConfig("/db")
			db, err := Open(cfg, Options{FS: errorfs.Wrap(mem, fault), Logger: log,
				DiskGuard: DiskGuardOptions{PollInterval: 20 * time.Millisecond, OnDiskFull: tr.record}})
			if err != nil {
				t.Fatal(err)
			}
			acked := map[string][]byte{}
			var ackedMu sync.Mutex
			put := func(k string, v []byte) error {
				if err := db.Put([]byte(k), v); err != nil {
					return err
				}
				ackedMu.Lock()
				acked[k] = v
				ackedMu.Unlock()
				return nil
			}
			for i := range 200 {
				if err := put(fmt.Sprintf("a%05d", i), doc(i, 300)); err != nil {
					t.Fatal(err)
				}
			}

			fault.arm(kind.nth)
			// Writers run until told to stop; a flush runs meanwhile.
			stop := make(chan struct{})
			var writers sync.WaitGroup
			var refused atomic.Int64
			writerErr := make(chan error, 4)
			for w := range 2 {
				writers.Add(1)
				go func() {
					defer writers.Done()
					for i := 0; ; i++ {
						select {
						case <-stop:
							return
						default:
						}
						err := put(fmt.Sprintf("w%d-%06d", w, i), doc(i, 300))
						if errors.Is(err, ErrNoSpace) {
							refused.Add(1)
							time.Sleep(2 * time.Millisecond)
						} else if err != nil {
							writerErr <- err
							return
						}
					}
				}()
			}
			flushed := make(chan error, 1)
			go func() { flushed <- db.Flush() }()

			waitFor(t, 10*time.Second, "the guard did not trip", func() bool {
				select {
				case err := <-writerErr:
					t.Fatalf("a writer failed with something else than ErrNoSpace: %v", err)
				default:
				}
				return db.DiskStatus().Full
			})
			start := time.Now()
			err = db.Put([]byte("refused"), []byte("v"))
			if !errors.Is(err, ErrNoSpace) || !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("Put while the disk is full = %v, want ErrNoSpace wrapping ENOSPC", err)
			}
			if d := time.Since(start); d > time.Second {
				t.Errorf("a refused Put took %v", d)
			}
			if got, err := db.Get([]byte("a00007")); err != nil || !bytes.Equal(got, doc(7, 300)) {
				t.Fatalf("Get while the disk is full = %v", err)
			}
			st := db.DiskStatus()
			if !errors.Is(st.Cause, ErrNoSpace) || len(st.Dirs) != 1 || st.Dirs[0].Role != "db_path" {
				t.Errorf("DiskStatus = %+v", st)
			}
			time.Sleep(50 * time.Millisecond) // let the fault bite more than once
			if fault.hits.Load() == 0 {
				t.Fatal("the fault never fired")
			}

			fault.lift()
			waitFor(t, 10*time.Second, "the guard did not clear after the fault was lifted", func() bool { return !db.DiskStatus().Full })
			select {
			case err := <-flushed:
				if err != nil && !errors.Is(err, ErrNoSpace) {
					t.Fatalf("Flush = %v", err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the flush hangs after the fault was lifted")
			}
			close(stop)
			writers.Wait()
			select {
			case err := <-writerErr:
				t.Fatalf("a writer failed with something else than ErrNoSpace: %v", err)
			default:
			}
			for i := range 50 {
				if err := put(fmt.Sprintf("z%05d", i), doc(i, 300)); err != nil {
					t.Fatalf("Put after recovery: %v", err)
				}
			}
			if err := db.Flush(); err != nil {
				t.Fatalf("Flush after recovery: %v", err)
			}
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			if got := tr.get(); len(got) < 2 || !got[0] || got[len(got)-1] {
				t.Errorf("OnDiskFull saw %v, want true ... false", got)
			}
			log.mu.Lock()
			logged := strings.Join(log.errs, "\n")
			log.mu.Unlock()
			if !strings.Contains(logged, "disk full") {
				t.Errorf("no disk full line logged: %q", logged)
			}

			db, err = Open(cfg, Options{FS: mem})
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			for k, v := range acked {
				if got, err := db.Get([]byte(k)); err != nil || !bytes.Equal(got, v) {
					t.Fatalf("acknowledged write %s lost: %v", k, err)
				}
			}
			t.Logf("%d faults, %d writes refused, %d acknowledged", fault.hits.Load(), refused.Load(), len(acked))
		})
	}
}

// TestBlobFinishPanicsWithoutDiskGuard shows what the guard protects from:
// without it, ENOSPC on a blob file's last write or sync during a flush
// panics in Pebble (blob.FileWriter.Close aborts a writable Finish already
// released) and the process dies. It runs the case in a child process. If
// this fails because the child lives, Pebble fixed the bug.
func TestBlobFinishPanicsWithoutDiskGuard(t *testing.T) {
	if os.Getenv("STRATA_BLOB_PANIC_CHILD") == "1" {
		testNoDiskGuardFS = true
		mem := vfs.NewMem()
		fault := &spaceFault{match: func(p string) bool { return strings.HasSuffix(p, ".blob") }}
		db, err := Open(diskFullConfig("/db"), Options{FS: errorfs.Wrap(mem, fault)})
		if err != nil {
			t.Fatal(err)
		}
		for i := range 200 {
			if err := db.Put(fmt.Appendf(nil, "a%05d", i), doc(i, 300)); err != nil {
				t.Fatal(err)
			}
		}
		fault.arm(1)
		_ = db.Flush() // the flush goroutine panics
		time.Sleep(2 * time.Second)
		fmt.Println("CHILD SURVIVED")
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestBlobFinishPanicsWithoutDiskGuard$", "-test.count=1")
	cmd.Env = append(os.Environ(), "STRATA_BLOB_PANIC_CHILD=1")
	out, err := cmd.CombinedOutput()
	if err == nil || strings.Contains(string(out), "CHILD SURVIVED") {
		t.Fatalf("without the guard the child survived a failed blob file Finish (err %v):\n%s", err, out)
	}
	if !strings.Contains(string(out), "fileBufferedWritable).Abort") {
		t.Fatalf("the child died, but not of the blob Finish panic:\n%s", out)
	}
	t.Logf("without the guard: %s", firstLines(string(out), 3))
}

func firstLines(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	return strings.Join(lines[:min(n, len(lines))], " | ")
}

// TestDiskGuardFloor trips the guard on free space alone (a MemFS that
// reports its usage): below the floor, writes are refused and the reserve
// file is released; once space returns the reserve is made again and
// writes are accepted.
func TestDiskGuardFloor(t *testing.T) {
	mem := vfs.NewMem()
	const total = 1 << 30
	mem.TestingSetDiskUsage(vfs.DiskUsage{AvailBytes: total / 2, TotalBytes: total, UsedBytes: total / 2})
	var tr transitions
	cfg := diskFullConfig("/db")
	cfg.WALDir = "/wal"
	db, err := Open(cfg, Options{FS: mem, DiskGuard: DiskGuardOptions{ReserveBytes: 1 << 20, PollInterval: 10 * time.Millisecond, OnDiskFull: tr.record}})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	reserves := func() (n int) {
		for _, dir := range []string{"/db", "/wal"} {
			if fi, err := mem.Stat(mem.PathJoin(dir, ReserveFileName)); err == nil && fi.Size() == 1<<20 {
				n++
			}
		}
		return n
	}
	st := db.DiskStatus()
	if st.Full || len(st.Dirs) != 2 || st.Dirs[1].Role != "wal_dir" || st.Dirs[0].MinFreeBytes != 1<<19 || st.Dirs[0].FreeBytes != total/2 || reserves() != 2 {
		t.Fatalf("at open: DiskStatus = %+v, %d reserve files", st, reserves())
	}
	if err := db.Put([]byte("k"), []byte("v")); err != nil {
		t.Fatal(err)
	}
	mem.TestingSetDiskUsage(vfs.DiskUsage{AvailBytes: 1 << 18, TotalBytes: total, UsedBytes: total - 1<<18})
	waitFor(t, 5*time.Second, "the guard did not trip under the floor", func() bool { return db.DiskStatus().Full })
	if err := db.Put([]byte("k2"), []byte("v")); !errors.Is(err, ErrNoSpace) {
		t.Fatalf("Put under the floor = %v, want ErrNoSpace", err)
	}
	if err := db.Flush(); !errors.Is(err, ErrNoSpace) {
		t.Fatalf("Flush under the floor = %v, want ErrNoSpace", err)
	}
	if n := reserves(); n != 0 {
		t.Fatalf("%d reserve files held while tripped, want them released", n)
	}
	if v, err := db.Get([]byte("k")); err != nil || string(v) != "v" {
		t.Fatalf("Get while tripped = %q, %v", v, err)
	}
	// Above the floor but not above floor + reserve + floor/2: stays.
	mem.TestingSetDiskUsage(vfs.DiskUsage{AvailBytes: 1 << 20, TotalBytes: total, UsedBytes: total - 1<<20})
	time.Sleep(100 * time.Millisecond)
	if !db.DiskStatus().Full {
		t.Fatal("the guard cleared without room for the reserve")
	}
	mem.TestingSetDiskUsage(vfs.DiskUsage{AvailBytes: total / 2, TotalBytes: total, UsedBytes: total / 2})
	waitFor(t, 5*time.Second, "the guard did not clear", func() bool { return !db.DiskStatus().Full })
	if err := db.Put([]byte("k2"), []byte("v")); err != nil {
		t.Fatal(err)
	}
	if n := reserves(); n != 2 {
		t.Fatalf("%d reserve files after clearing, want 2", n)
	}
	// OnDiskFull runs on the guard's goroutine, after DiskStatus changed.
	waitFor(t, 5*time.Second, "OnDiskFull did not see the guard clear", func() bool { return len(tr.get()) >= 2 })
	if got := tr.get(); len(got) != 2 || !got[0] || got[1] {
		t.Errorf("OnDiskFull saw %v, want [true false]", got)
	}
}

// TestDiskFullTmpfs fills a real 64 MB tmpfs through the engine with 8 KB
// values from four writers: no crash, every writer gets ErrNoSpace, reads
// work, and once another file on the file system is removed writes resume
// without a reopen; after a reopen every acknowledged write is there.
// Mounting needs root (CI runs as root); elsewhere the test is skipped.
//
// "reserve" runs with the default reserve and floor (the guard trips before
// Pebble meets ENOSPC); "enospc" with neither, so Pebble's own writes meet
// ENOSPC on a real file system and the guard's file system wrapper handles
// it.
func TestDiskFullTmpfs(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("tmpfs mounts are Linux only")
	}
	t.Run("reserve", func(t *testing.T) { testDiskFullTmpfs(t, DiskGuardOptions{}) })
	t.Run("enospc", func(t *testing.T) { testDiskFullTmpfs(t, DiskGuardOptions{ReserveBytes: -1, MinFreeBytes: -1}) })
}

func testDiskFullTmpfs(t *testing.T, guard DiskGuardOptions) {
	mnt := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", mnt).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a 64 MB tmpfs (needs root): %v: %s", err, out)
	}
	lazyUnmount := false
	t.Cleanup(func() {
		args := []string{mnt}
		if lazyUnmount {
			args = []string{"-l", mnt}
		}
		if out, err := exec.Command("umount", args...).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", mnt, err, out)
		}
	})
	// Another tenant of the file system, removed later to free space.
	filler := filepath.Join(mnt, "other-file")
	if err := os.WriteFile(filler, make([]byte, 16<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := diskFullConfig(filepath.Join(mnt, "db"))
	cfg.MemtableSizeMB, cfg.MaxWriteBufferNumber = 2, 2
	cfg.MinBlobSize = 1024
	var tr transitions
	log := &recordingLogger{}
	guard.PollInterval, guard.OnDiskFull = 50*time.Millisecond, tr.record
	opts := Options{Logger: log, DiskGuard: guard}
	db, err := Open(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	st := db.DiskStatus()
	t.Logf("at open: %s; reserve %d bytes, floor %d", describeDirs(st.Dirs), st.Dirs[0].ReserveBytes, st.Dirs[0].MinFreeBytes)

	var ackedMu sync.Mutex
	acked := map[string][]byte{}
	var writers sync.WaitGroup
	var stop atomic.Bool
	var puts atomic.Int64
	errs := make([]error, 4)
	deadline := time.Now().Add(20 * time.Second)
	for w := range 4 {
		writers.Add(1)
		go func() {
			defer writers.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 1))
			for i := 0; time.Now().Before(deadline) && !stop.Load(); i++ {
				k, v := fmt.Sprintf("w%d-%07d", w, i), make([]byte, 8<<10)
				for j := range v {
					v[j] = byte(rng.Uint32())
				}
				if err := db.Put([]byte(k), v); err != nil {
					errs[w] = err
					return
				}
				puts.Add(1)
				ackedMu.Lock()
				acked[k] = v
				ackedMu.Unlock()
			}
		}()
	}
	finished := make(chan struct{})
	go func() { writers.Wait(); close(finished) }()
	// The writers end with ErrNoSpace, or, where the disk ran out under a
	// WAL write already inside Pebble (no reserve to give back), those
	// puts wait for space (Pebble cannot survive a failed WAL write): the
	// guard must then be tripped and refuse every new write at once.
	lastPuts, lastMove := int64(-1), time.Now()
	waiting := false
	for done := false; !done; {
		select {
		case <-finished:
			done = true
		case <-time.After(100 * time.Millisecond):
			if n := puts.Load(); n != lastPuts {
				lastPuts, lastMove = n, time.Now()
			}
			if db.DiskStatus().Full && time.Since(lastMove) > 2*time.Second {
				waiting, done = true, true
			}
			if time.Since(lastMove) > 30*time.Second {
				// A Put stuck in Pebble without the guard tripped: the hang of
				// a full disk without the guard. The database cannot be
				// closed; the lazy unmount below copes.
				lazyUnmount = true
				st := db.DiskStatus()
				t.Fatalf("writers hang on a full disk (%d puts acknowledged; guard tripped %v: %v): %s", puts.Load(), st.Full, st.Cause, describeDirs(st.Dirs))
			}
		}
	}
	refused := make(chan error, 1)
	go func() { refused <- db.Put([]byte("new-write"), []byte("v")) }()
	select {
	case err := <-refused:
		if !errors.Is(err, ErrNoSpace) {
			t.Fatalf("a new Put on the full disk: %v, want ErrNoSpace", err)
		}
	case <-time.After(time.Second):
		lazyUnmount = true
		t.Fatalf("a new Put on the full disk hung (%d puts acknowledged): %s", len(acked), describeDirs(db.DiskStatus().Dirs))
	}
	for w, err := range errs {
		if err != nil && !errors.Is(err, ErrNoSpace) {
			t.Fatalf("writer %d ended with %v, want ErrNoSpace", w, err)
		}
	}
	st = db.DiskStatus()
	t.Logf("full after %d acknowledged puts (writers waiting inside Pebble: %v): %v; %s", len(acked), waiting, st.Cause, describeDirs(st.Dirs))
	log.mu.Lock()
	t.Logf("error lines logged: %d, first: %s", len(log.errs), firstLines(strings.Join(log.errs, "\n"), 2))
	log.mu.Unlock()
	if !st.Full {
		t.Fatal("writers were refused but DiskStatus is not Full")
	}
	ackedMu.Lock()
	for k, v := range acked {
		if got, err := db.Get([]byte(k)); err != nil || !bytes.Equal(got, v) {
			t.Fatalf("Get(%s) on a full disk: %v", k, err)
		}
		break
	}
	ackedMu.Unlock()
	stop.Store(true)

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	select {
	case <-finished: // the puts that waited for space are done
	case <-time.After(20 * time.Second):
		lazyUnmount = true
		t.Fatal("the puts waiting for space did not finish after space was freed")
	}
	waitFor(t, 10*time.Second, "writes were not accepted again after space was freed", func() bool { return !db.DiskStatus().Full })
	for i := range 100 {
		k, v := fmt.Sprintf("after-%04d", i), doc(i, 8<<10)
		if err := db.Put([]byte(k), v); err != nil {
			t.Fatalf("Put after space was freed: %v", err)
		}
		acked[k] = v
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if got := tr.get(); len(got) < 2 || !got[0] || got[len(got)-1] {
		t.Errorf("OnDiskFull saw %v, want true ... false", got)
	}
	db, err = Open(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for k, v := range acked {
		if got, err := db.Get([]byte(k)); err != nil || !bytes.Equal(got, v) {
			t.Fatalf("acknowledged write %s lost after reopen: %v", k, err)
		}
	}
}
