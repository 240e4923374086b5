package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/big"
	"slices"
	"strings"
	"time"

	"github.com/BurntSushi/toml"
	"go.yaml.in/yaml/v3"
)

// The syntax of the three file formats, each read by its library into the
// tree of values that decode.go checks and assigns: the only place a
// format differs from another.

// tomlTree parses a TOML file. BurntSushi/toml rejects repeated keys itself.
func tomlTree(data []byte) (*value, error) {
	var m map[string]any
	md, err := toml.Decode(string(data), &m)
	if err != nil {
		return nil, err
	}
	// The decoded map has lost the key order; MetaData.Keys has it.
	order := map[string]int{}
	for i, k := range md.Keys() {
		s := strings.Join(k, "\x00")
		if _, ok := order[s]; !ok {
			order[s] = i
		}
	}
	return fromTOML(m, "", order, 0), nil
}

func fromTOML(x any, path string, order map[string]int, depth int) *value {
	switch x := x.(type) {
	case map[string]any:
		t := newTable()
		if depth >= maxTreeDepth {
			return t
		}
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		pos := func(k string) int {
			if i, ok := order[path+k]; ok {
				return i
			}
			return math.MaxInt
		}
		slices.SortFunc(keys, func(a, b string) int {
			if d := pos(a) - pos(b); d != 0 {
				return d
			}
			return strings.Compare(a, b)
		})
		for _, k := range keys {
			t.set(k, fromTOML(x[k], path+k+"\x00", order, depth+1))
		}
		return t
	case []map[string]any:
		l := &value{kind: kindList}
		if depth < maxTreeDepth {
			for _, item := range x {
				l.list = append(l.list, fromTOML(item, path, order, depth+1))
			}
		}
		return l
	case []any:
		l := &value{kind: kindList}
		if depth < maxTreeDepth {
			for _, item := range x {
				l.list = append(l.list, fromTOML(item, path, order, depth+1))
			}
		}
		return l
	case string:
		return &value{kind: kindString, str: x}
	case int64:
		return &value{kind: kindInt, num: big.NewInt(x)}
	case float64:
		return &value{kind: kindFloat, float: x}
	case bool:
		return &value{kind: kindBool, boolean: x}
	case time.Time:
		return &value{kind: kindOther, what: "a datetime"}
	default:
		return &value{kind: kindOther, what: fmt.Sprintf("a %T", x)}
	}
}

// yamlTree parses a YAML file: a single document whose top level is a
// mapping. yaml.v3 keeps repeated keys in its node tree; set records them.
func yamlTree(data []byte) (*value, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return newTable(), nil
		}
		return nil, err
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		if err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("yaml: line %d: a config file holds one document, found another", extra.Line)
	}
	root := &doc
	if root.Kind == yaml.DocumentNode {
		if len(root.Content) == 0 {
			return newTable(), nil
		}
		root = root.Content[0]
	}
	root = yamlResolve(root)
	switch {
	case root.Kind == yaml.MappingNode:
		return fromYAML(root, 0), nil
	case root.Kind == yaml.ScalarNode && root.ShortTag() == "!!null":
		return newTable(), nil // a document of just "~" or "null"
	}
	return nil, fmt.Errorf("yaml: line %d: the top level must be a mapping of keys to values", root.Line)
}

// yamlResolve follows aliases to the anchored node.
func yamlResolve(n *yaml.Node) *yaml.Node {
	for i := 0; n.Kind == yaml.AliasNode && n.Alias != nil && i < 16; i++ {
		n = n.Alias
	}
	return n
}

func fromYAML(n *yaml.Node, depth int) *value {
	n = yamlResolve(n)
	switch n.Kind {
	case yaml.MappingNode:
		t := newTable()
		if depth >= maxTreeDepth {
			return t
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := yamlResolve(n.Content[i])
			key := k.Value
			if k.Kind != yaml.ScalarNode {
				key = fmt.Sprintf("<non-scalar key at line %d>", k.Line)
			}
			t.set(key, fromYAML(n.Content[i+1], depth+1))
		}
		return t
	case yaml.SequenceNode:
		l := &value{kind: kindList}
		if depth < maxTreeDepth {
			for _, item := range n.Content {
				l.list = append(l.list, fromYAML(item, depth+1))
			}
		}
		return l
	case yaml.ScalarNode:
		return fromYAMLScalar(n)
	default:
		return &value{kind: kindOther, what: "an unresolved alias"}
	}
}

func fromYAMLScalar(n *yaml.Node) *value {
	tag := n.ShortTag()
	switch tag {
	case "!!str":
		return &value{kind: kindString, str: n.Value}
	case "!!null":
		return &value{kind: kindNull}
	case "!!bool":
		var b bool
		if n.Decode(&b) == nil {
			return &value{kind: kindBool, boolean: b}
		}
	case "!!int":
		var i int64
		if n.Decode(&i) == nil {
			return &value{kind: kindInt, num: big.NewInt(i)}
		}
		var u uint64
		if n.Decode(&u) == nil {
			return &value{kind: kindInt, num: new(big.Int).SetUint64(u)}
		}
		return &value{kind: kindOther, what: "an integer out of range"}
	case "!!float":
		var f float64
		if n.Decode(&f) == nil {
			return &value{kind: kindFloat, float: f}
		}
	case "!!timestamp":
		return &value{kind: kindOther, what: "a timestamp"}
	case "!!binary":
		return &value{kind: kindOther, what: "binary data"}
	}
	return &value{kind: kindOther, what: "a value tagged " + tag}
}

// jsonTree parses a JSON file: one object, nothing after it. Whitespace
// alone is an empty file. Repeated keys, which encoding/json silently
// accepts (the last wins), are recorded by set.
func jsonTree(data []byte) (*value, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return newTable(), nil
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return nil, jsonError(data, err)
	}
	if tok != json.Delim('{') {
		return nil, jsonError(data, fmt.Errorf("the top level must be an object, found %v", jsonTokenName(tok)))
	}
	root, err := fromJSON(dec, tok, 0)
	if err != nil {
		return nil, jsonError(data, err)
	}
	if tok, err := dec.Token(); !errors.Is(err, io.EOF) {
		if err != nil {
			return nil, jsonError(data, err)
		}
		return nil, jsonError(data, fmt.Errorf("unexpected %v after the top-level object", jsonTokenName(tok)))
	}
	return root, nil
}

// fromJSON builds the value that begins with tok; jsonNext cuts the
// structure at maxTreeDepth.
func fromJSON(dec *json.Decoder, tok json.Token, depth int) (*value, error) {
	switch tok := tok.(type) {
	case json.Delim:
		if tok == '{' {
			t := newTable()
			for dec.More() {
				k, err := dec.Token()
				if err != nil {
					return nil, err
				}
				v, err := jsonNext(dec, depth+1)
				if err != nil {
					return nil, err
				}
				t.set(k.(string), v)
			}
			_, err := dec.Token() // '}'
			return t, err
		}
		l := &value{kind: kindList}
		for dec.More() {
			v, err := jsonNext(dec, depth+1)
			if err != nil {
				return nil, err
			}
			l.list = append(l.list, v)
		}
		_, err := dec.Token() // ']'
		return l, err
	case string:
		return &value{kind: kindString, str: tok}, nil
	case json.Number:
		if !strings.ContainsAny(string(tok), ".eE") {
			if n, ok := new(big.Int).SetString(string(tok), 10); ok {
				return &value{kind: kindInt, num: n}, nil
			}
		}
		f, err := tok.Float64()
		if err != nil {
			return &value{kind: kindOther, what: "a number out of range"}, nil
		}
		return &value{kind: kindFloat, float: f}, nil
	case bool:
		return &value{kind: kindBool, boolean: tok}, nil
	case nil:
		return &value{kind: kindNull}, nil
	}
	return nil, fmt.Errorf("unexpected token %v", tok)
}

func jsonNext(dec *json.Decoder, depth int) (*value, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	if d, ok := tok.(json.Delim); ok && depth >= maxTreeDepth {
		return jsonSkip(dec, d)
	}
	return fromJSON(dec, tok, depth)
}

// jsonSkip consumes a nested object or list without recursion and returns
// an empty marker of its kind.
func jsonSkip(dec *json.Decoder, open json.Delim) (*value, error) {
	v := &value{kind: kindList}
	if open == '{' {
		v = newTable()
	}
	for nesting := 1; nesting > 0; {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			nesting++
		case json.Delim('}'), json.Delim(']'):
			nesting--
		}
	}
	return v, nil
}

func jsonTokenName(tok json.Token) string {
	switch tok := tok.(type) {
	case json.Delim:
		return fmt.Sprintf("%q", string(tok))
	case string:
		return "a string"
	case nil:
		return "null"
	case bool:
		return "a boolean"
	default:
		return "a number"
	}
}

// jsonError adds the line of a syntax error, which encoding/json gives only
// as a byte offset.
func jsonError(data []byte, err error) error {
	var syntax *json.SyntaxError
	if errors.As(err, &syntax) {
		off := min(max(syntax.Offset, 0), int64(len(data)))
		line := 1 + bytes.Count(data[:off], []byte{'\n'})
		return fmt.Errorf("json: line %d: %w", line, err)
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("json: unexpected end of file")
	}
	return fmt.Errorf("json: %w", err)
}
