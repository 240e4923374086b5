package cluster

import (
	"crypto/tls"
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestPeerHTTP: a handler the server adds with HandlePeer is served on
// the peer URLs beside raft's, reached by another member's DoPeer over
// mutual peer TLS, and refused to a client without a peer certificate;
// paths that are the member's own (/raft/...), taken, or not clean paths
// are refused with an error naming the path.
func TestPeerHTTP(t *testing.T) {
	dir := t.TempDir()
	caFile, _, ca, caKey := writeCert(t, dir, "ca", nil, nil)
	certFile, keyFile, _, _ := writeCert(t, dir, "member", ca, caKey)
	server, client, err := PeerTLS(certFile, keyFile, caFile)
	if err != nil {
		t.Fatal(err)
	}
	c := newTestClusterScheme(t, 2, func(cfg *RaftConfig) {
		cfg.PeerServerTLS, cfg.PeerClientTLS = server, client
	}, "https")
	c.leader()
	a, b := c.nodes[0].(PeerHTTP), c.nodes[1].(PeerHTTP)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		_, _ = io.WriteString(w, "hash of "+string(body))
	})
	if err := a.HandlePeer("/members/hashkv", h); err != nil {
		t.Fatal(err)
	}
	u := c.members[0].PeerURLs[0] + "/members/hashkv"
	req, err := http.NewRequest(http.MethodGet, u, strings.NewReader("rev 5"))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := b.DoPeer(req)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(got) != "hash of rev 5" {
		t.Fatalf("GET %s through DoPeer: %s %q, want 200 %q", u, resp.Status, got, "hash of rev 5")
	}
	noCert := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: client.RootCAs}}}
	if resp, err := noCert.Get(u); err == nil {
		resp.Body.Close()
		t.Fatalf("a client without a peer certificate reached %s", u)
	}
	for path, want := range map[string]string{
		"/members/hashkv": "registered already",
		"/raft/members":   "/raft/ is the member's own",
		"/raft":           "/raft/ is the member's own",
		"/":               "must name a path",
		"members/hashkv":  "must be a path beginning with \"/\"",
		"GET /x":          "without method",
		"/a/../raft/x":    "not a clean path",
	} {
		if err := a.HandlePeer(path, h); err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), path) {
			t.Errorf("HandlePeer(%q) = %v, want an error naming the path with %q", path, err, want)
		}
	}
}
