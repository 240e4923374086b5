package config

import (
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/stratadb/strata/compression"
)

// Unmapped is one setting of an imported RocksDB OPTIONS file that Strata
// did not take over, with the reason. A whole section that is skipped (a
// column family other than "default", a table format other than
// BlockBasedTable) is one Unmapped with an empty Key. A value that was taken
// over only approximately (a size rounded up to whole MB) is listed too.
type Unmapped struct {
	// Section is the section as its header names it, without brackets
	// (`CFOptions "default"`); empty before the first section.
	Section string
	// Key is the option name; empty for a whole section,
	// "compression_opts.max_dict_bytes" for a part of a struct value,
	// "strata: name" for a "# strata:" comment.
	Key string
	// Value is the option's value as written, unescaped.
	Value string
	// Reason says why Strata did not take it over, or how it changed it.
	Reason string
}

// String returns "[section] key=value: reason".
func (u Unmapped) String() string {
	s := "[" + u.Section + "]"
	if u.Key != "" {
		s += " " + u.Key + "=" + u.Value
	}
	return s + ": " + u.Reason
}

// ImportRocksDBOptions reads a RocksDB OPTIONS file (RocksDB's INI format:
// [Section "argument"] headers, key=value statements, # comments, also at
// the end of a line, values escaped with \: \# \\ \n \r; see ini.go) and
// returns Default() with every setting the file has a Strata equivalent for
// laid over it, together with the settings it did not take over.
//
// Mapped are the options of the table of fields (fields.go; the "In
// OPTIONS-rocksdb" column of docs/config.md), in the four sections
// RocksDBOptions writes, and the codec options compression,
// bottommost_compression, compression_per_level and the level in
// compression_opts and bottommost_compression_opts, and block_cache as
// RocksDB's option strings give it (a size; RocksDB does not write it in
// its OPTIONS files). Sizes in bytes, with or without RocksDB's suffixes
// k, m, g, t, become MB; a size that is not a whole number of MB is
// rounded up and listed as Unmapped. Values that agree with what Strata does anyway
// (create_if_missing=true, num_levels=7, target_file_size_multiplier=1,
// index_type, ...) are accepted silently; everything else, including codecs
// Pebble cannot store (kZlibCompression), other column families and unknown
// keys, is listed as Unmapped and leaves
// the default in place. As RocksDB does, a bottommost_compression of
// kDisableCompressionOption means the bottommost level keeps the codec of
// compression_per_level or compression.
//
// The "# strata: key=value" comments of a file written by RocksDBOptions are
// read back as well, so importing Strata's own file yields the Config it was
// written from. A "strata:" codec spelling that disagrees with the RocksDB
// keys loses to them and is listed as Unmapped.
//
// Malformed input (a line that is neither a section, a statement nor a
// comment, a repeated section or key, a value of the wrong type for a mapped
// key) is an error naming the line. If the mapped values fail Validate, the
// Config and the Unmapped list are returned with the *ValidationError, whose
// keys are Strata's.
func ImportRocksDBOptions(r io.Reader) (*Config, []Unmapped, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, nil, fmt.Errorf("config: reading RocksDB options: %w", err)
	}
	imp := &importer{cfg: Default()}
	imp.codecs.spellings = map[string]*spelling{}
	if err := parseINI(data, imp); err != nil {
		return nil, nil, fmt.Errorf("config: RocksDB options: %w", err)
	}
	imp.resolveCodecs()
	if err := imp.cfg.Validate(); err != nil {
		return imp.cfg, imp.unmapped, &prefixedError{prefix: "config: RocksDB options give an invalid Strata config: ", err: err}
	}
	return imp.cfg, imp.unmapped, nil
}

// importer maps the pieces of one ImportRocksDBOptions call onto a Config:
// it is the iniVisitor whose keys are the rows of fields. The RocksDB names
// of a config file go through it too (rocksdb_names.go), in strict mode.
type importer struct {
	cfg      *Config
	unmapped []Unmapped
	// strict is set for a config file's RocksDB names: what an import takes
	// over approximately or not at all (and lists as Unmapped) is a problem
	// of the file instead, since a config file says exactly what it means.
	strict   bool
	problems []*FieldError
	// shown is, in strict mode, the file's value of each RocksDB name as a
	// FieldError shows it.
	shown   map[string]any
	section string
	skipped bool // the current section is Unmapped as a whole
	// numLevels is num_levels, 0 if not given.
	numLevels int
	// codecs collects the codec options, combined by resolveCodecs once
	// the file is read.
	codecs struct {
		compression   *compression.Codec // nil: not given or unusable
		bottommost    *compression.Codec // nil: not given, unusable or kDisableCompressionOption
		bottommostBad bool               // given as a codec Pebble cannot store
		// bottomKept is set when a config file gives L6's codec by
		// Strata's key: compression and compression_opts then leave it.
		bottomKept  bool
		perLevel    []compression.Codec
		perLevelRaw string
		opts        codecOpts // compression_opts
		bottomOpts  codecOpts // bottommost_compression_opts
		spellings   map[string]*spelling
		// levelsSpelling is the "# strata: compression_levels=" comment.
		levelsSpelling *levelsSpelling
	}
}

// levelsSpelling is compression_levels as Strata's OPTIONS file spelled it.
type levelsSpelling struct {
	section string
	names   []string
}

// codecOpts is what Strata reads of a CompressionOptions value.
type codecOpts struct {
	level   int // 0: the codec's default level
	enabled bool
	raw     string
}

// spelling is a "# strata: compression_*=" comment: the codec as the config
// spelled it.
type spelling struct {
	section, value string
}

// skip lists a setting Strata does not take over, for reason; in strict
// mode it is a problem "not applicable: reason".
func (imp *importer) skip(key, value, reason string) {
	imp.lossy(key, value, reason, "not applicable: "+reason)
}

// lossy lists a setting taken over approximately or not at all: in an
// import as Unmapped with reason (which says what Strata does instead), in
// strict mode as a problem whose rule says what is allowed.
func (imp *importer) lossy(key, value, reason, rule string) {
	if !imp.strict {
		imp.unmapped = append(imp.unmapped, Unmapped{Section: imp.section, Key: key, Value: value, Reason: reason})
		return
	}
	for _, p := range imp.problems {
		if p.Key == key && p.Rule == rule {
			return // compression_opts's level is read for L0-L5 and for L6
		}
	}
	shown, ok := imp.shown[key]
	if !ok {
		shown = value
	}
	imp.problems = append(imp.problems, &FieldError{Key: key, Value: shown, Rule: rule})
}

// visitSection starts a section. Only the four sections Strata writes are
// mapped; any other is Unmapped as a whole.
func (imp *importer) visitSection(name, title string) error {
	imp.section = name
	imp.skipped = false
	switch {
	case name == sectionVersion, name == sectionDB, name == sectionCF, name == sectionTable:
		return nil
	case title == "CFOptions" || title == "TableOptions/BlockBasedTable":
		imp.skip("", "", "only the default column family is mapped: a Strata database has one keyspace")
	case strings.HasPrefix(title, "TableOptions/"):
		imp.skip("", "", "Pebble writes block-based tables only")
	default:
		imp.skip("", "", "unknown section")
	}
	imp.skipped = true
	return nil
}

// visitKeyValue maps a statement through its row of fields.
func (imp *importer) visitKeyValue(section, key, raw string) error {
	if imp.skipped {
		return nil
	}
	value := unescapeTrim(raw)
	if f := rocksDBRows[section+"\x00"+key]; f != nil {
		return f.parse(imp, key, value, raw)
	}
	if section == sectionVersion {
		imp.skip(key, value, "unknown key")
		return nil
	}
	imp.unknown(key, value)
	return nil
}

// visitComment reads a "# strata: key=value" comment through its row of fields;
// other comments are skipped.
func (imp *importer) visitComment(text string) error {
	body, ok := strings.CutPrefix(text, strataPrefix)
	if !ok {
		return nil
	}
	key, raw, ok := strings.Cut(body, "=")
	key = strings.TrimSpace(key)
	if !ok || key == "" {
		imp.skip(strings.TrimSpace(strataPrefix+" "+body), "", "not a Strata key=value comment")
		return nil
	}
	value := unescapeTrim(raw)
	f := strataRows[key]
	if f == nil {
		imp.skip(strataPrefix+" "+key, value, "unknown Strata setting")
		return nil
	}
	return f.parse(imp, strataPrefix+" "+key, value, raw)
}

// fixedValue checks a value of an option Strata writes with a fixed value:
// another value, or one that is not a boolean where the option is one, is
// Unmapped with the row's reason (the option has no Strata field, so its
// type is not an error).
func (imp *importer) fixedValue(f *field, value string) error {
	same := value == f.fixed
	if f.fixed == "true" || f.fixed == "false" {
		got, err := parseBool(f.rocksdb, value)
		same = err == nil && strconv.FormatBool(got) == f.fixed
	}
	if !same && f.reason != "" {
		imp.skip(f.rocksdb, value, f.reason)
	}
	return nil
}

// scaled converts a size in RocksDB's unit (bytes) to the row's (MB),
// rounding up; a value that is not a whole number of units is Unmapped too.
func (imp *importer) scaled(f *field, name, value string) (int64, error) {
	n, err := parseSize(value)
	if err != nil {
		return 0, fmt.Errorf("%s=%s: expected a size in bytes, with or without one of RocksDB's suffixes k, m, g, t (64m)", name, clip(value))
	}
	unit := uint64(f.scale)
	mb := n / unit
	if n%unit != 0 {
		imp.lossy(name, value, fmt.Sprintf("not a whole number of MB: %s = %d (rounded up)", f.key, mb+1),
			fmt.Sprintf("not a whole number of MiB (%d bytes), the unit of %s: the nearest are %d and %d", unit, f.key, mb*unit, (mb+1)*unit))
		mb++
	}
	return int64(mb), nil
}

func (imp *importer) unknown(key, value string) {
	reason, ok := unmappedReasons[key]
	if !ok {
		reason = "no Strata setting"
	}
	if want, ok := agreeing[key]; ok && value == want {
		return
	}
	if key == "max_bytes_for_level_multiplier" {
		if f, err := strconv.ParseFloat(value, 64); err == nil && f == 10 {
			return
		}
	}
	imp.skip(key, value, reason)
}

// rocksDBCodec parses a RocksDB codec name; a codec Pebble cannot store is
// listed as Unmapped.
func (imp *importer) rocksDBCodec(key, value string) (compression.Codec, bool) {
	codec, err := imp.parseCodec(value)
	if err != nil {
		imp.lossy(key, value, "no Pebble equivalent: Strata's default codec stays (Pebble stores none, snappy, zstd and minlz; lz4 as minlz)",
			"no Pebble equivalent: allowed are "+rocksDBCodecNames)
		return codec, false
	}
	return codec, true
}

// rocksDBCodecNames is what a config file's RocksDB codec option accepts.
const rocksDBCodecNames = "kNoCompression, kSnappyCompression, kLZ4Compression, kZSTD, kMinLZCompression " +
	"or Strata's none, snappy, lz4, zstd, zstd:<1-22>, minlz"

// parseCodec parses a codec of a RocksDB option: a RocksDB name, and in
// strict mode (a config file) Strata's names as well.
func (imp *importer) parseCodec(name string) (compression.Codec, error) {
	codec, err := compression.ParseRocksDBName(name)
	if err != nil && imp.strict {
		if c, err2 := compression.ParseCodec(name); err2 == nil && strings.TrimSpace(name) != "" {
			return c, nil
		}
	}
	return codec, err
}

// compressionOpts reads the level and the enabled flag of RocksDB's
// CompressionOptions, written as a struct ({level=3;enabled=true;...}) or in
// the old positional form (window_bits:level:strategy:max_dict_bytes:
// zstd_max_train_bytes:parallel_threads:enabled:...). RocksDB's default
// level, 32767, and zstd's 0 are returned as 0. Dictionary compression and
// parallel threads are listed as Unmapped when set.
func (imp *importer) compressionOpts(key, value string) codecOpts {
	opts := codecOpts{raw: value}
	fields := map[string]string{}
	if strings.HasPrefix(value, "{") && strings.HasSuffix(value, "}") {
		for _, part := range strings.Split(value[1:len(value)-1], ";") {
			k, v, ok := strings.Cut(part, "=")
			if k = strings.TrimSpace(k); ok && k != "" {
				fields[k] = strings.TrimSpace(v)
			} else if strings.TrimSpace(part) != "" {
				imp.lossy(key, value, "unreadable compression options: the codec's default level is kept",
					"unreadable compression options: expected {level=N;...}")
				return opts
			}
		}
	} else {
		names := []string{"window_bits", "level", "strategy", "max_dict_bytes", "zstd_max_train_bytes", "parallel_threads", "enabled", "max_dict_buffer_bytes"}
		for i, v := range strings.Split(value, ":") {
			if i < len(names) {
				fields[names[i]] = strings.TrimSpace(v)
			}
		}
	}
	if v, ok := fields["level"]; ok {
		n, err := strconv.Atoi(v)
		if err != nil {
			imp.lossy(key, value, "unreadable level: the codec's default level is kept", "the level must be an integer")
		} else if n != kDefaultCompressionLevel {
			opts.level = n
		}
	}
	opts.enabled = fields["enabled"] == "true" || fields["enabled"] == "1"
	for _, k := range []string{"max_dict_bytes", "zstd_max_train_bytes"} {
		if v, ok := fields[k]; ok && v != "0" {
			imp.skip(key+"."+k, v, "Pebble has no dictionary compression")
		}
	}
	if v, ok := fields["parallel_threads"]; ok && v != "1" {
		imp.skip(key+".parallel_threads", v, "Pebble compresses each block on one thread")
	}
	return opts
}

// resolveCodecs combines the codec settings as RocksDB does:
// compression_per_level overrides compression; bottommost_compression, if
// set, overrides the last level; bottommost_compression_opts applies to the
// last level when enabled, compression_opts otherwise. One codec for levels
// 0-5 becomes compression_default, L6's compression_bottommost; different
// codecs on levels 0-5 become compression_levels, one name per level.
// "# strata:" spellings of the same codecs then replace the derived names.
func (imp *importer) resolveCodecs() {
	c, in := imp.cfg, &imp.codecs
	n := imp.numLevels
	if n == 0 {
		n = numLevels
	}
	levels, bottom := in.compression, in.compression
	var perLevel []compression.Codec // L0-L5 when they differ
	if len(in.perLevel) > 0 {
		at := func(level int) compression.Codec { return in.perLevel[min(level, len(in.perLevel)-1)] }
		uniform := true
		for l := 1; l < n-1; l++ {
			uniform = uniform && at(l) == at(0)
		}
		if uniform && n > 1 {
			first := at(0)
			levels = &first
		} else if n > 1 {
			levels = nil
			for l := range numLevels - 1 {
				perLevel = append(perLevel, at(min(l, n-2)))
			}
		}
		last := at(n - 1)
		bottom = &last
	}
	if in.bottommost != nil || in.bottommostBad {
		bottom = in.bottommost // an unusable codec leaves Strata's default
	}
	bottomOpts, bottomKey := in.opts, "compression_opts"
	if in.bottomOpts.enabled {
		bottomOpts, bottomKey = in.bottomOpts, "bottommost_compression_opts"
	}
	bottomName := c.CompressionBottommost
	if bottom != nil && !in.bottomKept {
		bottomName = imp.codecName(*bottom, bottomOpts, bottomKey)
	}
	if perLevel != nil {
		c.CompressionLevels = nil
		for _, codec := range perLevel {
			c.CompressionLevels = append(c.CompressionLevels, imp.codecName(codec, in.opts, "compression_opts"))
		}
		c.CompressionLevels = append(c.CompressionLevels, bottomName)
	} else {
		if levels != nil {
			c.CompressionDefault = imp.codecName(*levels, in.opts, "compression_opts")
		}
		c.CompressionBottommost = bottomName
	}
	// Strata's own file of a Config with compression_levels: the levels
	// come from it, compression_default and compression_bottommost (which
	// then have no effect) from their spellings alone.
	byLevels := imp.applyLevelsSpelling(levels != nil || bottom != nil || perLevel != nil)
	imp.applySpelling("compression_default", &c.CompressionDefault, levels != nil && !byLevels)
	imp.applySpelling("compression_bottommost", &c.CompressionBottommost, bottom != nil && !in.bottomKept && perLevel == nil && !byLevels)
}

// applyLevelsSpelling takes the "# strata: compression_levels" comment
// over when no RocksDB key named a codec (derived false) or the codecs it
// names write the RocksDB codec keys the file has (RocksDB has one zstd
// level for L0-L5: the comment carries the others), and reports whether it
// did; a disagreeing one is listed as Unmapped.
func (imp *importer) applyLevelsSpelling(derived bool) bool {
	s := imp.codecs.levelsSpelling
	if s == nil {
		return false
	}
	c := imp.cfg
	want := c.Clone().resolve() // the codecs the RocksDB keys give
	trial := c.Clone()
	trial.CompressionLevels = s.names
	if got := trial.resolve(); derived && (!got.codecsOK() || codecKeys(got) != codecKeys(want)) {
		imp.unmapped = append(imp.unmapped, Unmapped{Section: s.section, Key: strataPrefix + " compression_levels",
			Value: strings.Join(s.names, ","), Reason: "disagrees with the RocksDB compression keys, which give " + want.DescribeCodecs()})
		return false
	}
	c.CompressionLevels = s.names
	return true
}

// codecName returns the config spelling of a RocksDB codec at a zstd level
// (0: the default): "zstd" when the level is zstd_level's, "zstd:N" otherwise.
func (imp *importer) codecName(codec compression.Codec, opts codecOpts, key string) string {
	level, raw := opts.level, opts.raw
	if codec.Algorithm == compression.Zstd && !codec.DefaultLevel {
		level = codec.Level // a config file's "zstd:6" keeps its level
	}
	if codec.Algorithm != compression.Zstd || level == 0 {
		return codec.Algorithm.String()
	}
	if level < 1 || level > compression.MaxZstdLevel {
		imp.section = sectionCF
		imp.lossy(key, raw, fmt.Sprintf("zstd level %d is outside 1-%d: zstd_level is used", level, compression.MaxZstdLevel),
			fmt.Sprintf("zstd level %d is outside 1-%d", level, compression.MaxZstdLevel))
		return "zstd"
	}
	if level == imp.cfg.ZstdLevel {
		return "zstd"
	}
	return fmt.Sprintf("zstd:%d", level)
}

// applySpelling replaces a codec name derived from the RocksDB keys by the
// "# strata:" spelling when both mean the same codec, and sets it when no
// RocksDB key named the codec.
func (imp *importer) applySpelling(key string, dst *string, derived bool) {
	s := imp.codecs.spellings[key]
	if s == nil {
		return
	}
	if !derived {
		*dst = s.value
		return
	}
	want, err := imp.cfg.codec(*dst)
	got, err2 := imp.cfg.codec(s.value)
	if err == nil && err2 == nil && want == got {
		*dst = s.value
		return
	}
	imp.unmapped = append(imp.unmapped, Unmapped{Section: s.section, Key: strataPrefix + " " + key, Value: s.value,
		Reason: fmt.Sprintf("disagrees with the RocksDB compression keys, which give %s", *dst)})
}

// parseSize reads a size in bytes as RocksDB's option strings write it: an
// unsigned integer, optionally followed by one of k, m, g, t (upper case
// too) for 2^10, 2^20, 2^30, 2^40 (RocksDB's ParseUint64), as in
// write_buffer_size=64m.
func parseSize(value string) (uint64, error) {
	digits, shift := value, 0
	if value != "" {
		if i := strings.IndexByte("kmgt", value[len(value)-1]|0x20); i >= 0 {
			digits, shift = value[:len(value)-1], 10*(i+1)
		}
	}
	n, err := strconv.ParseUint(digits, 10, 64)
	if err != nil || n > math.MaxUint64>>shift {
		return 0, fmt.Errorf("size %q: expected an unsigned integer with an optional k, m, g or t", value)
	}
	return n << shift, nil
}

// parseBool reads a boolean as RocksDB writes it: true, false, 1 or 0.
func parseBool(key, value string) (bool, error) {
	switch value {
	case "true", "1":
		return true, nil
	case "false", "0":
		return false, nil
	}
	return false, fmt.Errorf("%s=%s: expected true or false", key, clip(value))
}

// parseInt reads an integer that fits in bits.
func parseInt(key, value string, bits int) (int64, error) {
	n, err := strconv.ParseInt(value, 10, bits)
	if err != nil {
		if errors.Is(err, strconv.ErrRange) {
			return 0, fmt.Errorf("%s=%s: integer out of range", key, clip(value))
		}
		return 0, fmt.Errorf("%s=%s: expected an integer", key, clip(value))
	}
	return n, nil
}

// codecKeys is the OPTIONS text of the RocksDB codec options of r.
func codecKeys(r *Resolved) string {
	var b strings.Builder
	for i := range fields {
		if f := &fields[i]; f.rocksdb != "" && slices.Contains(f.sets, "compression_levels") {
			text, _ := f.format(r)
			b.WriteString(f.rocksdb + "=" + text + "\n")
		}
	}
	return b.String()
}
