package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"

	"github.com/BurntSushi/toml"
	"go.yaml.in/yaml/v3"
)

// The file formats Parse and Marshal accept. "yml" is accepted as "yaml".
const (
	FormatTOML = "toml"
	FormatYAML = "yaml"
	FormatJSON = "json"
)

// Load reads a configuration file, choosing its format by the extension
// (.toml, .yaml or .yml, .json; case is ignored), and returns the validated
// Config: Default() with every key of the file laid over it. A key the file
// does not set keeps its default, so an empty file yields Default().
//
// Besides Strata's keys, the top level takes the RocksDB names of the
// settings Strata maps, in RocksDB's units (write_buffer_size in bytes,
// compression_per_level as a list of codecs; see rocksdb_names.go and
// docs/config.md).
//
// Every error names the file. Unknown keys, values of the wrong type and
// invalid values are reported all at once as a *ValidationError whose
// *FieldError entries each name their key (errors.As finds them); a file
// that cannot be read keeps its *fs.PathError in the chain.
func Load(path string) (*Config, error) {
	return load(path, Default())
}

// load is Load over base instead of Default().
func load(path string, base *Config) (*Config, error) {
	ext := strings.ToLower(filepath.Ext(path))
	format := strings.TrimPrefix(ext, ".")
	if _, err := parseFormat(format); err != nil {
		return nil, fmt.Errorf("config: %s: unsupported file extension %q: allowed are .toml, .yaml, .yml, .json", path, ext)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	cfg, err := parse(data, format, base)
	if err != nil {
		return nil, &prefixedError{prefix: "config: " + path + ": ", err: err}
	}
	return cfg, nil
}

// prefixedError puts context such as a file's path in front of an error of
// this package, in place of its "config: " prefix.
type prefixedError struct {
	prefix string
	err    error
}

func (e *prefixedError) Error() string {
	return e.prefix + strings.TrimPrefix(e.err.Error(), "config: ")
}

func (e *prefixedError) Unwrap() error { return e.err }

// Parse decodes a configuration in the given format ("toml", "yaml" or
// "yml", "json") over Default() and validates it, as Load does for a file.
// Empty input, or input holding only comments or whitespace, yields
// Default(). Keys match exactly; integers must be written as integers; a
// null value (YAML ~, JSON null) is an error except for db_paths, where it
// means no entries.
//
// Syntax errors carry the line. Every other problem comes back at once as a
// *ValidationError of *FieldError, each naming its key:
//
//	memtable_size_mb = "big": expected an integer
//	memtable_sise_mb = 512: unknown key (did you mean memtable_size_mb?)
//	write_buffer_size = 100000000: not a whole number of MiB (1048576 bytes), the unit of memtable_size_mb: the nearest are 99614720 and 100663296
//	memtable_size_mb = 8192: must be from 1 to 4095
//
// The problems of keys and types come first, in file order; a key with one
// keeps its default while the rest of the file is laid over the base and
// validated, so Validate's problems with the other keys follow in the same
// error.
func Parse(data []byte, format string) (*Config, error) {
	return parse(data, format, Default())
}

// parse is Parse over base (which it does not change) instead of Default().
func parse(data []byte, format string, base *Config) (*Config, error) {
	f, err := parseFormat(format)
	if err != nil {
		return nil, err
	}
	var tree *value
	switch f {
	case FormatTOML:
		tree, err = tomlTree(data)
	case FormatYAML:
		tree, err = yamlTree(data)
	case FormatJSON:
		tree, err = jsonTree(data)
	}
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	c := checkTree(tree)
	cfg := base.Clone()
	assign(reflect.ValueOf(cfg).Elem(), tree, configSchema, c.bad)
	problems := append(c.problems, applyRocksDBNames(cfg, tree, c.rocksDB)...)
	byFilePosition(problems, tree)
	var verr *ValidationError
	if err := cfg.Validate(); errors.As(err, &verr) {
		problems = append(problems, verr.Problems...)
	} else if err != nil {
		return nil, err
	}
	if len(problems) > 0 {
		return nil, &ValidationError{Problems: problems}
	}
	return cfg, nil
}

// parseFormat returns the canonical name of a format.
func parseFormat(format string) (string, error) {
	switch strings.ToLower(strings.TrimPrefix(format, ".")) {
	case "toml":
		return FormatTOML, nil
	case "yaml", "yml":
		return FormatYAML, nil
	case "json":
		return FormatJSON, nil
	}
	return "", fmt.Errorf("config: unknown format %q: allowed are toml, yaml (or yml), json", format)
}

// Marshal writes c in the given format ("toml", "yaml" or "yml", "json"),
// every key in field order, so that Parse (and Load) of the result yields a
// Config equal to c, provided c is valid. An empty db_paths or
// compression_levels is written as an empty list. Marshal does not validate c.
func (c *Config) Marshal(format string) ([]byte, error) {
	f, err := parseFormat(format)
	if err != nil {
		return nil, err
	}
	out := c.Clone()
	if out.DBPaths == nil {
		out.DBPaths = []DBPath{} // "db_paths = []" rather than an absent key or null
	}
	if out.CompressionLevels == nil {
		out.CompressionLevels = []string{}
	}
	var buf bytes.Buffer
	switch f {
	case FormatTOML:
		err = toml.NewEncoder(&buf).Encode(out)
	case FormatYAML:
		enc := yaml.NewEncoder(&buf)
		enc.SetIndent(2)
		if err = enc.Encode(out); err == nil {
			err = enc.Close()
		}
	case FormatJSON:
		enc := json.NewEncoder(&buf)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false)
		err = enc.Encode(out)
	}
	if err != nil {
		return nil, fmt.Errorf("config: marshal %s: %w", f, err)
	}
	return buf.Bytes(), nil
}
