package memberproc

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// The kubeadm stacked control plane, as kubeadm v1.37 builds it: its
// certs phase writes an etcd CA and, per node, etcd's server and peer
// certificates plus the apiserver's and the health check's client
// certificates (cmd/kubeadm/app/phases/certs/certlist.go); its etcd phase
// writes the static pod manifest whose command line is getEtcdCommand's
// (cmd/kubeadm/app/phases/etcd/local.go). The first control-plane node
// starts a cluster of one; each joining node is first added as a learner
// (clientv3 MemberAddAsLearner), started with the members listed and
// --initial-cluster-state=existing, then promoted
// (CreateStackedEtcdStaticPodManifestFile). StartKubeadm does the same
// with `strata etcd` in place of etcd, changing only the addresses (all
// on 127.0.0.1, a port each) and the paths (under one temporary
// directory).

// KubeadmOptions configures StartKubeadm.
type KubeadmOptions struct {
	// Members is the number of control-plane nodes: 3 for the usual
	// stacked control plane.
	Members int
	// ExtraArgs are kubeadm's etcd.local.extraArgs: each replaces or adds
	// a flag of every member's command line (name without dashes).
	ExtraArgs map[string]string
}

// KubeadmCluster is the control plane StartKubeadm started.
type KubeadmCluster struct {
	*Cluster
	// Commands are the members' etcd command lines, as their manifests
	// have them (the program name first, then the flags in kubeadm's
	// sorted order).
	Commands [][]string
	// APIServerTLS is the client TLS of kube-apiserver's
	// --etcd-certfile/--etcd-keyfile/--etcd-cafile
	// (apiserver-etcd-client, signed by the etcd CA).
	APIServerTLS *tls.Config
	// HealthcheckTLS is etcd/healthcheck-client's, which kubeadm's etcd
	// client tools use.
	HealthcheckTLS *tls.Config
	// CAPool holds the etcd CA.
	CAPool *x509.CertPool
}

// kubeadmNode is one control-plane node: its name, addresses and the
// directories kubeadm uses (/etc/kubernetes/pki, /var/lib/etcd).
type kubeadmNode struct {
	name                  string
	client, peer, metrics string // 127.0.0.1:PORT
	pkiDir, dataDir       string
	initialCluster        []string // name=peerURL
	existing              bool
	extraArgs             map[string]string
	advertiseIP           net.IP
}

// command is kubeadm's getEtcdCommand: the etcd command line
// of a stacked member's manifest, flags sorted by name as
// kubeadmutil.ArgumentsToCommand writes them.
func (n *kubeadmNode) command() []string {
	args := map[string]string{
		"name":                           n.name,
		"feature-gates":                  "InitialCorruptCheck=true",
		"listen-client-urls":             "https://127.0.0.1:" + port(n.client) + ",https://" + n.client,
		"advertise-client-urls":          "https://" + n.client,
		"listen-peer-urls":               "https://" + n.peer,
		"initial-advertise-peer-urls":    "https://" + n.peer,
		"data-dir":                       n.dataDir,
		"cert-file":                      filepath.Join(n.pkiDir, "etcd", "server.crt"),
		"key-file":                       filepath.Join(n.pkiDir, "etcd", "server.key"),
		"trusted-ca-file":                filepath.Join(n.pkiDir, "etcd", "ca.crt"),
		"client-cert-auth":               "true",
		"peer-cert-file":                 filepath.Join(n.pkiDir, "etcd", "peer.crt"),
		"peer-key-file":                  filepath.Join(n.pkiDir, "etcd", "peer.key"),
		"peer-trusted-ca-file":           filepath.Join(n.pkiDir, "etcd", "ca.crt"),
		"peer-client-cert-auth":          "true",
		"snapshot-count":                 "10000",
		"listen-metrics-urls":            "http://" + n.metrics,
		"watch-progress-notify-interval": "5s",
		"initial-cluster":                strings.Join(n.initialCluster, ","),
	}
	if n.existing {
		args["initial-cluster-state"] = "existing"
	}
	for k, v := range n.extraArgs {
		args[k] = v
	}
	names := make([]string, 0, len(args))
	for k := range args {
		names = append(names, k)
	}
	sort.Strings(names)
	cmd := []string{"etcd"}
	for _, k := range names {
		cmd = append(cmd, "--"+k+"="+args[k])
	}
	return cmd
}

func port(hostport string) string {
	_, p, _ := net.SplitHostPort(hostport)
	return p
}

// StartKubeadm builds `strata` from the repository at repoRoot and starts
// a kubeadm stacked control plane's etcd members with it, one by one as
// kubeadm init and kubeadm join do: the first alone, each next one added
// as a learner, started, and promoted. Every member's client and peer
// URLs are https with client certificates required; its metrics URL is
// http, where kubelet probes /livez and /readyz.
func StartKubeadm(repoRoot string, opts KubeadmOptions) (*KubeadmCluster, error) {
	c, bin, err := newCluster(repoRoot, "./cmd/strata", "strata", opts.Members)
	if err != nil {
		return nil, err
	}
	kc := &KubeadmCluster{Cluster: c}
	nodes := make([]*kubeadmNode, opts.Members)
	for i := range nodes {
		n := &kubeadmNode{name: fmt.Sprintf("cp%d", i+1), advertiseIP: net.IPv4(127, 0, 0, 1), extraArgs: opts.ExtraArgs}
		for _, a := range []*string{&n.client, &n.peer, &n.metrics} {
			if *a, err = freeAddr(); err != nil {
				return nil, c.failStart(err)
			}
		}
		n.pkiDir = filepath.Join(c.Dir, n.name, "pki")
		n.dataDir = filepath.Join(c.Dir, n.name, "etcd")
		nodes[i] = n
	}
	if err := kc.writePKI(nodes); err != nil {
		return nil, c.failStart(err)
	}
	for i, n := range nodes {
		m := &Member{Name: n.name, Client: n.client, Dir: n.dataDir, MetricsURL: "http://" + n.metrics, TLS: kc.APIServerTLS}
		if i == 0 {
			// kubeadm init: a cluster of one.
			n.initialCluster = []string{n.name + "=https://" + n.peer}
		} else if err := kc.addLearner(n); err != nil {
			return nil, kc.fail(err)
		}
		cmd := n.command()
		kc.Commands = append(kc.Commands, cmd)
		m.args = append([]string{bin}, cmd...) // `strata etcd FLAGS` in place of `etcd FLAGS`
		c.Members = append(c.Members, m)
		if err := m.Start(); err != nil {
			return nil, kc.fail(err)
		}
		if i > 0 {
			if err := kc.promote(n); err != nil {
				return nil, kc.fail(err)
			}
		}
	}
	return kc, nil
}

func (kc *KubeadmCluster) fail(err error) error {
	kc.Stop(true)
	return err
}

// client is a client of every started member, as kubeadm's etcd client
// (the apiserver-etcd-client certificate).
func (kc *KubeadmCluster) client() (*clientv3.Client, error) {
	return clientv3.New(clientv3.Config{Endpoints: kc.Endpoints(), DialTimeout: 5 * time.Second, TLS: kc.APIServerTLS, Logger: zap.NewNop()})
}

// addLearner is kubeadm's AddMemberAsLearner: add n's peer URL as a
// learner and list the members, naming the new one, as its
// --initial-cluster.
func (kc *KubeadmCluster) addLearner(n *kubeadmNode) error {
	cli, err := kc.client()
	if err != nil {
		return err
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	peerURL := "https://" + n.peer
	resp, err := cli.MemberAddAsLearner(ctx, []string{peerURL})
	if err != nil {
		return fmt.Errorf("memberproc: member add --learner %s: %w", peerURL, err)
	}
	for _, m := range resp.Members {
		name := m.Name
		if m.ID == resp.Member.ID {
			name = n.name
		}
		for _, u := range m.PeerURLs {
			n.initialCluster = append(n.initialCluster, name+"="+u)
		}
	}
	n.existing = true
	return nil
}

// promote is kubeadm's MemberPromote, retried while the learner catches
// up (kubeadm retries for about a minute).
func (kc *KubeadmCluster) promote(n *kubeadmNode) error {
	cli, err := kc.client()
	if err != nil {
		return err
	}
	defer cli.Close()
	deadline := time.Now().Add(time.Minute)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		ml, err := cli.MemberList(ctx)
		var id uint64
		if err == nil {
			for _, m := range ml.Members {
				if len(m.PeerURLs) > 0 && m.PeerURLs[0] == "https://"+n.peer {
					id = m.ID
				}
			}
			if id == 0 {
				err = fmt.Errorf("no member with peer URL https://%s", n.peer)
			} else {
				_, err = cli.MemberPromote(ctx, id)
			}
		}
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("memberproc: member promote %s: %w", n.name, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// writePKI is kubeadm's certs phase for the etcd certificates: one etcd
// CA, and per node etc/kubernetes/pki/etcd/{ca,server,peer,
// healthcheck-client}.{crt,key} and pki/apiserver-etcd-client.{crt,key}.
// RSA 2048 keys, as kubeadm's default encryption algorithm.
func (kc *KubeadmCluster) writePKI(nodes []*kubeadmNode) error {
	now := time.Now()
	caKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return err
	}
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "etcd-ca"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return err
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return err
	}
	kc.CAPool = x509.NewCertPool()
	kc.CAPool.AddCert(caCert)
	serial := int64(1)
	type pair struct{ cert, key []byte }
	issue := func(cn string, usages []x509.ExtKeyUsage, dns []string, ips []net.IP) (pair, error) {
		key, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			return pair{}, err
		}
		serial++
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: cn},
			NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), ExtKeyUsage: usages,
			KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment, DNSNames: dns, IPAddresses: ips}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
		if err != nil {
			return pair{}, err
		}
		return pair{pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
			pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})}, nil
	}
	client := []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	both := []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	apiserver, err := issue("kube-apiserver-etcd-client", client, nil, nil)
	if err != nil {
		return err
	}
	health, err := issue("kube-etcd-healthcheck-client", client, nil, nil)
	if err != nil {
		return err
	}
	caPair := pair{pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(caKey)})}
	for _, n := range nodes {
		// GetEtcdAltNames: the node name, localhost, its advertise
		// address and the loopback addresses; GetEtcdPeerAltNames: the
		// node name and its advertise address.
		server, err := issue(n.name, both, []string{n.name, "localhost"}, []net.IP{n.advertiseIP, net.IPv4(127, 0, 0, 1), net.IPv6loopback})
		if err != nil {
			return err
		}
		peer, err := issue(n.name, both, []string{n.name, "localhost"}, []net.IP{n.advertiseIP})
		if err != nil {
			return err
		}
		for name, p := range map[string]pair{"etcd/ca": caPair, "etcd/server": server, "etcd/peer": peer,
			"etcd/healthcheck-client": health, "apiserver-etcd-client": apiserver} {
			path := filepath.Join(n.pkiDir, name)
			if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
				return err
			}
			if err := os.WriteFile(path+".crt", p.cert, 0o644); err != nil {
				return err
			}
			if err := os.WriteFile(path+".key", p.key, 0o600); err != nil {
				return err
			}
		}
	}
	tlsOf := func(p pair) (*tls.Config, error) {
		cert, err := tls.X509KeyPair(p.cert, p.key)
		if err != nil {
			return nil, err
		}
		return &tls.Config{RootCAs: kc.CAPool, Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, nil
	}
	if kc.APIServerTLS, err = tlsOf(apiserver); err != nil {
		return err
	}
	kc.HealthcheckTLS, err = tlsOf(health)
	return err
}
