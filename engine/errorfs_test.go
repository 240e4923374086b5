package engine

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/stratadb/strata/config"
)

// errorSweepWorkload opens a database on fs and runs open, synced writes,
// a flush, a batch, CompactAll (Pebble's compaction and, with every table
// rewritten chunk by chunk, the codec rewrite), a checkpoint, more writes
// and Close, stopping at the first error. It records every acknowledged
// write in acked and returns the first error.
func errorSweepWorkload(fs vfs.FS, acked map[string][]byte) (err error) {
	cfg := errorSweepConfig()
	db, err := Open(cfg, Options{FS: fs})
	if err != nil {
		return err
	}
	defer func() {
		if cerr := db.Close(); err == nil {
			err = cerr
		}
	}()
	db.testChunksOnly = true
	put := func(i int) error {
		k, v := fmt.Appendf(nil, "k%06d", i), doc(i, 400)
		if err := db.Put(k, v); err != nil {
			return err
		}
		acked[string(k)] = v
		return nil
	}
	for i := range 300 {
		if err := put(i); err != nil {
			return err
		}
	}
	if err := db.Flush(); err != nil {
		return err
	}
	b := db.NewBatch()
	defer b.Close()
	for i := 300; i < 350; i++ {
		if err := b.Put(fmt.Appendf(nil, "k%06d", i), doc(i, 400)); err != nil {
			return err
		}
	}
	if err := b.Commit(); err != nil {
		return err
	}
	for i := 300; i < 350; i++ {
		acked[fmt.Sprintf("k%06d", i)] = doc(i, 400)
	}
	if err := db.CompactAll(); err != nil {
		return err
	}
	if err := db.Checkpoint("/checkpoint"); err != nil {
		return err
	}
	for i := 350; i < 400; i++ {
		if err := put(i); err != nil {
			return err
		}
	}
	return nil
}

// injectable reports whether the sweep injects errors into op: every
// operation but the writes of the WAL (its directory included) and of the
// MANIFEST and its marker. Pebble treats a failed write there as fatal by
// design, as RocksDB stops on a background error: on Pebble's own
// goroutines it panics (rotateWAL even with its mutex released, which Go
// cannot recover), so the process dies; the engine turns such a failure
// into ErrFatal where it happens in the caller's goroutine (Open, a
// commit), but a process death there is a crash, which the SIGKILL tests
// cover.
func injectable(op errorfs.Op) bool {
	base := filepath.Base(op.Path)
	fatal := strings.HasPrefix(op.Path, errorSweepConfig().WALDir) || strings.HasSuffix(base, ".log") ||
		strings.HasPrefix(base, "MANIFEST-") || strings.HasPrefix(base, "marker.")
	return !fatal || op.Kind.ReadOrWrite() == errorfs.OpIsRead
}

func errorSweepConfig() *config.Config {
	cfg := config.Default()
	cfg.DBPath, cfg.WALDir = "/db", "/wal"
	cfg.Sync = true
	cfg.MemtableSizeMB, cfg.BlockCacheSizeMB = 1, 1
	cfg.CompressionDefault, cfg.CompressionBottommost = "snappy", "zstd"
	return cfg
}

// TestErrorInjectionSweep injects an I/O error at the n-th file system
// operation of errorSweepWorkload, for every n up to the clean run's total
// (every fifteenth under -short), WAL and MANIFEST writes excepted (see
// injectable): each run must succeed or return an error (never panic or
// hang), and after reopening without injection every acknowledged synced
// write is present in what a power cut after the run would leave (a crash
// clone of the file system: synced data only). As Pebble's TestErrors.
func TestErrorInjectionSweep(t *testing.T) {
	var ops atomic.Int32
	counting := errorfs.InjectorFunc(func(op errorfs.Op) error {
		if injectable(op) {
			ops.Add(1)
		}
		return nil
	})
	if err := errorSweepWorkload(errorfs.Wrap(vfs.NewMem(), counting), map[string][]byte{}); err != nil {
		t.Fatalf("clean run: %v", err)
	}
	total := int(ops.Load())
	stride := 1
	if testing.Short() {
		stride = max(1, total/15)
	}
	t.Logf("%d file system operations in a clean run; injecting at every %d", total, stride)
	failed, injectedSeen := 0, 0
	for n := 0; n < total; n += stride {
		mem := vfs.NewCrashableMem()
		var seen atomic.Int32
		inj := &errorfs.Counter{Injector: errorfs.InjectorFunc(func(op errorfs.Op) error {
			if injectable(op) && seen.Add(1)-1 == int32(n) {
				return errorfs.ErrInjected
			}
			return nil
		})}
		acked := map[string][]byte{}
		done := make(chan error, 1)
		go func() {
			defer func() {
				if r := recover(); r != nil {
					done <- fmt.Errorf("panic: %v\n%s", r, debug.Stack())
				}
			}()
			done <- errorSweepWorkload(errorfs.Wrap(mem, inj), acked)
		}()
		var err error
		select {
		case err = <-done:
		case <-time.After(30 * time.Second):
			t.Fatalf("n=%d: the run hangs", n)
		}
		if err != nil && strings.HasPrefix(err.Error(), "panic: ") {
			t.Fatalf("n=%d: %v", n, err)
		}
		if err != nil {
			failed++
			if errors.Is(err, errorfs.ErrInjected) {
				injectedSeen++
			}
		}
		// Reopen on what survives a power cut after the run: only synced
		// data, so a missing sync fails the check as much as a lost write.
		clean := mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
		db, rerr := Open(errorSweepConfig(), Options{FS: clean})
		if rerr != nil {
			t.Fatalf("n=%d (run error %v): reopen on the clean file system: %v", n, err, rerr)
		}
		for k, v := range acked {
			got, gerr := db.Get([]byte(k))
			if gerr != nil || !bytes.Equal(got, v) {
				t.Fatalf("n=%d (run error %v): acknowledged synced write %s lost: %v", n, err, k, gerr)
			}
		}
		if cerr := db.Close(); cerr != nil {
			t.Fatalf("n=%d: close after reopen: %v", n, cerr)
		}
	}
	t.Logf("%d runs failed with the injected error surfacing (%d wrapping errorfs.ErrInjected)", failed, injectedSeen)
	if failed == 0 {
		t.Fatal("no injected error surfaced: the sweep tested nothing")
	}
}
