// Package damage damages a database's files the way a bad sector does, for
// tests of what the engine, the store and a cluster member do when they
// meet it.
package damage

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// Bytes is how many bytes LargestFile flips.
const Bytes = 64

// LargestFile flips Bytes bytes in the middle of the largest file named
// *.ext in dir (ext "sst" for tables, "blob" for blob files), keeping its
// length, so the file still opens and only the block there fails its
// checksum; it returns the file's path. The database must be closed.
func LargestFile(t testing.TB, dir, ext string) string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*."+ext))
	if err != nil || len(files) == 0 {
		t.Fatalf("damage: no *.%s file in %s (%v)", ext, dir, err)
	}
	size := func(p string) int64 {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		return fi.Size()
	}
	largest := slices.MaxFunc(files, func(a, b string) int { return int(size(a) - size(b)) })
	data, err := os.ReadFile(largest)
	if err != nil {
		t.Fatal(err)
	}
	for i := len(data) / 2; i < len(data)/2+Bytes && i < len(data); i++ {
		data[i] ^= 0xff
	}
	if err := os.WriteFile(largest, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return largest
}
