package config

import (
	"errors"
	"fmt"
	"strings"

	"github.com/stratadb/strata/compression"
	"github.com/stratadb/strata/internal/fsutil"
	"github.com/stratadb/strata/tiering"
)

// Validate checks every setting and returns nil or a *ValidationError listing
// every problem found, in field order, each a *FieldError naming the key, the
// offending value and what is allowed:
//
//	memtable_size_mb = -4: must be from 1 to 4095
//
// Validate is pure: it neither changes c nor touches the file system.
// Relative paths are compared in their absolute form, resolved against the
// working directory. Settings Pebble cannot deliver but Strata accepts
// (see Notes) are valid here. Several db_paths are valid: Validate checks
// each entry's path and target_size_bytes and that no two entries name the
// same directory or nest. What only the engine can refuse is left to
// engine.Open: use_universal_compaction, use_direct_* on a file system
// without O_DIRECT (unless direct_io_fallback), and directories that cannot
// be created.
func (c *Config) Validate() error { return c.validate(nil) }

// validate is Validate; r, if not nil, is c resolved, whose codecs it
// checks instead of parsing them again. The rules of each key are its row
// in fields (limits and check), in field order, then the sections'.
func (c *Config) validate(r *Resolved) error {
	v := validator{resolved: r}
	for _, f := range byField {
		if f.limits != nil {
			if x := f.number(c); !f.limits.allows(x) {
				v.add(f.key, f.value(c).Interface(), f.limits.rule())
			}
		}
		if f.check != nil {
			f.check(&v, c, f)
		}
	}
	c.Server.validate(&v)
	c.Cluster.validate(&v)
	if len(v.problems) == 0 {
		return nil
	}
	return &ValidationError{Problems: v.problems}
}

// validator collects FieldErrors.
type validator struct {
	problems []*FieldError
	resolved *Resolved // nil, or the Config resolved
}

func (v *validator) add(key string, value any, rule string) {
	v.problems = append(v.problems, &FieldError{Key: key, Value: value, Rule: rule})
}

// between requires min <= n <= max.
func (v *validator) between(key string, n, min, max int64) {
	if n < min || n > max {
		v.add(key, n, fmt.Sprintf("must be from %d to %d", min, max))
	}
}

// notEmpty requires a string that is not blank.
func (v *validator) notEmpty(c *Config, f *field) {
	if s := f.value(c).String(); strings.TrimSpace(s) == "" {
		v.add(f.key, s, "must not be empty")
	}
}

// codec requires a codec name compression.ParseCodec accepts.
func (v *validator) codec(c *Config, f *field) {
	name := f.value(c).String()
	var err error
	if r := v.resolved; r != nil {
		err = r.codecErr[0]
		if f.key == "compression_bottommost" {
			err = r.codecErr[1]
		}
	} else {
		_, err = compression.ParseCodec(name)
	}
	v.codecName(f.key, name, err)
}

// codecLevels requires compression_levels to be empty or to name a codec
// for each of the seven levels.
func (v *validator) codecLevels(c *Config, f *field) {
	names := c.CompressionLevels
	if len(names) == 0 {
		return
	}
	if len(names) != NumLevels {
		v.add(f.key, quotedList(names), fmt.Sprintf("must name %d codecs, one per level, L0 first (or be empty), not %d", NumLevels, len(names)))
	}
	for l, name := range names {
		var err error
		if r := v.resolved; r != nil {
			err = r.levelErrs[l]
		} else {
			_, err = compression.ParseCodec(name)
		}
		v.codecName(fmt.Sprintf("%s[%d]", f.key, l), name, err)
	}
}

// codecName adds the problem of a codec name that did not parse (err).
func (v *validator) codecName(key, name string, err error) {
	switch {
	case errors.Is(err, compression.ErrZstdLevel):
		v.add(key, name, fmt.Sprintf("zstd level must be an integer from 1 to %d", compression.MaxZstdLevel))
	case err != nil:
		v.add(key, name, "must be one of "+strings.Join(compression.Names(), ", "))
	}
}

// codecs checks every codec key of c, r being c resolved (Config.Codecs).
func (v *validator) codecs(c *Config, r *Resolved) {
	v.resolved = r
	for _, f := range byField {
		switch f.key {
		case "compression_default", "compression_bottommost", "compression_levels":
			f.check(v, c, f)
		}
	}
}

// keyCodec requires key_compression to be empty, or a codec with blob
// files on: without them a table's data blocks hold the values, which the
// level's codec compresses.
func (v *validator) keyCodec(c *Config, f *field) {
	if c.KeyCompression == "" {
		return
	}
	_, err := compression.ParseCodec(c.KeyCompression)
	v.codecName(f.key, c.KeyCompression, err)
	if err == nil && !c.EnableBlobFiles {
		v.add(f.key, c.KeyCompression, "requires enable_blob_files = true: without blob files the tables hold the values, and the level's codec compresses them; set key_compression = \"\" or enable_blob_files = true")
	}
}

// syncNeedsWAL rejects sync without a WAL to sync.
func (v *validator) syncNeedsWAL(c *Config, f *field) {
	if c.Sync && !c.EnableWAL {
		v.add(f.key, c.Sync, "requires enable_wal = true: sync waits for the write's WAL record")
	}
}

// blobFilesOnOnePath rejects blob files with a tiered layout: the tiering
// mover places a blob file by the level it was written for and never moves
// it down, so flushed values would stay on the first path past its target.
func (v *validator) blobFilesOnOnePath(c *Config, f *field) {
	if c.EnableBlobFiles && len(c.DBPaths) > 1 {
		v.add(f.key, c.EnableBlobFiles, fmt.Sprintf("cannot be used with db_paths (%d paths): blob files stay on the path they were written to; set enable_blob_files = false, or use one path", len(c.DBPaths)))
	}
}

// walFailoverDir rejects a failover directory that is the WAL directory
// itself (wal_dir, or db_path when wal_dir is empty): failing over to it
// would change nothing.
func (v *validator) walFailoverDir(c *Config, _ *field) {
	if c.WALFailoverDir == "" {
		return
	}
	walDir, walKey := c.WALDir, "wal_dir"
	if walDir == "" {
		walDir, walKey = c.DBPath, "db_path (where the WAL lives when wal_dir is empty)"
	}
	if walDir != "" && fsutil.SamePath(walDir, c.WALFailoverDir) {
		v.add("wal_failover_dir", c.WALFailoverDir, "must be another directory than "+walKey)
	}
}

// dbPaths reports the db_paths rules, which tiering keeps (tiering.CheckPaths),
// as field errors.
func (v *validator) dbPaths(c *Config, _ *field) {
	paths := make([]tiering.Path, len(c.DBPaths))
	for i, p := range c.DBPaths {
		paths[i] = tiering.Path{Dir: p.Path, TargetSize: p.TargetSizeBytes}
	}
	for _, e := range tiering.CheckPaths(paths) {
		v.add(fmt.Sprintf("db_paths[%d].%s", e.Index, e.Field), e.Value, e.Rule)
	}
}
