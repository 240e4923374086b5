package admin

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stratadb/strata/config"
	"github.com/stratadb/strata/engine"
	"github.com/stratadb/strata/internal/integrity"
)

// checkDB builds a database of several flushed tables and, with blob
// files on (as `strata serve` runs), several blob files: every fourth
// value is 2 KB and goes to a blob file, the others stay in the tables.
// Values are random, so the files are as large as the data.
func checkDB(t *testing.T) string {
	t.Helper()
	cfg := config.Default()
	cfg.DBPath = filepath.Join(t.TempDir(), "db")
	cfg.MemtableSizeMB, cfg.TargetFileSizeBaseMB, cfg.MaxBytesForLevelBaseMB = 1, 1, 1
	cfg.BlockCacheSizeMB = 8
	cfg.EnableBlobFiles, cfg.MinBlobSize = true, 1024
	db, err := engine.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(47, 3))
	for flush := range 4 {
		for i := range 1500 {
			v := make([]byte, 200)
			if i%4 == 0 {
				v = make([]byte, 2048)
			}
			for j := range v {
				v[j] = byte(r.Uint32())
			}
			if err := db.Put(fmt.Appendf(nil, "key/%d/%06d", flush, i), v); err != nil {
				t.Fatal(err)
			}
		}
		if err := db.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	return cfg.DBPath
}

// checkTables lists the database's tables as the MANIFEST has them.
func checkTables(t *testing.T, dir string) []engine.TableInfo {
	t.Helper()
	cfg, _, err := config.RecordedConfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	db, err := engine.Open(cfg, engine.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := db.Close(); err != nil {
			t.Error(err)
		}
	}()
	tables, err := db.Tables()
	if err != nil {
		t.Fatal(err)
	}
	return tables
}

// filesWithExt lists dir's files ending in ext, sorted.
func filesWithExt(t *testing.T, dir, ext string) []string {
	t.Helper()
	matches, err := filepath.Glob(filepath.Join(dir, "*"+ext))
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(matches)
	return matches
}

// flip64 inverts 64 bytes in the middle of the file at path.
func flip64(t *testing.T, path string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	mid := len(data) / 2
	for i := mid; i < mid+64; i++ {
		data[i] ^= 0xff
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// fileSums returns, for every file and directory under dir, its mode, size,
// modification time and the SHA-256 of its contents: two sums taken around
// a command are equal exactly when it changed nothing on disk.
func fileSums(t *testing.T, dir string) map[string]string {
	t.Helper()
	sums := make(map[string]string)
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		sum := ""
		if info.Mode().IsRegular() {
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			h := sha256.Sum256(data)
			sum = hex.EncodeToString(h[:])
		}
		sums[path] = fmt.Sprintf("%v %d %s %s", info.Mode(), info.Size(), info.ModTime().Format("15:04:05.000000000"), sum)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return sums
}

// assertUnchanged fails the test if the files under dir differ from before.
func assertUnchanged(t *testing.T, dir string, before map[string]string) {
	t.Helper()
	after := fileSums(t, dir)
	for path, b := range before {
		if a, ok := after[path]; !ok {
			t.Errorf("check removed %s", path)
		} else if a != b {
			t.Errorf("check changed %s:\nbefore %s\nafter  %s", path, b, a)
		}
	}
	for path := range after {
		if _, ok := before[path]; !ok {
			t.Errorf("check created %s", path)
		}
	}
}

// checkJSON is the JSON output of check.
type checkJSON struct {
	DBPath    string `json:"db_path"`
	Tables    int    `json:"tables"`
	BlobFiles int    `json:"blob_files"`
	OK        bool   `json:"ok"`
	Damaged   []struct {
		File     string  `json:"file"`
		Kind     string  `json:"kind"`
		Level    *int    `json:"level"`
		Smallest *string `json:"smallest"`
		Error    string  `json:"error"`
	} `json:"damaged"`
}

func runCheckJSON(t *testing.T, dir string) (checkJSON, error) {
	t.Helper()
	out, stderr, err := run(t, "--db", dir, "check", "--format", "json")
	var got checkJSON
	if jerr := json.Unmarshal([]byte(out), &got); jerr != nil {
		t.Fatalf("check --format json: %v in %q (stderr %q)", jerr, out, stderr)
	}
	return got, err
}

// TestCheckCleanDatabase: a sound database passes, with every table and
// blob file counted, exit status zero, and not a byte of it changed.
func TestCheckCleanDatabase(t *testing.T) {
	dir := checkDB(t)
	tables, blobs := filesWithExt(t, dir, ".sst"), filesWithExt(t, dir, ".blob")
	if len(tables) < 2 || len(blobs) < 2 {
		t.Fatalf("the set-up made %d tables and %d blob files; the test needs several of each", len(tables), len(blobs))
	}
	before := fileSums(t, dir)

	out := mustRun(t, "--db", dir, "check")
	want := fmt.Sprintf("checked %d tables and %d blob files", len(tables), len(blobs))
	if !strings.HasPrefix(out, want) || !strings.HasSuffix(out, "no damage found\n") || strings.Count(out, "\n") != 1 {
		t.Errorf("check printed %q, want one line %q ... no damage found", out, want)
	}
	got, err := runCheckJSON(t, dir)
	if err != nil || !got.OK || len(got.Damaged) != 0 || got.Tables != len(tables) || got.BlobFiles != len(blobs) || got.DBPath != dir {
		t.Errorf("check --format json = %+v, %v", got, err)
	}
	assertUnchanged(t, dir, before)
}

// TestCheckDamagedTable: 64 bytes flipped in the middle of one table make
// check name that table, its level and key range and the checksum error,
// and only it, and fail; the directory is left as it was.
func TestCheckDamagedTable(t *testing.T) {
	dir := checkDB(t)
	tables := checkTables(t, dir)
	if len(tables) < 2 {
		t.Fatalf("the set-up made %d tables; the test needs several", len(tables))
	}
	victim := tables[len(tables)/2]
	path := filepath.Join(dir, fmt.Sprintf("%06d.sst", victim.FileNum))
	flip64(t, path)
	before := fileSums(t, dir)

	out, _, err := run(t, "--db", dir, "check")
	if !errors.Is(err, integrity.ErrDamaged) {
		t.Fatalf("check of a damaged table: error %v, want integrity.ErrDamaged", err)
	}
	if !strings.Contains(err.Error(), path) {
		t.Errorf("the error %q does not name %s", err, path)
	}
	row := lineWith(out, path)
	for _, want := range []string{"table", fmt.Sprintf("L%d", victim.Level), string(victim.Smallest), "checksum"} {
		if !strings.Contains(row, want) {
			t.Errorf("the row of %s lacks %q:\n%s", path, want, out)
		}
	}
	if !strings.Contains(out, "1 damaged") {
		t.Errorf("no summary line with \"1 damaged\":\n%s", out)
	}
	for _, other := range filesWithExt(t, dir, ".sst") {
		if other != path && strings.Contains(out, other) {
			t.Errorf("check names the sound table %s:\n%s", other, out)
		}
	}

	got, err := runCheckJSON(t, dir)
	if !errors.Is(err, integrity.ErrDamaged) || got.OK || len(got.Damaged) != 1 {
		t.Fatalf("check --format json = %+v, %v", got, err)
	}
	d := got.Damaged[0]
	if d.File != path || d.Kind != "table" || d.Level == nil || *d.Level != victim.Level ||
		d.Smallest == nil || *d.Smallest != string(victim.Smallest) || !strings.Contains(d.Error, "checksum") {
		t.Errorf("check --format json damaged[0] = %+v, want %s at L%d from %q", d, path, victim.Level, victim.Smallest)
	}
	assertUnchanged(t, dir, before)
}

// TestCheckDamagedBlobFile: 64 bytes flipped in the middle of one blob file
// make check name that file and fail.
func TestCheckDamagedBlobFile(t *testing.T) {
	dir := checkDB(t)
	blobs := filesWithExt(t, dir, ".blob")
	if len(blobs) < 2 {
		t.Fatalf("the set-up made %d blob files; the test needs several", len(blobs))
	}
	path := blobs[len(blobs)/2]
	flip64(t, path)
	before := fileSums(t, dir)

	out, _, err := run(t, "--db", dir, "check")
	if !errors.Is(err, integrity.ErrDamaged) {
		t.Fatalf("check of a damaged blob file: error %v, want integrity.ErrDamaged", err)
	}
	row := lineWith(out, path)
	if !strings.Contains(row, "blob file") || !strings.Contains(row, "checksum") || !strings.Contains(out, "1 damaged") {
		t.Errorf("check does not report %s as a damaged blob file:\n%s", path, out)
	}
	got, err := runCheckJSON(t, dir)
	if !errors.Is(err, integrity.ErrDamaged) || len(got.Damaged) != 1 || got.Damaged[0].File != path || got.Damaged[0].Kind != "blob file" {
		t.Errorf("check --format json = %+v, %v", got, err)
	}
	assertUnchanged(t, dir, before)
}

// TestCheckMissingTable: a table the MANIFEST lists but the directory lost
// is named, and fails the check.
func TestCheckMissingTable(t *testing.T) {
	dir := checkDB(t)
	tables := checkTables(t, dir)
	victim := tables[0]
	path := filepath.Join(dir, fmt.Sprintf("%06d.sst", victim.FileNum))
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	// Pebble refuses to open a database that lost a file, and names it.
	out, _, err := run(t, "--db", dir, "check")
	name := fmt.Sprintf("%06d", victim.FileNum)
	if row := lineWith(out, name); !errors.Is(err, integrity.ErrDamaged) || !strings.Contains(row, "database") || !strings.Contains(row, "does not exist") {
		t.Errorf("check of a database missing %s: %v\n%s", path, err, out)
	}
}

// TestCheckNoDatabase: a --db that does not exist, or holds no database,
// is an error naming --db, and creates nothing.
func TestCheckNoDatabase(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "nowhere")
	empty := t.TempDir()
	before := fileSums(t, empty)
	for _, dir := range []string{missing, empty} {
		out, _, err := run(t, "--db", dir, "check")
		if !errors.Is(err, integrity.ErrNoDatabase) || !strings.Contains(err.Error(), "--db "+dir) {
			t.Errorf("check --db %s: error %v, want integrity.ErrNoDatabase naming --db", dir, err)
		}
		if out != "" {
			t.Errorf("check --db %s printed %q", dir, out)
		}
	}
	if _, err := os.Stat(missing); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("check created %s: %v", missing, err)
	}
	assertUnchanged(t, empty, before)

	if _, _, err := run(t, "--db", empty, "check", "--format", "csv"); err == nil || !strings.Contains(err.Error(), "--format csv") {
		t.Errorf("check --format csv: %v, want an error naming --format", err)
	}
}

// lineWith returns the first line of out containing s, or "".
func lineWith(out, s string) string {
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, s) {
			return l
		}
	}
	return ""
}
