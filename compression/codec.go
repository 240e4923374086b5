// Package compression names the block codecs Strata accepts in a Config and
// maps each onto what Pebble's table format can store.
//
// A codec is written in a config file as none, snappy, lz4, zstd, zstd:N
// (N = 1..22) or minlz:
//
//	c, err := compression.ParseCodec("zstd:6")
//	profile := c.PebbleProfile() // handed to pebble.LevelOptions.Compression
//
// Pebble's block format has no LZ4. A requested lz4 is stored as MinLZ, the
// LZ77 byte codec of LZ4's class that Pebble supports; Effective reports the
// codec that tables really carry, and Strata shows both wherever a codec is
// reported. The raw codecs (the real LZ4 among them) are measured side by
// side by `tune codecs` (internal/rawcodec).
package compression

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/cockroachdb/pebble/v2/sstable"
)

// Algorithm is a block compression algorithm a user can ask for.
type Algorithm uint8

// The algorithms, in the order of Names.
const (
	None Algorithm = iota
	Snappy
	LZ4
	Zstd
	MinLZ
)

var algorithmNames = [...]string{None: "none", Snappy: "snappy", LZ4: "lz4", Zstd: "zstd", MinLZ: "minlz"}

// String returns the config-file name of the algorithm.
func (a Algorithm) String() string {
	if int(a) < len(algorithmNames) {
		return algorithmNames[a]
	}
	return fmt.Sprintf("algorithm(%d)", uint8(a))
}

// Names lists the accepted codec spellings, for error messages and help.
func Names() []string { return []string{"none", "snappy", "lz4", "zstd", "zstd:<1-22>", "minlz"} }

// DefaultZstdLevel is the zstd level used when a codec says just "zstd"; it
// is the level of Pebble's built-in ZSTD profile and RocksDB's default.
const DefaultZstdLevel = 3

// MaxZstdLevel is the highest zstd level accepted.
const MaxZstdLevel = 22

// Codec is an algorithm with its level. Level is meaningful for zstd only and
// is 0 for every other algorithm; a zero-value Codec is "none".
type Codec struct {
	Algorithm Algorithm
	Level     int
	// DefaultLevel is true for a zstd codec whose name gave no level
	// ("zstd"): Level is DefaultZstdLevel until WithDefaultLevel puts a
	// configured default (a config's zstd_level) in its place.
	DefaultLevel bool
}

// The errors of ParseCodec, told apart with errors.Is.
var (
	ErrUnknownCodec = errors.New("compression: unknown codec")
	ErrZstdLevel    = errors.New("compression: zstd level out of range")
)

// ParseCodec parses a codec name as written in a config file: none, snappy,
// lz4, minlz, zstd or zstd:N (also zstd-N). Case and surrounding spaces are
// ignored; "" and "no" mean none. Plain zstd gets DefaultZstdLevel with
// DefaultLevel set. An error wraps ErrUnknownCodec or ErrZstdLevel.
func ParseCodec(s string) (Codec, error) {
	name := strings.ToLower(strings.TrimSpace(s))
	if level, ok := cutLevel(name); ok {
		n, err := strconv.Atoi(level)
		if err != nil || n < 1 || n > MaxZstdLevel {
			return Codec{}, &parseError{fmt.Sprintf("compression: codec %q: zstd level must be an integer from 1 to %d", s, MaxZstdLevel), ErrZstdLevel}
		}
		return Codec{Algorithm: Zstd, Level: n}, nil
	}
	switch name {
	case "", "none", "no":
		return Codec{Algorithm: None}, nil
	case "snappy":
		return Codec{Algorithm: Snappy}, nil
	case "lz4":
		return Codec{Algorithm: LZ4}, nil
	case "minlz":
		return Codec{Algorithm: MinLZ}, nil
	case "zstd":
		return Codec{Algorithm: Zstd, Level: DefaultZstdLevel, DefaultLevel: true}, nil
	}
	return Codec{}, &parseError{fmt.Sprintf("compression: unknown codec %q: allowed are %s", s, strings.Join(Names(), ", ")), ErrUnknownCodec}
}

// parseError is an error of ParseCodec: its message names the value, and it
// unwraps to the sentinel of its kind.
type parseError struct {
	msg  string
	kind error
}

func (e *parseError) Error() string { return e.msg }
func (e *parseError) Unwrap() error { return e.kind }

// WithDefaultLevel returns c with level in place of a default zstd level
// (DefaultLevel set): how a config's zstd_level applies to a plain "zstd".
// The result has DefaultLevel false; every other codec is returned as is.
func (c Codec) WithDefaultLevel(level int) Codec {
	if c.Algorithm == Zstd && c.DefaultLevel {
		c.Level, c.DefaultLevel = level, false
	}
	return c
}

func cutLevel(name string) (string, bool) {
	for _, sep := range []string{"zstd:", "zstd-"} {
		if rest, ok := strings.CutPrefix(name, sep); ok {
			return rest, true
		}
	}
	return "", false
}

// String returns the canonical config-file spelling: zstd carries its level
// unless it is the default ("zstd", "zstd:6").
func (c Codec) String() string {
	if c.Algorithm == Zstd && c.Level != 0 && c.Level != DefaultZstdLevel {
		return fmt.Sprintf("zstd:%d", c.Level)
	}
	return c.Algorithm.String()
}

// Effective returns the codec tables really carry: lz4 becomes minlz, since
// Pebble's block format has no LZ4; every other codec is itself.
func (c Codec) Effective() Codec {
	if c.Algorithm == LZ4 {
		return Codec{Algorithm: MinLZ}
	}
	return c
}

// Substituted reports whether the stored codec differs from the requested one.
func (c Codec) Substituted() bool { return c.Effective() != c }

// Describe returns "requested" or "requested (stored as effective)".
func (c Codec) Describe() string {
	if c.Substituted() {
		return fmt.Sprintf("%s (stored as %s)", c, c.Effective())
	}
	return c.String()
}

// PebbleProfile returns the Pebble compression profile realising the codec.
// zstd at a level other than 3 is a copy of Pebble's ZSTD profile with the
// level changed for every block kind.
func (c Codec) PebbleProfile() *sstable.CompressionProfile {
	switch c.Effective().Algorithm {
	case Snappy:
		return sstable.SnappyCompression
	case MinLZ:
		return sstable.MinLZCompression
	case Zstd:
		if c.Level == 0 || c.Level == DefaultZstdLevel {
			return sstable.ZstdCompression
		}
		p := *sstable.ZstdCompression
		p.Name = fmt.Sprintf("ZSTD%d", c.Level)
		p.DataBlocks.Level = uint8(c.Level)
		p.ValueBlocks.Level = uint8(c.Level)
		p.OtherBlocks.Level = uint8(c.Level)
		return &p
	default:
		return sstable.NoCompression
	}
}

// PebbleProfileSplit returns the profile that compresses a table's data and
// index blocks with keys and values (blob files' value blocks, and tables'
// value blocks) with c: what a level gets when its values live in blob
// files and its keys have a codec of their own (config's key_compression).
// Pebble's own "Fast" profile splits the same way. The same codec twice is
// c's profile, under c's name.
func (c Codec) PebbleProfileSplit(keys Codec) *sstable.CompressionProfile {
	values := c.PebbleProfile()
	k := keys.PebbleProfile()
	if k.Name == values.Name {
		return values
	}
	p := *values
	p.Name = fmt.Sprintf("%s values, %s keys", values.Name, k.Name)
	p.DataBlocks = k.DataBlocks
	p.OtherBlocks = k.OtherBlocks
	return &p
}

// rocksDBNames maps each algorithm to its RocksDB CompressionType name.
var rocksDBNames = [...]string{None: "kNoCompression", Snappy: "kSnappyCompression", LZ4: "kLZ4Compression", Zstd: "kZSTD", MinLZ: "kMinLZCompression"}

// RocksDBName returns the RocksDB OPTIONS-file name of the requested
// algorithm (kLZ4Compression for lz4, kZSTD for zstd). MinLZ has no RocksDB
// name; it is written as kMinLZCompression, which RocksDB itself would reject,
// so Strata's OPTIONS writer notes it in a comment.
func (c Codec) RocksDBName() string { return rocksDBNames[c.Algorithm] }

// ParseRocksDBName parses a RocksDB CompressionType name. Names RocksDB has
// but Pebble cannot store (kZlibCompression, kBZip2Compression,
// kLZ4HCCompression, kXpressCompression) return an error naming the value.
func ParseRocksDBName(s string) (Codec, error) {
	switch strings.TrimSpace(s) {
	case "kNoCompression", "kDisableCompressionOption":
		return Codec{Algorithm: None}, nil
	case "kSnappyCompression":
		return Codec{Algorithm: Snappy}, nil
	case "kLZ4Compression":
		return Codec{Algorithm: LZ4}, nil
	case "kZSTD", "kZSTDNotFinalCompression":
		return Codec{Algorithm: Zstd, Level: DefaultZstdLevel, DefaultLevel: true}, nil
	case "kMinLZCompression":
		return Codec{Algorithm: MinLZ}, nil
	}
	return Codec{}, fmt.Errorf("compression: RocksDB codec %q has no Pebble equivalent: allowed are kNoCompression, kSnappyCompression, kLZ4Compression, kZSTD", s)
}
