package config

import (
	"fmt"
	"math"
	"path/filepath"
	"strings"

	"github.com/stratadb/strata/compression"
)

// maxTargetSizeBytes bounds db_paths[i].target_size_bytes: 8 EiB, the largest
// integer a TOML file can hold, so that every valid Config can be written back.
const maxTargetSizeBytes = math.MaxInt64

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
func (c *Config) Validate() error {
	var v validator
	if strings.TrimSpace(c.DBPath) == "" {
		v.add("db_path", c.DBPath, "must not be empty")
	}
	v.walFailoverDir(c)
	v.dbPaths(c.DBPaths)
	v.between("tiering_move_rate_mb", c.TieringMoveRateMB, 0, 1<<20)
	v.codec("compression_default", c.CompressionDefault)
	v.codec("compression_bottommost", c.CompressionBottommost)
	v.between("zstd_level", int64(c.ZstdLevel), 1, compression.MaxZstdLevel)
	v.between("block_size", int64(c.BlockSize), 1<<10, 1<<20)
	if c.BottommostBlockSize != 0 && (c.BottommostBlockSize < 1<<10 || c.BottommostBlockSize > 1<<20) {
		v.add("bottommost_block_size", c.BottommostBlockSize, "must be 0 (block_size) or from 1024 to 1048576")
	}
	v.between("block_cache_size_mb", c.BlockCacheSizeMB, 0, 1<<20)
	if !(c.HighPriPoolRatio >= 0 && c.HighPriPoolRatio <= 1) { // also rejects NaN
		v.add("high_pri_pool_ratio", c.HighPriPoolRatio, "must be from 0 to 1")
	}
	v.between("bloom_bits_per_key", int64(c.BloomBitsPerKey), 0, 64)
	v.between("memtable_size_mb", c.MemtableSizeMB, 1, 4095)
	v.between("max_write_buffer_number", int64(c.MaxWriteBufferNumber), 1, 64)
	v.between("min_write_buffer_number_to_merge", int64(c.MinWriteBufferNumberToMerge), 1, 64)
	v.between("target_file_size_base_mb", c.TargetFileSizeBaseMB, 1, 4096)
	v.between("max_bytes_for_level_base_mb", c.MaxBytesForLevelBaseMB, 1, 1<<20)
	if c.Sync && !c.EnableWAL {
		v.add("sync", c.Sync, "requires enable_wal = true: sync waits for the write's WAL record")
	}
	v.between("max_background_jobs", int64(c.MaxBackgroundJobs), 1, 256)
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

func (v *validator) codec(key, name string) {
	if _, err := compression.ParseCodec(name); err != nil {
		if hasExplicitLevel(name) {
			v.add(key, name, fmt.Sprintf("zstd level must be an integer from 1 to %d", compression.MaxZstdLevel))
		} else {
			v.add(key, name, "must be one of "+strings.Join(compression.Names(), ", "))
		}
	}
}

// walFailoverDir rejects a failover directory that is the WAL directory
// itself (wal_dir, or db_path when wal_dir is empty): failing over to it
// would change nothing.
func (v *validator) walFailoverDir(c *Config) {
	if c.WALFailoverDir == "" {
		return
	}
	walDir, walKey := c.WALDir, "wal_dir"
	if walDir == "" {
		walDir, walKey = c.DBPath, "db_path (where the WAL lives when wal_dir is empty)"
	}
	if walDir != "" && absPath(walDir) == absPath(c.WALFailoverDir) {
		v.add("wal_failover_dir", c.WALFailoverDir, "must be another directory than "+walKey)
	}
}

// dbPaths checks each entry, then every pair: no two entries may name the
// same directory, and none may lie inside another. A conflict is reported
// once, on the later entry.
func (v *validator) dbPaths(paths []DBPath) {
	abs := make([]string, len(paths))
	for i, p := range paths {
		if strings.TrimSpace(p.Path) == "" {
			v.add(fmt.Sprintf("db_paths[%d].path", i), p.Path, "must not be empty")
		} else {
			abs[i] = absPath(p.Path)
		}
		if p.TargetSizeBytes == 0 || p.TargetSizeBytes > maxTargetSizeBytes {
			v.add(fmt.Sprintf("db_paths[%d].target_size_bytes", i), p.TargetSizeBytes,
				fmt.Sprintf("must be from 1 to %d", uint64(maxTargetSizeBytes)))
		}
	}
	for j := range paths {
		if abs[j] == "" {
			continue
		}
		for i := range j {
			if abs[i] == "" {
				continue
			}
			var rule string
			switch {
			case abs[i] == abs[j]:
				rule = "is the same directory as db_paths[%d].path (%q): entries must be distinct"
			case within(abs[i], abs[j]):
				rule = "lies inside db_paths[%d].path (%q): entries must not nest"
			case within(abs[j], abs[i]):
				rule = "contains db_paths[%d].path (%q): entries must not nest"
			default:
				continue
			}
			v.add(fmt.Sprintf("db_paths[%d].path", j), paths[j].Path, fmt.Sprintf(rule, i, paths[i].Path))
			break
		}
	}
}

// absPath returns the cleaned absolute form of p, or its cleaned form when
// the working directory is unknown.
func absPath(p string) string {
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return filepath.Clean(p)
}

// within reports whether the cleaned path inner lies strictly below outer.
func within(outer, inner string) bool {
	prefix := outer
	if !strings.HasSuffix(prefix, string(filepath.Separator)) {
		prefix += string(filepath.Separator)
	}
	return strings.HasPrefix(inner, prefix)
}
