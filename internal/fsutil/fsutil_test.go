package fsutil

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
)

func TestAbsAndSamePath(t *testing.T) {
	cwd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	if got := Abs("data/./x/"); got != filepath.Join(cwd, "data", "x") {
		t.Errorf("Abs = %q", got)
	}
	if got := Abs("/a//b/../c"); got != "/a/c" {
		t.Errorf("Abs = %q", got)
	}
	if !SamePath("data", filepath.Join(cwd, "data")+"/") || SamePath("data", "data2") {
		t.Error("SamePath")
	}
}

func TestContains(t *testing.T) {
	for _, tc := range []struct {
		dir, path string
		want      bool
	}{
		{"/a/b", "/a/b/c", true},
		{"/a/b", "/a/b/c/d", true},
		{"/a/b", "/a/b", false},  // itself is not inside
		{"/a/b", "/a/bc", false}, // a sibling sharing a prefix
		{"/a/b/c", "/a/b", false},
		{"/", "/a", true},
		{"/", "/", false},
	} {
		if got := Contains(tc.dir, tc.path); got != tc.want {
			t.Errorf("Contains(%q, %q) = %v, want %v", tc.dir, tc.path, got, tc.want)
		}
	}
}

// TestWriteFileAtomicSurvivesCrash writes a file on a crashable in-memory
// file system and keeps only what was synced (a crash at that moment): the
// file must be there, whole. Without the file's fsync its data is lost,
// without the directory's fsync the rename is; each fails this test.
func TestWriteFileAtomicSurvivesCrash(t *testing.T) {
	fs := vfs.NewCrashableMem()
	if err := fs.MkdirAll("/db", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := SyncDir(fs, "/"); err != nil {
		t.Fatal(err)
	}
	for i, data := range []string{"first version\n", "second, longer version\n"} {
		if err := WriteFileAtomic(fs, "/db", "OPTIONS", []byte(data)); err != nil {
			t.Fatal(err)
		}
		crashed := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
		got, err := readFile(crashed, "/db/OPTIONS")
		if err != nil || got != data {
			t.Fatalf("write %d: after a crash the file holds %q, %v; want %q", i, got, err, data)
		}
	}
}

// TestWriteFileAtomicKeepsOldOnError fails the write at each step (create,
// write, sync, rename, directory sync) with errorfs and checks that the
// error is returned and that the old content is still in place: a failed
// write never leaves a half-written file under the final name.
func TestWriteFileAtomicKeepsOldOnError(t *testing.T) {
	for name, op := range map[string]errorfs.OpKind{"create": errorfs.OpCreate, "write": errorfs.OpFileWrite, "sync": errorfs.OpFileSync, "rename": errorfs.OpRename, "open dir": errorfs.OpOpenDir} {
		mem := vfs.NewMem()
		if err := mem.MkdirAll("/db", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := WriteFileAtomic(mem, "/db", "f", []byte("old")); err != nil {
			t.Fatal(err)
		}
		fs := errorfs.Wrap(mem, errorfs.InjectorFunc(func(o errorfs.Op) error {
			if o.Kind == op {
				return errorfs.ErrInjected
			}
			return nil
		}))
		err := WriteFileAtomic(fs, "/db", "f", []byte("new"))
		if !errors.Is(err, errorfs.ErrInjected) {
			t.Errorf("%s fails: WriteFileAtomic returned %v", name, err)
		}
		got, _ := readFile(mem, "/db/f")
		want := "old"
		if op == errorfs.OpOpenDir { // renamed, only its durability unknown
			want = "new"
		}
		if got != want {
			t.Errorf("%s fails: the file holds %q, want %q", name, got, want)
		}
	}
}

func readFile(fs vfs.FS, name string) (string, error) {
	f, err := fs.Open(name)
	if err != nil {
		return "", err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "", err
	}
	b := make([]byte, st.Size())
	if _, err := f.ReadAt(b, 0); err != nil && st.Size() > 0 {
		return "", err
	}
	return string(b), nil
}
