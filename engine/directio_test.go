package engine

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stratadb/strata/directio"
)

// directDBPath returns a db_path on a filesystem that does O_DIRECT (the test
// temp dir, else a directory under /var/tmp or the package), or skips.
func directDBPath(t *testing.T) string {
	t.Helper()
	var errs []error
	for _, parent := range []string{t.TempDir(), "/var/tmp", "."} {
		dir, err := os.MkdirTemp(parent, "strata-direct-")
		if err != nil {
			errs = append(errs, err)
			continue
		}
		t.Cleanup(func() { _ = os.RemoveAll(dir) })
		if err := directio.Probe(dir, 0); err != nil {
			errs = append(errs, err)
			continue
		}
		abs, _ := filepath.Abs(dir)
		return filepath.Join(abs, "db")
	}
	t.Skipf("no directory here does O_DIRECT: %v", errors.Join(errs...))
	return ""
}

// TestDirectIOCombinations writes, compacts and reopens with each
// combination of use_direct_reads and use_direct_io_for_flush_and_compaction
// and reads every key back (Pebble verifies block checksums on every read).
func TestDirectIOCombinations(t *testing.T) {
	for _, tc := range []struct {
		name          string
		reads, writes bool
	}{
		{"buffered", false, false},
		{"direct-reads", true, false},
		{"direct-writes", false, true},
		{"direct-both", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(t)
			cfg.DBPath = directDBPath(t)
			cfg.UseDirectReads, cfg.UseDirectIOForFlushAndCompaction = tc.reads, tc.writes
			cfg.BlockCacheSizeMB = 1 // small, so reads reach the files
			const n = 3000
			db := mustOpen(t, cfg)
			for i := range n {
				if err := db.Put(key(i), doc(i, 700)); err != nil {
					t.Fatal(err)
				}
			}
			if err := db.Flush(); err != nil {
				t.Fatal(err)
			}
			if err := db.CompactAll(); err != nil {
				t.Fatal(err)
			}
			check := func(db *DB) {
				for i := range n {
					v, err := db.Get(key(i))
					if err != nil || !bytes.Equal(v, doc(i, 700)) {
						t.Fatalf("key %d: %v", i, err)
					}
				}
			}
			check(db)
			m, _ := db.Metrics()
			if tc.writes != (m.DirectIO.DirectWriteBytes > 0) {
				t.Errorf("direct write bytes %d with writes=%v", m.DirectIO.DirectWriteBytes, tc.writes)
			}
			if tc.reads != (m.DirectIO.DirectReadBytes > 0) {
				t.Errorf("direct read bytes %d with reads=%v", m.DirectIO.DirectReadBytes, tc.reads)
			}
			s, _ := db.Stats()
			if (tc.reads || tc.writes) != strings.Contains(s, "direct writes (") {
				t.Errorf("Stats direct I/O line:\n%s", s)
			}
			_ = db.Close()
			db = mustOpen(t, cfg)
			defer db.Close()
			check(db)
		})
	}
}

func TestDirectIORefusedWithoutFallback(t *testing.T) {
	shm, err := os.MkdirTemp("/dev/shm", "strata-direct-")
	if err != nil {
		t.Skipf("no /dev/shm: %v", err)
	}
	defer os.RemoveAll(shm)
	if directio.Probe(shm, 0) == nil {
		t.Skip("/dev/shm accepts O_DIRECT here")
	}
	cfg := testConfig(t)
	cfg.DBPath = filepath.Join(shm, "db")
	cfg.UseDirectReads = true
	_, err = Open(cfg)
	if err == nil || !errors.Is(err, directio.ErrUnsupported) || !strings.Contains(err.Error(), "use_direct_reads") || !strings.Contains(err.Error(), shm) {
		t.Fatalf("Open on tmpfs with direct reads = %v; want an error naming the option and the path", err)
	}

	cfg.DirectIOFallback = true
	db, err := Open(cfg)
	if err != nil {
		t.Fatalf("with direct_io_fallback: %v", err)
	}
	defer db.Close()
	_ = db.Put([]byte("k"), []byte("v"))
	_ = db.Flush()
	if v, err := db.Get([]byte("k")); err != nil || string(v) != "v" {
		t.Fatalf("Get = %q, %v", v, err)
	}
	m, _ := db.Metrics()
	if len(m.DirectIO.FallbackPaths) == 0 {
		t.Error("fallback not reported in Metrics")
	}
	s, _ := db.Stats()
	if !strings.Contains(s, "buffered fallback") {
		t.Errorf("fallback not in Stats:\n%s", s)
	}
}

func TestDirectIONeedsOSFileSystem(t *testing.T) {
	cfg := testConfig(t)
	cfg.DBPath = "/db"
	cfg.UseDirectIOForFlushAndCompaction = true
	if _, err := Open(cfg, Options{FS: vfs.NewMem()}); err == nil || !strings.Contains(err.Error(), "use_direct_io_for_flush_and_compaction") {
		t.Fatalf("direct I/O on a MemFS = %v", err)
	}
}
