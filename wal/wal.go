// Package wal places Strata's write-ahead log and accounts for its
// durability: which directory holds it, where it fails over to, which earlier
// directories Pebble must still read at recovery, and how many bytes and
// syncs it really cost.
//
//	p := wal.Placement{DBPath: "/data/db", Dir: "/nvme/wal", PreviousDirs: []string{"/old/wal"}}
//	fs := wal.NewCountingFS(vfs.Default)
//	if err := p.Apply(opts, fs); err != nil { ... }
//	fmt.Println(fs.Stats().Syncs)
//
// Pebble writes the WAL itself; this package only chooses where and counts
// what reaches the file system, so the counts are those of the real files.
package wal

import (
	"fmt"
	"slices"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	pebblewal "github.com/cockroachdb/pebble/v2/wal"
	"github.com/stratadb/strata/internal/fsutil"
)

// Placement says where the WAL lives.
type Placement struct {
	// DBPath is the database directory; an empty Dir means the WAL lives here.
	DBPath string
	// Dir is the WAL directory (config wal_dir). Created if missing.
	Dir string
	// FailoverDir is the secondary directory (config wal_failover_dir); empty
	// disables failover. Created if missing.
	FailoverDir string
	// PreviousDirs are WAL directories of earlier opens that may still hold
	// logs needed for recovery. Those that differ from Dir and FailoverDir are
	// given to Pebble as recovery directories, so changing wal_dir between
	// opens loses nothing.
	PreviousDirs []string
	// Disabled turns the WAL off (config enable_wal = false).
	Disabled bool
	// ReadOnly is a read-only open: no directory is created.
	ReadOnly bool
}

// EffectiveDir returns the directory the WAL files are written to.
func (p Placement) EffectiveDir() string {
	if p.Dir == "" {
		return p.DBPath
	}
	return p.Dir
}

// Apply creates the WAL directories on fs and sets the WAL fields of opts:
// DisableWAL, WALDir, WALFailover and WALRecoveryDirs.
func (p Placement) Apply(opts *pebble.Options, fs vfs.FS) error {
	opts.DisableWAL = p.Disabled
	for _, d := range []struct{ key, dir string }{{"wal_dir", p.Dir}, {"wal_failover_dir", p.FailoverDir}} {
		if d.dir == "" || p.ReadOnly {
			continue
		}
		if err := fs.MkdirAll(d.dir, 0o755); err != nil {
			return fmt.Errorf("wal: %s = %q: cannot create the directory: %w", d.key, d.dir, err)
		}
	}
	opts.WALDir = p.Dir
	if p.FailoverDir != "" {
		opts.WALFailover = &pebble.WALFailoverOptions{Secondary: pebblewal.Dir{FS: fs, Dirname: p.FailoverDir}}
	}
	current := []string{clean(p.EffectiveDir()), clean(p.FailoverDir)}
	for _, prev := range p.PreviousDirs {
		prevDir := prev
		if prevDir == "" {
			prevDir = p.DBPath
		}
		if slices.Contains(current, clean(prevDir)) {
			continue
		}
		if _, err := fs.Stat(prevDir); err != nil {
			// A previous directory that is gone cannot hold logs; Pebble
			// reports ErrMissingWALRecoveryDir if it still expected some.
			continue
		}
		opts.WALRecoveryDirs = append(opts.WALRecoveryDirs, pebblewal.Dir{FS: fs, Dirname: prevDir})
		current = append(current, clean(prevDir))
	}
	return nil
}

// clean returns dir's absolute form (fsutil.Abs), and "" for no directory.
func clean(dir string) string {
	if dir == "" {
		return ""
	}
	return fsutil.Abs(dir)
}
