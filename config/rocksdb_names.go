package config

import (
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
)

// A config file may name a setting as a RocksDB user knows it: the options
// of a RocksDB OPTIONS file that the table of fields maps
// (write_buffer_size, compression_per_level, filter_policy, ...), in
// RocksDB's units and forms (bytes, kLZ4Compression, "bloomfilter:10:false").
// They are read by the OPTIONS importer itself, row by row, so a config file
// and an OPTIONS file cannot map a name two ways; the importer runs in
// strict mode, where what an import would take over approximately (a size
// rounded up to whole MiB, a codec Pebble cannot store, L0-L5 with
// different codecs) is a problem of the file instead of an Unmapped entry.
//
//	write_buffer_size = 134217728                 # memtable_size_mb = 128
//	compression_per_level = ["kLZ4Compression", "kLZ4Compression", "kLZ4Compression",
//	  "kLZ4Compression", "kLZ4Compression", "kLZ4Compression", "kZSTD"]
//	filter_policy = "bloomfilter:10:false"        # bloom_bits_per_key = 10
//
// A file that names one setting twice, by its Strata key and by a RocksDB
// name (memtable_size_mb and write_buffer_size; compression_default and
// compression or compression_per_level), is refused with a problem naming
// both. As in RocksDB, compression (and compression_opts) give the
// bottommost level's codec too unless the file gives that one otherwise:
// by bottommost_compression, compression_per_level or Strata's
// compression_bottommost. RocksDB options Strata has no setting for are refused as "not
// applicable", with the reason, unless their value is what Strata does
// anyway (max_bytes_for_level_multiplier = 10).

// fileRowNames lists the RocksDB names of fileRows in the table's order.
func fileRowNames() []string {
	var names []string
	for i := range fields {
		f := &fields[i]
		for _, name := range []string{f.rocksdb, f.readAs} {
			if name != "" && fileRows[name] == f {
				names = append(names, name)
			}
		}
	}
	return names
}

// notMapped reports whether name is a RocksDB option the importer knows
// Strata has no setting for.
func notMapped(name string) bool {
	_, reason := unmappedReasons[name]
	_, agrees := agreeing[name]
	return reason || agrees
}

// fileSpec is the type a config file gives the value of a RocksDB name: the
// Strata key's for a plain value (sizes as non-negative integers), a string
// for a value RocksDB spells as text (filter_policy, compaction_style,
// codecs), the type of the fixed value for an option Strata writes fixed,
// and a list of codec names (or RocksDB's colon-separated string) for
// compression_per_level.
func fileSpec(f *field) keySpec {
	spec := keySpec{name: f.rocksdb, kind: keyString}
	switch {
	case f.text == perLevelText:
		spec.kind = keyStringList
	case f.fixed == "true" || f.fixed == "false":
		spec.kind = keyBool
	case f.fixed != "":
		if _, err := strconv.Atoi(f.fixed); err == nil {
			spec.kind, spec.bits = keyInt, 64
		}
	case f.key != "" && f.text == nil:
		spec, _ = configSchema.lookup(f.key)
		spec.name = f.rocksdb
		if f.scale > 1 {
			spec.kind = keySize
		}
	}
	return spec
}

// optionText is a scalar file value as an OPTIONS file would write it.
func optionText(v *value) string {
	switch v.kind {
	case kindString:
		return v.str
	case kindInt:
		return v.num.String()
	case kindFloat:
		return strconv.FormatFloat(v.float, 'g', -1, 64)
	case kindBool:
		return strconv.FormatBool(v.boolean)
	}
	return fmt.Sprint(v.shown())
}

// applyRocksDBNames lays the RocksDB names of a file (names, in file order,
// each already of its fileSpec's type) over cfg, which holds the file's
// Strata keys already, and returns the problems.
func applyRocksDBNames(cfg *Config, root *value, names []string) []*FieldError {
	if len(names) == 0 {
		return nil
	}
	imp := &importer{cfg: cfg, strict: true, shown: map[string]any{}}
	imp.codecs.spellings = map[string]*spelling{}
	_, imp.codecs.bottomKept = root.table["compression_bottommost"]
	for _, name := range names {
		v := root.table[name]
		var list []string
		imp.shown[name] = v.shown()
		if v.kind == kindList { // compression_per_level, checked to hold strings
			for _, item := range v.list {
				list = append(list, item.str)
			}
			imp.shown[name] = quotedList(list)
		}
		f := fileRows[name]
		if f == nil {
			imp.section = ""
			imp.unknown(name, optionText(v))
			continue
		}
		if other := alsoSet(f, root); other != "" {
			imp.problems = append(imp.problems, &FieldError{Key: name, Value: imp.shown[name],
				Rule: fmt.Sprintf("the file sets %s too, which is the same setting: keep one of the two", other)})
			continue
		}
		imp.section = f.section
		if v.kind == kindList {
			imp.perLevel(name, list, fmt.Sprint(imp.shown[name]))
			continue
		}
		imp.fileValue(f, name, v)
	}
	imp.resolveCodecs()
	imp.codecOptsUsed(root)
	return imp.problems
}

// fileValue takes the file's value of one RocksDB name over through its
// row, and holds a Strata key it sets to the key's range, in the RocksDB
// name's unit (a value outside it leaves the key as it was).
func (imp *importer) fileValue(f *field, name string, v *value) {
	var before any
	if f.key != "" {
		before = f.value(imp.cfg).Interface()
	}
	text := optionText(v)
	if err := f.parse(imp, name, text, text); err != nil {
		// The checker gave the value its type; the row still refused it
		// ("64x" for a size). Its error says "name=value: rule".
		rule := strings.TrimPrefix(err.Error(), name+"="+clip(text)+": ")
		imp.problems = append(imp.problems, &FieldError{Key: name, Value: v.shown(), Rule: rule})
		return
	}
	if f.key == "" || f.limits == nil || f.limits.allows(f.number(imp.cfg)) {
		return
	}
	f.value(imp.cfg).Set(reflect.ValueOf(before))
	rule := f.limits.rule()
	if scale := max(f.scale, 1); scale > 1 {
		rule = fmt.Sprintf("must be from %d to %d bytes (%s: %s MiB)",
			int64(f.limits.min)*scale, int64(f.limits.max)*scale, f.key, f.limits)
	}
	imp.problems = append(imp.problems, &FieldError{Key: name, Value: v.shown(), Rule: rule})
}

// alsoSet returns the Strata key the file sets beside the RocksDB name of
// row f, which sets the same setting; "" if there is none.
func alsoSet(f *field, root *value) string {
	keys := f.sets
	if f.key != "" {
		keys = []string{f.key}
	}
	for _, k := range keys {
		if _, ok := root.table[k]; ok {
			return k
		}
	}
	return ""
}

// codecOptsUsed refuses compression options that would set nothing: they
// give the level of the codec a RocksDB codec option names (RocksDB, too,
// reads bottommost_compression_opts only with enabled=true).
func (imp *importer) codecOptsUsed(root *value) {
	has := func(name string) bool { _, ok := root.table[name]; return ok }
	codecNamed := has("compression") || has("compression_per_level") || has("bottommost_compression")
	for _, name := range []string{"compression_opts", "bottommost_compression_opts"} {
		if !has(name) || alsoSet(fileRows[name], root) != "" {
			continue
		}
		switch {
		case !codecNamed:
			imp.problems = append(imp.problems, &FieldError{Key: name, Value: imp.shown[name],
				Rule: "sets the level of the codec that compression, compression_per_level or bottommost_compression names, and the file gives none of them"})
		case name == "bottommost_compression_opts" && !imp.codecs.bottomOpts.enabled:
			imp.problems = append(imp.problems, &FieldError{Key: name, Value: imp.shown[name],
				Rule: "has no effect without enabled=true, as in RocksDB"})
		}
	}
}

// byFilePosition orders problems by the place of their top-level key in
// the file, keeping the order of problems of one key.
func byFilePosition(problems []*FieldError, root *value) {
	pos := map[string]int{}
	for i, k := range root.keys {
		pos[k] = i
	}
	top := func(p *FieldError) int {
		k := p.Key
		if i := strings.IndexAny(k, ".["); i > 0 {
			if _, ok := pos[k]; !ok {
				k = k[:i]
			}
		}
		return pos[k]
	}
	slices.SortStableFunc(problems, func(a, b *FieldError) int { return top(a) - top(b) })
}
