package tiering

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// denyFS fails every Create under dir with EACCES (the tests run as root,
// which ignores permission bits).
type denyFS struct {
	vfs.FS
	dir string
}

func (fs denyFS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	if strings.HasPrefix(name, fs.dir+string(filepath.Separator)) {
		return nil, &os.PathError{Op: "open", Path: name, Err: syscall.EACCES}
	}
	return fs.FS.Create(name, c)
}

func TestNewValidation(t *testing.T) {
	root := t.TempDir()
	file := filepath.Join(root, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	dir := func(name string) string { return filepath.Join(root, name) }
	tests := []struct {
		name  string
		base  vfs.FS
		paths []Path
		want  []error
		entry []string // substrings naming the entries
	}{
		{name: "empty list", paths: nil, want: []error{ErrNoPaths}},
		{name: "empty dir", paths: []Path{{dir("a"), 1}, {"", 1}}, want: []error{ErrEmptyDir}, entry: []string{"db_paths[1]"}},
		{name: "zero target", paths: []Path{{dir("a"), 1}, {dir("b"), 0}}, want: []error{ErrTargetRange}, entry: []string{"db_paths[1]"}},
		{name: "listed twice", paths: []Path{{dir("a"), 1}, {dir("a") + "/", 1}}, want: []error{ErrDuplicate}, entry: []string{"db_paths[1]", "db_paths[0]"}},
		{name: "nested inside", paths: []Path{{dir("a"), 1}, {dir("a/b"), 1}}, want: []error{ErrNested}, entry: []string{"db_paths[1]"}},
		{name: "nested around", paths: []Path{{dir("a/b"), 1}, {dir("a"), 1}}, want: []error{ErrNested}, entry: []string{"db_paths[1]", "contains"}},
		{name: "every problem at once", paths: []Path{{dir("a"), 0}, {dir("a"), 1}, {"", 1}}, want: []error{ErrTargetRange, ErrDuplicate, ErrEmptyDir}, entry: []string{"db_paths[0]", "db_paths[1]", "db_paths[2]"}},
		{name: "cannot create", paths: []Path{{dir("a"), 1}, {filepath.Join(file, "sub"), 1}}, want: []error{ErrCannotCreate}, entry: []string{"db_paths[1]"}},
		{name: "not writable", base: denyFS{vfs.Default, dir("ro")}, paths: []Path{{dir("a"), 1}, {dir("ro"), 1}}, want: []error{ErrNotWritable}, entry: []string{"db_paths[1]"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			base := tc.base
			if base == nil {
				base = vfs.Default
			}
			_, err := New(base, dir("a"), tc.paths, Options{})
			if err == nil {
				t.Fatalf("New succeeded")
			}
			for _, w := range tc.want {
				if !errors.Is(err, w) {
					t.Errorf("error %q does not wrap %v", err, w)
				}
			}
			for _, e := range tc.entry {
				if !strings.Contains(err.Error(), e) {
					t.Errorf("error %q does not name %s", err, e)
				}
			}
			var pe *PathError
			if len(tc.entry) > 0 && !errors.As(err, &pe) {
				t.Errorf("error %q is not a *PathError", err)
			}
		})
	}
}

// TestNoSideEffectsOnInvalid checks New creates nothing when the list is
// invalid.
func TestNoSideEffectsOnInvalid(t *testing.T) {
	root := t.TempDir()
	_, err := New(vfs.Default, filepath.Join(root, "a"), []Path{{filepath.Join(root, "a"), 1}, {filepath.Join(root, "b"), 0}}, Options{})
	if err == nil {
		t.Fatal("New succeeded")
	}
	if entries, _ := os.ReadDir(root); len(entries) != 0 {
		t.Errorf("New created %v", entries)
	}
}

// TestRecovery sets up what interrupted moves and creations leave behind
// and checks New keeps exactly one complete copy of each table.
func TestRecovery(t *testing.T) {
	fs := vfs.NewMem()
	paths := []Path{{"/db", 10}, {"/cold", 10}}
	write := func(name string, size int) {
		t.Helper()
		f, err := fs.Create(name, vfs.WriteCategoryUnspecified)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write(make([]byte, size)); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	for _, d := range []string{"/db", "/cold"} {
		if err := fs.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write("/db/000001.sst", 100)             // only copy
	write("/cold/000002.sst"+tempSuffix, 50) // partial copy of a move
	write("/db/000002.sst", 100)             //   ... whose source is intact
	write("/db/000003.sst", 100)             // move interrupted after rename:
	write("/cold/000003.sst", 100)           //   two complete copies
	write("/db/000004.sst", 0)               // creation interrupted: empty placeholder
	write("/cold/000004.sst", 70)            //   ... and the real file
	write("/db/MANIFEST-000005", 10)         // metadata is not touched
	write("/cold/000006.blob", 30)           // blob files are tables too
	l, err := New(fs, "/db", paths, Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"000001.sst": "/db", "000002.sst": "/db", "000003.sst": "/db", "000004.sst": "/cold", "000006.blob": "/cold"}
	where, temps := physicalFiles(t, l)
	if len(temps) != 0 {
		t.Errorf("temps left: %v", temps)
	}
	for name, dir := range want {
		if len(where[name]) != 1 || l.locs[where[name][0]].dir != dir {
			t.Errorf("%s: in %v, want only %s", name, where[name], dir)
		}
	}
	if r := l.Stats().Recovery; r.TempsRemoved != 1 || r.DuplicatesRemoved != 2 {
		t.Errorf("recovery %+v, want 1 temp and 2 duplicates", r)
	}
	names, err := l.FS().List("/db")
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(names, " ")
	if wantList := "000001.sst 000002.sst 000003.sst 000004.sst 000006.blob MANIFEST-000005 " + pathsFile; got != wantList {
		t.Errorf("List(/db) = %s\nwant       %s", got, wantList)
	}
	if _, err := fs.Stat("/db/MANIFEST-000005"); err != nil {
		t.Errorf("metadata removed: %v", err)
	}
}

// TestPathsFile checks a path dropped from db_paths is drained, and that a
// copy of the database (whose TIERING-PATHS names the original's
// directories) leaves the original alone.
func TestPathsFile(t *testing.T) {
	fs := vfs.NewMem()
	put := func(name string) {
		t.Helper()
		if err := fs.MkdirAll(fs.PathDir(name), 0o755); err != nil {
			t.Fatal(err)
		}
		f, err := fs.Create(name, vfs.WriteCategoryUnspecified)
		if err != nil {
			t.Fatal(err)
		}
		f.Write([]byte("table"))
		f.Close()
	}
	put("/a/000001.sst")
	put("/b/000002.sst")
	if _, err := New(fs, "/a", []Path{{"/a", 10}, {"/b", 10}}, Options{}); err != nil {
		t.Fatal(err)
	}
	// Reopen without /b: it is drained.
	l, err := New(fs, "/a", []Path{{"/a", 10}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if loc, ok := l.lookup("000002.sst"); !ok || !l.locs[loc].drain {
		t.Errorf("000002.sst not found in a draining /b")
	}
	// A copy of /a in /c: its TIERING-PATHS names /a and /b, which belong
	// to the original.
	put("/c/000001.sst")
	if err := vfs.Copy(fs, "/a/"+pathsFile, "/c/"+pathsFile); err != nil {
		t.Fatal(err)
	}
	lc, err := New(fs, "/c", []Path{{"/c", 10}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(lc.locs) != 1 {
		t.Errorf("the copy searches %v", lc.locs)
	}
	for _, name := range []string{"/a/000001.sst", "/b/000002.sst"} {
		if _, err := fs.Stat(name); err != nil {
			t.Errorf("opening the copy touched the original: %v", err)
		}
	}
}

// TestInspectChangesNothing: Inspect, on a closed tiered database with a
// temporary copy left by an interrupted move, reports the same per-path
// files and bytes as the layout did before closing, and leaves the
// temporary copy where it is (New would remove it).
func TestInspectChangesNothing(t *testing.T) {
	root := t.TempDir()
	paths := []Path{{"p0", 1 << 20}, {"p1", 2 << 20}, {"p2", 1 << 30}}
	d := openTestDB(t, root, paths, Options{})
	d.write(0, 4000, 9)
	d.settle()
	levels, err := d.db.SSTables()
	if err != nil {
		t.Fatal(err)
	}
	want := d.layout.Stats()
	d.close()
	tmp := filepath.Join(root, "p1", "000999.sst"+tempSuffix)
	if err := os.WriteFile(tmp, []byte("partial"), 0o644); err != nil {
		t.Fatal(err)
	}

	abs := make([]Path, len(paths))
	for i, p := range paths {
		abs[i] = Path{Dir: filepath.Join(root, p.Dir), TargetSize: p.TargetSize}
	}
	got, err := Inspect(vfs.Default, filepath.Join(root, "p0"), abs, testShape(), levels)
	if err != nil {
		t.Fatal(err)
	}
	if !got.Inspected || got.MovedFiles != 0 {
		t.Errorf("Inspected %v, MovedFiles %d: want true, 0", got.Inspected, got.MovedFiles)
	}
	if len(got.Paths) != len(want.Paths) {
		t.Fatalf("%d paths, want %d", len(got.Paths), len(want.Paths))
	}
	for i := range want.Paths {
		g, w := got.Paths[i], want.Paths[i]
		if g.Dir != w.Dir || g.Files != w.Files || g.Bytes != w.Bytes || g.TargetSize != w.TargetSize {
			t.Errorf("path %d: Inspect %s %d files %d bytes target %d; the layout %s %d files %d bytes target %d",
				i, g.Dir, g.Files, g.Bytes, g.TargetSize, w.Dir, w.Files, w.Bytes, w.TargetSize)
		}
	}
	if got.Plan.String() != Compute(levelSizes(levels), testShape(), []uint64{1 << 20, 2 << 20, 1 << 30}).String() {
		t.Errorf("plan %s, want the plan as the LSM is", got.Plan)
	}
	if _, err := os.Stat(tmp); err != nil {
		t.Errorf("Inspect touched the temporary copy: %v", err)
	}
}
