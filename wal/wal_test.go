package wal

import (
	"io"
	"path/filepath"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

func TestPlacementApply(t *testing.T) {
	fs := vfs.NewMem()
	for _, d := range []string{"/old-wal", "/db"} {
		if err := fs.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	p := Placement{
		DBPath:       "/db",
		Dir:          "/nvme/wal",
		FailoverDir:  "/ssd/wal",
		PreviousDirs: []string{"/old-wal", "/nvme/wal", "/gone", ""},
	}
	opts := &pebble.Options{}
	if err := p.Apply(opts, fs); err != nil {
		t.Fatal(err)
	}
	if opts.WALDir != "/nvme/wal" || opts.DisableWAL {
		t.Errorf("WALDir %q DisableWAL %v", opts.WALDir, opts.DisableWAL)
	}
	if opts.WALFailover == nil || opts.WALFailover.Secondary.Dirname != "/ssd/wal" {
		t.Errorf("WALFailover %+v", opts.WALFailover)
	}
	for _, d := range []string{"/nvme/wal", "/ssd/wal"} {
		if _, err := fs.Stat(d); err != nil {
			t.Errorf("%s not created: %v", d, err)
		}
	}
	// The old dir and db_path (an empty previous wal_dir) are recovery dirs;
	// the current dir and a directory that no longer exists are not.
	var got []string
	for _, d := range opts.WALRecoveryDirs {
		got = append(got, d.Dirname)
	}
	if len(got) != 2 || got[0] != "/old-wal" || got[1] != "/db" {
		t.Errorf("WALRecoveryDirs = %v, want [/old-wal /db]", got)
	}
	if p.EffectiveDir() != "/nvme/wal" || (Placement{DBPath: "/db"}).EffectiveDir() != "/db" {
		t.Error("EffectiveDir")
	}
}

func TestCountingFS(t *testing.T) {
	mem := vfs.NewMem()
	fs := NewCountingFS(mem, false)
	f, err := fs.Create("000001.log", vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = f.Write(make([]byte, 100))
	_ = f.Sync()
	_ = f.SyncData()
	_ = f.Close()
	other, _ := fs.Create("000002.sst", vfs.WriteCategoryUnspecified)
	_, _ = other.Write(make([]byte, 50))
	_ = other.Sync()
	_ = other.Close()
	if s := fs.Stats(); s.Files != 1 || s.BytesWritten != 100 || s.Syncs != 2 {
		t.Errorf("Stats = %+v, want 1 file, 100 bytes, 2 syncs (tables not counted)", s)
	}
}

func TestDisabledWALLeavesNoFile(t *testing.T) {
	mem := vfs.NewMem()
	_ = mem.MkdirAll("/db", 0o755)
	fs := NewCountingFS(mem, true)
	name := filepath.Join("/db", "000002.log")
	f, err := fs.Create(name, vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := f.Write([]byte("record")); n != 6 || err != nil {
		t.Fatalf("Write = %d, %v", n, err)
	}
	if _, err := f.Read(make([]byte, 1)); err != io.EOF {
		t.Errorf("Read = %v", err)
	}
	_ = f.Close()
	if _, err := mem.Stat(name); err == nil {
		t.Error("a disabled WAL left a file")
	}
	if err := fs.Remove(name); err != nil {
		t.Errorf("removing a discarded log: %v", err)
	}
	// Other files are untouched.
	g, _ := fs.Create("/db/000003.sst", vfs.WriteCategoryUnspecified)
	_ = g.Close()
	if err := fs.Remove("/db/missing.sst"); err == nil {
		t.Error("removing a missing table succeeded")
	}
}
