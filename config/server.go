package config

import (
	"errors"
	"fmt"
	"math"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// ServerConfig is the [server] section: how `strata serve` listens and
// what it accepts. The engine keys of the same file configure the store it
// serves; see ServeDefault for the defaults the server changes.
type ServerConfig struct {
	// Listen is the host:port the server listens on, serving etcd's v2 keys
	// API (HTTP/1.1), its v3 gRPC API (HTTP/2), /metrics, /health and
	// /version on one port, as etcd does. Port 0 picks a free port (the
	// server prints the address it got). The default value is
	// "127.0.0.1:2379": loopback only, unless the file says otherwise.
	Listen string `toml:"listen" yaml:"listen" json:"listen"`

	// ListenMetricsURLs are more addresses to serve /metrics, /health,
	// /livez and /readyz on (etcd's --listen-metrics-urls), each a URL
	// "http://HOST:PORT" or "https://HOST:PORT" with HOST an IP address or
	// localhost: the same handlers as on listen, and nothing else, as
	// etcd's metrics listener. An https URL uses cert_file and key_file,
	// and with client_ca_file asks for and verifies client certificates,
	// as etcd's uses its client TLS. Port 0 picks a free port. kubeadm's
	// manifests probe etcd on "http://127.0.0.1:2381". The default value
	// is [] (none).
	ListenMetricsURLs []string `toml:"listen_metrics_urls" yaml:"listen_metrics_urls" json:"listen_metrics_urls"`

	// ListenClientURLs are more addresses to serve clients on beside
	// listen, with everything listen serves (etcd's --listen-client-urls
	// past the first port and scheme): each "http://HOST:PORT" or
	// "https://HOST:PORT", HOST an IP address or localhost. An http URL is
	// served without TLS even when cert_file is set (etcd serves its http
	// URLs so beside its https ones); an https URL uses cert_file, key_file
	// and client_ca_file as listen does. The default value is [] (none).
	ListenClientURLs []string `toml:"listen_client_urls" yaml:"listen_client_urls" json:"listen_client_urls"`

	// MaxRequestBytes is the largest request accepted, in bytes: a v2 body
	// or a v3 message (etcd's --max-request-bytes; gRPC gets 512 KiB more
	// for framing, as in etcd). 1 KiB..64 MiB. The default value is
	// 1572864 (1.5 MiB).
	MaxRequestBytes int64 `toml:"max_request_bytes" yaml:"max_request_bytes" json:"max_request_bytes"`

	// MaxTxnOps is the most compares, or operations of one branch, a txn
	// may have (etcd's --max-txn-ops; a nested txn counts against what
	// its parent left). 1..1048576. The default value is 128.
	MaxTxnOps int64 `toml:"max_txn_ops" yaml:"max_txn_ops" json:"max_txn_ops"`

	// MaxValueBytes is the largest value a put accepts, in bytes.
	// 1..1572864 (the store's own limit). The default value is 1572864.
	MaxValueBytes int64 `toml:"max_value_bytes" yaml:"max_value_bytes" json:"max_value_bytes"`

	// CertFile and KeyFile are the PEM server certificate and key; with
	// both set the server speaks TLS only (HTTP/1.1 and gRPC, chosen by
	// ALPN). Both or neither. The default value is "" (plain TCP).
	CertFile string `toml:"cert_file" yaml:"cert_file" json:"cert_file"`
	// KeyFile: see CertFile. The default value is "".
	KeyFile string `toml:"key_file" yaml:"key_file" json:"key_file"`

	// ClientCAFile is a PEM bundle of CAs; when set, every client must
	// present a certificate signed by one of them (mutual TLS, etcd's
	// --client-cert-auth with --trusted-ca-file). Requires cert_file. The
	// default value is "".
	ClientCAFile string `toml:"client_ca_file" yaml:"client_ca_file" json:"client_ca_file"`

	// MaxConcurrentStreams is the number of concurrent gRPC streams (calls
	// and watches) one client connection may have open (etcd's
	// --max-concurrent-streams). 1..4294967295. The default value is
	// 4294967295, etcd's.
	MaxConcurrentStreams int64 `toml:"max_concurrent_streams" yaml:"max_concurrent_streams" json:"max_concurrent_streams"`

	// MemoryBudgetMB sizes the engine's memory for serving, in MB: when > 0
	// it replaces memtable_size_mb, max_write_buffer_number and
	// block_cache_size_mb so that memtables and block cache together stay
	// within it (see ApplyMemoryBudget and docs/server.md). 0 keeps the
	// engine keys as written. 0..1048576. The default value is 32.
	MemoryBudgetMB int64 `toml:"memory_budget_mb" yaml:"memory_budget_mb" json:"memory_budget_mb"`

	// GoMemoryLimitMB is the soft limit of the Go runtime's memory, in MB
	// (runtime/debug.SetMemoryLimit), which `strata serve` sets (a fixed
	// limit at start, the automatic one once the store is open) so
	// that the garbage collector returns the heap it does not need instead of
	// keeping GOGC=100's headroom (as much again as the live heap, most of
	// it the mvcc key index). 0 is automatic: a limit that follows the live
	// heap, the runtime's memory outside the heap plus the live heap plus a
	// quarter plus AutoGoMemoryLimitSlackMB, so the collector never fights
	// a key index that outgrew a fixed number (see docs/server.md); it
	// also raises GOGC (unless the environment sets it) so that a live heap
	// under 32 MB may still grow by 32 MB between collections.
	// -1 leaves the runtime's limit and GOGC alone (GOMEMLIMIT, if set). Pebble's
	// memtables and block cache are outside the Go heap (memory_budget_mb
	// bounds them). -1..1048576. The default value is 0.
	GoMemoryLimitMB int64 `toml:"go_memory_limit_mb" yaml:"go_memory_limit_mb" json:"go_memory_limit_mb"`
	// WatchProgressNotifyIntervalMS is how often a watcher created with
	// progress_notify (clientv3.WithProgressNotify, etcdctl watch
	// --progress-notify) that delivered no event meanwhile gets an empty
	// response carrying the revision it has seen up to, so a client can
	// resume from there without missing or repeating events. etcd's
	// default (--experimental-watch-progress-notify-interval) is 10
	// minutes. 10..86400000. The default value is 600000.
	WatchProgressNotifyIntervalMS int64 `toml:"watch_progress_notify_interval_ms" yaml:"watch_progress_notify_interval_ms" json:"watch_progress_notify_interval_ms"`
	// ReclaimHistory makes each compaction give back the disk space of the
	// history it drops: the store compacts the engine over the dropped
	// revisions in the background (mvcc.Options.ReclaimHistory, see
	// docs/mvcc-compaction.md). Without it the dropped revisions' tombstones stay
	// above their values, which the engine's own compactions never reach,
	// and the store keeps every version ever written. The default value is
	// true: after 1,000,000 pod updates compacted every 30 s and a last
	// compaction, the disk was 265 MB with it and 990 MB without (etcd
	// 3.7.3: 3,239), for the same server CPU, with no second without a
	// completed put in four runs since the blob reference depth went to
	// 40 (docs/mvcc-compaction.md).
	ReclaimHistory bool `toml:"reclaim_history" yaml:"reclaim_history" json:"reclaim_history"`
	// CompressValues compresses each value of 512 bytes or more alone,
	// against a dictionary of the values written before it (S2 with a
	// dictionary, mvcc.Options.RawValues off; see docs/mvcc.md), before
	// it reaches the WAL. Kubernetes objects repeat each other far more
	// than they repeat themselves: a pod alone compresses about 8x this
	// way against 4.9x for the engine's blocks of two pods, and a read
	// decompresses its own value only. The default value is true; false
	// stores values as clients sent them (values compressed already).
	CompressValues bool `toml:"compress_values" yaml:"compress_values" json:"compress_values"`

	// InitialCorruptCheck makes a cluster member that starts with data
	// compare, before it joins the cluster, the hash of its store at its
	// revision (HashKV) with each peer's at that revision, and refuse to
	// start when a peer with the same compaction revision has another
	// hash (etcd's --experimental-initial-corrupt-check, the
	// InitialCorruptCheck feature gate). Peers are asked over their client
	// URLs; one that does not answer is skipped. No effect without
	// [cluster]. The default value is false, etcd's.
	InitialCorruptCheck bool `toml:"initial_corrupt_check" yaml:"initial_corrupt_check" json:"initial_corrupt_check"`
	// CorruptCheckIntervalMS is how often the leader compares its hash
	// with its followers' and raises the CORRUPT alarm for a member that
	// differs (etcd's --corrupt-check-time), in milliseconds; 0 means
	// never. 0..86400000. The default value is 0, etcd's.
	CorruptCheckIntervalMS int64 `toml:"corrupt_check_interval_ms" yaml:"corrupt_check_interval_ms" json:"corrupt_check_interval_ms"`
	// CompactHashCheck makes every member keep the hash of its store at
	// each of its last 10 compactions, and the leader compare them with
	// its followers' every compact_hash_check_interval_ms, raising the
	// CORRUPT alarm for the members in the minority (etcd's
	// --experimental-compact-hash-check-enabled, the CompactHashCheck
	// feature gate). Each compaction then reads the store once more, to
	// hash it. The default value is false, etcd's.
	CompactHashCheck bool `toml:"compact_hash_check" yaml:"compact_hash_check" json:"compact_hash_check"`
	// CompactHashCheckIntervalMS is how often the leader runs the compact
	// hash check, in milliseconds (etcd's --compact-hash-check-time).
	// 1..86400000. The default value is 60000, etcd's.
	CompactHashCheckIntervalMS int64 `toml:"compact_hash_check_interval_ms" yaml:"compact_hash_check_interval_ms" json:"compact_hash_check_interval_ms"`

	// AuthToken is the kind of token Authenticate hands out once auth is
	// enabled, in etcd's --auth-token form: "simple" (a random string the
	// member keeps, valid auth_token_ttl after its last use) or
	// "jwt,pub-key=PATH,priv-key=PATH,sign-method=RS256,ttl=5m" (signed,
	// checked by any member holding pub-key; sign-method one of etcd's:
	// RS256/384/512, PS256/384/512, ES256/384/512, EdDSA, HS256/384/512
	// with priv-key only). The key files are read at start. The default
	// value is "simple".
	AuthToken string `toml:"auth_token" yaml:"auth_token" json:"auth_token"`
	// AuthTokenTTL is how long a simple token stays valid after its last
	// use, in seconds (etcd's --auth-token-ttl). 1..2147483647. The
	// default value is 300.
	AuthTokenTTL int64 `toml:"auth_token_ttl" yaml:"auth_token_ttl" json:"auth_token_ttl"`
	// BcryptCost is the bcrypt cost of the password hashes stored for
	// users (etcd's --bcrypt-cost); each Authenticate pays it once.
	// 4..31. The default value is 10.
	BcryptCost int64 `toml:"bcrypt_cost" yaml:"bcrypt_cost" json:"bcrypt_cost"`

	// QuotaBackendBytes is etcd's --quota-backend-bytes: the database size
	// (Maintenance.Status's dbSize, etcd_mvcc_db_total_size_in_bytes) at
	// which the member raises etcd's NOSPACE alarm. A put, a txn that
	// writes or a lease grant that would take the database to the quota is
	// refused with etcd's "etcdserver: mvcc: database space exceeded"
	// (ResourceExhausted), and the alarm, applied through the log on every
	// member, refuses them all until `etcdctl alarm disarm`; reads,
	// deletes, compaction, defragmentation, snapshots and lease revokes go
	// on (see docs/server-reference.md). 0 means the default, as etcd's 0 does; a
	// negative value turns the quota off. Strata stores a workload in
	// about a tenth of etcd's bytes (0.12x for Kubernetes objects), so
	// etcd's 2 GiB of data is about 250 MB here: the default is twice
	// that, the room for what an LSM's size moves by (live WAL, a
	// compaction's outputs before its inputs go, blob garbage awaiting a
	// rewrite). The default value is 536870912 (512 MiB).
	QuotaBackendBytes int64 `toml:"quota_backend_bytes" yaml:"quota_backend_bytes" json:"quota_backend_bytes"`
	// MinFreeDiskBytes is the free space, in bytes, below which the
	// member raises the NOSPACE alarm, as for quota_backend_bytes, on any
	// file system that holds db_path, wal_dir or (in a cluster) the raft
	// log: the room the engine needs to finish its flushes, compactions
	// and blob files and the raft log its segments, whatever the quota.
	// The space counted is what an unprivileged process may use (statfs's
	// f_bavail). 0 turns the floor off. 0..4611686018427387904. The
	// default value is 268435456 (256 MiB).
	MinFreeDiskBytes int64 `toml:"min_free_disk_bytes" yaml:"min_free_disk_bytes" json:"min_free_disk_bytes"`

	// AutoCompactionMode is how auto_compaction_retention is read
	// (etcd's --auto-compaction-mode): "periodic" keeps the history of
	// the last retention (a duration) and compacts every retention, at
	// most every hour; "revision" keeps the last retention revisions
	// and compacts every 5 minutes. Only the leader compacts, through
	// the log, as a client's Compact does (docs/server-reference.md). The default
	// value is "periodic".
	AutoCompactionMode string `toml:"auto_compaction_mode" yaml:"auto_compaction_mode" json:"auto_compaction_mode"`
	// AutoCompactionRetention is etcd's --auto-compaction-retention, read
	// as etcd reads it: in periodic mode a duration ("1h", "30m", "2s")
	// or a bare integer of hours ("1" is an hour); in revision mode a
	// number of revisions ("1000"). "0" or "" turns auto-compaction off,
	// and the history then grows until a client compacts. The default
	// value is "0" (off, etcd's default).
	AutoCompactionRetention string `toml:"auto_compaction_retention" yaml:"auto_compaction_retention" json:"auto_compaction_retention"`
}

// The auto_compaction_mode values (etcd's v3compactor.ModePeriodic and
// ModeRevision).
const (
	AutoCompactionPeriodic = "periodic"
	AutoCompactionRevision = "revision"
)

// MinAutoCompactionPeriod is the shortest periodic retention accepted:
// the compactor samples the revision every tenth of it.
const MinAutoCompactionPeriod = time.Second

// AutoCompaction is auto_compaction_mode and auto_compaction_retention
// resolved (ServerConfig.AutoCompaction): the one place both are parsed,
// for validation and for the server.
type AutoCompaction struct {
	// Mode is AutoCompactionPeriodic or AutoCompactionRevision.
	Mode string
	// Period is the periodic mode's retention; Revisions the revision
	// mode's. Both 0: auto-compaction is off.
	Period    time.Duration
	Revisions int64
}

// Enabled reports whether the leader compacts by itself.
func (a AutoCompaction) Enabled() bool { return a.Period > 0 || a.Revisions > 0 }

// AutoCompaction resolves the auto-compaction keys as etcd's
// parseCompactionRetention does: a bare integer is hours in periodic
// mode and revisions in revision mode; anything else is a Go duration,
// periodic mode only (etcd would read "1h" in revision mode as 3.6e12
// revisions; that is refused here). The error is a *FieldError.
func (s ServerConfig) AutoCompaction() (AutoCompaction, error) {
	a := AutoCompaction{Mode: s.AutoCompactionMode}
	if a.Mode != AutoCompactionPeriodic && a.Mode != AutoCompactionRevision {
		return AutoCompaction{}, &FieldError{Key: "server.auto_compaction_mode", Value: s.AutoCompactionMode,
			Rule: "must be " + AutoCompactionPeriodic + " or " + AutoCompactionRevision}
	}
	r := strings.TrimSpace(s.AutoCompactionRetention)
	bad := func(rule string) (AutoCompaction, error) {
		return AutoCompaction{}, &FieldError{Key: "server.auto_compaction_retention", Value: s.AutoCompactionRetention, Rule: rule}
	}
	if r == "" {
		return a, nil
	}
	if n, err := strconv.ParseInt(r, 10, 64); err == nil {
		switch {
		case n < 0:
			return bad("must not be negative (0 turns auto-compaction off)")
		case a.Mode == AutoCompactionRevision:
			a.Revisions = n
		case n > math.MaxInt64/int64(time.Hour):
			return bad("too many hours")
		default:
			a.Period = time.Duration(n) * time.Hour
		}
		return a, nil
	}
	if a.Mode == AutoCompactionRevision {
		return bad("must be a number of revisions in revision mode, e.g. \"1000\" (0 = off)")
	}
	d, err := time.ParseDuration(r)
	switch {
	case err != nil:
		return bad("must be a duration (\"1h\", \"30m\") or a number of hours in periodic mode (0 = off)")
	case d < 0:
		return bad("must not be negative (0 turns auto-compaction off)")
	case d > 0 && d < MinAutoCompactionPeriod:
		// etcd accepts any duration, but samples the revision every
		// tenth of it: 0 for under 10ns, a busy loop for microseconds.
		return bad("must be at least " + MinAutoCompactionPeriod.String() + " (or 0 = off)")
	}
	a.Period = d
	return a, nil
}

// DefaultQuotaBackendBytes is quota_backend_bytes' default, what 0 means.
const DefaultQuotaBackendBytes = 512 << 20

// QuotaBytes resolves quota_backend_bytes: the quota in bytes, the
// default for 0, or -1 when the quota is off.
func (s ServerConfig) QuotaBytes() int64 {
	switch {
	case s.QuotaBackendBytes < 0:
		return -1
	case s.QuotaBackendBytes == 0:
		return DefaultQuotaBackendBytes
	}
	return s.QuotaBackendBytes
}

// AutoGoMemoryLimitSlackMB shapes the automatic Go memory limit
// (go_memory_limit_mb = 0): the live heap plus a quarter plus the slack,
// so that a large key index keeps a quarter of headroom rather than
// GOGC=100's whole one, and a small server collects no more often than
// GOGC=100 makes it. The slack is the room for requests in flight: a page
// of 500 Kubernetes objects is about 7 MB, read, encoded and written out,
// three times over. With 8 MB the collector ran and the runtime returned
// pages within each such page, and every page faulted its memory back in
// (five times the page faults, two fifths of a list's CPU, docs/server.md).
// The idle return gives the slack back once the requests stop.
const AutoGoMemoryLimitSlackMB = 64

// MaxValueBytesLimit is the largest max_value_bytes: the mvcc store's
// MaxValueSize (a server test checks they agree; config sits below mvcc).
const MaxValueBytesLimit = 3 << 19

// defaultServer returns the [server] defaults.
func defaultServer() ServerConfig {
	return ServerConfig{
		Listen:               "127.0.0.1:2379",
		MaxRequestBytes:      3 << 19,
		MaxTxnOps:            128,
		MaxValueBytes:        MaxValueBytesLimit,
		MaxConcurrentStreams: 1<<32 - 1,
		MemoryBudgetMB:       32,
		CompressValues:       true,
		ReclaimHistory:       true,

		WatchProgressNotifyIntervalMS: 600000,
		CompactHashCheckIntervalMS:    60000,

		AuthToken:    "simple",
		AuthTokenTTL: 300,
		BcryptCost:   10,

		QuotaBackendBytes: DefaultQuotaBackendBytes,
		MinFreeDiskBytes:  256 << 20,

		AutoCompactionMode:      AutoCompactionPeriodic,
		AutoCompactionRetention: "0",
	}
}

// ServeDefault returns the defaults of `strata serve`: Default() with
// sync = true, since a server acknowledges writes to clients that cannot
// tell a lost write from a failed one; target_file_size_base_mb =
// ServeTargetFileSizeMB; and blob files for values of ServeMinBlobSize and
// more, with the codec and block size chosen for them (ServeBlobCodec,
// ServeBlockSize, on every level: a blob rewrite writes its values into a
// file of the bottommost level's) and the keys' codec (ServeKeyCodec).
func ServeDefault() *Config {
	c := Default()
	c.Sync = true
	c.TargetFileSizeBaseMB = ServeTargetFileSizeMB
	c.EnableBlobFiles = true
	c.MinBlobSize = ServeMinBlobSize
	c.EnableBlobGarbageCollection = true
	c.CompressionDefault = ServeBlobCodec
	c.KeyCompression = ServeKeyCodec
	c.BlockSize = ServeBlockSize
	c.BottommostBlockSize = ServeBlockSize
	return c
}

// ServeMinBlobSize is the smallest value the server keeps in a blob file.
// Kubernetes' objects of a kilobyte and more (pods of 10-20 KB, large
// config maps and secrets) are then written about once, not once per level
// as compactions carry them down, and a restart rebuilds the key index
// without reading them. Smaller values (leases, events, etcd's benchmark
// values of 256 B) stay in the tables, where a read finds them without a
// second lookup.
const ServeMinBlobSize = 1024

// ServeBlobCodec is the codec of levels 0-5, which a blob file takes from
// the level it is written for: values leave the memtable into blob files
// once and stay there until a blob rewrite moves the live ones into a file
// of the bottommost level's zstd. lz4 (stored as MinLZ) against zstd on
// 32 KB blocks: on pod-sized writes (40,000 creates and 40,000 updates, 3
// passes) 0.84x the server CPU, 1.26x the creates and 1.14x the updates
// per second, a full list in 0.81x the time, for 1.31x the disk
// (docs/data/blob-codec.md). Compressing and decompressing pods with zstd
// was a fifth of the server's CPU, and etcd compresses nothing.
const ServeBlobCodec = "lz4"

// ServeBlockSize is the data block size of every level, the tables' and
// the blob files'. The store compresses each pod against a dictionary
// before it reaches the engine (mvcc's values, about 8x), so a larger
// block finds little more to compress, while every read of one record (a
// page of a list, a watch event's previous value) reads and decompresses
// the whole table block and blob block that hold it. 4 KB against 32 KB,
// on 70,000 pod creates and 70,000 updates (3 passes): a full list in
// 0.79x the time and 0.75x the server CPU, updates 1.03x, disk 1.03x; 8 KB
// listed in between (docs/data/serve-block-size.md). 32 KB was chosen
// when the engine compressed the pods, in blocks of two.
const ServeBlockSize = 4 << 10

// ServeKeyCodec is the server's key_compression: the tables' keys in lz4
// (MinLZ) on every level, while the bottommost level's zstd stays on the
// values in blob files. Every watch event with prevKV, every read and
// every page of a list looks its records up in the tables; with zstd on
// the bottommost tables' blocks (32 KB then), a fifth of the server's CPU
// during pod updates went to reading previous values, a quarter of that
// to zstd.
// On 70,000 pod creates and 70,000 updates (3 passes): 0.96x the server
// CPU, a full list in 0.89x the time and CPU, disk +0.6%
// (docs/data/key-codec.md).
const ServeKeyCodec = "lz4"

// ServeTargetFileSizeMB is the server's table size. The revisioned store
// appends at the end of its key space, so every flushed memtable overlaps
// the last table of the level below, and the compaction that takes it
// down rewrites that table: its size, not the flush's, sets the cost of
// each flush. With RocksDB's 64 MB, a store of Kubernetes-sized objects
// rewrote up to 64 MB for every 4 MB flushed and stalled writes for
// seconds at a time; 4 MB keeps that rewrite as small as a flush.
const ServeTargetFileSizeMB = 4

// LoadServe is Load with ServeDefault() under the file: what
// `strata serve --config FILE` runs with.
func LoadServe(path string) (*Config, error) {
	return load(path, ServeDefault())
}

// ApplyMemoryBudget sets the engine's memory keys from
// server.memory_budget_mb, if it is > 0, so that all the memory the engine
// may hold is the budget: two memtables (max_write_buffer_number = 2) of
// an eighth of it each, and a block cache of the rest less three
// memtables, since the engine sizes Pebble's cache as block_cache_size_mb
// plus max_write_buffer_number + 1 memtables (the one Pebble recycles):
// 32 MB gives 4 MB memtables and a 20 MB block cache. It returns whether
// it changed c.
func (c *Config) ApplyMemoryBudget() bool {
	b := c.Server.MemoryBudgetMB
	if b <= 0 {
		return false
	}
	c.MemtableSizeMB = max(1, min(b/8, 4095))
	c.MaxWriteBufferNumber = 2
	c.BlockCacheSizeMB = max(0, b-3*c.MemtableSizeMB)
	return true
}

// validate adds the problems of the [server] section to v.
func (s *ServerConfig) validate(v *validator) {
	if err := checkListen(s.Listen); err != nil {
		v.add("server.listen", s.Listen, err.Error())
	}
	for _, u := range s.ListenMetricsURLs {
		if _, err := ParseListenURL(u); err != nil {
			v.add("server.listen_metrics_urls", u, err.Error())
		} else if strings.HasPrefix(u, "https:") && s.CertFile == "" {
			v.add("server.listen_metrics_urls", u, "https needs server.cert_file and server.key_file (the client URL's certificate, as etcd's)")
		}
	}
	for _, u := range s.ListenClientURLs {
		if _, err := ParseListenURL(u); err != nil {
			v.add("server.listen_client_urls", u, err.Error())
		} else if strings.HasPrefix(u, "https:") && s.CertFile == "" {
			v.add("server.listen_client_urls", u, "https needs server.cert_file and server.key_file")
		}
	}
	v.between("server.max_request_bytes", s.MaxRequestBytes, 1<<10, 64<<20)
	v.between("server.max_txn_ops", s.MaxTxnOps, 1, 1<<20)
	v.between("server.max_value_bytes", s.MaxValueBytes, 1, MaxValueBytesLimit)
	if (s.CertFile == "") != (s.KeyFile == "") {
		if s.CertFile == "" {
			v.add("server.cert_file", s.CertFile, "must be set when server.key_file is set (TLS needs both)")
		} else {
			v.add("server.key_file", s.KeyFile, "must be set when server.cert_file is set (TLS needs both)")
		}
	}
	if s.ClientCAFile != "" && s.CertFile == "" {
		v.add("server.client_ca_file", s.ClientCAFile, "requires server.cert_file and server.key_file: client certificates are checked over TLS")
	}
	v.between("server.max_concurrent_streams", s.MaxConcurrentStreams, 1, 1<<32-1)
	v.between("server.memory_budget_mb", s.MemoryBudgetMB, 0, 1<<20)
	v.between("server.go_memory_limit_mb", s.GoMemoryLimitMB, -1, 1<<20)
	v.between("server.watch_progress_notify_interval_ms", s.WatchProgressNotifyIntervalMS, 10, 86400000)
	v.between("server.corrupt_check_interval_ms", s.CorruptCheckIntervalMS, 0, 86400000)
	v.between("server.compact_hash_check_interval_ms", s.CompactHashCheckIntervalMS, 1, 86400000)
	if err := checkAuthToken(s.AuthToken); err != nil {
		v.add("server.auth_token", s.AuthToken, err.Error())
	}
	v.between("server.auth_token_ttl", s.AuthTokenTTL, 1, 1<<31-1)
	v.between("server.bcrypt_cost", s.BcryptCost, 4, 31)
	v.between("server.min_free_disk_bytes", s.MinFreeDiskBytes, 0, 1<<62)
	if _, err := s.AutoCompaction(); err != nil {
		var fe *FieldError
		if errors.As(err, &fe) {
			v.problems = append(v.problems, fe)
		}
	}
}

// checkAuthToken checks the form of etcd's --auth-token: the token kind,
// then key=value options each given once. (The key files are read when
// the server starts.)
func checkAuthToken(tok string) error {
	kind, opts, _ := strings.Cut(tok, ",")
	if kind != "simple" && kind != "jwt" {
		return fmt.Errorf("token kind %q: must be \"simple\" or \"jwt,pub-key=PATH,priv-key=PATH,sign-method=RS256,ttl=5m\"", kind)
	}
	if opts == "" {
		if kind == "jwt" {
			return fmt.Errorf("jwt needs options: sign-method=..., and pub-key=PATH and/or priv-key=PATH")
		}
		return nil
	}
	seen := map[string]bool{}
	for _, o := range strings.Split(opts, ",") {
		k, _, ok := strings.Cut(o, "=")
		if !ok || strings.Count(o, "=") != 1 {
			return fmt.Errorf("option %q: must be key=value", o)
		}
		if seen[k] {
			return fmt.Errorf("option %q given twice", k)
		}
		seen[k] = true
	}
	return nil
}

// ListenURL is one of server.listen_metrics_urls or listen_client_urls,
// parsed.
type ListenURL struct {
	// TLS is true for https.
	TLS bool
	// Addr is the host:port to listen on.
	Addr string
}

// ParseListenURL parses one of server.listen_metrics_urls or
// listen_client_urls as etcd's
// checkBindURLs accepts it: http or https, an IP address or localhost
// with a numeric port, and no path, query or user.
func ParseListenURL(raw string) (ListenURL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return ListenURL{}, fmt.Errorf("must be a URL such as http://127.0.0.1:2381 (%v)", err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return ListenURL{}, fmt.Errorf("scheme %q: must be http or https, e.g. http://127.0.0.1:2381", u.Scheme)
	}
	if (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.User != nil || u.Opaque != "" {
		return ListenURL{}, fmt.Errorf("must be SCHEME://HOST:PORT with nothing after the port, e.g. http://127.0.0.1:2381")
	}
	if err := checkListen(u.Host); err != nil {
		return ListenURL{}, err
	}
	if h := u.Hostname(); h != "localhost" && net.ParseIP(h) == nil {
		return ListenURL{}, fmt.Errorf("host %q: must be an IP address or localhost to listen on (etcd's rule)", h)
	}
	return ListenURL{TLS: u.Scheme == "https", Addr: u.Host}, nil
}

// checkListen requires host:port with a numeric port.
func checkListen(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("must be host:port, e.g. 127.0.0.1:2379 (%v)", strings.TrimPrefix(err.Error(), "address "+addr+": "))
	}
	if strings.ContainsAny(host, " \t\n/") {
		return fmt.Errorf("host %q is not a host name or IP address", host)
	}
	if n, err := strconv.ParseUint(port, 10, 16); err != nil || (n == 0 && port != "0") {
		return fmt.Errorf("port %q must be a number from 0 to 65535 (0 picks a free port)", port)
	}
	return nil
}
