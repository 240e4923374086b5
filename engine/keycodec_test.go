package engine

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/objstorage"
	"github.com/cockroachdb/pebble/v2/sstable"
	"github.com/cockroachdb/pebble/v2/sstable/blob"
	"github.com/cockroachdb/pebble/v2/sstable/block"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stratadb/strata/internal/pebbleconf"
)

// TestKeyCompressionSplitsTheLevels writes values into blob files with
// zstd on every level and key_compression = "lz4", compacts everything
// into L6, and reads the files back with stock Pebble: every data block of
// the L6 tables is MinLZ, and the blob files' value blocks (written at the
// flush, which a compaction does not rewrite) are zstd. Without
// key_compression the same tables' data blocks are zstd. Tables that hold
// their values (a snapshot restore's, through ReplaceSpan) are zstd either
// way, and a full compaction does not take them for mismatched.
func TestKeyCompressionSplitsTheLevels(t *testing.T) {
	for _, tc := range []struct {
		keys string
		want block.CompressionIndicator
	}{{"lz4", block.MinLZCompressionIndicator}, {"", block.ZstdCompressionIndicator}} {
		cfg := testConfig(t)
		cfg.EnableBlobFiles = true
		cfg.MinBlobSize = 512
		cfg.CompressionDefault = "zstd"
		cfg.KeyCompression = tc.keys
		db := mustOpen(t, cfg)
		for i := range 3000 {
			// Keys and small values repeat enough for either codec to
			// keep the blocks compressed.
			if err := db.Put(key(i), doc(i, 2000)); err != nil {
				t.Fatal(err)
			}
			if err := db.Put(append(key(i), 's'), doc(i, 100)); err != nil {
				t.Fatal(err)
			}
		}
		if err := db.CompactAll(); err != nil {
			t.Fatal(err)
		}
		// A snapshot restore's tables hold their values: the level's codec
		// on every block, and a full compaction leaves them be.
		err := db.ReplaceSpan([]byte("replaced/"), []byte("replaced0"), func(put func(k, v []byte) error) error {
			for i := range 500 {
				if err := put(append([]byte("replaced/"), key(i)...), doc(i, 2000)); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		restored := replacedTables(t, db)
		if err := db.CompactAll(); err != nil {
			t.Fatal(err)
		}
		if again := replacedTables(t, db); !slices.Equal(again, restored) || len(restored) == 0 {
			t.Fatalf("key_compression %q: the restored tables %v became %v in a full compaction, want them kept", tc.keys, restored, again)
		}
		for _, num := range restored {
			for i, got := range tableDataCodecs(t, filepath.Join(cfg.DBPath, num+".sst")) {
				if got != block.ZstdCompressionIndicator {
					t.Fatalf("key_compression %q: restored table %s data block %d is %s, want the level's zstd (it holds values)", tc.keys, num, i, got)
				}
			}
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}

		r, err := cfg.Resolve()
		if err != nil {
			t.Fatal(err)
		}
		opts := pebbleconf.Options(r)
		opts.ReadOnly = true
		pdb, err := pebble.Open(cfg.DBPath, opts)
		var levels [][]pebble.SSTableInfo
		opts.Cache.Unref()
		if err != nil {
			t.Fatal(err)
		}
		levels, err = pdb.SSTables()
		if cerr := pdb.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			t.Fatal(err)
		}
		if len(levels[6]) == 0 {
			t.Fatalf("key_compression %q: no table in L6 after CompactAll", tc.keys)
		}
		for _, tab := range levels[6] {
			if bytes.HasPrefix(tab.Smallest.UserKey, []byte("replaced/")) {
				continue
			}
			path := filepath.Join(cfg.DBPath, tab.BackingSSTNum.String()+".sst")
			for i, got := range tableDataCodecs(t, path) {
				if got != tc.want {
					t.Fatalf("key_compression %q: L6 table %s data block %d is %s, want %s", tc.keys, path, i, got, tc.want)
				}
			}
		}
		blobs, err := filepath.Glob(filepath.Join(cfg.DBPath, "*.blob"))
		if err != nil || len(blobs) == 0 {
			t.Fatalf("key_compression %q: no blob file (%v)", tc.keys, err)
		}
		for _, path := range blobs {
			if got := blobFirstBlockCodec(t, path); got != block.ZstdCompressionIndicator {
				t.Errorf("key_compression %q: blob file %s holds %s values, want the levels' zstd", tc.keys, path, got)
			}
		}
	}
}

// replacedTables returns the file numbers of db's tables that hold the
// span the test replaces.
func replacedTables(t *testing.T, db *DB) []string {
	t.Helper()
	levels, err := db.pdb.SSTables()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, tables := range levels {
		for _, tab := range tables {
			if bytes.HasPrefix(tab.Smallest.UserKey, []byte("replaced/")) {
				out = append(out, tab.BackingSSTNum.String())
			}
		}
	}
	return out
}

// tableDataCodecs returns the codec of each data block of the table at
// path, from the block trailers that stock Pebble's layout locates.
func tableDataCodecs(t *testing.T, path string) []block.CompressionIndicator {
	t.Helper()
	r, err := sstable.NewReader(context.Background(), openReadable(t, path), sstable.ReaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	layout, err := r.Layout()
	if err != nil {
		t.Fatal(err)
	}
	ends := make([]uint64, len(layout.Data))
	for i, h := range layout.Data {
		ends[i] = h.Offset + h.Length
	}
	return trailerCodecs(t, path, ends...)
}

// blobFirstBlockCodec returns the codec of the first value block of the
// blob file at path, located by stock Pebble's layout of the file.
func blobFirstBlockCodec(t *testing.T, path string) block.CompressionIndicator {
	t.Helper()
	r, err := blob.NewFileReader(context.Background(), openReadable(t, path), blob.FileReaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	layout, err := r.Layout()
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`block 0: offset=(\d+) length=(\d+)`).FindStringSubmatch(layout)
	if m == nil {
		t.Fatalf("blob file %s: no first block in its layout:\n%s", path, layout)
	}
	off, _ := strconv.ParseUint(m[1], 10, 64)
	n, _ := strconv.ParseUint(m[2], 10, 64)
	return trailerCodecs(t, path, off+n)[0]
}

// openReadable opens the file at path for Pebble's readers, which close it.
func openReadable(t *testing.T, path string) objstorage.Readable {
	t.Helper()
	f, err := vfs.Default.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	readable, err := sstable.NewSimpleReadable(f)
	if err != nil {
		t.Fatal(err)
	}
	return readable
}

// trailerCodecs returns the codecs named by the block trailers at offsets
// of the file at path (a trailer's first byte follows its block), reading
// the file once.
func trailerCodecs(t *testing.T, path string, offsets ...uint64) []block.CompressionIndicator {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]block.CompressionIndicator, len(offsets))
	for i, off := range offsets {
		out[i] = block.CompressionIndicator(raw[off])
	}
	return out
}
