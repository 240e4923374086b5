// Package etcdflags reads etcd's command line, its ETCD_* environment and
// its YAML configuration file (--config-file) with etcd's meaning, and
// builds the Strata configuration that `strata etcd` serves:
//
//	v, notes, err := etcdflags.Parse(os.Args[1:], os.Environ())
//	res, err := etcdflags.Build(v)   // res.Config, res.Notes
//	err = etcdflags.CheckDataDir(res.DataDir)
//	more, err := etcdflags.MakeSelfCerts(res.SelfCerts) // --auto-tls
//
// Every etcd flag is known here (the names of etcd 3.7's embed and
// etcdmain, plus the experimental names kubeadm still writes). A flag is
// either mapped to a config key, accepted with a note saying why it has
// no effect (it tunes an etcd internal Strata does not have), or refused
// because Strata lacks the feature and running without it would change
// what the operator asked for (discovery, CRLs). An unknown flag is
// refused with etcd's nearest flag name. --auto-tls and --peer-auto-tls
// make etcd's self-signed certificates (MakeSelfCerts, before serving).
// See docs/etcd-flags.md.
package etcdflags

import (
	"errors"
	"fmt"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"github.com/stratadb/strata/internal/textdist"
)

// kind is how a flag's value is parsed (as etcd's flag package would).
type kind int

const (
	kString kind = iota
	kBool
	kUint     // a non-negative integer
	kInt      // an integer
	kDuration // a Go duration ("5s")
	kURLs     // comma-separated http(s) URLs
)

// flagDef is one etcd flag.
type flagDef struct {
	name string
	kind kind
	def  string
}

// defs are etcd's flags with etcd's defaults ("" when etcd's is empty or
// computed). How each is used is in build.go (mapped) and effects.go.
var defs = []flagDef{
	{"config-file", kString, ""},
	{"name", kString, "default"},
	{"data-dir", kString, ""}, // etcd: ${name}.etcd
	{"wal-dir", kString, ""},
	{"listen-client-urls", kURLs, "http://localhost:2379"},
	{"advertise-client-urls", kURLs, "http://localhost:2379"},
	{"listen-peer-urls", kURLs, "http://localhost:2380"},
	{"initial-advertise-peer-urls", kURLs, "http://localhost:2380"},
	{"initial-cluster", kString, ""}, // etcd: name=initial-advertise-peer-urls
	{"initial-cluster-state", kString, "new"},
	{"initial-cluster-token", kString, "etcd-cluster"},
	{"listen-metrics-urls", kURLs, ""},
	{"listen-client-http-urls", kURLs, ""},
	{"cert-file", kString, ""},
	{"key-file", kString, ""},
	{"trusted-ca-file", kString, ""},
	{"client-cert-auth", kBool, "false"},
	{"peer-cert-file", kString, ""},
	{"peer-key-file", kString, ""},
	{"peer-trusted-ca-file", kString, ""},
	{"peer-client-cert-auth", kBool, "false"},
	{"auto-tls", kBool, "false"},
	{"peer-auto-tls", kBool, "false"},
	{"quota-backend-bytes", kInt, "0"},
	{"max-request-bytes", kUint, "1572864"},
	{"max-txn-ops", kUint, "128"},
	{"max-concurrent-streams", kUint, "4294967295"},
	{"auth-token", kString, "simple"},
	{"auth-token-ttl", kUint, "300"},
	{"bcrypt-cost", kUint, "10"},
	{"auto-compaction-mode", kString, "periodic"},
	{"auto-compaction-retention", kString, "0"},
	{"heartbeat-interval", kUint, "100"},
	{"election-timeout", kUint, "1000"},
	{"snapshot-count", kUint, "10000"},
	{"watch-progress-notify-interval", kDuration, "10m0s"},
	{"experimental-watch-progress-notify-interval", kDuration, "10m0s"},
	{"experimental-initial-corrupt-check", kBool, "false"},
	{"feature-gates", kString, ""},
	{"log-level", kString, "info"},
	{"logger", kString, "zap"},

	// Accepted without effect (effects.go says why).
	{"log-outputs", kString, "default"},
	{"log-format", kString, "json"},
	{"enable-log-rotation", kBool, "false"},
	{"log-rotation-config-json", kString, ""},
	{"metrics", kString, "basic"},
	{"enable-pprof", kBool, "false"},
	{"max-snapshots", kUint, "5"},
	{"max-wals", kUint, "5"},
	{"snapshot-catchup-entries", kUint, "5000"},
	{"backend-batch-interval", kDuration, "0s"},
	{"backend-batch-limit", kInt, "0"},
	{"backend-bbolt-freelist-type", kString, "map"},
	{"compaction-batch-limit", kInt, "1000"},
	{"compaction-sleep-interval", kDuration, "0s"},
	{"bootstrap-defrag-threshold-megabytes", kUint, "0"},
	{"pre-vote", kBool, "true"},
	{"strict-reconfig-check", kBool, "true"},
	{"max-learners", kInt, "1"},
	{"initial-election-tick-advance", kBool, "true"},
	{"grpc-keepalive-min-time", kDuration, "5s"},
	{"grpc-keepalive-interval", kDuration, "2h0m0s"},
	{"grpc-keepalive-timeout", kDuration, "20s"},
	{"corrupt-check-time", kDuration, "0s"},
	{"compact-hash-check-time", kDuration, "1m0s"},
	{"downgrade-check-time", kDuration, "5s"},
	{"warning-apply-duration", kDuration, "100ms"},
	{"warning-unary-request-duration", kDuration, "300ms"},
	{"raft-read-timeout", kDuration, "5s"},
	{"raft-write-timeout", kDuration, "5s"},
	{"socket-reuse-address", kBool, "false"},
	{"socket-reuse-port", kBool, "false"},
	{"memory-mlock", kBool, "false"},
	{"enable-grpc-gateway", kBool, "true"},
	{"cors", kString, ""},
	{"host-whitelist", kString, ""},
	{"self-signed-cert-validity", kUint, "1"},
	{"client-cert-file", kString, ""},
	{"client-key-file", kString, ""},
	{"peer-client-cert-file", kString, ""},
	{"peer-client-key-file", kString, ""},
	{"enable-distributed-tracing", kBool, "false"},
	{"distributed-tracing-address", kString, ""},
	{"distributed-tracing-service-name", kString, ""},
	{"distributed-tracing-instance-id", kString, ""},
	{"distributed-tracing-sampling-rate", kInt, "0"},
	{"version", kBool, "false"},

	// Refused when set (effects.go says why).
	{"force-new-cluster", kBool, "false"},
	{"unsafe-no-fsync", kBool, "false"},
	{"client-crl-file", kString, ""},
	{"peer-crl-file", kString, ""},
	{"client-cert-allowed-hostname", kString, ""},
	{"peer-cert-allowed-cn", kString, ""},
	{"peer-cert-allowed-hostname", kString, ""},
	{"peer-skip-client-san-verification", kBool, "false"},
	{"cipher-suites", kString, ""},
	{"tls-min-version", kString, ""},
	{"tls-max-version", kString, ""},
	{"discovery-token", kString, ""},
	{"discovery-endpoints", kString, ""},
	{"discovery-srv", kString, ""},
	{"discovery-srv-name", kString, ""},
	{"discovery-dial-timeout", kDuration, "2s"},
	{"discovery-request-timeout", kDuration, "5s"},
	{"discovery-keepalive-time", kDuration, "2s"},
	{"discovery-keepalive-timeout", kDuration, "6s"},
	{"discovery-insecure-transport", kBool, "true"},
	{"discovery-insecure-skip-tls-verify", kBool, "false"},
	{"discovery-cert", kString, ""},
	{"discovery-key", kString, ""},
	{"discovery-cacert", kString, ""},
	{"discovery-user", kString, ""},
	{"discovery-password", kString, ""},
}

// lookup returns the definition of name.
func lookup(name string) (flagDef, bool) {
	for _, d := range defs {
		if d.name == name {
			return d, true
		}
	}
	return flagDef{}, false
}

// Names returns every etcd flag name strata etcd knows, sorted.
func Names() []string {
	var ns []string
	for _, d := range defs {
		ns = append(ns, d.name)
	}
	sort.Strings(ns)
	return ns
}

// value is a flag's value, checked as its kind on Set.
type value struct {
	kind kind
	s    string
}

func (v *value) String() string { return v.s }
func (v *value) Type() string {
	switch v.kind {
	case kBool:
		return "bool"
	case kUint, kInt:
		return "int"
	case kDuration:
		return "duration"
	case kURLs:
		return "urls"
	}
	return "string"
}

func (v *value) Set(s string) error {
	var err error
	switch v.kind {
	case kBool:
		var b bool
		if b, err = strconv.ParseBool(s); err == nil {
			s = strconv.FormatBool(b)
		}
	case kUint:
		_, err = strconv.ParseUint(s, 10, 64)
	case kInt:
		_, err = strconv.ParseInt(s, 10, 64)
	case kDuration:
		_, err = time.ParseDuration(s)
	case kURLs:
		_, err = parseURLs(s)
	}
	if err != nil {
		return err
	}
	v.s = s
	return nil
}

// parseURLs parses etcd's comma-separated URL list: http or https, with a
// host and a port, nothing else.
func parseURLs(s string) ([]*url.URL, error) {
	var us []*url.URL
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		u, err := url.Parse(part)
		if err != nil {
			return nil, err
		}
		if u.Scheme != "http" && u.Scheme != "https" {
			return nil, fmt.Errorf("URL scheme must be http or https: %s (unix sockets are not supported)", part)
		}
		if u.Port() == "" || u.Hostname() == "" {
			return nil, fmt.Errorf(`URL address does not have the form "host:port": %s`, part)
		}
		if (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
			return nil, fmt.Errorf("URL must not have a path, query, fragment or user: %s", part)
		}
		us = append(us, u)
	}
	if len(us) == 0 {
		return nil, errors.New("no URL given")
	}
	return us, nil
}

// Values are the flags as given: on the command line, in ETCD_*
// variables or in the --config-file.
type Values struct {
	fs *pflag.FlagSet
	// from says where each explicitly set flag came from ("--name",
	// "ETCD_NAME", "config file key name").
	from map[string]string
	// file is the --config-file the values were read from ("" for flags
	// and ETCD_* variables).
	file string
}

// Get returns the flag's value: as set, or etcd's default.
func (v *Values) Get(name string) string {
	f := v.fs.Lookup(name)
	if f == nil {
		panic("etcdflags: no flag " + name)
	}
	return f.Value.String()
}

// IsSet reports whether the flag was given (anywhere).
func (v *Values) IsSet(name string) bool { _, ok := v.from[name]; return ok }

// Source names where the flag was given: "--name", "ETCD_NAME" or
// "name in FILE".
func (v *Values) Source(name string) string { return v.from[name] }

// Set sets a flag as if given on the command line (for tests and
// --config-file).
func (v *Values) set(name, val, from string) error {
	if err := v.fs.Set(name, val); err != nil {
		return fmt.Errorf("invalid value %q for %s: %w", val, from, err)
	}
	v.from[name] = from
	return nil
}

func newValues() *Values {
	fs := pflag.NewFlagSet("etcd", pflag.ContinueOnError)
	fs.SetOutput(discard{})
	fs.SortFlags = false
	for _, d := range defs {
		v := &value{kind: d.kind, s: d.def}
		f := fs.VarPF(v, d.name, "", "etcd's --"+d.name)
		if d.kind == kBool {
			f.NoOptDefVal = "true"
		}
	}
	return &Values{fs: fs, from: map[string]string{}}
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// EnvName is the environment variable of a flag, etcd's rule
// (flags.FlagToEnv): ETCD_ and the name upper-cased, dashes to
// underscores.
func EnvName(flag string) string {
	return "ETCD_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// Parse reads args (etcd's flags, with one or two dashes) and environ
// (KEY=VALUE, as os.Environ) as etcd does:
//
//  1. an unknown flag is refused with the nearest etcd flag name;
//  2. with --config-file (or ETCD_CONFIG_FILE) the file's keys are the
//     configuration and the other flags and ETCD_* variables are ignored,
//     each named in a note (etcd logs that it ignores them);
//  3. otherwise every flag not on the command line takes its ETCD_*
//     variable if set; a flag set both ways is refused, as etcd refuses
//     ("conflicting environment variable is shadowed by corresponding
//     command-line flag"); an ETCD_* variable that names no flag is
//     noted, as etcd warns.
func Parse(args, environ []string) (*Values, []string, error) {
	v := newValues()
	var norm []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			if rest := args[i+1:]; len(rest) > 0 {
				return nil, nil, fmt.Errorf("%q is not a valid flag", rest[0])
			}
			break
		}
		if !strings.HasPrefix(a, "-") || a == "-" {
			return nil, nil, fmt.Errorf("%q is not a valid flag", a)
		}
		name := strings.TrimLeft(a, "-")
		name, val, hasVal := strings.Cut(name, "=")
		d, ok := lookup(name)
		if !ok {
			return nil, nil, unknownFlag("--"+name, "flag")
		}
		arg := "--" + name
		if hasVal {
			arg += "=" + val
		}
		norm = append(norm, arg)
		if d.kind != kBool && !hasVal && i+1 < len(args) {
			i++
			norm = append(norm, args[i])
		}
	}
	if err := v.fs.Parse(norm); err != nil {
		return nil, nil, err
	}
	v.fs.Visit(func(f *pflag.Flag) { v.from[f.Name] = "--" + f.Name })

	env := map[string]string{}
	for _, kv := range environ {
		k, val, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "ETCD_") && val != "" {
			env[k] = val
		}
	}
	var notes []string
	file := v.Get("config-file")
	if file == "" {
		file = env[EnvName("config-file")]
	}
	if file != "" {
		fv, err := loadFile(file)
		if err != nil {
			return nil, nil, err
		}
		var ignored []string
		for _, n := range Names() {
			if n != "config-file" && v.IsSet(n) {
				ignored = append(ignored, v.Source(n))
			}
		}
		for k := range env {
			if k != EnvName("config-file") {
				ignored = append(ignored, k)
			}
		}
		sort.Strings(ignored)
		if len(ignored) > 0 {
			notes = append(notes, fmt.Sprintf("--config-file %s: the configuration is the file's; ignored, as etcd ignores them: %s",
				file, strings.Join(ignored, ", ")))
		}
		return fv, notes, nil
	}

	used := map[string]bool{}
	for _, d := range defs {
		key := EnvName(d.name)
		val, ok := env[key]
		if !ok {
			continue
		}
		used[key] = true
		if v.IsSet(d.name) {
			return nil, nil, fmt.Errorf("conflicting environment variable %s is shadowed by corresponding command-line flag --%s (either unset environment variable or disable flag)", key, d.name)
		}
		if err := v.set(d.name, val, key); err != nil {
			return nil, nil, err
		}
	}
	var unknown []string
	for k := range env {
		if !used[k] {
			unknown = append(unknown, k)
		}
	}
	sort.Strings(unknown)
	for _, k := range unknown {
		flag := strings.ToLower(strings.ReplaceAll(strings.TrimPrefix(k, "ETCD_"), "_", "-"))
		notes = append(notes, fmt.Sprintf("unrecognized environment variable %s ignored, as etcd ignores it (did you mean %s?)", k, EnvName(Nearest(flag))))
	}
	return v, notes, nil
}

// unknownFlag is the refusal of an unknown name.
func unknownFlag(name, what string) error {
	return fmt.Errorf("unknown %s %s; did you mean --%s?", what, name, Nearest(strings.TrimLeft(name, "-")))
}

// Nearest returns the etcd flag name closest to name (edit distance,
// ties to the shorter).
func Nearest(name string) string {
	best, bestD := "", -1
	for _, n := range Names() {
		d := textdist.Levenshtein(name, n)
		if bestD < 0 || d < bestD || (d == bestD && len(n) < len(best)) {
			best, bestD = n, d
		}
	}
	return best
}
