package engine

import (
	"bytes"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// writeCountingFS counts the Write calls and bytes that reach table files.
type writeCountingFS struct {
	vfs.FS
	mu            sync.Mutex
	writes, bytes int64
}

func (fs *writeCountingFS) Create(name string, category vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.Create(name, category)
	if err != nil || !strings.HasSuffix(name, ".sst") {
		return f, err
	}
	return &writeCountingFile{File: f, fs: fs}, nil
}

type writeCountingFile struct {
	vfs.File
	fs *writeCountingFS
}

func (f *writeCountingFile) Write(p []byte) (int, error) {
	f.fs.mu.Lock()
	f.fs.writes++
	f.fs.bytes += int64(len(p))
	f.fs.mu.Unlock()
	return f.File.Write(p)
}

// TestTableWritesAreBuffered checks that a flush and a compaction write
// their tables to the file system in large chunks, not in Pebble's 4 KB
// blocks, and that the tables read back intact after a reopen.
func TestTableWritesAreBuffered(t *testing.T) {
	counting := &writeCountingFS{FS: vfs.NewMem()}
	cfg := testConfig(t)
	cfg.CompressionDefault, cfg.CompressionBottommost = "none", "none"
	db, err := Open(cfg, Options{FS: counting})
	if err != nil {
		t.Fatal(err)
	}
	value := func(i int) []byte { return bytes.Repeat([]byte(fmt.Sprintf("value %06d ", i)), 100) }
	const n = 4000 // ~4.7 MB
	for i := range n {
		if err := db.Put([]byte(fmt.Sprintf("key%06d", i)), value(i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := db.CompactAll(); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	counting.mu.Lock()
	writes, written := counting.writes, counting.bytes
	counting.mu.Unlock()
	if written < n*1000 {
		t.Fatalf("%d bytes written to tables for %d values of 1200 bytes", written, n)
	}
	// Unbuffered, Pebble writes each 4 KB block on its own: > 1000 writes.
	if avg := written / writes; avg < 64<<10 {
		t.Errorf("%d table writes of %d bytes on average, want >= 64 KB each (Pebble's 4 KB blocks reach the file system one by one)", writes, avg)
	}

	db, err = Open(cfg, Options{FS: counting})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for i := range n {
		got, err := db.Get([]byte(fmt.Sprintf("key%06d", i)))
		if err != nil || !bytes.Equal(got, value(i)) {
			t.Fatalf("key%06d after reopen: %d bytes, %v", i, len(got), err)
		}
	}
}
