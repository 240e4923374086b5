// Package tiering spreads Pebble's table files over several directories by
// level, as RocksDB's db_paths does, using only Pebble's public hooks: a
// vfs.FS of its own given to Pebble, and Pebble's EventListener.
//
//	layout, err := tiering.New(vfs.Default, "/nvme/db", []tiering.Path{
//		{Dir: "/nvme/db", TargetSize: 100 << 30},   // hot: L0 and the upper levels
//		{Dir: "/hdd/db", TargetSize: 4 << 40},      // cold: the rest
//	}, tiering.Options{Shape: tiering.ShapeOf(opts)})
//	if err != nil { ... }                         // each problem names db_paths[i]
//	opts.FS = layout.FS()
//	opts.EventListener = pebble.TeeEventListener(layout.EventListener(), mine)
//	db, err := pebble.Open("/nvme/db", opts)
//	layout.Attach(db)                             // placement follows the LSM; the mover starts
//	...
//	layout.Close()                                // stop the mover, then
//	db.Close()
//
// # Placement
//
// Each level gets a target size as Pebble's compaction picker computes it
// (LevelTargets); the levels are walked from L0 down and laid over the paths
// in order, each path taking levels until its target is used, the last path
// taking the rest (Place). Unlike RocksDB, a level that does not fit whole in
// a path's remaining capacity is split rather than pushed to the next path,
// so a path smaller than one level is still used (rocksdb#10841). The plan
// as the LSM is (Compute, which Settle follows) gives levels that hold no
// data no room, so a full compaction leaves the fast paths filled; while
// the database grows, placement plans ahead for the levels to come. See
// docs/tiering.md for the rules with a worked example.
//
// # Creation in the right path
//
// Pebble's FS.Create learns only a file's name. The layout creates a table
// as a placeholder in path 0; the TableCreated event, fired on the same
// goroutine after Create and before the first byte, maps the file to its
// job's output level (from FlushBegin or CompactionBegin); at the first
// write the file moves its descriptor to the chosen path with dup3(2). A
// table that takes its level beyond the level's target is placed in the
// next level's path, where Pebble takes it next.
//
// # Statistics
//
// Layout.Stats gives per-path usage and the plan, with the running totals
// (Counters). Inspect reads the same per-path figures from disk for a
// database opened read-only, where no Layout runs.
//
// # The mover
//
// After each flush and compaction the background mover runs a lazy pass: it
// drains directories no longer in db_paths and, from a path over its target
// by more than one target file, moves the tables the plan no longer wants
// there (a move compaction changes a table's level without rewriting it;
// the plan shifts as the database grows; db_paths may change between
// opens). Settle (which the engine's CompactAll runs last) moves every
// table where the plan wants it. A move copies (paced by Options.MoveRate),
// syncs, renames into place, syncs the directory, switches the map, points
// open readers at the new copy and only then removes the old one; New
// cleans up after a crash at any step.
//
// # A full device
//
// A table whose write returns ENOSPC continues in the next path with room
// (its bytes so far copied there, its descriptor retargeted), as RocksDB
// moves on to its next db_path; Pebble never sees the error while any path
// has room.
//
// Metadata (MANIFEST, OPTIONS, LOCK, markers) stays in the directory given
// to pebble.Open; the WAL goes wherever Options.WALDir says.
package tiering
