package tune

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stratadb/strata/config"
	"github.com/stratadb/strata/engine"
)

func TestImportRoundTrip(t *testing.T) {
	cfg := config.Default()
	cfg.DBPath = "/var/lib/strata"
	cfg.WALDir = "/nvme/wal"
	cfg.CompressionDefault = "snappy"
	cfg.CompressionBottommost = "zstd:6"
	cfg.BlockSize = 16384
	cfg.BloomBitsPerKey = 16
	cfg.MemtableSizeMB = 512
	cfg.MaxBackgroundJobs = 6
	cfg.Sync = true
	// What `tune options --config` prints, imported by `tune import`:
	out, err := ImportOptions(strings.NewReader(cfg.RocksDBOptions()), "OPTIONS-rocksdb")
	if err != nil {
		t.Fatal(err)
	}
	got, err := config.Parse(out, config.FormatTOML)
	if err != nil {
		t.Fatalf("the imported TOML does not load: %v\n%s", err, out)
	}
	want, _ := cfg.Marshal(config.FormatTOML)
	have, _ := got.Marshal(config.FormatTOML)
	if !bytes.Equal(have, want) {
		t.Errorf("round trip changed the config:\n%s\nwant\n%s", have, want)
	}
	if !strings.HasPrefix(string(out), "# Strata config imported from the RocksDB OPTIONS file OPTIONS-rocksdb.\n# Every setting was taken over.\n") {
		t.Errorf("header:\n%s", out)
	}
}

func TestImportUnmapped(t *testing.T) {
	rocks := `[Version]
  rocksdb_version=8.11.0
  options_file_version=1.1
[DBOptions]
  max_open_files=5000
  max_subcompactions=2
  max_background_jobs=4
[CFOptions "default"]
  compression=kZSTD
  compaction_pri=kMinOverlappingRatio
[CFOptions "logs"]
  compression=kNoCompression
`
	out, err := ImportOptions(strings.NewReader(rocks), "OPTIONS-000042")
	if err != nil {
		t.Fatal(err)
	}
	text := string(out)
	for _, want := range []string{
		"# 3 setting(s) not taken over",
		"#   [DBOptions] max_subcompactions=2: ",
		"max_open_files = 5000",
		"#   [CFOptions \"default\"] compaction_pri=kMinOverlappingRatio: ",
		"#   [CFOptions \"logs\"]: only the default column family",
		"max_background_jobs = 4",
		`compression_default = "zstd"`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q:\n%s", want, text)
		}
	}
	if _, err := config.Parse(out, config.FormatTOML); err != nil {
		t.Errorf("output does not load: %v", err)
	}
	if _, err := ImportOptions(strings.NewReader(" \n"), "empty"); err == nil || !strings.Contains(err.Error(), "empty") {
		t.Errorf("empty file: %v", err)
	}
	if _, err := ImportOptions(strings.NewReader("[DBOptions]\nnot a statement\n"), "bad"); err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Errorf("malformed file: %v", err)
	}
}

func TestReadDBOptions(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "db")
	cfg := config.Default()
	cfg.DBPath = dir
	cfg.CompressionBottommost = "zstd:9"
	db, err := engine.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	files, err := ReadDBOptions(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 2 || files[0].Pebble || !files[1].Pebble || filepath.Base(files[0].Path) != config.RocksDBOptionsFileName ||
		!strings.HasPrefix(filepath.Base(files[1].Path), "OPTIONS-0") {
		t.Fatalf("files %+v", files)
	}
	if files[0].Text != cfg.RocksDBOptions() {
		t.Error("Strata's file differs from cfg.RocksDBOptions()")
	}
	var b bytes.Buffer
	if err := WriteDBOptions(&b, files); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(b.String(), "# ==> "); n != 2 || !strings.Contains(b.String(), "[Level \"6\"]") {
		t.Errorf("%d headers:\n%s", n, b.String())
	}

	// The config recorded in the directory is the one it was opened with.
	got, found, err := DBConfig(dir)
	if err != nil || !found || got.CompressionBottommost != "zstd:9" || got.DBPath != dir {
		t.Errorf("DBConfig: %+v %v %v", got, found, err)
	}

	empty := t.TempDir()
	if _, err := ReadDBOptions(empty); !errors.Is(err, ErrNotDatabase) {
		t.Errorf("empty directory: %v", err)
	}
	if _, err := ReadDBOptions(filepath.Join(empty, "missing")); err == nil || errors.Is(err, ErrNotDatabase) {
		t.Errorf("missing directory: %v", err)
	}
	// Only a Pebble OPTIONS file: still a database, and the output says
	// Strata's file is missing.
	if err := os.WriteFile(filepath.Join(empty, "OPTIONS-000007"), []byte("[Version]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	files, err = ReadDBOptions(empty)
	if err != nil || len(files) != 1 {
		t.Fatalf("%v %v", files, err)
	}
	b.Reset()
	_ = WriteDBOptions(&b, files)
	if !strings.Contains(b.String(), "no OPTIONS-rocksdb") {
		t.Errorf("%s", b.String())
	}
}
