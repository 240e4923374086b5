package config

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/stratadb/strata/internal/fsutil"
)

// TieringRecordFileName is the file in db_path where the tiered layout
// (package tiering) records the table directories of the last open: lines
// "db_path DIR" and "path DIR", "#" comments.
const TieringRecordFileName = "TIERING-PATHS"

// Opener opens a file for reading; os.Open fits, and so does the Open of
// Pebble's vfs.FS wrapped in a closure.
type Opener func(name string) (io.ReadCloser, error)

// Recorded is what a database recorded about its configuration at its last
// open: the Config in OPTIONS-rocksdb and the table directories in the
// tiering record. It is the one reader of both, used by the engine (WAL
// directories of the previous open, the table directories of a read-only
// open), by `tune doctor` and by the admin tool's --db.
type Recorded struct {
	// Dir is the database directory the record was read from.
	Dir string
	// Config is the configuration of the last open with DBPath = Dir, or
	// nil when Dir holds no OPTIONS-rocksdb (a database never opened by
	// Strata, or a checkpoint).
	Config *Config
	// Unmapped lists what the OPTIONS file held that has no Config field.
	Unmapped []Unmapped
	// TableDirs are the table directories the tiered layout recorded (its
	// db_paths and the directories it was still draining), empty without a
	// record or when the record was written for another db_path.
	TableDirs []string
}

// ReadRecorded reads the record of the database in dir through open (nil:
// os.Open). Missing files are not errors: the fields stay empty. A file
// that cannot be read or parsed is an error naming it.
func ReadRecorded(dir string, open Opener) (*Recorded, error) {
	if open == nil {
		open = func(name string) (io.ReadCloser, error) { return os.Open(name) }
	}
	rec := &Recorded{Dir: dir}
	path := filepath.Join(dir, RocksDBOptionsFileName)
	if f, err := open(path); err == nil {
		cfg, unmapped, err := ImportRocksDBOptions(f)
		_ = f.Close()
		if err != nil {
			return nil, fmt.Errorf("config: %s: %w", path, err)
		}
		cfg.DBPath = dir
		rec.Config, rec.Unmapped = cfg, unmapped
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("config: %s: %w", path, err)
	}
	path = filepath.Join(dir, TieringRecordFileName)
	f, err := open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return rec, nil
	}
	if err != nil {
		return nil, fmt.Errorf("config: %s: %w", path, err)
	}
	data, err := io.ReadAll(f)
	_ = f.Close()
	if err != nil {
		return nil, fmt.Errorf("config: %s: %w", path, err)
	}
	rec.TableDirs = parseTieringRecord(string(data), dir)
	return rec, nil
}

// parseTieringRecord returns the "path" lines of a tiering record, or none
// when its db_path line names another directory than dir (the database was
// copied or moved: those directories belong to the original).
func parseTieringRecord(text, dir string) []string {
	var dirs []string
	for _, line := range strings.Split(text, "\n") {
		key, value, ok := strings.Cut(line, " ")
		switch {
		case !ok || strings.HasPrefix(line, "#"):
		case key == "db_path" && !fsutil.SamePath(value, dir):
			return nil
		case key == "path":
			dirs = append(dirs, value)
		}
	}
	return dirs
}

// RecordedConfig returns the configuration to open the database in dir
// with when nothing else is given: the recorded one, or Default() with
// DBPath = dir when dir holds no OPTIONS-rocksdb. found reports which.
func RecordedConfig(dir string) (cfg *Config, found bool, err error) {
	rec, err := ReadRecorded(dir, nil)
	if err != nil {
		return nil, false, err
	}
	if rec.Config == nil {
		cfg = Default()
		cfg.DBPath = dir
		return cfg, false, nil
	}
	return rec.Config, true, nil
}

// PreviousWALDirs returns the WAL directories of the last open (wal_dir,
// or db_path when it was empty, and wal_failover_dir), so a database whose
// wal_dir changed still recovers its old logs; nil without a record.
func (r *Recorded) PreviousWALDirs() []string {
	if r == nil || r.Config == nil {
		return nil
	}
	dirs := []string{r.Config.WALDir}
	if r.Config.WALFailoverDir != "" {
		dirs = append(dirs, r.Config.WALFailoverDir)
	}
	return dirs
}
