package engine

import (
	"context"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stratadb/strata/internal/fsutil"
	"github.com/stratadb/strata/tiering"
)

// tiered puts the tiered layout (package tiering) over fs when db_paths is
// set: table files are created in the path their level belongs to, a
// background mover relocates tables whose level changed, and metadata stays
// in db_path. Each db_paths directory is created and, under direct I/O,
// probed first.
func (db *DB) tiered(fs vfs.FS, popts *pebble.Options) (vfs.FS, error) {
	cfg := db.cfg
	if len(cfg.DBPaths) == 0 {
		return fs, nil
	}
	layout, err := tiering.New(fs, cfg.DBPath, db.tieringPaths(), tiering.Options{
		Shape:    tiering.ShapeOf(popts),
		Logger:   pebbleLogger{db.logger},
		MoveRate: cfg.TieringMoveRateMB << 20,
	})
	if err != nil {
		return nil, fmt.Errorf("engine: %w", err)
	}
	// A rewrite interrupted by a crash may have left its table in any path
	// (rewriteTablePath); Open cleans db_path itself.
	for _, p := range cfg.DBPaths {
		if fsutil.SamePath(p.Path, cfg.DBPath) {
			continue
		}
		if err := removeLeftovers(fs, p.Path); err != nil {
			_ = layout.Close()
			return nil, err
		}
	}
	if db.dio != nil {
		for i, p := range cfg.DBPaths {
			if err := db.dio.Probe(p.Path); err != nil {
				_ = layout.Close()
				return nil, fmt.Errorf("engine: db_paths[%d].path: %w (set direct_io_fallback = true to use buffered I/O there)", i, err)
			}
		}
	}
	db.layout = layout
	return layout.FS(), nil
}

func (db *DB) closeLayout() {
	if db.layout != nil {
		_ = db.layout.Close()
	}
}

// tieringPaths is db_paths as the tiering package takes it.
func (db *DB) tieringPaths() []tiering.Path {
	paths := make([]tiering.Path, len(db.cfg.DBPaths))
	for i, p := range db.cfg.DBPaths {
		paths[i] = tiering.Path{Dir: p.Path, TargetSize: p.TargetSizeBytes}
	}
	return paths
}

// Tiering returns the tiered layout's statistics: per path the files, bytes,
// target, fill and levels placed there, the level-to-path map and the
// mover's counts. A read-only open runs no layout: its statistics are read
// from disk (tiering.Inspect; Stats.Inspected set, no mover counts). ok is
// false when db_paths is empty, or when a read-only open cannot read them.
func (db *DB) Tiering() (stats tiering.Stats, ok bool) {
	if db.layout != nil {
		return db.layout.Stats(), true
	}
	if !db.readOnly || len(db.cfg.DBPaths) == 0 || db.pdb == nil {
		return tiering.Stats{}, false
	}
	levels, err := db.pdb.SSTables()
	if err == nil {
		stats, err = tiering.Inspect(db.fs, db.cfg.DBPath, db.tieringPaths(), tiering.ShapeOf(db.popts), levels)
	}
	if err != nil {
		pebbleLogger{db.logger}.Errorf("engine: read the tiered layout: %v", err)
		return tiering.Stats{}, false
	}
	return stats, true
}

// settleLayout runs the tiering mover until every table sits in the path
// its level belongs to (tiering.Layout.Settle: strict passes, waiting for
// compactions that hold misplaced tables); CompactAll calls it last, so the
// layout holds its targets when CompactAll returns. Without db_paths it does
// nothing.
func (db *DB) settleLayout(ctx context.Context) error {
	if db.layout == nil {
		return nil
	}
	return db.layout.Settle(ctx)
}

// placeForSettle makes the tiered layout place new tables as Settle will
// want them (tiering.Layout.PlaceForSettle) until the returned function is
// called; CompactAll holds it while it compacts. Without db_paths it does
// nothing.
func (db *DB) placeForSettle() (done func()) {
	if db.layout == nil {
		return func() {}
	}
	return db.layout.PlaceForSettle()
}

// rewriteTablePath is where the codec rewrite writes the table it ingests
// into level: name inside the directory that will hold it. With db_paths
// that is the path the plan gives the level's next table, so Pebble's
// ingestion hard-links it in place and the table is never copied again.
func (db *DB) rewriteTablePath(level int, name string) string {
	if db.layout != nil {
		return db.layout.TablePath(level, name)
	}
	return db.fs.PathJoin(db.cfg.DBPath, name)
}
