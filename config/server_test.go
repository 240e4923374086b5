package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestServerSectionLoads(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "strata.toml")
	file := "db_path = \"/tmp/x\"\n[server]\nlisten = \"127.0.0.1:0\"\nmemory_budget_mb = 128\n"
	if err := os.WriteFile(path, []byte(file), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := LoadServe(path)
	if err != nil {
		t.Fatal(err)
	}
	if c.Server.Listen != "127.0.0.1:0" || c.Server.MemoryBudgetMB != 128 || c.Server.MaxRequestBytes != defaultServer().MaxRequestBytes {
		t.Errorf("server = %+v", c.Server)
	}
	if !c.Sync {
		t.Error("LoadServe: sync = false, want the server's default true")
	}
	if plain, err := Load(path); err != nil || plain.Sync {
		t.Errorf("Load: sync = %v, %v; want the engine's default false", plain.Sync, err)
	}
	if err := os.WriteFile(path, []byte("sync = false\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if c, err := LoadServe(path); err != nil || c.Sync {
		t.Errorf("LoadServe with sync = false: %v, %v", c.Sync, err)
	}
}

func TestServerSectionErrors(t *testing.T) {
	for _, tt := range []struct{ file, want string }{
		{"[server]\nlisen = \"x\"\n", "server.lisen = \"x\": unknown key (did you mean listen?)"},
		{"[server]\nlisten = 5\n", "server.listen = 5: expected a string"},
		{"server = 5\n", "server = 5: expected a table (a [server] section)"},
		{"[server]\nlisten = \"localhost\"\n", "server.listen = \"localhost\": must be host:port"},
		{"[server]\nlisten = \"localhost:99999\"\n", "port \"99999\" must be a number from 0 to 65535"},
		{"[server]\nlisten_metrics_urls = [\"127.0.0.1:2381\"]\n", "server.listen_metrics_urls = \"127.0.0.1:2381\": must be a URL such as http://127.0.0.1:2381"},
		{"[server]\nlisten_metrics_urls = [\"unix://m.sock\"]\n", "server.listen_metrics_urls = \"unix://m.sock\": scheme \"unix\": must be http or https"},
		{"[server]\nlisten_metrics_urls = [\"http://127.0.0.1:2381/metrics\"]\n", "server.listen_metrics_urls = \"http://127.0.0.1:2381/metrics\": must be SCHEME://HOST:PORT"},
		{"[server]\nlisten_metrics_urls = [\"http://127.0.0.1\"]\n", "server.listen_metrics_urls = \"http://127.0.0.1\": must be host:port"},
		{"[server]\nlisten_metrics_urls = [\"http://node1:2381\"]\n", "server.listen_metrics_urls = \"http://node1:2381\": host \"node1\": must be an IP address or localhost"},
		{"[server]\nlisten_metrics_urls = [\"https://127.0.0.1:2381\"]\n", "server.listen_metrics_urls = \"https://127.0.0.1:2381\": https needs server.cert_file"},
		{"[server]\nmax_value_bytes = 0\n", "server.max_value_bytes = 0: must be from 1 to 1572864"},
		{"[server]\ncert_file = \"c.pem\"\n", "server.key_file = \"\": must be set when server.cert_file is set"},
		{"[server]\nclient_ca_file = \"ca.pem\"\n", "server.client_ca_file = \"ca.pem\": requires server.cert_file"},
		{"[server]\nmax_concurrent_streams = 0\n", "server.max_concurrent_streams = 0: must be from 1 to 4294967295"},
		{"[server]\ngo_memory_limit_mb = -2\n", "server.go_memory_limit_mb = -2: must be from -1 to 1048576"},
		{"[server]\nwatch_progress_notify_interval_ms = 5\n", "server.watch_progress_notify_interval_ms = 5: must be from 10 to 86400000"},
		{"[server]\ncompact_hash_check_interval_ms = 0\n", "server.compact_hash_check_interval_ms = 0: must be from 1 to 86400000"},
		{"[server]\ncorrupt_check_interval_ms = -1\n", "server.corrupt_check_interval_ms = -1: must be from 0 to 86400000"},
		{"[server]\nauth_token = \"jwt\"\n", "server.auth_token = \"jwt\": jwt needs options"},
		{"[server]\nauth_token = \"oauth\"\n", "server.auth_token = \"oauth\": token kind \"oauth\": must be \"simple\" or"},
		{"[server]\nauth_token = \"jwt,ttl\"\n", "server.auth_token = \"jwt,ttl\": option \"ttl\": must be key=value"},
		{"[server]\nauth_token_ttl = 0\n", "server.auth_token_ttl = 0: must be from 1 to 2147483647"},
		{"[server]\nbcrypt_cost = 3\n", "server.bcrypt_cost = 3: must be from 4 to 31"},
		{"[server]\nmin_free_disk_bytes = -1\n", "server.min_free_disk_bytes = -1: must be from 0 to 4611686018427387904"},
		{"[server]\nauto_compaction_mode = \"daily\"\n", "server.auto_compaction_mode = \"daily\": must be periodic or revision"},
		{"[server]\nauto_compaction_retention = \"1 hour\"\n", "server.auto_compaction_retention = \"1 hour\": must be a duration"},
		{"[server]\nauto_compaction_mode = \"revision\"\nauto_compaction_retention = \"1h\"\n", "server.auto_compaction_retention = \"1h\": must be a number of revisions in revision mode"},
	} {
		_, err := Parse([]byte(tt.file), "toml")
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Parse(%q) = %v\nwant an error containing %q", tt.file, err, tt.want)
		}
	}
}

func TestApplyMemoryBudget(t *testing.T) {
	c := Default()
	c.Server.MemoryBudgetMB = 32
	if !c.ApplyMemoryBudget() || c.MemtableSizeMB != 4 || c.MaxWriteBufferNumber != 2 || c.BlockCacheSizeMB != 20 {
		t.Errorf("budget 32: memtable %d x %d, cache %d", c.MemtableSizeMB, c.MaxWriteBufferNumber, c.BlockCacheSizeMB)
	}
	if err := c.Validate(); err != nil {
		t.Error(err)
	}
	c = Default()
	c.Server.MemoryBudgetMB = 0
	if c.ApplyMemoryBudget() || c.MemtableSizeMB != Default().MemtableSizeMB {
		t.Error("budget 0 changed the engine keys")
	}
}

func TestQuotaBytes(t *testing.T) {
	for _, tt := range []struct{ set, want int64 }{
		{0, DefaultQuotaBackendBytes}, {-1, -1}, {-5, -1}, {1, 1}, {8 << 30, 8 << 30},
	} {
		s := defaultServer()
		s.QuotaBackendBytes = tt.set
		if got := s.QuotaBytes(); got != tt.want {
			t.Errorf("quota_backend_bytes = %d: QuotaBytes() = %d, want %d", tt.set, got, tt.want)
		}
	}
	if got := defaultServer().QuotaBytes(); got != DefaultQuotaBackendBytes {
		t.Errorf("default QuotaBytes() = %d", got)
	}
}

func TestAutoCompaction(t *testing.T) {
	for _, tt := range []struct {
		mode, retention string
		want            AutoCompaction
		err             string // a substring of the error; "" = none
	}{
		{mode: "periodic", retention: "0", want: AutoCompaction{Mode: "periodic"}},
		{mode: "periodic", retention: "", want: AutoCompaction{Mode: "periodic"}},
		{mode: "revision", retention: "0", want: AutoCompaction{Mode: "revision"}},
		// etcd's parseCompactionRetention: a bare integer is hours in
		// periodic mode, revisions in revision mode.
		{mode: "periodic", retention: "1", want: AutoCompaction{Mode: "periodic", Period: time.Hour}},
		{mode: "periodic", retention: "72", want: AutoCompaction{Mode: "periodic", Period: 72 * time.Hour}},
		{mode: "periodic", retention: "30m", want: AutoCompaction{Mode: "periodic", Period: 30 * time.Minute}},
		{mode: "periodic", retention: "2s", want: AutoCompaction{Mode: "periodic", Period: 2 * time.Second}},
		{mode: "periodic", retention: "0s", want: AutoCompaction{Mode: "periodic"}},
		{mode: "revision", retention: "1000", want: AutoCompaction{Mode: "revision", Revisions: 1000}},
		{mode: "periodic", retention: "500ms", err: `server.auto_compaction_retention = "500ms": must be at least 1s`},
		{mode: "periodic", retention: "-1h", err: "must not be negative"},
		{mode: "revision", retention: "-5", err: "must not be negative"},
		{mode: "periodic", retention: "9999999999", err: "too many hours"},
		{mode: "revision", retention: "5m", err: "must be a number of revisions"},
		{mode: "periodic", retention: "soon", err: "must be a duration"},
		{mode: "", retention: "1", err: `server.auto_compaction_mode = "": must be periodic or revision`},
		{mode: "Periodic", retention: "1", err: "must be periodic or revision"},
	} {
		s := defaultServer()
		s.AutoCompactionMode, s.AutoCompactionRetention = tt.mode, tt.retention
		got, err := s.AutoCompaction()
		if tt.err != "" {
			var fe *FieldError
			if err == nil || !strings.Contains(err.Error(), tt.err) || !errors.As(err, &fe) {
				t.Errorf("%s %q: %v, want a FieldError containing %q", tt.mode, tt.retention, err, tt.err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("%s %q: %+v, %v; want %+v", tt.mode, tt.retention, got, err, tt.want)
		}
		if got.Enabled() != (tt.want.Period > 0 || tt.want.Revisions > 0) {
			t.Errorf("%s %q: Enabled() = %v", tt.mode, tt.retention, got.Enabled())
		}
	}
	if a, err := defaultServer().AutoCompaction(); err != nil || a.Enabled() {
		t.Errorf("default: %+v, %v; want off, as etcd's", a, err)
	}
}
