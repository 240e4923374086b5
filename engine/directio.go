package engine

import (
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stratadb/strata/directio"
)

// directIO puts the direct I/O layer under the engine's file system when
// use_direct_reads or use_direct_io_for_flush_and_compaction is set, and
// probes db_path: a filesystem that refuses O_DIRECT fails Open with an
// error naming the path and the option, unless direct_io_fallback is set.
// Only table files are affected; the WAL and MANIFEST stay buffered.
func (db *DB) directIO(fs vfs.FS, osFS bool) (vfs.FS, error) {
	cfg := db.cfg
	if !cfg.UseDirectReads && !cfg.UseDirectIOForFlushAndCompaction {
		return fs, nil
	}
	option := "use_direct_reads"
	if !cfg.UseDirectReads {
		option = "use_direct_io_for_flush_and_compaction"
	}
	if !osFS && vfs.Root(fs) != vfs.Default {
		return nil, fmt.Errorf("engine: %s = true: direct I/O needs the operating system's file system, not the one given in engine.Options.FS", option)
	}
	db.dio = directio.NewFS(fs, directio.Options{
		Reads:    cfg.UseDirectReads,
		Writes:   cfg.UseDirectIOForFlushAndCompaction,
		Fallback: cfg.DirectIOFallback,
		Logger:   pebbleLogger{db.logger},
	})
	if err := db.dio.Probe(cfg.DBPath); err != nil {
		if errors.Is(err, directio.ErrUnsupported) {
			return nil, fmt.Errorf("engine: %s = true: %w (set direct_io_fallback = true to use buffered I/O there)", option, err)
		}
		return nil, fmt.Errorf("engine: %s = true: %w", option, err)
	}
	return db.dio, nil
}

// DirectIOMetrics describes direct I/O on table files.
type DirectIOMetrics struct {
	// Reads and Writes report the options in force.
	Reads, Writes bool
	// Stats counts direct reads and writes and lists the directories that
	// fell back to buffered I/O.
	directio.Stats
}

func (db *DB) directIOMetrics() DirectIOMetrics {
	m := DirectIOMetrics{Reads: db.cfg.UseDirectReads, Writes: db.cfg.UseDirectIOForFlushAndCompaction}
	if db.dio != nil {
		m.Stats = db.dio.Stats()
	}
	return m
}
