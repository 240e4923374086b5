package admin

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/stratadb/strata/config"
	"github.com/stratadb/strata/internal/etcdflags"
	"github.com/stratadb/strata/internal/testport"
)

// etcdChildEnv makes the test binary run `strata` with the arguments in
// it (separated by newlines) instead of the tests, as
// cluster/clustertest's members do.
const etcdChildEnv = "STRATA_ADMIN_CHILD_ARGS"

func TestMain(m *testing.M) {
	if args := os.Getenv(etcdChildEnv); args != "" {
		root := NewRootCommand()
		root.SetArgs(strings.Split(args, "\n"))
		if err := root.Execute(); err != nil {
			fmt.Fprintln(os.Stderr, "strata:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// kubeadmArgs is the command line kubeadm writes for a stacked member
// (addresses and paths rewritten), over TLS.
func kubeadmArgs(dir string) []string {
	return []string{
		"--advertise-client-urls=https://10.0.0.1:2379",
		"--cert-file=/etc/kubernetes/pki/etcd/server.crt",
		"--client-cert-auth=true",
		"--data-dir=" + dir,
		"--feature-gates=InitialCorruptCheck=true",
		"--initial-advertise-peer-urls=https://10.0.0.1:2380",
		"--initial-cluster=cp1=https://10.0.0.1:2380,cp2=https://10.0.0.2:2380,cp3=https://10.0.0.3:2380",
		"--key-file=/etc/kubernetes/pki/etcd/server.key",
		"--listen-client-urls=https://127.0.0.1:2379,https://10.0.0.1:2379",
		"--listen-metrics-urls=http://127.0.0.1:2381",
		"--listen-peer-urls=https://10.0.0.1:2380",
		"--name=cp1",
		"--peer-cert-file=/etc/kubernetes/pki/etcd/peer.crt",
		"--peer-client-cert-auth=true",
		"--peer-key-file=/etc/kubernetes/pki/etcd/peer.key",
		"--peer-trusted-ca-file=/etc/kubernetes/pki/etcd/ca.crt",
		"--snapshot-count=10000",
		"--trusted-ca-file=/etc/kubernetes/pki/etcd/ca.crt",
		"--watch-progress-notify-interval=5s",
	}
}

// TestEtcdFlagMapping checks each mapped flag, given on the command line
// or as ETCD_*, lands in its config key.
func TestEtcdFlagMapping(t *testing.T) {
	cluster := []string{"--name=s1", "--initial-cluster=s1=http://10.0.0.1:2380,s2=http://10.0.0.2:2380",
		"--initial-advertise-peer-urls=http://10.0.0.1:2380", "--listen-peer-urls=http://10.0.0.1:2380"}
	kube := config.ServeDefault()
	kube.DBPath = "/var/lib/etcd/strata"
	kube.Server.Listen = "0.0.0.0:2379"
	kube.Server.CertFile, kube.Server.KeyFile = "/etc/kubernetes/pki/etcd/server.crt", "/etc/kubernetes/pki/etcd/server.key"
	kube.Server.ClientCAFile = "/etc/kubernetes/pki/etcd/ca.crt"
	kube.Server.WatchProgressNotifyIntervalMS = 5000
	kube.Server.ListenMetricsURLs = []string{"http://127.0.0.1:2381"}
	kube.Server.InitialCorruptCheck = true
	kube.Cluster = config.ClusterConfig{Name: "cp1", ListenPeer: "10.0.0.1:2380", Token: "etcd-cluster", RaftDir: "/var/lib/etcd/raft",
		HeartbeatIntervalMS: 100, ElectionTimeoutMS: 1000, SnapshotEntries: 10000,
		PeerCertFile: "/etc/kubernetes/pki/etcd/peer.crt", PeerKeyFile: "/etc/kubernetes/pki/etcd/peer.key",
		PeerTrustedCAFile: "/etc/kubernetes/pki/etcd/ca.crt",
		Members: []config.ClusterMember{
			{Name: "cp1", PeerURL: "https://10.0.0.1:2380", ClientURL: "https://10.0.0.1:2379"},
			{Name: "cp2", PeerURL: "https://10.0.0.2:2380", ClientURL: "https://10.0.0.2:2379"},
			{Name: "cp3", PeerURL: "https://10.0.0.3:2380", ClientURL: "https://10.0.0.3:2379"},
		}}

	tests := []struct {
		name string
		args []string
		env  []string
		got  func(*etcdflags.Result) any
		want any
	}{
		{"kubeadm", kubeadmArgs("/var/lib/etcd"), nil, func(r *etcdflags.Result) any { return r.Config }, kube},
		{"name", cluster, nil, func(r *etcdflags.Result) any { return r.Config.Cluster.Name }, "s1"},
		{"data-dir", []string{"--data-dir=/d"}, nil, func(r *etcdflags.Result) any { return r.Config.DBPath }, "/d/strata"},
		{"data-dir default", []string{"--name=x"}, nil, func(r *etcdflags.Result) any { return r.Config.DBPath }, "x.etcd/strata"},
		{"data-dir raft", append([]string{"--data-dir=/d"}, cluster...), nil, func(r *etcdflags.Result) any { return r.Config.Cluster.RaftDir }, "/d/raft"},
		{"wal-dir cluster", append([]string{"--wal-dir=/w"}, cluster...), nil, func(r *etcdflags.Result) any { return r.Config.Cluster.RaftDir }, "/w"},
		{"wal-dir single", []string{"--wal-dir=/w"}, nil, func(r *etcdflags.Result) any { return r.Config.WALDir }, "/w"},
		{"listen-client-urls", []string{"--listen-client-urls=http://10.0.0.1:4000", "--advertise-client-urls=http://10.0.0.1:4000"}, nil,
			func(r *etcdflags.Result) any { return r.Config.Server.Listen }, "10.0.0.1:4000"},
		{"listen-client-urls several", []string{"--listen-client-urls=http://127.0.0.1:4000,http://10.0.0.1:4000", "--advertise-client-urls=http://10.0.0.1:4000"}, nil,
			func(r *etcdflags.Result) any { return r.Config.Server.Listen }, "0.0.0.0:4000"},
		{"listen-client-urls two ports", []string{"--listen-client-urls=http://127.0.0.1:2379,http://127.0.0.1:2479", "--advertise-client-urls=http://127.0.0.1:2379"}, nil,
			func(r *etcdflags.Result) any {
				return fmt.Sprint(r.Config.Server.Listen, r.Config.Server.ListenClientURLs)
			}, "127.0.0.1:2379[http://127.0.0.1:2479]"},
		{"listen-client-urls https and http", []string{"--listen-client-urls=http://127.0.0.1:4001,https://10.0.0.1:2379,https://127.0.0.1:2379", "--advertise-client-urls=https://10.0.0.1:2379", "--cert-file=c", "--key-file=k"}, nil,
			func(r *etcdflags.Result) any {
				return fmt.Sprint(r.Config.Server.Listen, r.Config.Server.ListenClientURLs, r.Config.Server.CertFile)
			}, "0.0.0.0:2379[http://127.0.0.1:4001]c"},
		{"advertise-client-urls", append([]string{"--listen-client-urls=http://0.0.0.0:4000", "--advertise-client-urls=http://10.0.0.1:4000"}, cluster...), nil,
			func(r *etcdflags.Result) any { return r.Config.Cluster.Members[0].ClientURL }, "http://10.0.0.1:4000"},
		{"listen-peer-urls", cluster, nil, func(r *etcdflags.Result) any { return r.Config.Cluster.ListenPeer }, "10.0.0.1:2380"},
		{"initial-advertise-peer-urls and initial-cluster", cluster, nil,
			func(r *etcdflags.Result) any { return r.Config.Cluster.Members[1].PeerURL }, "http://10.0.0.2:2380"},
		{"initial-cluster default", []string{"--name=a", "--initial-advertise-peer-urls=http://10.0.0.9:2380", "--listen-peer-urls=http://10.0.0.9:2380"}, nil,
			func(r *etcdflags.Result) any { return r.Config.Cluster.Members }, []config.ClusterMember{{Name: "a", PeerURL: "http://10.0.0.9:2380", ClientURL: "http://localhost:2379"}}},
		{"initial-cluster-state existing", append([]string{"--initial-cluster-state=existing"}, cluster...), nil,
			func(r *etcdflags.Result) any { return r.Config.Cluster.Join }, true},
		{"initial-cluster-state new", cluster, nil, func(r *etcdflags.Result) any { return r.Config.Cluster.Join }, false},
		{"initial-cluster-token", append([]string{"--initial-cluster-token=tok"}, cluster...), nil,
			func(r *etcdflags.Result) any { return r.Config.Cluster.Token }, "tok"},
		{"cert-file key-file", []string{"--listen-client-urls=https://127.0.0.1:2379", "--advertise-client-urls=https://127.0.0.1:2379", "--cert-file=c", "--key-file=k"}, nil,
			func(r *etcdflags.Result) any { return [2]string{r.Config.Server.CertFile, r.Config.Server.KeyFile} }, [2]string{"c", "k"}},
		{"trusted-ca-file client-cert-auth", []string{"--listen-client-urls=https://127.0.0.1:2379", "--advertise-client-urls=https://127.0.0.1:2379", "--cert-file=c", "--key-file=k", "--trusted-ca-file=ca", "--client-cert-auth"}, nil,
			func(r *etcdflags.Result) any { return r.Config.Server.ClientCAFile }, "ca"},
		{"cert-file on http", []string{"--cert-file=c", "--key-file=k"}, nil,
			func(r *etcdflags.Result) any { return r.Config.Server.CertFile }, ""},
		{"peer TLS", []string{"--name=s1", "--initial-cluster=s1=https://10.0.0.1:2380", "--initial-advertise-peer-urls=https://10.0.0.1:2380", "--listen-peer-urls=https://10.0.0.1:2380",
			"--peer-cert-file=pc", "--peer-key-file=pk", "--peer-trusted-ca-file=pca", "--peer-client-cert-auth=true"}, nil,
			func(r *etcdflags.Result) any {
				c := r.Config.Cluster
				return [3]string{c.PeerCertFile, c.PeerKeyFile, c.PeerTrustedCAFile}
			}, [3]string{"pc", "pk", "pca"}},
		{"auto-tls with cert", []string{"--listen-client-urls=https://127.0.0.1:2379", "--advertise-client-urls=https://127.0.0.1:2379", "--cert-file=c", "--key-file=k", "--auto-tls"}, nil,
			func(r *etcdflags.Result) any { return r.Config.Server.CertFile }, "c"},
		{"listen-metrics-urls", []string{"--listen-metrics-urls=http://127.0.0.1:2381,https://[::1]:2381", "--listen-client-urls=https://127.0.0.1:2379",
			"--advertise-client-urls=https://127.0.0.1:2379", "--cert-file=c", "--key-file=k"}, nil,
			func(r *etcdflags.Result) any { return r.Config.Server.ListenMetricsURLs }, []string{"http://127.0.0.1:2381", "https://[::1]:2381"}},
		{"quota-backend-bytes", []string{"--quota-backend-bytes=8589934592"}, nil, func(r *etcdflags.Result) any { return r.Config.Server.QuotaBackendBytes }, int64(8 << 30)},
		{"max-request-bytes", []string{"--max-request-bytes=33554432"}, nil, func(r *etcdflags.Result) any { return r.Config.Server.MaxRequestBytes }, int64(32 << 20)},
		{"max-concurrent-streams", []string{"--max-concurrent-streams=100"}, nil, func(r *etcdflags.Result) any { return r.Config.Server.MaxConcurrentStreams }, int64(100)},
		{"auth-token", []string{"--auth-token=jwt,pub-key=p,priv-key=k,sign-method=RS256"}, nil, func(r *etcdflags.Result) any { return r.Config.Server.AuthToken }, "jwt,pub-key=p,priv-key=k,sign-method=RS256"},
		{"auth-token-ttl", []string{"--auth-token-ttl=60"}, nil, func(r *etcdflags.Result) any { return r.Config.Server.AuthTokenTTL }, int64(60)},
		{"bcrypt-cost", []string{"--bcrypt-cost=12"}, nil, func(r *etcdflags.Result) any { return r.Config.Server.BcryptCost }, int64(12)},
		{"auto-compaction", []string{"--auto-compaction-mode=revision", "--auto-compaction-retention=1000"}, nil,
			func(r *etcdflags.Result) any {
				return r.Config.Server.AutoCompactionMode + "/" + r.Config.Server.AutoCompactionRetention
			}, "revision/1000"},
		{"heartbeat-interval", append([]string{"--heartbeat-interval=250", "--election-timeout=2500"}, cluster...), nil,
			func(r *etcdflags.Result) any {
				return [2]int64{r.Config.Cluster.HeartbeatIntervalMS, r.Config.Cluster.ElectionTimeoutMS}
			}, [2]int64{250, 2500}},
		{"snapshot-count", append([]string{"--snapshot-count=5000"}, cluster...), nil, func(r *etcdflags.Result) any { return r.Config.Cluster.SnapshotEntries }, int64(5000)},
		{"watch-progress-notify-interval", []string{"--watch-progress-notify-interval=5s"}, nil,
			func(r *etcdflags.Result) any { return r.Config.Server.WatchProgressNotifyIntervalMS }, int64(5000)},
		{"experimental-watch-progress-notify-interval", []string{"--experimental-watch-progress-notify-interval=2s"}, nil,
			func(r *etcdflags.Result) any { return r.Config.Server.WatchProgressNotifyIntervalMS }, int64(2000)},
		{"experimental-initial-corrupt-check", []string{"--experimental-initial-corrupt-check=true"}, nil,
			func(r *etcdflags.Result) any { return r.Config.Server.InitialCorruptCheck }, true},
		{"feature-gates corruption checks", []string{"--feature-gates=InitialCorruptCheck=true,CompactHashCheck=true"}, nil,
			func(r *etcdflags.Result) any {
				return [2]bool{r.Config.Server.InitialCorruptCheck, r.Config.Server.CompactHashCheck}
			}, [2]bool{true, true}},
		{"corrupt-check-time compact-hash-check-time", []string{"--corrupt-check-time=5m", "--compact-hash-check-time=30s"}, nil,
			func(r *etcdflags.Result) any {
				return [2]int64{r.Config.Server.CorruptCheckIntervalMS, r.Config.Server.CompactHashCheckIntervalMS}
			}, [2]int64{300000, 30000}},
		{"max-txn-ops", []string{"--max-txn-ops=1024"}, nil, func(r *etcdflags.Result) any { return r.Config.Server.MaxTxnOps }, int64(1024)},
		{"single dash", []string{"-data-dir", "/d"}, nil, func(r *etcdflags.Result) any { return r.Config.DBPath }, "/d/strata"},
		// The same through the environment.
		{"env data-dir", nil, []string{"ETCD_DATA_DIR=/e"}, func(r *etcdflags.Result) any { return r.Config.DBPath }, "/e/strata"},
		{"env quota", nil, []string{"ETCD_QUOTA_BACKEND_BYTES=1024"}, func(r *etcdflags.Result) any { return r.Config.Server.QuotaBackendBytes }, int64(1024)},
		{"env cluster", nil, []string{"ETCD_NAME=s2", "ETCD_INITIAL_CLUSTER=s1=http://10.0.0.1:2380,s2=http://10.0.0.2:2380",
			"ETCD_INITIAL_ADVERTISE_PEER_URLS=http://10.0.0.2:2380", "ETCD_LISTEN_PEER_URLS=http://10.0.0.2:2380", "ETCD_INITIAL_CLUSTER_STATE=existing"},
			func(r *etcdflags.Result) any {
				return fmt.Sprint(r.Config.Cluster.Name, r.Config.Cluster.ListenPeer, r.Config.Cluster.Join)
			}, "s210.0.0.2:2380true"},
		{"env watch progress", nil, []string{"ETCD_EXPERIMENTAL_WATCH_PROGRESS_NOTIFY_INTERVAL=3s"},
			func(r *etcdflags.Result) any { return r.Config.Server.WatchProgressNotifyIntervalMS }, int64(3000)},
		{"env flag both", []string{"--data-dir=/f"}, []string{"ETCD_QUOTA_BACKEND_BYTES=2048"},
			func(r *etcdflags.Result) any { return fmt.Sprint(r.Config.DBPath, r.Config.Server.QuotaBackendBytes) }, "/f/strata2048"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res, err := etcdConfig(tc.args, tc.env)
			if err != nil {
				t.Fatal(err)
			}
			if got := tc.got(res); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got  %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

// TestEtcdNotes checks the flags without a counterpart are noted, with
// the reason, and those Strata lacks are noted or refused.
func TestEtcdNotes(t *testing.T) {
	tests := []struct {
		name string
		args []string
		note string // a note contains it; "" for none
		err  string // the error contains it; "" for none
	}{
		{"listen-metrics-urls", []string{"--listen-metrics-urls=http://127.0.0.1:2381"}, "", ""},
		{"listen-metrics-urls host name", []string{"--listen-metrics-urls=http://node1:2381"}, "",
			`--listen-metrics-urls=http://node1:2381: http://node1:2381: host "node1": must be an IP address or localhost`},
		{"listen-metrics-urls https on http", []string{"--listen-metrics-urls=https://127.0.0.1:2381"}, "", "--listen-metrics-urls=https://127.0.0.1:2381: not supported yet"},
		{"listen-metrics-urls unix", []string{"--listen-metrics-urls=unix://m.sock"}, "", "URL scheme must be http or https"},
		{"max-txn-ops", []string{"--max-txn-ops=1024"}, "", ""},
		{"max-txn-ops over the limit", []string{"--max-txn-ops=2000000"}, "", "server.max_txn_ops"},
		{"experimental-initial-corrupt-check", []string{"--experimental-initial-corrupt-check=true", "--initial-cluster=default=http://localhost:2380"}, "", ""},
		{"experimental-initial-corrupt-check single", []string{"--experimental-initial-corrupt-check=true"}, "--experimental-initial-corrupt-check=true: no effect: without --initial-cluster", ""},
		{"feature-gates", []string{"--feature-gates=InitialCorruptCheck=true,CompactHashCheck=false"}, "", ""},
		{"feature-gates without effect", []string{"--feature-gates=PriorityRequest=true"}, "PriorityRequest=true: no effect", ""},
		{"compact-hash-check-time zero", []string{"--compact-hash-check-time=0s"}, "", "--compact-hash-check-time must be >0"},
		{"feature-gates unknown", []string{"--feature-gates=NoSuchGate=true"}, "", "unrecognized feature gate: NoSuchGate"},
		{"logger", []string{"--logger=zap"}, "--logger=zap: no effect", ""},
		{"log-level debug", []string{"--log-level=debug"}, "logs as etcd does at info", ""},
		{"log-level info", []string{"--log-level=info"}, "", ""},
		{"logger capnslog", []string{"--logger=capnslog"}, "", `unknown logger option "capnslog"`},
		{"log-level bad", []string{"--log-level=loud"}, "", "unknown log level"},
		{"auto-tls", []string{"--listen-client-urls=https://127.0.0.1:2379", "--advertise-client-urls=https://127.0.0.1:2379", "--auto-tls"}, "--auto-tls=true: serving https with a self-signed certificate in default.etcd/fixtures/client", ""},
		{"peer-auto-tls", []string{"--listen-peer-urls=https://127.0.0.1:2380", "--initial-advertise-peer-urls=https://127.0.0.1:2380", "--peer-auto-tls"}, "--peer-auto-tls=true: serving https with a self-signed certificate in default.etcd/fixtures/peer", ""},
		{"client-cert-auth without CA", []string{"--listen-client-urls=https://127.0.0.1:2379", "--advertise-client-urls=https://127.0.0.1:2379", "--cert-file=c", "--key-file=k", "--client-cert-auth"}, "", "needs --trusted-ca-file"},
		{"mixed schemes on one port", []string{"--listen-client-urls=https://127.0.0.1:2379,http://127.0.0.1:2379", "--advertise-client-urls=https://127.0.0.1:2379", "--cert-file=c", "--key-file=k"}, "", "http and https on one port (2379)"},
		{"advertise required", []string{"--listen-client-urls=http://127.0.0.1:2379"}, "", "--advertise-client-urls is required"},
		{"several listen hosts", []string{"--listen-client-urls=http://127.0.0.1:2379,http://10.0.0.1:2379", "--advertise-client-urls=http://10.0.0.1:2379"}, "serving http on 0.0.0.0:2379", ""},
		{"name not in cluster", []string{"--name=zz", "--initial-cluster=s1=http://10.0.0.1:2380", "--initial-advertise-peer-urls=http://10.0.0.1:2380"}, "", `couldn't find local name "zz"`},
		{"advertise mismatch", []string{"--name=s1", "--initial-cluster=s1=http://10.0.0.1:2380", "--initial-advertise-peer-urls=http://10.0.0.1:2390"}, "", "must match"},
		{"several peer URLs", []string{"--name=s1", "--initial-cluster=s1=http://10.0.0.1:2380,s1=http://10.0.0.2:2380", "--initial-advertise-peer-urls=http://10.0.0.1:2380"}, "", "several peer URLs"},
		{"bad state", []string{"--initial-cluster-state=old", "--initial-cluster=default=http://localhost:2380"}, "", `unexpected clusterState "old"`},
		{"force-new-cluster", []string{"--force-new-cluster"}, "", "--force-new-cluster=true: not supported"},
		{"client-crl-file", []string{"--client-crl-file=crl.pem"}, "", "revocation lists"},
		{"discovery", []string{"--discovery-srv=example.com"}, "", "list the members in --initial-cluster"},
		{"enable-pprof", []string{"--enable-pprof"}, "--enable-pprof=true: no effect: Strata serves no /debug/pprof", ""},
		{"snapshot-count single", []string{"--snapshot-count=100"}, "--snapshot-count=100: no effect: without --initial-cluster", ""},
		{"bad value", []string{"--heartbeat-interval=fast"}, "", `invalid argument "fast"`},
		{"election timeout validated", []string{"--heartbeat-interval=100", "--election-timeout=200", "--initial-cluster=default=http://localhost:2380"}, "", "cluster.election_timeout_ms"},
		{"positional", []string{"serve"}, "", `"serve" is not a valid flag`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res, err := etcdConfig(tc.args, nil)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			notes := strings.Join(res.Notes, "\n")
			if tc.note == "" && len(res.Notes) > 0 {
				t.Errorf("notes %q, want none", notes)
			}
			if !strings.Contains(notes, tc.note) {
				t.Errorf("notes:\n%s\nwant one containing %q", notes, tc.note)
			}
		})
	}
}

// TestEtcdEveryFlagHandled checks every etcd flag is either mapped
// (changes the configuration), noted, or refused: none silently ignored.
func TestEtcdEveryFlagHandled(t *testing.T) {
	base, err := etcdConfig(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	// A value other than etcd's default for each flag, chosen to pass
	// its parsing.
	odd := map[string]string{
		"listen-client-urls": "http://127.0.0.1:4379", "advertise-client-urls": "http://127.0.0.1:4379",
		"listen-peer-urls": "http://localhost:4380", "initial-advertise-peer-urls": "http://localhost:2380",
		"listen-metrics-urls": "http://127.0.0.1:2381", "listen-client-http-urls": "http://127.0.0.1:2382",
		"initial-cluster": "default=http://localhost:2380", "initial-cluster-state": "existing",
		"auto-compaction-mode": "revision", "auto-compaction-retention": "10", "auth-token": "simple,x=y",
		"feature-gates": "InitialCorruptCheck=true", "log-level": "debug", "logger": "zap", "quota-backend-bytes": "1000000",
		"max-request-bytes": "2000000", "max-txn-ops": "256", "heartbeat-interval": "50", "election-timeout": "3000",
		"snapshot-count": "20", "auth-token-ttl": "30", "bcrypt-cost": "11", "max-concurrent-streams": "1000",
		"watch-progress-notify-interval": "2s", "experimental-watch-progress-notify-interval": "2s",
	}
	for _, n := range etcdflags.Names() {
		if n == "config-file" {
			continue
		}
		t.Run(n, func(t *testing.T) {
			val, ok := odd[n]
			arg := "--" + n
			if ok {
				arg += "=" + val
			} else if !strings.HasSuffix(n, "-tls") && n != "version" {
				arg += "=v"
				switch n {
				case "max-snapshots", "max-wals", "snapshot-catchup-entries", "backend-batch-limit", "compaction-batch-limit",
					"bootstrap-defrag-threshold-megabytes", "max-learners", "self-signed-cert-validity", "distributed-tracing-sampling-rate":
					arg = "--" + n + "=7"
				case "backend-batch-interval", "compaction-sleep-interval", "grpc-keepalive-min-time", "grpc-keepalive-interval",
					"grpc-keepalive-timeout", "corrupt-check-time", "compact-hash-check-time", "downgrade-check-time",
					"warning-apply-duration", "warning-unary-request-duration", "raft-read-timeout", "raft-write-timeout",
					"discovery-dial-timeout", "discovery-request-timeout", "discovery-keepalive-time", "discovery-keepalive-timeout":
					arg = "--" + n + "=7s"
				case "pre-vote", "strict-reconfig-check", "initial-election-tick-advance", "enable-grpc-gateway", "discovery-insecure-transport":
					arg = "--" + n + "=false"
				case "enable-log-rotation", "socket-reuse-address", "socket-reuse-port", "memory-mlock", "enable-pprof",
					"client-cert-auth", "peer-client-cert-auth", "experimental-initial-corrupt-check", "enable-distributed-tracing",
					"force-new-cluster", "unsafe-no-fsync", "peer-skip-client-san-verification":
					arg = "--" + n + "=true"
				}
			}
			res, err := etcdConfig([]string{arg}, nil)
			if err != nil {
				return // refused, with a reason
			}
			if !reflect.DeepEqual(res.Config, base.Config) {
				return // mapped
			}
			for _, note := range res.Notes {
				if strings.Contains(note, "--"+n+"=") || strings.Contains(note, "--"+n+":") {
					return // noted
				}
			}
			t.Errorf("%s: no config change, no note, no error (notes %q)", arg, res.Notes)
		})
	}
}

// TestEtcdUnknownFlag checks an unknown flag is refused with etcd's
// nearest name, in a file too.
func TestEtcdUnknownFlag(t *testing.T) {
	_, err := etcdConfig([]string{"--listen-client-url=http://127.0.0.1:2379"}, nil)
	if want := "unknown flag --listen-client-url; did you mean --listen-client-urls?"; err == nil || err.Error() != want {
		t.Errorf("error %v, want %q", err, want)
	}
	_, err = etcdConfig([]string{"--initial-cluster-stat", "existing"}, nil)
	if want := "did you mean --initial-cluster-state?"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("error %v, want %q", err, want)
	}
	file := filepath.Join(t.TempDir(), "etcd.yaml")
	if err := os.WriteFile(file, []byte("name: s1\ndata-dirs: /x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = etcdConfig([]string{"--config-file", file}, nil)
	if want := "unknown key data-dirs; did you mean data-dir?"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("error %v, want %q", err, want)
	}
	res, err := etcdConfig(nil, []string{"ETCD_DATADIR=/x"})
	if err != nil {
		t.Fatal(err)
	}
	if want := "unrecognized environment variable ETCD_DATADIR ignored, as etcd ignores it (did you mean ETCD_DATA_DIR?)"; !slicesContains(res.Notes, want) {
		t.Errorf("notes %q, want %q", res.Notes, want)
	}
}

func slicesContains(s []string, want string) bool {
	for _, x := range s {
		if x == want {
			return true
		}
	}
	return false
}

// TestEtcdEnvPrecedence checks etcd's rule: a variable applies when its
// flag is not given, and a flag given both ways is refused, as etcd
// refuses it; --config-file ignores (and names) both.
func TestEtcdEnvPrecedence(t *testing.T) {
	res, err := etcdConfig([]string{"--data-dir=/flag"}, []string{"ETCD_NAME=fromenv", "PATH=/bin"})
	if err != nil {
		t.Fatal(err)
	}
	if res.DataDir != "/flag" {
		t.Errorf("data dir %q, want /flag", res.DataDir)
	}
	_, err = etcdConfig([]string{"--data-dir=/flag"}, []string{"ETCD_DATA_DIR=/env"})
	if want := "conflicting environment variable ETCD_DATA_DIR is shadowed by corresponding command-line flag --data-dir"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("error %v, want %q", err, want)
	}
	_, err = etcdConfig(nil, []string{"ETCD_SNAPSHOT_COUNT=many"})
	if want := `invalid value "many" for ETCD_SNAPSHOT_COUNT`; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("error %v, want %q", err, want)
	}

	dir := t.TempDir()
	file := filepath.Join(dir, "etcd.yaml")
	yaml := `name: m1
data-dir: /var/lib/etcd
listen-client-urls: https://10.0.0.1:2379
advertise-client-urls: https://10.0.0.1:2379
listen-peer-urls: https://10.0.0.1:2380
initial-advertise-peer-urls: https://10.0.0.1:2380
initial-cluster: m1=https://10.0.0.1:2380,m2=https://10.0.0.2:2380
initial-cluster-state: existing
heartbeat-interval: 200
election-timeout: 2000
watch-progress-notify-interval: 5000000000
client-transport-security:
  cert-file: /pki/server.crt
  key-file: /pki/server.key
  client-cert-auth: true
  trusted-ca-file: /pki/ca.crt
peer-transport-security:
  cert-file: /pki/peer.crt
  key-file: /pki/peer.key
  client-cert-auth: true
  trusted-ca-file: /pki/ca.crt
`
	if err := os.WriteFile(file, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	res, err = etcdConfig([]string{"--quota-backend-bytes=5"}, []string{"ETCD_CONFIG_FILE=" + file, "ETCD_NAME=other"})
	if err != nil {
		t.Fatal(err)
	}
	c := res.Config
	got := fmt.Sprint(c.DBPath, " ", c.Server.Listen, " ", c.Server.CertFile, " ", c.Server.ClientCAFile, " ", c.Server.WatchProgressNotifyIntervalMS, " ",
		c.Server.QuotaBackendBytes == config.DefaultQuotaBackendBytes, " ", c.Cluster.Name, " ", c.Cluster.Join, " ", c.Cluster.HeartbeatIntervalMS, " ",
		c.Cluster.PeerCertFile, " ", c.Cluster.PeerTrustedCAFile, " ", len(c.Cluster.Members))
	if want := "/var/lib/etcd/strata 10.0.0.1:2379 /pki/server.crt /pki/ca.crt 5000 true m1 true 200 /pki/peer.crt /pki/ca.crt 2"; got != want {
		t.Errorf("from the file:\ngot  %s\nwant %s", got, want)
	}
	if want := "ignored, as etcd ignores them: --quota-backend-bytes, ETCD_NAME"; !strings.Contains(strings.Join(res.Notes, "\n"), want) {
		t.Errorf("notes %q, want one containing %q", res.Notes, want)
	}
}

// TestEtcdDataDirRefused checks an etcd member's data dir is refused with
// the restore command that converts it, and accepted once converted.
func TestEtcdDataDirRefused(t *testing.T) {
	dir := t.TempDir()
	for _, d := range []string{"member/snap", "member/wal"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "member/snap/db"), []byte("bbolt"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := etcdConfig([]string{"--data-dir=" + dir}, nil)
	if !errors.Is(err, etcdflags.ErrEtcdDataDir) {
		t.Fatalf("error %v, want ErrEtcdDataDir", err)
	}
	if want := fmt.Sprintf("strata --db %s/strata restore %s/member/snap/db", dir, dir); !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not name %q", err, want)
	}
	// The command it names is restore's: --db and the FILE argument.
	root := NewRootCommand()
	restore, _, err := root.Find([]string{"restore"})
	if err != nil || restore.Name() != "restore" || root.PersistentFlags().Lookup("db") == nil {
		t.Fatalf("restore command or --db flag missing: %v", err)
	}
	if err := os.Mkdir(filepath.Join(dir, "strata"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := etcdConfig([]string{"--data-dir=" + dir}, nil); err != nil {
		t.Errorf("after restore: %v", err)
	}
}

var etcdServingLine = regexp.MustCompile(`serving etcd v2 and v3 APIs on https?://(\S+) `)

// TestEtcdThreeMembers starts three `strata etcd` processes with a
// kubeadm-style command line (plain http) and checks a put, a get and the
// member list through clientv3, and etcdctl when installed.
func TestEtcdThreeMembers(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three processes")
	}
	dir := t.TempDir()
	names := []string{"cp1", "cp2", "cp3"}
	peers, clients := make([]string, 3), make([]string, 3)
	var initial []string
	for i, n := range names {
		peers[i], clients[i] = testport.Addr(t), testport.Addr(t)
		initial = append(initial, n+"=http://"+peers[i])
	}
	type proc struct {
		cmd    *exec.Cmd
		log    string
		served chan struct{}
		exited chan struct{}
	}
	procs := make([]*proc, 3)
	metrics := make([]string, 3)
	for i, n := range names {
		_, metricsPort, _ := strings.Cut(testport.Addr(t), ":")
		metrics[i] = "http://127.0.0.1:" + metricsPort
		args := []string{"etcd",
			"--advertise-client-urls=http://" + clients[i],
			"--data-dir=" + filepath.Join(dir, n),
			"--experimental-initial-corrupt-check=true",
			"--experimental-watch-progress-notify-interval=5s",
			"--initial-advertise-peer-urls=http://" + peers[i],
			"--initial-cluster=" + strings.Join(initial, ","),
			"--initial-cluster-state=new",
			"--initial-cluster-token=kube-etcd",
			"--heartbeat-interval=50",
			"--election-timeout=500",
			"--listen-client-urls=http://" + clients[i],
			"--listen-metrics-urls=http://127.0.0.1:" + metricsPort,
			"--listen-peer-urls=http://" + peers[i],
			"--name=" + n,
			"--snapshot-count=10000",
		}
		logPath := filepath.Join(dir, n+".log")
		logf, err := os.Create(logPath)
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), etcdChildEnv+"="+strings.Join(args, "\n"), "ETCD_AUTO_COMPACTION_RETENTION=1h")
		cmd.Stderr = logf
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		p := &proc{cmd: cmd, log: logPath, served: make(chan struct{}), exited: make(chan struct{})}
		procs[i] = p
		go func() {
			defer logf.Close()
			sc := bufio.NewScanner(stdout)
			once := false
			for sc.Scan() {
				fmt.Fprintln(logf, "stdout: "+sc.Text())
				if !once && etcdServingLine.MatchString(sc.Text()) {
					once = true
					close(p.served)
				}
			}
			_ = cmd.Wait()
			close(p.exited)
		}()
	}
	t.Cleanup(func() {
		for _, p := range procs {
			_ = p.cmd.Process.Signal(syscall.SIGKILL)
			<-p.exited
		}
		if t.Failed() {
			for i, p := range procs {
				b, _ := os.ReadFile(p.log)
				t.Logf("%s log:\n%s", names[i], b)
			}
		}
	})
	for i, p := range procs {
		select {
		case <-p.served:
		case <-p.exited:
			t.Fatalf("%s exited before serving", names[i])
		case <-time.After(60 * time.Second):
			t.Fatalf("%s did not serve within 60s", names[i])
		}
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: clients, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := cli.Put(ctx, "/registry/pods/default/p1", "v1"); err != nil {
		t.Fatal(err)
	}
	for _, ep := range clients {
		one, err := clientv3.New(clientv3.Config{Endpoints: []string{ep}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
		if err != nil {
			t.Fatal(err)
		}
		got, err := one.Get(ctx, "/registry/pods/default/p1")
		_ = one.Close()
		if err != nil || len(got.Kvs) != 1 || string(got.Kvs[0].Value) != "v1" {
			t.Fatalf("get on %s: %v %v", ep, got, err)
		}
	}
	ml, err := cli.MemberList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	for i, n := range names {
		want[n] = "http://" + clients[i]
	}
	got := map[string]string{}
	for _, m := range ml.Members {
		got[m.Name] = strings.Join(m.ClientURLs, ",")
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("member list %v, want %v", got, want)
	}
	// The notes reached the log.
	b, _ := os.ReadFile(procs[0].log)
	if !strings.Contains(string(b), "--initial-cluster: the other members' client URLs") {
		t.Errorf("cp1's log lacks the notes:\n%s", b)
	}
	// The metrics URLs serve the probes, and the start says where.
	for i, p := range procs {
		want := "strata: serving /metrics, /health, /livez and /readyz on " + metrics[i]
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			b, _ := os.ReadFile(p.log)
			if strings.Contains(string(b), want) {
				break
			}
			if time.Now().After(deadline) {
				t.Errorf("%s's log lacks %q", names[i], want)
				break
			}
		}
		hc := &http.Client{Timeout: 10 * time.Second}
		resp, err := hc.Get(metrics[i] + "/readyz")
		if err != nil {
			t.Fatalf("%s: GET %s/readyz: %v", names[i], metrics[i], err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || string(body) != "ok\n" {
			t.Errorf("%s: GET %s/readyz: %d %q", names[i], metrics[i], resp.StatusCode, body)
		}
	}

	etcdctl, err := exec.LookPath("etcdctl")
	if err != nil {
		t.Log("etcdctl not installed: checked with clientv3 only")
		return
	}
	out, err := exec.Command(etcdctl, "--endpoints="+strings.Join(clients, ","), "member", "list").CombinedOutput()
	if err != nil {
		t.Fatalf("etcdctl member list: %v\n%s", err, out)
	}
	for _, n := range names {
		if !strings.Contains(string(out), ", "+n+", ") {
			t.Errorf("etcdctl member list lacks %s:\n%s", n, out)
		}
	}
	out, err = exec.Command(etcdctl, "--endpoints="+clients[2], "get", "/registry/pods/default/p1", "--print-value-only").CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "v1" {
		t.Errorf("etcdctl get: %v %q", err, out)
	}
}
