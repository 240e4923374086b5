package config

import (
	"fmt"
	"math"
	"math/big"
	"reflect"
	"strconv"
	"strings"

	"github.com/stratadb/strata/internal/textdist"
)

// Parse reads a file in one path for every format. The format's library
// reads the syntax into a tree of values, the same for every format
// (tomlTree, yamlTree, jsonTree); checkTree checks the tree against the keys
// and types of Config, so that every unknown key and every value of the
// wrong type is reported at once as a FieldError naming its key:
//
//	memtable_size_mb = "big": expected an integer
//
// and, once the tree is clean, assign lays it over the base Config. The
// libraries never decode into the struct themselves, so they cannot
// disagree with the check.
//
// The check is stricter than some of the libraries would be: keys match
// exactly (encoding/json and BurntSushi/toml fall back to case-insensitive
// matches), integers must be written as integers (yaml.v3 would truncate
// 1.5 to 1) and a negative target_size_bytes is an error (BurntSushi/toml
// would wrap it around).

// valueKind is the type of a value in a parsed file.
type valueKind uint8

const (
	kindNull valueKind = iota
	kindString
	kindInt
	kindFloat
	kindBool
	kindTable
	kindList
	kindOther // datetimes, binary data, out-of-range numbers: no key takes them
)

// maxTreeDepth is how deep the tree keeps structure: top-level table,
// db_paths list, entry table, scalar. Anything deeper is an error anyway, so
// a nested list or table below it is kept as an empty marker.
const maxTreeDepth = 4

// value is one node of a parsed file.
type value struct {
	kind    valueKind
	str     string
	num     *big.Int
	float   float64
	boolean bool
	what    string            // kindOther: what it is ("a datetime")
	keys    []string          // kindTable: keys in file order
	table   map[string]*value // kindTable
	dups    []dupKey          // kindTable: keys given more than once
	list    []*value          // kindList
}

func newTable() *value { return &value{kind: kindTable, table: map[string]*value{}} }

// dupKey is a repetition of a key in one table.
type dupKey struct {
	key string
	v   *value
}

// set adds key to a table, remembering a repeated key as a problem.
func (t *value) set(key string, v *value) {
	if _, ok := t.table[key]; ok {
		t.dups = append(t.dups, dupKey{key, v})
		return
	}
	t.keys = append(t.keys, key)
	t.table[key] = v
}

// rawValue is a FieldError value shown as is, without quotes.
type rawValue string

// shown returns the value as a FieldError shows it.
func (v *value) shown() any {
	switch v.kind {
	case kindString:
		return v.str
	case kindInt:
		if v.num.IsInt64() {
			return v.num.Int64()
		}
		return rawValue(v.num.String())
	case kindFloat:
		s := strconv.FormatFloat(v.float, 'g', -1, 64)
		if !strings.ContainsAny(s, ".eIN") {
			s += ".0" // show 512.0 as a float, not as the integer 512
		}
		return rawValue(s)
	case kindBool:
		return v.boolean
	case kindNull:
		return rawValue("null")
	case kindTable:
		return rawValue("{...}")
	case kindList:
		return rawValue("[...]")
	default:
		return rawValue("<" + v.what + ">")
	}
}

// keyKind is the type a key accepts.
type keyKind uint8

const (
	keyString keyKind = iota
	keyInt
	keyUint
	keyFloat
	keyBool
	keyDBPaths
	keyTable     // a section such as [server]: sub holds its keys
	keyTableList // a list of tables such as [[cluster.members]]: sub holds their keys
	// keyStringList is a list of strings, or one string: RocksDB's
	// compression_per_level (rocksdb_names.go); no Config field has it.
	keyStringList
	// keySize is a size in bytes under a RocksDB name: a non-negative
	// integer, or a string with RocksDB's suffix ("64m"; parseSize).
	keySize
	// keyCodecList is a list of codec names (compression_levels); null or
	// [] means no entries.
	keyCodecList
)

// keySpec is one key of a table: its name and type.
type keySpec struct {
	name  string
	kind  keyKind
	bits  int // keyInt, keyUint: the Go type's size
	sub   schema
	field int // the index of the struct field
}

// schema lists the keys of a table in field order.
type schema []keySpec

func (s schema) lookup(name string) (keySpec, bool) {
	for _, k := range s {
		if k.name == name {
			return k, true
		}
	}
	return keySpec{}, false
}

var configSchema = schemaOf(reflect.TypeFor[Config]())

// schemaOf reads the keys of a struct from its toml tags; a test checks the
// yaml and json tags agree.
func schemaOf(t reflect.Type) schema {
	var s schema
	for i := range t.NumField() {
		f := t.Field(i)
		spec := keySpec{name: f.Tag.Get("toml"), field: i}
		switch f.Type.Kind() {
		case reflect.String:
			spec.kind = keyString
		case reflect.Int, reflect.Int64:
			spec.kind, spec.bits = keyInt, f.Type.Bits()
		case reflect.Uint64:
			spec.kind, spec.bits = keyUint, f.Type.Bits()
		case reflect.Float64:
			spec.kind = keyFloat
		case reflect.Bool:
			spec.kind = keyBool
		case reflect.Struct:
			spec.kind, spec.sub = keyTable, schemaOf(f.Type)
		case reflect.Slice:
			switch {
			case f.Type.Elem() == reflect.TypeFor[DBPath]():
				spec.kind, spec.sub = keyDBPaths, schemaOf(f.Type.Elem())
			case f.Type.Elem().Kind() == reflect.String:
				spec.kind = keyCodecList
			case f.Type.Elem().Kind() == reflect.Struct:
				spec.kind, spec.sub = keyTableList, schemaOf(f.Type.Elem())
			default:
				panic("config: unsupported field " + f.Name)
			}
		default:
			panic("config: unsupported field " + f.Name)
		}
		s = append(s, spec)
	}
	return s
}

// checker collects the FieldErrors of a parsed file.
type checker struct {
	problems []*FieldError
	// bad holds the values with a problem, which assign leaves out so that
	// the rest of the file is still assigned and validated.
	bad map[*value]bool
	// rocksDB lists the top-level keys that are RocksDB names
	// (rocksdb_names.go), of the right type, in file order.
	rocksDB []string
}

func (c *checker) add(key string, v *value, rule string) {
	c.problems = append(c.problems, &FieldError{Key: key, Value: v.shown(), Rule: rule})
}

// codecNames checks that every item of the list v, at key, is a codec name
// (a string; its value is checked when the Config is validated).
func (c *checker) codecNames(key string, v *value) {
	for i, item := range v.list {
		if item.kind != kindString {
			c.add(fmt.Sprintf("%s[%d]", key, i), item, "expected a codec name")
		}
	}
}

// checkTree checks a parsed file against Config's keys and types. The
// top level takes RocksDB's names too.
func checkTree(root *value) *checker {
	c := &checker{bad: map[*value]bool{}}
	c.table("", root, configSchema)
	return c
}

// table checks the keys of t, a table of schema s; prefix is "" for the
// top level.
func (c *checker) table(prefix string, t *value, s schema) {
	for _, k := range t.keys {
		v := t.table[k]
		before := len(c.problems)
		spec, ok := s.lookup(k)
		switch {
		case ok:
			c.value(prefix+k, v, spec)
		case prefix == "" && fileRows[k] != nil:
			if c.value(k, v, fileSpec(fileRows[k])); len(c.problems) == before {
				c.rocksDB = append(c.rocksDB, k)
			}
		case prefix == "" && notMapped(k):
			c.rocksDB = append(c.rocksDB, k)
		default:
			c.add(prefix+k, v, unknownKeyRule(k, s, prefix == ""))
		}
		if len(c.problems) > before && spec.kind != keyTable {
			c.bad[v] = true // a section's good keys are still assigned
		}
	}
	for _, d := range t.dups {
		c.add(prefix+d.key, d.v, "is set more than once")
	}
}

// maxExactFloatInt is the largest integer a float key takes: 2^53, the last
// one a float64 holds exactly (BurntSushi/toml refuses larger ones).
const maxExactFloatInt = 1 << 53

func (c *checker) value(key string, v *value, spec keySpec) {
	switch spec.kind {
	case keyString:
		if v.kind != kindString {
			c.add(key, v, "expected a string")
		}
	case keyInt:
		switch {
		case v.kind != kindInt:
			c.add(key, v, "expected an integer")
		case v.num.BitLen() >= spec.bits:
			c.add(key, v, fmt.Sprintf("integer out of range: must fit in %d bits", spec.bits))
		}
	case keyUint:
		switch {
		case v.kind != kindInt || v.num.Sign() < 0:
			c.add(key, v, "expected a non-negative integer")
		case v.num.BitLen() > spec.bits:
			c.add(key, v, fmt.Sprintf("integer out of range: must fit in %d bits", spec.bits))
		}
	case keyFloat:
		switch {
		case v.kind == kindInt:
			if new(big.Int).Abs(v.num).Cmp(big.NewInt(maxExactFloatInt)) > 0 {
				c.add(key, v, "number out of range")
			}
		case v.kind != kindFloat:
			c.add(key, v, "expected a number")
		}
	case keyBool:
		if v.kind != kindBool {
			c.add(key, v, "expected true or false")
		}
	case keySize:
		if (v.kind != kindInt || v.num.Sign() < 0) && v.kind != kindString {
			c.add(key, v, `expected a size in bytes: a non-negative integer, or a string with RocksDB's suffix k, m, g or t ("64m")`)
		}
	case keyStringList:
		if v.kind == kindString {
			return
		}
		if v.kind != kindList {
			c.add(key, v, "expected a list of codec names")
			return
		}
		c.codecNames(key, v)
	case keyCodecList:
		switch v.kind {
		case kindNull: // an empty list
		case kindList:
			c.codecNames(key, v)
		default:
			c.add(key, v, "expected a list of codec names, L0 first")
		}
	case keyTable:
		if v.kind != kindTable {
			c.add(key, v, "expected a table (a ["+key+"] section)")
			return
		}
		c.table(key+".", v, spec.sub)
	case keyDBPaths:
		switch v.kind {
		case kindNull: // an empty list
		case kindList:
			for i, item := range v.list {
				if item.kind != kindTable {
					c.add(fmt.Sprintf("%s[%d]", key, i), item, "expected a table with keys path and target_size_bytes")
					continue
				}
				c.table(fmt.Sprintf("%s[%d].", key, i), item, spec.sub)
			}
		default:
			c.add(key, v, "expected a list of tables with keys path and target_size_bytes")
		}
	case keyTableList:
		var names []string
		for _, k := range spec.sub {
			names = append(names, k.name)
		}
		want := "a table with keys " + strings.Join(names, ", ")
		switch v.kind {
		case kindNull: // an empty list
		case kindList:
			for i, item := range v.list {
				if item.kind != kindTable {
					c.add(fmt.Sprintf("%s[%d]", key, i), item, "expected "+want)
					continue
				}
				c.table(fmt.Sprintf("%s[%d].", key, i), item, spec.sub)
			}
		default:
			c.add(key, v, "expected a list of tables, each "+want)
		}
	}
}

// assign lays the values of a checked table t over the struct dst (a
// Config, a section or a list entry), leaving out unknown keys and the
// values checkTree found bad, so that the struct keeps its value there.
func assign(dst reflect.Value, t *value, s schema, bad map[*value]bool) {
	for _, k := range t.keys {
		spec, ok := s.lookup(k)
		if !ok || bad[t.table[k]] {
			continue
		}
		v, f := t.table[k], dst.Field(spec.field)
		switch spec.kind {
		case keyString:
			f.SetString(v.str)
		case keyInt:
			f.SetInt(v.num.Int64())
		case keyUint:
			f.SetUint(v.num.Uint64())
		case keyFloat:
			if v.kind == kindInt {
				f.SetFloat(float64(v.num.Int64()))
			} else {
				f.SetFloat(v.float)
			}
		case keyBool:
			f.SetBool(v.boolean)
		case keyCodecList:
			var names []string // null and [] mean no entries
			for _, item := range v.list {
				names = append(names, item.str)
			}
			f.Set(reflect.ValueOf(names))
		case keyTable:
			assign(f, v, spec.sub, bad)
		case keyDBPaths, keyTableList:
			f.Set(reflect.Zero(f.Type())) // null and [] mean no entries
			if len(v.list) > 0 {
				f.Set(reflect.MakeSlice(f.Type(), len(v.list), len(v.list)))
				for i, item := range v.list {
					assign(f.Index(i), item, spec.sub, bad)
				}
			}
		}
	}
}

// unknownKeyRule says a key is unknown and suggests the closest key of s
// (and, at the top level, of RocksDB's names a file may use), if one is
// close (suggestion).
func unknownKeyRule(k string, s schema, top bool) string {
	var names []string
	for _, spec := range s {
		names = append(names, spec.name)
	}
	if top {
		names = append(names, fileRowNames()...)
	}
	if best, ok := suggestion(k, names); ok {
		return fmt.Sprintf("unknown key (did you mean %s?)", best)
	}
	return "unknown key"
}

// suggestion returns the name closest to a mistyped key k, by edit
// distance, ignoring case: to the whole name, or (one step further) to the
// start of a longer name, so that bloom_bitz finds bloom_bits_per_key. A
// name is suggested when the distance is at most a third of k's length,
// between 1 and 3: "foo" suggests nothing, "synk" suggests sync.
func suggestion(k string, names []string) (string, bool) {
	if len(k) > 64 {
		return "", false
	}
	key := strings.ToLower(k)
	limit := min(3, max(1, len(key)/3))
	best, bestDist := "", math.MaxInt
	for _, name := range names {
		d := textdist.Levenshtein(key, name)
		if len(key) >= 5 && len(key) < len(name) {
			d = min(d, textdist.Levenshtein(key, name[:len(key)])+1)
		}
		if d < bestDist {
			best, bestDist = name, d
		}
	}
	return best, bestDist <= limit
}
