package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"

	"github.com/stratadb/strata/cluster"
	"github.com/stratadb/strata/config"
	"github.com/stratadb/strata/engine"
	"github.com/stratadb/strata/internal/testport"
	"github.com/stratadb/strata/mvcc"
)

// TestCheckPeerHashes holds the compact hash check's decision to etcd's
// (checkPeerHashes in etcd's corrupt.go): which members get the CORRUPT
// alarm, and whether the older compactions still need a check. The
// leader is member 1 with hash 10 at compaction revision 5.
func TestCheckPeerHashes(t *testing.T) {
	peer := func(id uint64, hash uint32, compact int64) *peerHash {
		return &peerHash{id: id, resp: &pb.HashKVResponse{Hash: hash, CompactRevision: compact}}
	}
	silent := func(id uint64) *peerHash { return &peerHash{id: id, err: fmt.Errorf("no answer")} }
	tests := []struct {
		name    string
		peers   []*peerHash
		alarms  []uint64
		done    bool
		checked int64 // the latest revision checked on the whole cluster after
	}{
		{"all equal", []*peerHash{peer(2, 10, 5), peer(3, 10, 5)}, nil, true, 5},
		{"one follower differs", []*peerHash{peer(2, 10, 5), peer(3, 11, 5)}, []uint64{3}, true, 0},
		{"the leader differs", []*peerHash{peer(2, 11, 5), peer(3, 11, 5)}, []uint64{1}, true, 0},
		{"no majority", []*peerHash{peer(2, 11, 5), peer(3, 12, 5)}, []uint64{0}, true, 0},
		{"five members, two differ", []*peerHash{peer(2, 10, 5), peer(3, 10, 5), peer(4, 11, 5), peer(5, 12, 5)}, []uint64{4, 5}, true, 0},
		{"a follower silent", []*peerHash{peer(2, 10, 5), silent(3)}, nil, false, 0},
		{"a follower at another compaction", []*peerHash{peer(2, 10, 5), peer(3, 99, 4)}, nil, false, 0},
		{"silent, the other differs", []*peerHash{peer(2, 11, 5), silent(3)}, []uint64{0}, true, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var raised []uint64
			c := &corruptChecker{alarm: func(id uint64) { raised = append(raised, id) }}
			done := c.checkPeerHashes(1, mvcc.CompactionHash{Hash: 10, Revision: 5, CompactRevision: 5}, tc.peers)
			slices.Sort(raised)
			if done != tc.done || !slices.Equal(raised, tc.alarms) || c.latestChecked != tc.checked {
				t.Errorf("done %v, alarms %v, latest checked %d; want %v, %v, %d", done, raised, c.latestChecked, tc.done, tc.alarms, tc.checked)
			}
		})
	}
}

// hashKVStore opens a store with revisions 2..6 (five puts), compacted
// at 3 with its hash kept (HashCompactions, as compact_hash_check keeps
// them).
func hashKVStore(t testing.TB) *mvcc.Store {
	t.Helper()
	cfg := config.ServeDefault()
	cfg.DBPath = t.TempDir()
	db, err := engine.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	st, err := mvcc.Open(db, mvcc.Options{HashCompactions: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := errors.Join(st.Close(), db.Close()); err != nil {
			t.Error(err)
		}
	})
	for i := range 5 {
		if _, err := st.Put(fmt.Appendf(nil, "k%d", i%2), fmt.Appendf(nil, "v%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Compact(3); err != nil {
		t.Fatal(err)
	}
	return st
}

// peerHashKVServer serves h on a loopback port below 32768 and returns
// its URL.
func peerHashKVServer(t *testing.T, h http.Handler) string {
	t.Helper()
	ln, err := testport.Listen()
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(h)
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestPeerHashKVHandler holds /members/hashkv to etcd's hashKVHandler:
// its JSON request and response, and its answers to bad input (each
// naming what was wrong), which etcd's HashByRev on the asking side turns
// back into rpctypes errors.
func TestPeerHashKVHandler(t *testing.T) {
	st := hashKVStore(t)
	h := &peerHashKVHandler{store: st, ids: func() (uint64, uint64) { return 0xc1, 0x5e1f }}
	wantHash := func(rev int64) string {
		hash, hashRev, compacted, err := st.HashKV(rev)
		if err != nil {
			t.Fatal(err)
		}
		return fmt.Sprintf(`{"header":{"cluster_id":193,"member_id":24095,"revision":6},"hash":%d,"compact_revision":%d,"hash_revision":%d}`, hash, compacted, hashRev)
	}
	tests := []struct {
		name, method, cluster, body string
		code                        int
		want                        string // the whole body for 200, else a part of it
	}{
		{"current", "GET", "", `{"revision":0}`, 200, wantHash(0)},
		{"empty object", "GET", "", `{}`, 200, wantHash(0)},
		{"at a revision", "GET", "c1", `{"revision":5}`, 200, wantHash(5)},
		{"at the compaction", "GET", "c1", `{"revision":3}`, 200, wantHash(3)},
		{"not JSON", "GET", "", `revision=5`, 400, "error unmarshalling request: invalid character 'r'"},
		{"empty body", "GET", "", ``, 400, "error unmarshalling request: unexpected end of JSON input"},
		{"revision a string", "GET", "", `{"revision":"5"}`, 400, "error unmarshalling request: json: cannot unmarshal string into Go struct field HashKVRequest.revision of type int64"},
		{"negative revision", "GET", "", `{"revision":-1}`, 400, "revision = -1: must be >= 0"},
		{"body too large", "GET", "", `{"revision":1` + strings.Repeat(" ", maxHashKVRequest) + `}`, 400, "body over 4096 bytes"},
		{"future revision", "GET", "", `{"revision":7}`, 400, "mvcc: required revision is a future revision: hash at 7, current revision is 6"},
		{"compacted revision", "GET", "", `{"revision":2}`, 400, "mvcc: required revision has been compacted: hash at 2, compacted at 3"},
		{"another cluster", "GET", "c2", `{"revision":0}`, 412, `cluster ID mismatch: this member (5e1f) belongs to cluster c1, the request names X-Etcd-Cluster-ID = "c2"`},
		{"POST", "POST", "", `{"revision":0}`, 405, "Method Not Allowed"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req := httptest.NewRequest(tc.method, peerHashKVPath, strings.NewReader(tc.body))
			if tc.cluster != "" {
				req.Header.Set(etcdClusterIDHeader, tc.cluster)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			got := strings.TrimSpace(rec.Body.String())
			if rec.Code != tc.code || (tc.code == 200 && got != tc.want) || !strings.Contains(got, tc.want) {
				t.Fatalf("%s %s: %d %q; want %d with %q", tc.method, tc.body, rec.Code, got, tc.code, tc.want)
			}
			if tc.code == 200 {
				if cid := rec.Header().Get(etcdClusterIDHeader); cid != "c1" {
					t.Errorf("%s = %q, want c1", etcdClusterIDHeader, cid)
				}
				var resp pb.HashKVResponse // the shape etcd's HashByRev decodes
				if err := json.Unmarshal(rec.Body.Bytes(), &resp); err != nil || resp.Hash == 0 {
					t.Errorf("etcd's decoding of %q: hash %d, %v", got, resp.Hash, err)
				}
			}
			if tc.code == http.StatusMethodNotAllowed && rec.Header().Get("Allow") != "GET" {
				t.Errorf("Allow = %q, want GET", rec.Header().Get("Allow"))
			}
		})
	}
}

// TestPeerHashOf asks /members/hashkv as the checks do (peerHashOf over
// HTTP) and shows etcd's errors coming back as the rpctypes errors the
// checks tell apart; and that a peer is asked at its client URLs only
// when its peer URL does not serve /members/hashkv (404).
func TestPeerHashOf(t *testing.T) {
	st := hashKVStore(t)
	mux := http.NewServeMux()
	mux.Handle(peerHashKVPath, &peerHashKVHandler{store: st, ids: func() (uint64, uint64) { return 0xc1, 0x5e1f }})
	peerURL := peerHashKVServer(t, mux)
	cid := uint64(0xc1)
	c := &corruptChecker{ctx: context.Background(), timeout: 5 * time.Second, peerDo: http.DefaultClient.Do, cid: func() uint64 { return cid }}

	resp, err := c.peerHashOf(peerURL, 5)
	hash, _, _, herr := st.HashKV(5)
	if err != nil || herr != nil || resp.Hash != hash || resp.HashRevision != 5 || resp.CompactRevision != 3 || resp.GetHeader().GetRevision() != 6 {
		t.Fatalf("peerHashOf(5) = %v, %v; want hash %d at 5, compacted 3, header revision 6 (%v)", resp, err, hash, herr)
	}
	for _, tc := range []struct {
		rev  int64
		cid  uint64
		want error
	}{
		{7, 0xc1, rpctypes.ErrFutureRev},
		{2, 0xc1, rpctypes.ErrCompacted},
		{5, 0xc2, rpctypes.ErrClusterIDMismatch},
	} {
		cid = tc.cid
		if _, err := c.peerHashOf(peerURL, tc.rev); !errors.Is(err, tc.want) {
			t.Errorf("peerHashOf(%d) from cluster %x = %v, want %v", tc.rev, tc.cid, err, tc.want)
		}
	}
	cid = 0xc1

	// A member that predates /members/hashkv answers 404 on its peer URL:
	// it is asked at its client URL (here nothing listens: the error is
	// the client URL's). A peer URL failing otherwise is not.
	oldPeer := peerHashKVServer(t, http.NewServeMux())
	failing := peerHashKVServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "broken", http.StatusInternalServerError)
	}))
	if _, err := c.peerHashOf(oldPeer, 5); !errors.Is(err, errHashKVNotServed) {
		t.Errorf("peerHashOf on a peer without %s = %v, want %v", peerHashKVPath, err, errHashKVNotServed)
	}
	clientURL := "http://" + testport.Addr(t)
	for _, tc := range []struct {
		name, peerURL string
		wantEps       string
	}{
		{"serves it", peerURL, peerURL},
		{"answers 404", oldPeer, clientURL},
		{"answers 500", failing, failing},
	} {
		p := c.peerHash(1, cluster.Member{ID: 2, PeerURLs: []string{tc.peerURL}, ClientURLs: []string{clientURL}}, 5)
		if len(p.eps) != 1 || p.eps[0] != tc.wantEps || (tc.peerURL == peerURL) != (p.err == nil) {
			t.Errorf("a peer URL that %s: asked %v (error %v), want %s", tc.name, p.eps, p.err, tc.wantEps)
		}
	}
}

// FuzzPeerHashKVHandler: any body a peer sends to /members/hashkv is
// answered with a hash (200) or etcd's 400, never a panic or a 500.
func FuzzPeerHashKVHandler(f *testing.F) {
	for _, seed := range []string{`{"revision":0}`, `{"revision":5}`, `{"revision":-1}`, `{"revision":99}`, `{"revision":"5"}`, `{`, ``, `null`, `[]`, `{"revision":1e3}`} {
		f.Add(seed)
	}
	st := hashKVStore(f)
	h := &peerHashKVHandler{store: st, ids: func() (uint64, uint64) { return 1, 2 }}
	f.Fuzz(func(t *testing.T, body string) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, peerHashKVPath, strings.NewReader(body)))
		if rec.Code != http.StatusOK && rec.Code != http.StatusBadRequest {
			t.Fatalf("body %q: %d %s", body, rec.Code, rec.Body)
		}
	})
}
