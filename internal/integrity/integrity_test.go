package integrity

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/sstable/block"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stratadb/strata/config"
	"github.com/stratadb/strata/engine"
	"github.com/stratadb/strata/internal/pebbleconf"
)

// TestBlobIndexMatchesLayout holds checkBlob's reading of a blob file's
// index block (Pebble does not export its decoder) to Pebble's own: the
// value blocks it finds are those blob.FileReader.Layout prints, so a
// Pebble upgrade that changes the format fails here, not in the field.
func TestBlobIndexMatchesLayout(t *testing.T) {
	cfg := config.Default()
	cfg.DBPath = t.TempDir()
	cfg.MemtableSizeMB, cfg.BlockCacheSizeMB = 1, 8
	cfg.EnableBlobFiles, cfg.MinBlobSize = true, 64
	db, err := engine.Open(cfg, engine.Options{FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	fs, _ := db.Dir()
	for i := range 3000 {
		v := fmt.Appendf(nil, "%d %s", i, strings.Repeat("value ", 20+i%50))
		if err := db.Put(fmt.Appendf(nil, "k%05d", i), v); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	res, err := cfg.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	popts := pebbleconf.Options(res)
	popts.Cache.Unref()
	ro := popts.MakeReaderOptions()

	names, err := fs.List(cfg.DBPath)
	if err != nil {
		t.Fatal(err)
	}
	line := regexp.MustCompile(`(?m)^block (\d+): offset=(\d+) length=(\d+)$`)
	checked := 0
	for _, n := range names {
		if kind, num, ok := parseName(n); !ok || kind != KindBlob {
			continue
		} else {
			ro = readerOptions(ro, num)
		}
		path := filepath.Join(cfg.DBPath, n)
		handles, r, err := blobBlocks(fs, path, ro)
		if err != nil {
			t.Fatalf("%s: %v", n, err)
		}
		layout, err := r.Layout()
		if cerr := r.Close(); cerr != nil {
			t.Fatal(cerr)
		}
		if err != nil {
			t.Fatalf("%s: Layout: %v", n, err)
		}
		var want []block.Handle
		for _, m := range line.FindAllStringSubmatch(layout, -1) {
			var h block.Handle
			if _, err := fmt.Sscan(m[2]+" "+m[3], &h.Offset, &h.Length); err != nil {
				t.Fatal(err)
			}
			want = append(want, h)
		}
		if len(want) < 2 {
			t.Fatalf("%s: Layout lists %d blocks; the test needs several:\n%.500s", n, len(want), layout)
		}
		if fmt.Sprint(handles) != fmt.Sprint(want) {
			t.Errorf("%s: blobBlocks = %v, Layout lists %v", n, handles, want)
		}
		if err := checkBlob(fs, path, ro); err != nil {
			t.Errorf("%s: checkBlob of a sound file: %v", n, err)
		}
		checked++
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if checked == 0 {
		t.Fatal("the set-up wrote no blob file")
	}
}
