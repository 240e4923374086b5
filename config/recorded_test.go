package config

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestReadRecorded(t *testing.T) {
	dir := t.TempDir()
	rec, err := ReadRecorded(dir, nil)
	if err != nil || rec.Config != nil || rec.TableDirs != nil || rec.PreviousWALDirs() != nil {
		t.Fatalf("empty directory: %+v, %v; want an empty record", rec, err)
	}
	cfg, found, err := RecordedConfig(dir)
	if err != nil || found || cfg.DBPath != dir || cfg.CompressionBottommost != Default().CompressionBottommost {
		t.Fatalf("RecordedConfig of an empty directory = %+v, %v, %v; want the default with db_path = dir", cfg, found, err)
	}

	want := Default()
	want.DBPath = "/somewhere/else" // the record is read with DBPath = dir
	want.WALDir, want.WALFailoverDir = "/wal", "/wal2"
	want.CompressionBottommost = "zstd:9"
	want.DBPaths = []DBPath{{Path: dir, TargetSizeBytes: 1 << 20}, {Path: "/cold", TargetSizeBytes: 1 << 30}}
	write := func(name, text string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(RocksDBOptionsFileName, want.RocksDBOptions())
	write(TieringRecordFileName, "# table directories\ndb_path "+dir+"\npath /cold\npath /old-warm\n")
	rec, err = ReadRecorded(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Config == nil || rec.Config.DBPath != dir || rec.Config.CompressionBottommost != "zstd:9" || len(rec.Config.DBPaths) != 2 {
		t.Errorf("recorded config %+v", rec.Config)
	}
	if got := rec.PreviousWALDirs(); !slices.Equal(got, []string{"/wal", "/wal2"}) {
		t.Errorf("PreviousWALDirs = %v", got)
	}
	if !slices.Equal(rec.TableDirs, []string{"/cold", "/old-warm"}) {
		t.Errorf("TableDirs = %v", rec.TableDirs)
	}

	// A tiering record written for another db_path (a copied database)
	// names the original's directories: ignored.
	write(TieringRecordFileName, "db_path /original\npath /cold\n")
	if rec, err = ReadRecorded(dir, nil); err != nil || rec.TableDirs != nil {
		t.Errorf("record of another db_path: %v, %v; want no directories", rec.TableDirs, err)
	}

	// A damaged OPTIONS file is an error naming it.
	write(RocksDBOptionsFileName, "[CFOptions \"default\"]\n  write_buffer_size=lots\n")
	if _, err := ReadRecorded(dir, nil); err == nil || !strings.Contains(err.Error(), RocksDBOptionsFileName) {
		t.Errorf("damaged OPTIONS file: %v; want an error naming it", err)
	}
}
