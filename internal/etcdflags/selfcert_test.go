package etcdflags

import (
	"math"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	"go.uber.org/zap"
)

func build(t *testing.T, args, env []string) (*Result, error) {
	t.Helper()
	v, _, err := Parse(args, env)
	if err != nil {
		t.Fatal(err)
	}
	return Build(v)
}

// TestAutoTLSMapping checks --auto-tls and --peer-auto-tls as etcd's
// ClientSelfCert and PeerSelfCert: a certificate in
// <data-dir>/fixtures/{client,peer} for the listen URLs' hosts, the TLS
// settings it replaces, and when it is not made.
func TestAutoTLSMapping(t *testing.T) {
	https := []string{"--data-dir=/d", "--listen-client-urls=https://127.0.0.1:2379,https://node1:2379",
		"--advertise-client-urls=https://127.0.0.1:2379"}
	peer := []string{"--data-dir=/d", "--name=s1", "--listen-peer-urls=https://10.0.0.1:2380",
		"--initial-advertise-peer-urls=https://10.0.0.1:2380", "--initial-cluster=s1=https://10.0.0.1:2380,s2=https://10.0.0.2:2380"}
	type tls struct {
		Cert, Key, CA, PeerCert, PeerKey, PeerCA string
		PeerSkip                                 bool
		SelfCerts                                []SelfCert
	}
	client := SelfCert{Flag: "auto-tls", Dir: "/d/fixtures/client", Hosts: []string{"127.0.0.1:2379", "node1:2379"}, ValidityYears: 1}
	peerCert := SelfCert{Flag: "peer-auto-tls", Dir: "/d/fixtures/peer", Hosts: []string{"10.0.0.1:2380"}, ValidityYears: 1}
	tests := []struct {
		name string
		args []string
		want tls
		note string // a note containing it; "" for any
	}{
		{"auto-tls", append(https, "--auto-tls"),
			tls{Cert: "/d/fixtures/client/cert.pem", Key: "/d/fixtures/client/key.pem", SelfCerts: []SelfCert{client}},
			"--auto-tls=true: serving https with a self-signed certificate in /d/fixtures/client"},
		{"auto-tls replaces the CA", append(https, "--auto-tls", "--trusted-ca-file=ca.pem", "--client-cert-auth"),
			tls{Cert: "/d/fixtures/client/cert.pem", Key: "/d/fixtures/client/key.pem", SelfCerts: []SelfCert{client}},
			"--client-cert-auth=true: no effect with --auto-tls"},
		{"auto-tls validity", append(https, "--auto-tls", "--self-signed-cert-validity=10"),
			tls{Cert: "/d/fixtures/client/cert.pem", Key: "/d/fixtures/client/key.pem",
				SelfCerts: []SelfCert{{Flag: "auto-tls", Dir: "/d/fixtures/client", Hosts: client.Hosts, ValidityYears: 10}}}, ""},
		{"auto-tls with certificates", append(https, "--auto-tls", "--cert-file=c", "--key-file=k"),
			tls{Cert: "c", Key: "k"}, "--auto-tls=true: no effect: --cert-file and --key-file are given"},
		{"auto-tls on http", []string{"--auto-tls"}, tls{}, "--auto-tls=true: no effect: --listen-client-urls are http"},
		{"peer-auto-tls", append(peer, "--peer-auto-tls", "--peer-trusted-ca-file=ca.pem", "--peer-client-cert-auth"),
			tls{PeerCert: "/d/fixtures/peer/cert.pem", PeerKey: "/d/fixtures/peer/key.pem", PeerSkip: true, SelfCerts: []SelfCert{peerCert}},
			"--peer-client-cert-auth=true: no effect with --peer-auto-tls"},
		{"peer-auto-tls with certificates", append(peer, "--peer-auto-tls", "--peer-cert-file=c", "--peer-key-file=k", "--peer-trusted-ca-file=ca"),
			tls{PeerCert: "c", PeerKey: "k", PeerCA: "ca"}, "--peer-auto-tls=true: no effect: --peer-cert-file and --peer-key-file are given"},
		{"both", append(append(https, peer[1:]...), "--auto-tls", "--peer-auto-tls"),
			tls{Cert: "/d/fixtures/client/cert.pem", Key: "/d/fixtures/client/key.pem", PeerCert: "/d/fixtures/peer/cert.pem",
				PeerKey: "/d/fixtures/peer/key.pem", PeerSkip: true, SelfCerts: []SelfCert{client, peerCert}}, ""},
		{"validity without auto-tls", append(https, "--cert-file=c", "--key-file=k", "--self-signed-cert-validity=5"),
			tls{Cert: "c", Key: "k"}, "--self-signed-cert-validity=5: no effect: no self-signed certificate is made"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res, err := build(t, tc.args, nil)
			if err != nil {
				t.Fatal(err)
			}
			s, c := res.Config.Server, res.Config.Cluster
			got := tls{Cert: s.CertFile, Key: s.KeyFile, CA: s.ClientCAFile, PeerCert: c.PeerCertFile, PeerKey: c.PeerKeyFile,
				PeerCA: c.PeerTrustedCAFile, PeerSkip: c.PeerInsecureSkipVerify, SelfCerts: res.SelfCerts}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got  %+v\nwant %+v", got, tc.want)
			}
			if notes := strings.Join(res.Notes, "\n"); !strings.Contains(notes, tc.note) {
				t.Errorf("notes:\n%s\nwant one containing %q", notes, tc.note)
			}
		})
	}
}

// TestAutoTLSErrors checks what is refused: https without certificate
// files or auto TLS, one file with auto TLS (etcd then ignores auto TLS),
// and a validity etcd's certificate code cannot make.
func TestAutoTLSErrors(t *testing.T) {
	https := []string{"--listen-client-urls=https://127.0.0.1:2379", "--advertise-client-urls=https://127.0.0.1:2379"}
	peer := []string{"--listen-peer-urls=https://127.0.0.1:2380", "--initial-advertise-peer-urls=https://127.0.0.1:2380"}
	tests := []struct {
		name string
		args []string
		env  []string
		err  string
	}{
		{"https without certificates", https, nil,
			"--listen-client-urls=https://127.0.0.1:2379: https needs --cert-file and --key-file, or --auto-tls"},
		{"auto-tls with a cert file only", append(https, "--auto-tls", "--cert-file=c"), nil,
			"https needs --cert-file and --key-file (--auto-tls is ignored when either is given"},
		{"peer https without certificates", peer, nil, "https needs --peer-cert-file and --peer-key-file, or --peer-auto-tls"},
		{"validity 0", append(https, "--auto-tls", "--self-signed-cert-validity=0"), nil,
			"--self-signed-cert-validity=0: must be at least 1 (years) with --auto-tls"},
		{"validity 0 in the environment", append(peer, "--peer-auto-tls"), []string{"ETCD_SELF_SIGNED_CERT_VALIDITY=0"},
			"ETCD_SELF_SIGNED_CERT_VALIDITY=0: must be at least 1 (years) with --peer-auto-tls"},
		{"validity overflows", append(https, "--auto-tls", "--self-signed-cert-validity=293"), nil,
			"--self-signed-cert-validity=293: must be at most 292 (years)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := build(t, tc.args, tc.env)
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("error %v, want one containing %q", err, tc.err)
			}
		})
	}
	if _, err := build(t, append(https, "--auto-tls", "--self-signed-cert-validity=292"), nil); err != nil {
		t.Errorf("validity 292: %v", err)
	}
}

// TestAutoTLSValidityInFile checks etcd's file rule: a validity of 0 (or
// none) in --config-file is 1 year.
func TestAutoTLSValidityInFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "etcd.yaml")
	if err := os.WriteFile(file, []byte(`data-dir: /d
listen-client-urls: https://127.0.0.1:2379
advertise-client-urls: https://127.0.0.1:2379
self-signed-cert-validity: 0
client-transport-security:
  auto-tls: true
`), 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := build(t, []string{"--config-file=" + file}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.SelfCerts) != 1 || res.SelfCerts[0].ValidityYears != 1 || res.Config.Server.CertFile != "/d/fixtures/client/cert.pem" {
		t.Errorf("self certs %+v, cert_file %q: want one of 1 year", res.SelfCerts, res.Config.Server.CertFile)
	}
}

// TestMakeSelfCerts makes a certificate with etcd's transport.SelfCert:
// for the hosts, valid for the years asked, its key readable by the owner
// only; a second start keeps it.
func TestMakeSelfCerts(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "fixtures", "client")
	sc := SelfCert{Flag: "auto-tls", Dir: dir, Hosts: []string{"127.0.0.1:2379", "localhost:2379"}, ValidityYears: 2}
	notes, err := MakeSelfCerts([]SelfCert{sc})
	if err != nil {
		t.Fatal(err)
	}
	if len(notes) != 1 || !strings.Contains(notes[0], "cert.pem made, for 127.0.0.1, localhost, valid until ") {
		t.Errorf("notes %q", notes)
	}
	cert, err := readCert(filepath.Join(dir, "cert.pem"))
	if err != nil {
		t.Fatal(err)
	}
	if days := math.Round(cert.NotAfter.Sub(cert.NotBefore).Hours() / 24); days != 2*365 {
		t.Errorf("valid %v days, want 2 years of 365", days)
	}
	if len(cert.IPAddresses) != 1 || !cert.IPAddresses[0].Equal(net.ParseIP("127.0.0.1")) || !reflect.DeepEqual(cert.DNSNames, []string{"localhost"}) {
		t.Errorf("hosts %v %v", cert.IPAddresses, cert.DNSNames)
	}
	if fi, err := os.Stat(filepath.Join(dir, "key.pem")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("key.pem: %v %v, want mode 0600", fi, err)
	}
	notes, err = MakeSelfCerts([]SelfCert{sc})
	if err != nil {
		t.Fatal(err)
	}
	again, _ := readCert(filepath.Join(dir, "cert.pem"))
	if len(notes) != 1 || !strings.Contains(notes[0], "kept from an earlier start") || again == nil || !again.Equal(cert) {
		t.Errorf("second start: notes %q, same certificate %v", notes, again != nil && again.Equal(cert))
	}
	if _, err := MakeSelfCerts([]SelfCert{{Flag: "peer-auto-tls", Dir: filepath.Join(t.TempDir(), "p"), ValidityYears: 0}}); err == nil ||
		!strings.Contains(err.Error(), "--peer-auto-tls: making a self-signed certificate in") {
		t.Errorf("validity 0: %v", err)
	}
}

// TestSelfCertValidityOverflow shows why Build refuses a validity over
// 292 years: etcd's transport.SelfCert then makes a certificate that has
// already expired.
func TestSelfCertValidityOverflow(t *testing.T) {
	for _, years := range []uint{maxValidityYears, maxValidityYears + 1} {
		dir := filepath.Join(t.TempDir(), "c")
		info, err := transport.SelfCert(zap.NewNop(), dir, []string{"127.0.0.1:1"}, years)
		if err != nil {
			t.Fatal(err)
		}
		cert, err := readCert(info.CertFile)
		if err != nil {
			t.Fatal(err)
		}
		expired := cert.NotAfter.Before(time.Now())
		if expired != (years > maxValidityYears) {
			t.Errorf("%d years: valid until %v (expired %v)", years, cert.NotAfter, expired)
		}
	}
}
