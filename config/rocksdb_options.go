package config

import (
	"fmt"
	"slices"
	"strings"

	"github.com/stratadb/strata/compression"
)

// RocksDBOptionsFileName is the name of the RocksDB-format OPTIONS file Strata
// writes into db_path on every open. It is not numeric, so Pebble never takes
// it for one of its own OPTIONS-NNNNNN files (which it would renumber and
// delete).
const RocksDBOptionsFileName = "OPTIONS-rocksdb"

// strataPrefix starts a comment that carries a Strata setting RocksDB does
// not persist: "# strata: key=value".
const strataPrefix = "strata:"

// RocksDBOptions renders c as a RocksDB OPTIONS file (see
// RocksDBOptionsFileName), so that `grep compression` and RocksDB's tools
// show the configuration under RocksDB's option names, and
// ImportRocksDBOptions can read it back: importing the file yields a Config
// equal to c.
//
// The file has RocksDB's four sections, [Version], [DBOptions],
// [CFOptions "default"] and [TableOptions/BlockBasedTable "default"], with
// sizes in bytes. A header of comments gives the requested and the
// effective codec of each level, and each Note as "# not applicable: key =
// value: reason" (codec notes are covered by the codec lines). Then come
// the rows of the table of fields, in order (fields.go); settings RocksDB
// does not keep in its OPTIONS file (db_path, db_paths, zstd_level, sync,
// the block cache, the codec names as written, ...) are "# strata:
// key=value" comments, which RocksDB's own parser skips. Values of RocksDB keys are escaped as RocksDB
// escapes them (\: \# \\ \n \r).
//
// c should be valid; an invalid codec name is written in a comment and
// leaves out the compression keys. A requested minlz is written as
// kMinLZCompression, a name RocksDB itself does not know; the header says so.
func (c *Config) RocksDBOptions() string { return c.Clone().resolve().RocksDBOptions() }

// RocksDBOptions is Config.RocksDBOptions of the resolved Config. The lines
// below the header are the rows of fields, in order.
func (r *Resolved) RocksDBOptions() string {
	c := r.Config
	w := &optionsWriter{}
	w.comment("RocksDB-format options file written by Strata (github.com/stratadb/strata).")
	w.comment("Strata stores its data with Pebble, which neither reads nor needs this file:")
	w.comment("it records the configuration under RocksDB's option names, and Strata's")
	w.comment("config.ImportRocksDBOptions reads it back. Settings that RocksDB does not keep")
	w.comment("in its options file are the comments starting with \"strata:\" below.")
	w.comment("")
	levels, bottom := r.Codecs[0], r.Codecs[NumLevels-1]
	uses := func(a compression.Algorithm) bool {
		return (r.codecErr[0] == nil && levels.Algorithm == a) || (r.codecErr[1] == nil && bottom.Algorithm == a)
	}
	switch {
	case r.perLevel() && r.codecsOK():
		for l, codec := range r.Codecs {
			w.codecLine(fmt.Sprintf("compression_per_level (level %d)", l), "", codec, nil)
		}
		uses = func(a compression.Algorithm) bool {
			return slices.ContainsFunc(r.Codecs[:], func(c compression.Codec) bool { return c.Algorithm == a })
		}
	case r.perLevel():
		w.comment(fmt.Sprintf("compression_levels: invalid %s", quotedList(c.CompressionLevels)))
		uses = func(compression.Algorithm) bool { return false }
	default:
		w.codecLine("compression (levels 0-5)", c.CompressionDefault, levels, r.codecErr[0])
		w.codecLine("bottommost_compression (level 6)", c.CompressionBottommost, bottom, r.codecErr[1])
	}
	if uses(compression.LZ4) {
		w.comment(reasonLZ4)
	}
	if uses(compression.MinLZ) {
		w.comment("kMinLZCompression is Strata's name for MinLZ, which RocksDB does not have:")
		w.comment("RocksDB itself cannot load this file as it is.")
	}
	notes := false
	for _, n := range r.Notes {
		if n.Reason == reasonLZ4 {
			continue
		}
		if !notes {
			w.comment("")
			notes = true
		}
		w.comment("not applicable: " + n.String())
	}
	w.comment("")
	section := sectionHeader
	for i := range fields {
		f := &fields[i]
		if f.section != section {
			w.section(f.section)
			section = f.section
		}
		text, ok := f.format(r)
		if !ok {
			continue
		}
		if f.comment != "" {
			w.comment(f.comment)
		}
		if f.rocksdb == "" {
			w.strata(f.key, text)
		} else {
			w.key(f.rocksdb, text)
		}
	}
	return w.b.String()
}

// optionsWriter writes the lines of an OPTIONS file; inside a section every
// line is indented by two spaces, as RocksDB writes them.
type optionsWriter struct {
	b      strings.Builder
	indent string
}

func (w *optionsWriter) comment(text string) {
	if text == "" {
		w.b.WriteString(w.indent + "#\n")
		return
	}
	w.b.WriteString(w.indent + "# " + text + "\n")
}

func (w *optionsWriter) strata(key, escaped string) {
	w.comment(strataPrefix + " " + key + "=" + escaped)
}

func (w *optionsWriter) section(name string) {
	w.b.WriteString("\n[" + name + "]\n")
	w.indent = "  "
}

func (w *optionsWriter) key(key, escaped string) {
	w.b.WriteString(w.indent + key + "=" + escaped + "\n")
}

func (w *optionsWriter) codecLine(what, name string, codec compression.Codec, err error) {
	if err != nil {
		w.comment(fmt.Sprintf("%s: invalid codec %q", what, name))
		return
	}
	w.comment(fmt.Sprintf("%s: requested %s, effective %s", what, describeCodec(codec), describeCodec(codec.Effective())))
}

// describeCodec names a codec with its zstd level spelled out.
func describeCodec(c compression.Codec) string {
	if c.Algorithm == compression.Zstd {
		return fmt.Sprintf("zstd level %d", c.Level)
	}
	return c.Algorithm.String()
}
