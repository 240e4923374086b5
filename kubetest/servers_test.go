package kubetest

import (
	"crypto/tls"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/stratadb/strata/internal/memberproc"
)

// The environment that chooses the server under test.
const (
	// serverEnv names the server: strata (the default), etcd37, cluster
	// or kubeadm.
	serverEnv = "STRATA_KUBETEST_SERVER"
	// endpointsEnv, comma-separated host:port, uses servers already
	// running instead of starting one.
	endpointsEnv = "STRATA_KUBETEST_ENDPOINTS"
	// killAfterEnv is how long into the run the cluster's leader is
	// killed (a Go duration; 20s by default).
	killAfterEnv = "STRATA_KUBETEST_KILL_AFTER"
)

// progressInterval is the watch progress notification interval the
// servers run with: etcd3's ProgressNotify and bookmark tests set 1s.
const progressInterval = time.Second

// servers is what TestMain started.
type servers struct {
	endpoints []string
	// c is nil for servers already running (endpointsEnv).
	c *memberproc.Cluster
	// killed reports the member killed mid-run (cluster mode).
	killed chan string
	// tls is the clients' TLS (kubeadm mode: the apiserver-etcd-client
	// certificate); nil is plain text.
	tls *tls.Config
	// prober probes the members as kubelet does (kubeadm mode).
	prober *kubeletProber
}

// startServers starts what serverEnv asks for, configured as
// k8s.io/apiserver's etcd3 tests configure their embedded etcd: without
// fsync, progress notifications every second.
func startServers() (*servers, error) {
	if eps := os.Getenv(endpointsEnv); eps != "" {
		return &servers{endpoints: strings.Split(eps, ",")}, nil
	}
	s := &servers{}
	var err error
	strata := func(n int) (*memberproc.Cluster, error) {
		return memberproc.StartStrata("..", memberproc.StrataOptions{Members: n, NoSync: true, ProgressNotify: progressInterval})
	}
	switch kind := os.Getenv(serverEnv); kind {
	case "", "strata":
		s.c, err = strata(1)
	case "cluster":
		if s.c, err = strata(3); err == nil {
			err = s.killLeaderLater()
		}
	case "kubeadm":
		var kc *memberproc.KubeadmCluster
		if kc, err = memberproc.StartKubeadm("..", memberproc.KubeadmOptions{Members: 3}); err == nil {
			s.c, s.tls = kc.Cluster, kc.APIServerTLS
			s.prober = startKubeletProber(kc.Cluster)
		}
	case "etcd37":
		s.c, err = memberproc.StartEtcd37("..", memberproc.Etcd37Options{Members: 1, NoFsync: true, ProgressNotify: progressInterval})
	default:
		err = fmt.Errorf("%s=%q: allowed are strata, etcd37, cluster and kubeadm", serverEnv, kind)
	}
	if err != nil {
		s.stop(true)
		return nil, err
	}
	s.endpoints = s.c.Endpoints()
	return s, nil
}

// killLeaderLater kills the cluster's leader with SIGKILL some seconds into
// the run (killAfterEnv) and restarts it on its data three seconds later,
// while the tests go on against all three endpoints.
func (s *servers) killLeaderLater() error {
	after := 20 * time.Second
	if v := os.Getenv(killAfterEnv); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return fmt.Errorf("%s=%q: want a positive Go duration such as 20s", killAfterEnv, v)
		}
		after = d
	}
	s.killed = make(chan string, 1)
	go func() {
		time.Sleep(after)
		m := s.c.Leader()
		if m == nil {
			m = s.c.Members[0]
		}
		fmt.Fprintf(os.Stderr, "kubetest: %s: SIGKILL to %s, the leader\n", time.Now().Format(time.TimeOnly), m.Name)
		m.Kill()
		time.Sleep(3 * time.Second)
		if err := m.Start(); err != nil {
			fmt.Fprintf(os.Stderr, "kubetest: restarting %s: %v\n", m.Name, err)
		} else {
			fmt.Fprintf(os.Stderr, "kubetest: %s: %s serves again\n", time.Now().Format(time.TimeOnly), m.Name)
		}
		s.killed <- m.Name
	}()
	return nil
}

// stop kills every process and removes their directory (kept, with the
// logs, when keep).
func (s *servers) stop(keep bool) {
	if s.c != nil {
		s.c.Stop(keep)
	}
}
