package etcdflags

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/stratadb/strata/config"
)

// Result is the configuration etcd's flags describe.
type Result struct {
	// Config is the validated configuration `strata serve` would run with.
	Config *config.Config
	// DataDir is --data-dir (etcd's default ${name}.etcd when not given).
	DataDir string
	// Notes are the lines to log: flags without effect, with the reason,
	// and choices made where Strata does less than etcd.
	Notes []string
	// SelfCerts are the self-signed certificates --auto-tls and
	// --peer-auto-tls ask for; Config names their files, which
	// MakeSelfCerts makes before the server starts.
	SelfCerts []SelfCert
}

// The layout of --data-dir.
const (
	// StoreDir is the store's directory inside the data dir (db_path).
	StoreDir = "strata"
	// RaftDir is the raft log's directory inside the data dir
	// (cluster.raft_dir), unless --wal-dir moves it.
	RaftDir = "raft"
)

// Build maps v onto Strata's configuration: config.ServeDefault() with
// each mapped flag's key set. The result is validated.
func Build(v *Values) (*Result, error) {
	b := &builder{v: v, cfg: config.ServeDefault()}
	b.build()
	if v.IsSet("self-signed-cert-validity") && len(b.selfCerts) == 0 {
		b.note("self-signed-cert-validity", "no effect: no self-signed certificate is made (--auto-tls or --peer-auto-tls on https URLs, without certificate files, make one)")
	}
	if len(b.errs) > 0 {
		return nil, errors.Join(b.errs...)
	}
	if err := b.cfg.Validate(); err != nil {
		return nil, err
	}
	return &Result{Config: b.cfg, DataDir: b.dataDir, Notes: b.notes, SelfCerts: b.selfCerts}, nil
}

type builder struct {
	v         *Values
	cfg       *config.Config
	dataDir   string
	notes     []string
	errs      []error
	selfCerts []SelfCert
}

func (b *builder) note(flag, format string, args ...any) {
	b.notes = append(b.notes, fmt.Sprintf("%s=%s: ", b.v.Source(flag), b.v.Get(flag))+fmt.Sprintf(format, args...))
}

func (b *builder) fail(flag, format string, args ...any) {
	b.errs = append(b.errs, fmt.Errorf("%s=%s: "+format, append([]any{b.v.Source(flag), b.v.Get(flag)}, args...)...))
}

func (b *builder) int(flag string) int64 {
	n, _ := strconv.ParseInt(b.v.Get(flag), 10, 64) // checked on Set
	return n
}

func (b *builder) uint(flag string) uint64 {
	n, _ := strconv.ParseUint(b.v.Get(flag), 10, 64)
	return n
}

func (b *builder) bool(flag string) bool { return b.v.Get(flag) == "true" }

func (b *builder) urls(flag string) []*url.URL {
	us, _ := parseURLs(b.v.Get(flag))
	return us
}

func (b *builder) build() {
	v, cfg := b.v, b.cfg
	name := v.Get("name")

	// Flags without effect, and flags refused.
	for _, n := range Names() {
		if !v.IsSet(n) {
			continue
		}
		if why, ok := noEffect[n]; ok {
			b.note(n, "no effect: %s", why)
		}
		if why, ok := refused[n]; ok {
			d, _ := lookup(n)
			if v.Get(n) != d.def {
				b.fail(n, "%s", why)
			}
		}
	}

	// Data directories.
	b.dataDir = v.Get("data-dir")
	if b.dataDir == "" {
		b.dataDir = name + ".etcd"
	}
	cfg.DBPath = filepath.Join(b.dataDir, StoreDir)

	clustered := v.IsSet("initial-cluster") || v.IsSet("initial-advertise-peer-urls") || v.IsSet("listen-peer-urls") ||
		v.Get("initial-cluster-state") == "existing"
	if clustered {
		cfg.Cluster.RaftDir = filepath.Join(b.dataDir, RaftDir)
	}
	if w := v.Get("wal-dir"); w != "" {
		if clustered {
			// The raft log is what etcd's wal is: the log fsynced
			// before a write is acknowledged.
			cfg.Cluster.RaftDir = w
		} else {
			cfg.WALDir = w
		}
	}

	// Client URLs and TLS.
	clientScheme := b.listenClients(cfg)
	if v.IsSet("listen-client-urls") && !v.IsSet("advertise-client-urls") {
		b.fail("listen-client-urls", "--advertise-client-urls is required when --listen-client-urls is set explicitly (etcd's rule)")
	}
	cert, key := v.Get("cert-file"), v.Get("key-file")
	// etcd's ClientSelfCert: --auto-tls without certificate files makes
	// one for the hosts of the listen client URLs, and its TLSInfo
	// replaces the client TLS settings (no CA, no client certificates).
	autoTLS := clientScheme == "https" && cert == "" && key == "" && b.bool("auto-tls")
	if autoTLS {
		hosts := hostsOf(b.urls("listen-client-urls"))
		if v.IsSet("listen-client-http-urls") {
			hosts = append(hosts, hostsOf(b.urls("listen-client-http-urls"))...)
		}
		cert, key = b.selfCert("auto-tls", "client", hosts)
	}
	switch {
	case clientScheme == "https" && (cert == "" || key == ""):
		if b.bool("auto-tls") {
			b.fail("listen-client-urls", "https needs --cert-file and --key-file (--auto-tls is ignored when either is given, as etcd ignores it)")
		} else {
			b.fail("listen-client-urls", "https needs --cert-file and --key-file, or --auto-tls")
		}
	case autoTLS:
		cfg.Server.CertFile, cfg.Server.KeyFile = cert, key
		for _, f := range []string{"trusted-ca-file", "client-cert-auth"} {
			if v.IsSet(f) {
				b.note(f, "no effect with --auto-tls: etcd's self-signed TLS replaces the client TLS settings, so clients are asked for no certificate")
			}
		}
	case clientScheme == "https":
		cfg.Server.CertFile, cfg.Server.KeyFile = cert, key
		if b.bool("auto-tls") {
			b.note("auto-tls", "no effect: --cert-file and --key-file are given (as etcd ignores it then)")
		}
		ca := v.Get("trusted-ca-file")
		switch {
		case ca != "":
			// etcd asks for and verifies client certificates when
			// either is set (transport.TLSInfo.ServerConfig).
			cfg.Server.ClientCAFile = ca
		case b.bool("client-cert-auth"):
			b.fail("client-cert-auth", "needs --trusted-ca-file: Strata verifies client certificates against it, not the system's roots")
		}
	default:
		for _, f := range []string{"cert-file", "key-file", "trusted-ca-file", "client-cert-auth", "auto-tls"} {
			if v.IsSet(f) {
				b.note(f, "no effect: --listen-client-urls are http, and etcd too serves them without TLS")
			}
		}
	}

	// Metrics URLs: a listener each, as etcd's serveMetrics. An https
	// one uses the client TLS (--cert-file, --key-file and, with it,
	// client certificates against --trusted-ca-file), as etcd's does.
	if v.IsSet("listen-metrics-urls") {
		for _, u := range b.urls("listen-metrics-urls") {
			if u.Scheme == "https" && clientScheme != "https" {
				b.fail("listen-metrics-urls", "not supported yet: an https metrics URL takes the client URLs' TLS, and --listen-client-urls are http")
				continue
			}
			raw := u.Scheme + "://" + u.Host
			if _, err := config.ParseListenURL(raw); err != nil {
				b.fail("listen-metrics-urls", "%s: %v", raw, err)
				continue
			}
			cfg.Server.ListenMetricsURLs = append(cfg.Server.ListenMetricsURLs, raw)
		}
	}

	// Server limits and behaviour.
	if v.IsSet("quota-backend-bytes") {
		// Both read 0 as their default (etcd's 2 GiB, Strata's
		// config.DefaultQuotaBackendBytes for a store a tenth the size).
		cfg.Server.QuotaBackendBytes = b.int("quota-backend-bytes")
	}
	cfg.Server.MaxRequestBytes = int64(min(b.uint("max-request-bytes"), 1<<62))
	cfg.Server.MaxConcurrentStreams = int64(min(b.uint("max-concurrent-streams"), 1<<62))
	cfg.Server.MaxTxnOps = int64(min(b.uint("max-txn-ops"), 1<<62))
	cfg.Server.AuthToken = v.Get("auth-token")
	cfg.Server.AuthTokenTTL = int64(min(b.uint("auth-token-ttl"), 1<<62))
	cfg.Server.BcryptCost = int64(min(b.uint("bcrypt-cost"), 1<<62))
	cfg.Server.AutoCompactionMode = v.Get("auto-compaction-mode")
	cfg.Server.AutoCompactionRetention = v.Get("auto-compaction-retention")
	progress := "watch-progress-notify-interval"
	if v.IsSet("experimental-watch-progress-notify-interval") {
		if v.IsSet(progress) {
			b.fail(progress, "also given as --experimental-watch-progress-notify-interval: give one")
		}
		progress = "experimental-watch-progress-notify-interval"
	}
	d, _ := time.ParseDuration(v.Get(progress))
	if d%time.Millisecond != 0 {
		b.fail(progress, "Strata counts the interval in whole milliseconds")
	}
	cfg.Server.WatchProgressNotifyIntervalMS = d.Milliseconds()

	// Corruption checks and feature gates.
	cfg.Server.InitialCorruptCheck = b.bool("experimental-initial-corrupt-check")
	for flag, ms := range map[string]*int64{"corrupt-check-time": &cfg.Server.CorruptCheckIntervalMS,
		"compact-hash-check-time": &cfg.Server.CompactHashCheckIntervalMS} {
		d, _ := time.ParseDuration(v.Get(flag))
		switch {
		case flag == "compact-hash-check-time" && d <= 0:
			b.fail(flag, "--compact-hash-check-time must be >0 (set to %v)", d)
		case d < 0:
			b.fail(flag, "must be >= 0 (0 means never)")
		case d%time.Millisecond != 0:
			b.fail(flag, "Strata counts the interval in whole milliseconds")
		}
		*ms = d.Milliseconds()
	}
	if g := v.Get("feature-gates"); g != "" {
		for _, kv := range strings.Split(g, ",") {
			k, val, ok := strings.Cut(strings.TrimSpace(kv), "=")
			if !ok {
				b.fail("feature-gates", "missing bool value for %s", k)
				continue
			}
			on, err := strconv.ParseBool(val)
			why, known := featureGates[k]
			switch {
			case err != nil:
				b.fail("feature-gates", "invalid value of %s=%s, err: %v", k, val, err)
			case k == "InitialCorruptCheck":
				cfg.Server.InitialCorruptCheck = on
			case k == "CompactHashCheck":
				cfg.Server.CompactHashCheck = on
			case !known:
				b.fail("feature-gates", "unrecognized feature gate: %s", k)
			case on:
				b.notes = append(b.notes, fmt.Sprintf("%s: %s=true: no effect: %s", v.Source("feature-gates"), k, why))
			}
		}
	}

	// Logging.
	switch lvl := v.Get("log-level"); lvl {
	case "debug", "info", "warn", "error", "dpanic", "panic", "fatal":
		if v.IsSet("log-level") && lvl != "info" {
			b.note("log-level", "Strata logs as etcd does at info (its start, members joining and leaving, leaders, snapshots, compactions, alarms, errors) at every level")
		}
	default:
		b.fail("log-level", "unknown log level (debug, info, warn, error, panic or fatal)")
	}
	if lg := v.Get("logger"); lg != "zap" {
		b.fail("logger", "unknown logger option %q (etcd 3.5+ knows zap only)", lg)
	} else if v.IsSet("logger") {
		b.note("logger", "no effect: Strata writes plain text lines to stderr")
	}

	if clustered {
		b.cluster(name)
		return
	}
	for _, f := range []string{"name", "advertise-client-urls", "initial-cluster-token", "heartbeat-interval", "election-timeout",
		"snapshot-count", "peer-cert-file", "peer-key-file", "peer-trusted-ca-file", "peer-client-cert-auth", "peer-auto-tls",
		"experimental-initial-corrupt-check", "corrupt-check-time", "compact-hash-check-time"} {
		if v.IsSet(f) {
			b.note(f, "no effect: without --initial-cluster (or peer URLs) Strata serves as a single server, with no raft log, named \"strata\" in member list; give --initial-cluster to run a cluster member, even of one")
		}
	}
}

// cluster fills the [cluster] section.
func (b *builder) cluster(name string) {
	v, c := b.v, &b.cfg.Cluster
	c.Name = name
	c.Token = v.Get("initial-cluster-token")
	switch st := v.Get("initial-cluster-state"); st {
	case "new":
	case "existing":
		c.Join = true
	default:
		b.fail("initial-cluster-state", "unexpected clusterState %q (new or existing)", st)
	}
	c.HeartbeatIntervalMS = int64(min(b.uint("heartbeat-interval"), 1<<62))
	c.ElectionTimeoutMS = int64(min(b.uint("election-timeout"), 1<<62))
	c.SnapshotEntries = int64(min(b.uint("snapshot-count"), 1<<62))

	peerScheme := b.listen("listen-peer-urls", &c.ListenPeer)
	pcert, pkey := v.Get("peer-cert-file"), v.Get("peer-key-file")
	// etcd's PeerSelfCert: as --auto-tls, for the listen peer URLs. Its
	// TLSInfo has no CA and no client-cert auth, so the peer server asks
	// for no certificate, and its ClientConfig skips verifying the
	// peers' (selfCert sets InsecureSkipVerify).
	peerAutoTLS := peerScheme == "https" && pcert == "" && pkey == "" && b.bool("peer-auto-tls")
	if peerAutoTLS {
		pcert, pkey = b.selfCert("peer-auto-tls", "peer", hostsOf(b.urls("listen-peer-urls")))
	}
	switch {
	case peerScheme == "https" && (pcert == "" || pkey == ""):
		if b.bool("peer-auto-tls") {
			b.fail("listen-peer-urls", "https needs --peer-cert-file and --peer-key-file (--peer-auto-tls is ignored when either is given, as etcd ignores it)")
		} else {
			b.fail("listen-peer-urls", "https needs --peer-cert-file and --peer-key-file, or --peer-auto-tls")
		}
	case peerAutoTLS:
		c.PeerCertFile, c.PeerKeyFile, c.PeerInsecureSkipVerify = pcert, pkey, true
		for _, f := range []string{"peer-trusted-ca-file", "peer-client-cert-auth"} {
			if v.IsSet(f) {
				b.note(f, "no effect with --peer-auto-tls: etcd's self-signed TLS replaces the peer TLS settings, so members are asked for no certificate and accept their peers' without verifying them")
			}
		}
	case peerScheme == "https":
		c.PeerCertFile, c.PeerKeyFile = pcert, pkey
		if b.bool("peer-auto-tls") {
			b.note("peer-auto-tls", "no effect: --peer-cert-file and --peer-key-file are given (as etcd ignores it then)")
		}
		ca := v.Get("peer-trusted-ca-file")
		switch {
		case ca != "":
			c.PeerTrustedCAFile = ca
		case b.bool("peer-client-cert-auth"):
			b.fail("peer-client-cert-auth", "needs --peer-trusted-ca-file: Strata verifies peer certificates against it")
		}
	default:
		for _, f := range []string{"peer-cert-file", "peer-key-file", "peer-trusted-ca-file", "peer-client-cert-auth", "peer-auto-tls"} {
			if v.IsSet(f) {
				b.note(f, "no effect: --listen-peer-urls are http, and etcd too serves them without TLS")
			}
		}
	}

	// This member's client URL, as it publishes it.
	adv := b.urls("advertise-client-urls")
	self := adv[0]
	if len(adv) > 1 {
		b.note("advertise-client-urls", "not supported yet: Strata publishes one client URL per member: %s", self)
	}

	// The members: etcd's default is this member alone, at its
	// advertised peer URLs.
	apurls := b.urls("initial-advertise-peer-urls")
	ic := v.Get("initial-cluster")
	if !v.IsSet("initial-cluster") {
		var parts []string
		for _, u := range apurls {
			parts = append(parts, name+"="+u.String())
		}
		ic = strings.Join(parts, ",")
	}
	seen := map[string]bool{}
	var others []string
	for _, part := range strings.Split(ic, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		mname, raw, ok := strings.Cut(part, "=")
		if !ok || mname == "" {
			b.fail("initial-cluster", "%q is not NAME=PEER_URL", part)
			continue
		}
		us, err := parseURLs(raw)
		if err != nil {
			b.fail("initial-cluster", "member %s: %v", mname, err)
			continue
		}
		if seen[mname] {
			b.fail("initial-cluster", "not supported yet: member %s has several peer URLs; Strata's members have one", mname)
			continue
		}
		seen[mname] = true
		peer := us[0]
		m := config.ClusterMember{Name: mname, PeerURL: peer.String()}
		if mname == name {
			m.ClientURL = self.String()
			if len(apurls) != 1 || apurls[0].String() != peer.String() {
				b.fail("initial-cluster", "--initial-cluster has %s=%s but --initial-advertise-peer-urls has %s (etcd's rule: they must match)",
					mname, peer, v.Get("initial-advertise-peer-urls"))
			}
		} else {
			// etcd's --initial-cluster has no client URLs: a member
			// publishes its own when it starts (through the log), and
			// member list shows this guess for it until then.
			m.ClientURL = (&url.URL{Scheme: self.Scheme, Host: net.JoinHostPort(peer.Hostname(), self.Port())}).String()
			others = append(others, mname+"="+m.ClientURL)
		}
		c.Members = append(c.Members, m)
	}
	if !seen[name] {
		b.fail("initial-cluster", "couldn't find local name %q in the initial cluster configuration", name)
	}
	if len(others) > 0 {
		b.notes = append(b.notes, fmt.Sprintf("%s: the other members' client URLs are taken as the peer host with this member's client port (%s) until each publishes its own when it starts",
			v.Source("initial-cluster"), strings.Join(others, ", ")))
	}
}

// listen sets *addr from a URL-list flag and returns its scheme. Strata
// listens on one host:port with one scheme: several URLs on one port are
// served on the wildcard address of that port (noted); different ports
// or schemes are refused.
func (b *builder) listen(flag string, addr *string) string {
	us := b.urls(flag)
	scheme, port := us[0].Scheme, us[0].Port()
	for _, u := range us {
		if u.Scheme != scheme {
			b.fail(flag, "not supported yet: Strata serves one scheme; this mixes http and https")
			return scheme
		}
		if u.Port() != port {
			b.fail(flag, "not supported yet: Strata listens on one port; this lists %s and %s", port, u.Port())
			return scheme
		}
	}
	*addr = b.listenAddr(flag, us)
	return scheme
}

// listenClients maps --listen-client-urls: the URLs grouped by scheme and
// port, the first https group (else the first) to server.listen, each
// other group to server.listen_client_urls. It returns server.listen's
// scheme.
func (b *builder) listenClients(cfg *config.Config) string {
	const flag = "listen-client-urls"
	type group struct {
		scheme, port string
		urls         []*url.URL
	}
	var groups []*group
	for _, u := range b.urls(flag) {
		i := slices.IndexFunc(groups, func(g *group) bool { return g.scheme == u.Scheme && g.port == u.Port() })
		if i < 0 && slices.ContainsFunc(groups, func(g *group) bool { return g.port == u.Port() }) {
			b.fail(flag, "not supported yet: http and https on one port (%s); give them ports of their own", u.Port())
			return u.Scheme
		}
		if i < 0 {
			groups = append(groups, &group{scheme: u.Scheme, port: u.Port()})
			i = len(groups) - 1
		}
		groups[i].urls = append(groups[i].urls, u)
	}
	if len(groups) == 0 { // unparsable: reported where the flag was read
		return "http"
	}
	primary := max(0, slices.IndexFunc(groups, func(g *group) bool { return g.scheme == "https" }))
	cfg.Server.Listen = b.listenAddr(flag, groups[primary].urls)
	for i, g := range groups {
		if i != primary {
			cfg.Server.ListenClientURLs = append(cfg.Server.ListenClientURLs, g.scheme+"://"+b.listenAddr(flag, g.urls))
		}
	}
	return groups[primary].scheme
}

// listenAddr is the address that serves us, URLs of one scheme and port:
// their host if they name one, else the wildcard address of the port,
// with a note (Strata listens once per port).
func (b *builder) listenAddr(flag string, us []*url.URL) string {
	hosts := map[string]bool{}
	var v6 bool
	for _, u := range us {
		hosts[u.Hostname()] = true
		v6 = v6 || strings.Contains(u.Hostname(), ":")
	}
	port := us[0].Port()
	if len(hosts) == 1 {
		return net.JoinHostPort(us[0].Hostname(), port)
	}
	wild := "0.0.0.0"
	if v6 {
		wild = "::"
	}
	addr := net.JoinHostPort(wild, port)
	b.note(flag, "Strata listens once per port: serving %s on %s, which covers these hosts and every other address of this machine", us[0].Scheme, addr)
	return addr
}

// ErrEtcdDataDir is returned by CheckDataDir for an etcd member's data
// directory.
var ErrEtcdDataDir = errors.New("etcdflags: the data dir is an etcd member's")

// CheckDataDir refuses dataDir when it is an etcd member's (member/snap/db
// and member/wal) and holds no Strata store yet: Strata cannot serve etcd's
// bbolt file; `strata restore` converts it. Once DIR/strata exists (the
// restore's output), etcd's files beside it are left alone.
func CheckDataDir(dataDir string) error {
	db := filepath.Join(dataDir, "member", "snap", "db")
	if _, err := os.Stat(db); err != nil {
		return nil
	}
	if _, err := os.Stat(filepath.Join(dataDir, "member", "wal")); err != nil {
		return nil
	}
	store := filepath.Join(dataDir, StoreDir)
	if _, err := os.Stat(store); err == nil {
		return nil
	}
	return fmt.Errorf("%w: --data-dir %s holds etcd's member/snap/db and member/wal, which Strata does not read; stop etcd, then convert it with\n"+
		"  strata --db %s restore %s\n"+
		"and start again with the same flags (the store goes to %s; etcd's member/ stays as it was; see docs/migration.md for a cluster)",
		ErrEtcdDataDir, dataDir, store, db, store)
}
