//go:build linux

package directio

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"golang.org/x/sys/unix"
)

// TestWriterExample walks the example in the writer's type comment and
// checks the system calls it costs (Stats) and the file after each step.
func TestWriterExample(t *testing.T) {
	dir := directDir(t)
	fs := NewFS(vfs.Default, Options{Writes: true})
	path := filepath.Join(dir, "000001.sst")
	f, err := fs.Create(path, "pebble-compaction")
	if err != nil {
		t.Fatal(err)
	}
	data := make([]byte, 8192)
	for i := range data {
		data[i] = byte(i*7 + i>>8)
	}
	step := func(what string, do func() error, wantLen int, wantWrites, wantBytes int64) {
		t.Helper()
		if err := do(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, data[:wantLen]) {
			t.Fatalf("after %s: the file holds %d bytes, want the first %d written", what, len(got), wantLen)
		}
		if st := fs.Stats(); st.DirectWrites != wantWrites || st.DirectWriteBytes != wantBytes {
			t.Fatalf("after %s: %d direct writes of %d bytes, want %d of %d", what, st.DirectWrites, st.DirectWriteBytes, wantWrites, wantBytes)
		}
	}
	write := func(p []byte) func() error { return func() error { _, err := f.Write(p); return err } }
	step("write 5000", write(data[:5000]), 0, 0, 0)
	step("sync", f.Sync, 5000, 1, 8192)       // 5000 bytes padded to 8192, truncated
	step("sync again", f.Sync, 5000, 1, 8192) // nothing new: no write
	step("write 3192", write(data[5000:]), 5000, 1, 8192)
	step("close", f.Close, 8192, 2, 8192+4096) // the partial block rewritten whole
}

// TestRetargetedDescriptor does what the tiering layout does to a new table:
// create it in one directory, then dup3 the descriptor of a file created in
// another directory onto it and write through the first. Whichever of the
// two directories fell back to buffered I/O, the bytes come out right.
func TestRetargetedDescriptor(t *testing.T) {
	base := directDir(t)
	data := make([]byte, 3*DefaultAlignment+77)
	for i := range data {
		data[i] = byte(i*13 + 5)
	}
	for _, tc := range []struct{ name, fallback string }{
		{"placeholder-fell-back", "p"}, {"real-fell-back", "r"}, {"none-fell-back", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := NewFS(vfs.Default, Options{Writes: true})
			pdir, rdir := filepath.Join(base, tc.name, "p"), filepath.Join(base, tc.name, "r")
			for _, dir := range []string{pdir, rdir} {
				if err := os.MkdirAll(dir, 0o755); err != nil {
					t.Fatal(err)
				}
				if filepath.Base(dir) == tc.fallback {
					fs.dirs[dir] = dirState{fallback: true} // as if its filesystem refused
				}
			}
			ph, err := fs.Create(filepath.Join(pdir, "000001.sst"), "pebble-compaction")
			if err != nil {
				t.Fatal(err)
			}
			real, err := fs.Create(filepath.Join(rdir, "000001.sst"), "pebble-compaction")
			if err != nil {
				t.Fatal(err)
			}
			if err := unix.Dup3(int(real.Fd()), int(ph.Fd()), unix.O_CLOEXEC); err != nil {
				t.Fatal(err)
			}
			if err := real.Close(); err != nil {
				t.Fatal(err)
			}
			for _, p := range [][]byte{data[:100], data[100:5000], data[5000:]} {
				if _, err := ph.Write(p); err != nil {
					t.Fatal(err)
				}
				if err := ph.Sync(); err != nil {
					t.Fatal(err)
				}
			}
			if err := ph.Close(); err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(filepath.Join(rdir, "000001.sst"))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, data) {
				t.Fatalf("the file holds %d bytes, want the %d written", len(got), len(data))
			}
		})
	}
}
