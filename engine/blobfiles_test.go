package engine

import (
	"bytes"
	"strings"
	"testing"
)

// TestBlobFilesSeparateLargeValues writes values on both sides of
// min_blob_size and checks, from Pebble's own accounting of its blob
// files, that exactly the large ones left the tables; that every value
// reads back, after a reopen too; and that deleting the large values and
// compacting leaves no value referenced (a blob file stays only while a
// key refers to it).
func TestBlobFilesSeparateLargeValues(t *testing.T) {
	const n, large, small = 300, 4000, 200
	cfg := testConfig(t)
	cfg.EnableBlobFiles = true
	cfg.MinBlobSize = 1024
	db := mustOpen(t, cfg)
	want := map[string][]byte{}
	for i := range n {
		for _, size := range []int{large, small} {
			k := append(key(i), byte('a'+size%7))
			v := doc(i*7+size, size)
			if err := db.Put(k, v); err != nil {
				t.Fatal(err)
			}
			want[string(k)] = v
		}
	}
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	m, err := db.Metrics()
	if err != nil {
		t.Fatal(err)
	}
	var largeBytes uint64
	for _, v := range want {
		if len(v) >= int(cfg.MinBlobSize) {
			largeBytes += uint64(len(v))
		}
	}
	if bf := m.BlobFiles; bf.Files == 0 || bf.ValueBytes != largeBytes || bf.ReferencedValueBytes != largeBytes {
		t.Fatalf("blob files after the flush: %+v; want every value of %d bytes and more (%d bytes) and nothing else", bf, cfg.MinBlobSize, largeBytes)
	}
	// A table's raw value bytes count its values in blob files whole,
	// though its blocks hold only references: it was written with its
	// level's options, and neither Stats nor CompactAll says otherwise.
	for l, lm := range m.Levels {
		if lm.Mismatched != 0 {
			t.Errorf("L%d after the flush: %d of %d tables said not written with the level's options; want none", l, lm.Mismatched, lm.Tables)
		}
	}
	stats, err := db.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stats, "Blob files (values of 1024 bytes and more)") {
		t.Errorf("Stats has no blob file line:\n%s", stats)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	db = mustOpen(t, cfg)
	defer db.Close()
	if m, err = db.Metrics(); err != nil {
		t.Fatal(err)
	}
	if m.DiskUsageBytes < m.BlobFiles.Bytes || m.BlobFiles.Bytes == 0 {
		t.Errorf("after a reopen: disk usage %d bytes with %d bytes of blob files; want the blob files counted", m.DiskUsageBytes, m.BlobFiles.Bytes)
	}
	for k, v := range want {
		got, err := db.Get([]byte(k))
		if err != nil || !bytes.Equal(got, v) {
			t.Fatalf("Get(%q) after reopen = %d bytes, %v; want %d bytes", k, len(got), err, len(v))
		}
	}
	// A full compaction leaves every table with its level's options and
	// the values in blob files: no table is rewritten chunk by chunk (which
	// would take the values back inline).
	if err := db.CompactAll(); err != nil {
		t.Fatal(err)
	}
	if m, err = db.Metrics(); err != nil {
		t.Fatal(err)
	}
	for l, lm := range m.Levels {
		if lm.Mismatched != 0 {
			t.Errorf("L%d after CompactAll: %d of %d tables said not written with the level's options; want none", l, lm.Mismatched, lm.Tables)
		}
	}
	if rw := m.Rewrites; rw.Chunks != 0 || m.BlobFiles.ReferencedValueBytes != largeBytes {
		t.Errorf("CompactAll rewrote %d chunks (%+v), %d bytes of values referenced in blob files; want none rewritten and all %d referenced", rw.Chunks, rw, m.BlobFiles.ReferencedValueBytes, largeBytes)
	}
	for k, v := range want {
		if len(v) >= int(cfg.MinBlobSize) {
			if err := db.Delete([]byte(k)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := db.CompactAll(); err != nil {
		t.Fatal(err)
	}
	if m, err = db.Metrics(); err != nil {
		t.Fatal(err)
	}
	if bf := m.BlobFiles; bf.ReferencedValueBytes != 0 {
		t.Errorf("blob files after deleting every large value and compacting: %+v; want no value referenced", bf)
	}
}

// TestBlobFilesOffByDefault: the embedded engine keeps RocksDB's default
// (enable_blob_files = false), every value in the tables.
func TestBlobFilesOffByDefault(t *testing.T) {
	db := mustOpen(t, testConfig(t))
	defer db.Close()
	for i := range 50 {
		if err := db.Put(key(i), doc(i, 8000)); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	m, err := db.Metrics()
	if err != nil {
		t.Fatal(err)
	}
	if m.BlobFiles.Files != 0 {
		t.Errorf("blob files with enable_blob_files = false: %+v", m.BlobFiles)
	}
}
