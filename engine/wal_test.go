package engine

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func walFiles(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".log") {
			out = append(out, e.Name())
		}
	}
	return out
}

func TestWALPlacement(t *testing.T) {
	cfg := testConfig(t)
	cfg.WALDir = filepath.Join(t.TempDir(), "nested", "wal") // created if missing
	cfg.Sync = true
	db := mustOpen(t, cfg)
	for i := range 100 {
		_ = db.Put(key(i), doc(i, 100))
	}
	m, _ := db.Metrics()
	_ = db.Close()
	if got := walFiles(t, cfg.WALDir); len(got) == 0 {
		t.Error("no WAL file in wal_dir")
	}
	if got := walFiles(t, cfg.DBPath); len(got) != 0 {
		t.Errorf("WAL files in db_path: %v", got)
	}
	if m.WAL.FS.Syncs < 100 {
		t.Errorf("sync = true: %d WAL syncs for 100 writes", m.WAL.FS.Syncs)
	}
	if m.WAL.FS.BytesWritten < 100*100 {
		t.Errorf("WAL bytes written %d", m.WAL.FS.BytesWritten)
	}
}

func TestWALDisabled(t *testing.T) {
	cfg := testConfig(t)
	cfg.EnableWAL = false
	db := mustOpen(t, cfg)
	for i := range 100 {
		_ = db.Put(key(i), doc(i, 100))
	}
	_ = db.Flush()
	m, _ := db.Metrics()
	_ = db.Close()
	if got := walFiles(t, cfg.DBPath); len(got) != 0 {
		t.Errorf("enable_wal = false left WAL files: %v", got)
	}
	if m.WAL.FS.BytesWritten != 0 || m.WAL.Enabled {
		t.Errorf("WAL metrics with the WAL off: %+v", m.WAL)
	}
	db = mustOpen(t, cfg)
	defer db.Close()
	if _, err := db.Get(key(5)); err != nil {
		t.Errorf("flushed data lost: %v", err)
	}
}

func TestWALSyncOffDoesNotSyncEachWrite(t *testing.T) {
	cfg := testConfig(t)
	db := mustOpen(t, cfg)
	defer db.Close()
	for i := range 200 {
		_ = db.Put(key(i), doc(i, 100))
	}
	m, _ := db.Metrics()
	if m.WAL.FS.Syncs >= 200 {
		t.Errorf("sync = false still synced %d times for 200 writes", m.WAL.FS.Syncs)
	}
}
