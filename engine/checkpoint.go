package engine

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stratadb/strata/internal/fsutil"
)

// Checkpoint writes a consistent, openable copy of the database into dir,
// which must not exist. Table files are hard-linked where possible. The
// checkpoint carries the WAL (flushed first), so it holds every write
// acknowledged before the call; open it with db_path = dir and no wal_dir.
func (db *DB) Checkpoint(dir string) (err error) {
	if err := db.enterOp(); err != nil {
		return err
	}
	defer db.leaveOp()
	defer db.recoverFatal(&err)
	if err := db.writable("Checkpoint"); err != nil {
		return err
	}
	if err := db.fs.MkdirAll(filepath.Dir(filepath.Clean(dir)), 0o755); err != nil {
		return fmt.Errorf("engine: checkpoint %q: %w", dir, err)
	}
	if err := db.pdb.Checkpoint(dir, pebble.WithFlushedWAL()); err != nil {
		if errors.Is(err, os.ErrExist) {
			return fmt.Errorf("engine: checkpoint %q: the directory already exists: %w", dir, err)
		}
		return fmt.Errorf("engine: checkpoint %q: %w", dir, err)
	}
	if err := localizeWALDir(db.fs, dir); err != nil {
		return fmt.Errorf("engine: checkpoint %q: %w", dir, err)
	}
	return nil
}

// localizeWALDir comments out wal_dir in the checkpoint's Pebble OPTIONS
// file. Pebble copies the WAL files into the checkpoint directory but keeps
// the source's wal_dir line, and would then refuse to open the checkpoint
// without the source's WAL directory as a recovery directory.
func localizeWALDir(fs vfs.FS, dir string) error {
	names, err := fs.List(dir)
	if err != nil {
		return err
	}
	for _, name := range names {
		if !strings.HasPrefix(name, "OPTIONS-0") {
			continue
		}
		path := fs.PathJoin(dir, name)
		data, err := readAll(fs, path)
		if err != nil {
			return err
		}
		lines := strings.Split(string(data), "\n")
		changed := false
		for i, line := range lines {
			if strings.HasPrefix(strings.TrimSpace(line), "wal_dir=") {
				lines[i] = "  # " + strings.TrimSpace(line) + " (checkpoint: the WAL files are in this directory)"
				changed = true
			}
		}
		if changed {
			if err := fsutil.WriteFileAtomic(fs, dir, name, []byte(strings.Join(lines, "\n"))); err != nil {
				return err
			}
		}
	}
	return nil
}

func readAll(fs vfs.FS, path string) ([]byte, error) {
	f, err := fs.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}
