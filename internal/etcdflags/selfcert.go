package etcdflags

import (
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	"go.uber.org/zap"
)

// SelfCert is a self-signed certificate --auto-tls or --peer-auto-tls asks
// for, as etcd's ClientSelfCert and PeerSelfCert make it with
// transport.SelfCert: an ECDSA P-521 key and a certificate that is its own
// CA, for Hosts (IP addresses and DNS names), valid for ValidityYears
// from when it is made, in Dir/cert.pem and Dir/key.pem. A Dir that holds
// both already is used as it is (etcd keeps the certificate of its first
// start).
type SelfCert struct {
	// Flag is "auto-tls" or "peer-auto-tls".
	Flag string
	// Dir is <data-dir>/fixtures/client or <data-dir>/fixtures/peer.
	Dir string
	// Hosts are the host:port of the listen URLs.
	Hosts []string
	// ValidityYears is --self-signed-cert-validity.
	ValidityYears uint
}

// maxValidityYears is the longest --self-signed-cert-validity: the
// certificate code computes the end as a time.Duration of years*365 days,
// which overflows past 292 years into a certificate already expired.
const maxValidityYears = 292

// selfCert asks for the self-signed certificate of flag in
// <data-dir>/fixtures/kind and returns its file names.
func (b *builder) selfCert(flag, kind string, hosts []string) (certFile, keyFile string) {
	years := b.uint("self-signed-cert-validity")
	switch {
	case years == 0 && b.v.file != "":
		// etcd's ConfigFromFile reads 0 (or no key) as 1.
		years = 1
	case years == 0:
		b.fail("self-signed-cert-validity", "must be at least 1 (years) with --%s (etcd: selfSignedCertValidity is invalid, it should be greater than 0)", flag)
	case years > maxValidityYears:
		b.fail("self-signed-cert-validity", "must be at most %d (years): a longer validity overflows etcd's certificate code into an expired certificate", maxValidityYears)
	}
	dir := filepath.Join(b.dataDir, "fixtures", kind)
	b.selfCerts = append(b.selfCerts, SelfCert{Flag: flag, Dir: dir, Hosts: hosts, ValidityYears: uint(years)})
	who := "clients skip verifying it (etcdctl --insecure-skip-tls-verify, with --insecure-transport=false for etcdctl 3.4) or take its cert.pem as their CA"
	if kind == "peer" {
		who = "the members accept each other's without verifying them"
	}
	b.note(flag, "serving https with a self-signed certificate in %s (etcd's auto TLS); it chains to no CA, so %s", dir, who)
	return filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
}

// hostsOf returns the host:port of each URL.
func hostsOf(us []*url.URL) []string {
	hs := make([]string, len(us))
	for i, u := range us {
		hs[i] = u.Host
	}
	return hs
}

// MakeSelfCerts makes each certificate of certs with etcd's
// transport.SelfCert (or keeps the one its directory holds) and returns a
// line for each saying which it is and until when it is valid.
func MakeSelfCerts(certs []SelfCert) ([]string, error) {
	var notes []string
	for _, sc := range certs {
		_, errCert := os.Stat(filepath.Join(sc.Dir, "cert.pem"))
		_, errKey := os.Stat(filepath.Join(sc.Dir, "key.pem"))
		kept := errCert == nil && errKey == nil
		info, err := transport.SelfCert(zap.NewNop(), sc.Dir, sc.Hosts, sc.ValidityYears)
		if err != nil {
			return nil, fmt.Errorf("--%s: making a self-signed certificate in %s: %w", sc.Flag, sc.Dir, err)
		}
		cert, err := readCert(info.CertFile)
		if err != nil {
			return nil, fmt.Errorf("--%s: %w", sc.Flag, err)
		}
		var sans []string
		for _, ip := range cert.IPAddresses {
			sans = append(sans, ip.String())
		}
		sans = append(sans, cert.DNSNames...)
		how := "made"
		if kept {
			how = "kept from an earlier start (remove the directory for a new one)"
		}
		notes = append(notes, fmt.Sprintf("--%s: certificate %s %s, for %s, valid until %s",
			sc.Flag, info.CertFile, how, strings.Join(sans, ", "), cert.NotAfter.UTC().Format("2006-01-02 15:04:05 MST")))
	}
	return notes, nil
}

// readCert parses the first certificate of a PEM file.
func readCert(path string) (*x509.Certificate, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	blk, _ := pem.Decode(b)
	if blk == nil || blk.Type != "CERTIFICATE" {
		return nil, errors.New(path + ": no PEM certificate")
	}
	return x509.ParseCertificate(blk.Bytes)
}
