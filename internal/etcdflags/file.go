package etcdflags

import (
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// securityKeys maps the keys of etcd's client-transport-security and
// peer-transport-security sections (embed's securityConfig) to flags.
var securityKeys = map[string][2]string{
	"cert-file":                    {"cert-file", "peer-cert-file"},
	"key-file":                     {"key-file", "peer-key-file"},
	"client-cert-file":             {"client-cert-file", "peer-client-cert-file"},
	"client-key-file":              {"client-key-file", "peer-client-key-file"},
	"client-cert-auth":             {"client-cert-auth", "peer-client-cert-auth"},
	"trusted-ca-file":              {"trusted-ca-file", "peer-trusted-ca-file"},
	"auto-tls":                     {"auto-tls", "peer-auto-tls"},
	"allowed-cn":                   {"", "peer-cert-allowed-cn"},
	"allowed-hostname":             {"client-cert-allowed-hostname", "peer-cert-allowed-hostname"},
	"skip-client-san-verification": {"", "peer-skip-client-san-verification"},
}

// loadFile reads etcd's YAML configuration file (embed.ConfigFromFile):
// top-level keys named as the flags, URL lists as comma-separated
// strings, TLS in client-transport-security and peer-transport-security.
// A duration given as a number is nanoseconds (etcd's file holds
// time.Duration as JSON). An unknown key is refused with the nearest
// name; etcd's file reader would skip it silently.
func loadFile(path string) (*Values, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--config-file: %w", err)
	}
	var doc map[string]any
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("--config-file %s: %w", path, err)
	}
	v := newValues()
	v.file = path
	keys := make([]string, 0, len(doc))
	for k := range doc {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		val := doc[k]
		if k == "client-transport-security" || k == "peer-transport-security" {
			sec, ok := val.(map[string]any)
			if val != nil && !ok {
				return nil, fmt.Errorf("--config-file %s: %s must be a mapping", path, k)
			}
			peer := 0
			if k == "peer-transport-security" {
				peer = 1
			}
			for sk, sv := range sec {
				names, ok := securityKeys[sk]
				if !ok || names[peer] == "" {
					return nil, fmt.Errorf("--config-file %s: unknown key %s.%s", path, k, sk)
				}
				if err := setFromFile(v, path, names[peer], k+"."+sk, sv); err != nil {
					return nil, err
				}
			}
			continue
		}
		if _, ok := lookup(k); !ok || k == "config-file" {
			return nil, fmt.Errorf("--config-file %s: unknown key %s; did you mean %s?", path, k, Nearest(k))
		}
		if err := setFromFile(v, path, k, k, val); err != nil {
			return nil, err
		}
	}
	return v, nil
}

// setFromFile sets flag from a YAML value.
func setFromFile(v *Values, path, flag, key string, val any) error {
	if val == nil {
		return nil
	}
	d, _ := lookup(flag)
	var s string
	switch x := val.(type) {
	case []any:
		var parts []string
		for _, p := range x {
			parts = append(parts, fmt.Sprint(p))
		}
		s = strings.Join(parts, ",")
	case int:
		s = strconv.Itoa(x)
		if d.kind == kDuration {
			s = time.Duration(x).String()
		}
	case map[string]any:
		return fmt.Errorf("--config-file %s: %s must be a value, not a mapping", path, key)
	default:
		s = fmt.Sprint(x)
	}
	return v.set(flag, s, key+" in "+path)
}
