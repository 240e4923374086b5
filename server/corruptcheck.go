package server

import (
	"bytes"
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/stratadb/strata/cluster"
	"github.com/stratadb/strata/config"
	"github.com/stratadb/strata/engine"
	"github.com/stratadb/strata/mvcc"
)

// corruptChecker runs etcd's three checks that compare the members'
// stores (etcd's server/etcdserver/corrupt.go, whose decisions and log
// lines it follows):
//
//  1. The initial check (server.initial_corrupt_check): a member that
//     starts with data, before it joins the cluster, hashes its store at
//     its revision and asks every peer for its hash at that revision. A
//     peer with the same compaction revision and another hash makes it
//     refuse to start with etcd's error, "<id> found data inconsistency
//     with peers". A peer that does not answer, is behind (ErrFutureRev)
//     or compacted past the revision is logged and skipped.
//  2. The periodic check (server.corrupt_check_interval_ms): the leader
//     hashes its store, asks its followers for theirs at its revision, and
//     raises the CORRUPT alarm for a follower ahead of it, or with its
//     compaction revision and another hash (and for itself if its own
//     hash moved at the same revision).
//  3. The compact hash check (server.compact_hash_check): every member
//     keeps the hash of its store at each of its last 10 compactions
//     (mvcc.Options.HashCompactions); the leader, every
//     compact_hash_check_interval_ms, takes its compaction hashes newer
//     than the last one it checked, newest first, and asks every follower
//     for its hash at that revision. Members answering with the same
//     compaction revision are grouped by hash: a hash held by a majority
//     of the cluster leaves the others in the minority, and each gets the
//     CORRUPT alarm, naming it; with no majority the alarm names member 0
//     (the whole cluster), as etcd's. A revision some follower could not
//     answer for is skipped for the next older one.
//
// How peers are asked, as etcd asks them: a GET of /members/hashkv on the
// peer's peer URLs (etcd's PeerHashKVPath), with etcd's JSON (a
// HashKVRequest, answered with a HashKVResponse; peerHashKVHandler),
// over the peer transport: the member's peer TLS authenticates it, and no
// auth token is needed, so the checks compare with auth enabled too. The
// running checks send through the raft member's transport
// (cluster.PeerHTTP); the initial check, before it starts, through a
// client with the same peer TLS. Peer URLs come from the member list
// (cluster.Node.Members), and, for the initial check, from a running
// peer's /raft/members. A peer that answers 404 there (a Strata member
// that predates the endpoint) is asked at its client URLs instead, with
// the Maintenance.HashKV call `etcdctl endpoint hashkv` makes: an https
// client URL is dialled with TLS that presents the peer certificate
// (cluster.peer_cert_file, else server.cert_file) and verifies against
// server.client_ca_file (else cluster.peer_trusted_ca_file, else the
// system's roots). With auth enabled that call needs the root role, which
// a member does not have: such a peer answers PermissionDenied and is
// skipped (logged).
type corruptChecker struct {
	s       *Server
	log     engine.Logger
	timeout time.Duration
	tls     *tls.Config
	// ctx ends the peers' calls: the server's streams once run starts
	// (so that Close does not wait out a peer's timeout).
	ctx context.Context
	// peerDo sends a request to a peer URL over the peer transport: a
	// client with the peer TLS for the initial check, the raft member's
	// (cluster.PeerHTTP) once run starts.
	peerDo func(*http.Request) (*http.Response, error)
	// cid, if set, gives the cluster ID sent to peers instead of the
	// node's (tests).
	cid func() uint64

	// alarm raises the CORRUPT alarm for a member (raise; tests record).
	alarm func(id uint64)

	mu sync.Mutex
	// latestChecked is the newest compaction revision the compact hash
	// check compared on the whole cluster.
	latestChecked int64
	done          chan struct{}
}

// corruptCheckTimeout bounds each peer's HashKV answer (etcd's
// ReqTimeout: 5 s plus the election timeout).
func corruptCheckTimeout(cfg *config.Config) time.Duration {
	return 5*time.Second + 2*time.Duration(cfg.Cluster.ElectionTimeoutMS)*time.Millisecond
}

func newCorruptChecker(s *Server) (*corruptChecker, error) {
	tc, err := checkerTLS(s.cfg)
	if err != nil {
		return nil, err
	}
	c := &corruptChecker{s: s, log: s.log, timeout: corruptCheckTimeout(s.cfg), tls: tc, ctx: context.Background(), done: make(chan struct{})}
	c.alarm = c.raise
	client, err := peerClient(s.cfg)
	if err != nil {
		return nil, err
	}
	c.peerDo = client.Do
	return c, nil
}

// peerClient reaches peer URLs before the raft member runs (its
// transport does after): with the peer TLS the transport has
// (cluster.PeerTLSFrom), no redirects followed.
func peerClient(cfg *config.Config) (*http.Client, error) {
	cc := cfg.Cluster
	client := &http.Client{
		Timeout:       corruptCheckTimeout(cfg),
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	if cc.PeerCertFile != "" {
		_, tc, err := cluster.PeerTLSFrom(&cc)
		if err != nil {
			return nil, err
		}
		client.Transport = &http.Transport{TLSClientConfig: tc}
	}
	return client, nil
}

// checkerTLS is the TLS a member dials its peers' https client URLs with.
func checkerTLS(cfg *config.Config) (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	certFile, keyFile := cfg.Cluster.PeerCertFile, cfg.Cluster.PeerKeyFile
	if certFile == "" {
		certFile, keyFile = cfg.Server.CertFile, cfg.Server.KeyFile
	}
	if certFile != "" {
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("server: corruption checks: certificate %q, key %q: %w", certFile, keyFile, err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	ca := cfg.Server.ClientCAFile
	if ca == "" {
		ca = cfg.Cluster.PeerTrustedCAFile
	}
	if ca != "" {
		pem, err := os.ReadFile(ca)
		if err != nil {
			return nil, fmt.Errorf("server: corruption checks: CA file %q: %w", ca, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("server: corruption checks: CA file %q: no PEM certificate", ca)
		}
		tc.RootCAs = pool
	}
	return tc, nil
}

// peerHash is one peer's answer to HashKV at a revision (etcd's
// peerHashKVResp).
type peerHash struct {
	id   uint64
	eps  []string
	resp *pb.HashKVResponse
	err  error
}

// peerHashes asks every member in peers for its hash at rev, in parallel:
// at each of its peer URLs until one answers, then, if one answered 404
// (it does not serve /members/hashkv), at its client URLs.
func (c *corruptChecker) peerHashes(self uint64, peers []cluster.Member, rev int64) []*peerHash {
	var out []*peerHash
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, m := range peers {
		if m.ID == self || len(m.PeerURLs)+len(m.ClientURLs) == 0 {
			continue
		}
		wg.Go(func() {
			p := c.peerHash(self, m, rev)
			mu.Lock()
			out = append(out, p)
			mu.Unlock()
		})
	}
	wg.Wait()
	slices.SortFunc(out, func(a, b *peerHash) int { return cmp.Compare(a.id, b.id) })
	return out
}

// peerHash asks member m for its hash at rev (see peerHashes).
func (c *corruptChecker) peerHash(self uint64, m cluster.Member, rev int64) *peerHash {
	p := &peerHash{id: m.ID, eps: m.PeerURLs}
	failed := func(ep string) {
		c.errorf("failed hash kv request: local-member-id=%x requested-revision=%d remote-peer-endpoint=%s error=%q",
			self, rev, ep, p.err)
	}
	notServed := false
	for _, ep := range m.PeerURLs {
		p.resp, p.err = c.peerHashOf(ep, rev)
		if p.err == nil || c.ctx.Err() != nil {
			return p
		}
		failed(ep)
		notServed = notServed || errors.Is(p.err, errHashKVNotServed)
	}
	if (!notServed && len(m.PeerURLs) > 0) || len(m.ClientURLs) == 0 {
		return p
	}
	p.eps = m.ClientURLs
	for _, ep := range m.ClientURLs {
		p.resp, p.err = c.hashOf(ep, rev)
		if p.err == nil || c.ctx.Err() != nil {
			return p
		}
		failed(ep)
	}
	return p
}

// peerHashKVPath is where a member serves its hash to its peers, on its
// peer URLs (etcd's PeerHashKVPath).
const peerHashKVPath = "/members/hashkv"

// etcdClusterIDHeader names the cluster a /members/hashkv request is
// meant for, in hex (etcd's X-Etcd-Cluster-ID).
const etcdClusterIDHeader = "X-Etcd-Cluster-ID"

// errHashKVNotServed: the peer URL answered 404 to /members/hashkv.
var errHashKVNotServed = errors.New("server: the peer does not serve " + peerHashKVPath)

// peerHashOf asks the peer URL ep for its hash at rev with etcd's request
// (etcd's HashByRev): a GET of /members/hashkv with a JSON HashKVRequest
// body and this member's cluster ID, over the peer transport. A compacted
// or future revision comes back as rpctypes.ErrCompacted or
// ErrFutureRev, another cluster's member as ErrClusterIDMismatch, a 404
// as errHashKVNotServed.
func (c *corruptChecker) peerHashOf(ep string, rev int64) (*pb.HashKVResponse, error) {
	if c.peerDo == nil {
		return nil, errors.New("no peer transport")
	}
	body, err := json.Marshal(&pb.HashKVRequest{Revision: rev})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(c.ctx, c.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(ep, "/")+peerHashKVPath, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	if cid := c.clusterID(); cid != 0 {
		req.Header.Set(etcdClusterIDHeader, strconv.FormatUint(cid, 16))
	}
	resp, err := c.peerDo(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return nil, err
	}
	msg := strings.TrimSpace(string(b))
	switch resp.StatusCode {
	case http.StatusOK:
		out := &pb.HashKVResponse{}
		if err := json.Unmarshal(b, out); err != nil {
			return nil, fmt.Errorf("a HashKVResponse that does not decode: %w", err)
		}
		return out, nil
	case http.StatusNotFound:
		return nil, errHashKVNotServed
	case http.StatusBadRequest:
		if strings.Contains(msg, mvcc.ErrCompacted.Error()) {
			return nil, fmt.Errorf("%w (%s)", rpctypes.ErrCompacted, msg)
		}
		if strings.Contains(msg, mvcc.ErrFutureRev.Error()) {
			return nil, fmt.Errorf("%w (%s)", rpctypes.ErrFutureRev, msg)
		}
	case http.StatusPreconditionFailed:
		if strings.Contains(msg, errClusterIDMismatch) {
			return nil, fmt.Errorf("%w (%s)", rpctypes.ErrClusterIDMismatch, msg)
		}
	}
	return nil, fmt.Errorf("unknown error: %s: %s", resp.Status, msg)
}

// clusterID is this member's cluster ID, 0 before its node runs (the
// initial check: the header is then left out, which etcd's handler
// accepts).
func (c *corruptChecker) clusterID() uint64 {
	switch {
	case c.cid != nil:
		return c.cid()
	case c.s == nil || c.s.node == nil:
		return 0
	}
	return c.s.node.Status().ClusterID
}

// hashOf calls Maintenance.HashKV(rev) on the client URL ep.
func (c *corruptChecker) hashOf(ep string, rev int64) (*pb.HashKVResponse, error) {
	u, err := url.Parse(ep)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("client URL %q: not a URL", ep)
	}
	creds := insecure.NewCredentials()
	if u.Scheme == "https" {
		creds = credentials.NewTLS(c.tls.Clone())
	}
	conn, err := grpc.NewClient(u.Host, grpc.WithTransportCredentials(creds))
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(c.ctx, c.timeout)
	defer cancel()
	resp, err := pb.NewMaintenanceClient(conn).HashKV(ctx, &pb.HashKVRequest{Revision: rev})
	if err != nil {
		return nil, rpctypes.Error(err)
	}
	return resp, nil
}

// errClusterIDMismatch is the text of etcd's rafthttp.ErrClusterIDMismatch,
// which its HashByRev looks for in a 412.
const errClusterIDMismatch = "cluster ID mismatch"

// peerHashKVHandler serves GET /members/hashkv on the peer URLs, as
// etcd's hashKVHandler: the body is a JSON HashKVRequest
// ({"revision":N}, 0 or absent: the current revision), the answer a JSON
// HashKVResponse ({"header":{...,"revision":current},"hash":H,
// "compact_revision":C,"hash_revision":R}) from mvcc.Store.HashKV, so
// the compaction hashes kept count as etcd's HashByRev. Errors, as
// etcd's: 405 for another method; 412 "cluster ID mismatch" when the
// X-Etcd-Cluster-ID header names another cluster (absent, it is not
// checked); 400 "error unmarshalling request" for a body that is not
// such JSON (or is over maxHashKVRequest bytes, or has a negative
// revision); 400 with the store's error for a revision compacted ("mvcc:
// required revision has been compacted") or not reached ("mvcc: required
// revision is a future revision"); 500 for any other store error. The
// peer transport authenticates the asker (peer TLS); there is no auth
// token, as in etcd.
type peerHashKVHandler struct {
	store *mvcc.Store
	// ids returns the cluster and member IDs (the node's, once it runs).
	ids func() (clusterID, memberID uint64)
	log engine.Logger
}

// maxHashKVRequest bounds the body of a /members/hashkv request; etcd's
// request JSON is about 20 bytes.
const maxHashKVRequest = 4096

func (h *peerHashKVHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", http.MethodGet)
		http.Error(w, "Method Not Allowed", http.StatusMethodNotAllowed)
		return
	}
	cid, mid := h.ids()
	if got := r.Header.Get(etcdClusterIDHeader); got != "" && got != strconv.FormatUint(cid, 16) {
		http.Error(w, fmt.Sprintf("%s: this member (%x) belongs to cluster %x, the request names %s = %q",
			errClusterIDMismatch, mid, cid, etcdClusterIDHeader, got), http.StatusPreconditionFailed)
		return
	}
	b, err := io.ReadAll(io.LimitReader(r.Body, maxHashKVRequest+1))
	if err != nil {
		http.Error(w, "error reading body: "+err.Error(), http.StatusBadRequest)
		return
	}
	if len(b) > maxHashKVRequest {
		http.Error(w, fmt.Sprintf("error unmarshalling request: body over %d bytes: a HashKVRequest is {\"revision\":N}", maxHashKVRequest), http.StatusBadRequest)
		return
	}
	req := &pb.HashKVRequest{}
	if err := json.Unmarshal(b, req); err != nil {
		http.Error(w, fmt.Sprintf("error unmarshalling request: %v: a HashKVRequest is {\"revision\":N}, N >= 0", err), http.StatusBadRequest)
		return
	}
	if req.Revision < 0 {
		http.Error(w, fmt.Sprintf("error unmarshalling request: revision = %d: must be >= 0 (0: the current revision)", req.Revision), http.StatusBadRequest)
		return
	}
	hash, hashRev, compacted, err := h.store.HashKV(req.Revision)
	if err != nil {
		if h.log != nil {
			h.log.Errorf("server: failed to get hashKV: requested-revision=%d error=%q", req.Revision, err)
		}
		code := http.StatusInternalServerError
		if errors.Is(err, mvcc.ErrCompacted) || errors.Is(err, mvcc.ErrFutureRev) {
			code = http.StatusBadRequest
		}
		http.Error(w, err.Error(), code)
		return
	}
	out, err := json.Marshal(&pb.HashKVResponse{
		Header: &pb.ResponseHeader{ClusterId: cid, MemberId: mid, Revision: h.store.Rev()},
		Hash:   hash, CompactRevision: compacted, HashRevision: hashRev,
	})
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set(etcdClusterIDHeader, strconv.FormatUint(cid, 16))
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(out)
}

// servePeerHashKV serves /members/hashkv on the member's peer URLs
// (peerHashKVHandler) when its node has them (a raft member); Start calls
// it once the node runs. Every member serves it, checks on or off, as
// etcd's peers do: the leader's checks ask it.
func (s *Server) servePeerHashKV() error {
	ph, ok := s.node.(cluster.PeerHTTP)
	if !ok {
		return nil
	}
	node := s.node
	h := &peerHashKVHandler{store: s.store, log: s.log, ids: func() (uint64, uint64) {
		st := node.Status()
		return st.ClusterID, st.MemberID
	}}
	return ph.HandlePeer(peerHashKVPath, h)
}

func (c *corruptChecker) infof(format string, args ...any) {
	if c.log != nil {
		c.log.Infof("server: "+format, args...)
	}
}

func (c *corruptChecker) errorf(format string, args ...any) {
	if c.log != nil {
		c.log.Errorf("server: "+format, args...)
	}
}

// errInconsistent is the initial check's refusal: etcd's "found data
// inconsistency with peers".
var errInconsistent = errors.New("found data inconsistency with peers")

// initialCheck is check 1 (see corruptChecker), for member self whose
// peers are peers; store is this member's, not serving yet.
func (c *corruptChecker) initialCheck(self uint64, peers []cluster.Member) error {
	c.infof("starting initial corruption check: local-member-id=%x timeout=%v", self, c.timeout)
	store := c.s.store
	h, rev, compacted, err := store.HashKV(0)
	if err != nil {
		return fmt.Errorf("server: %x failed to fetch hash (%w)", self, err)
	}
	mismatch := 0
	for _, p := range c.peerHashes(self, peers, rev) {
		if p.resp != nil {
			fields := fmt.Sprintf("local-member-id=%x local-member-revision=%d local-member-compact-revision=%d local-member-hash=%d remote-peer-id=%x remote-peer-endpoints=%v remote-peer-revision=%d remote-peer-compact-revision=%d remote-peer-hash=%d",
				self, rev, compacted, h, p.id, p.eps, p.resp.GetHeader().GetRevision(), p.resp.CompactRevision, p.resp.Hash)
			if h != p.resp.Hash {
				if compacted == p.resp.CompactRevision {
					c.errorf("found different hash values from remote peer: %s", fields)
					mismatch++
				} else {
					c.errorf("found different compact revision values from remote peer: %s", fields)
				}
			}
			continue
		}
		fields := fmt.Sprintf("local-member-id=%x local-member-revision=%d local-member-compact-revision=%d local-member-hash=%d remote-peer-id=%x remote-peer-endpoints=%v error=%q",
			self, rev, compacted, h, p.id, p.eps, p.err)
		switch {
		case errors.Is(p.err, rpctypes.ErrFutureRev):
			c.errorf("cannot fetch hash from slow remote peer: %s", fields)
		case errors.Is(p.err, rpctypes.ErrCompacted):
			c.errorf("cannot fetch hash from remote peer; local member is behind: %s", fields)
		default:
			c.errorf("cannot fetch hash from remote peer: %s", fields)
		}
	}
	if mismatch > 0 {
		return fmt.Errorf("%x %w", self, errInconsistent)
	}
	c.infof("initial corruption checking passed; no corruption: local-member-id=%x", self)
	return nil
}

// periodicCheck is check 2 (see corruptChecker), run by the leader.
func (c *corruptChecker) periodicCheck() error {
	s := c.s
	self := s.node.Status().MemberID
	h, rev, compacted, err := s.store.HashKV(0)
	if err != nil {
		return err
	}
	peers := c.peerHashes(self, s.node.Members(), rev)
	ctx, cancel := context.WithTimeout(s.streams, c.timeout)
	err = s.node.ReadBarrier(ctx)
	cancel()
	if err != nil {
		return err
	}
	h2, rev2, compacted2, err := s.store.HashKV(0)
	if err != nil {
		return err
	}
	alarmed := false
	mismatch := func(id uint64) {
		if !alarmed {
			alarmed = true
			c.alarm(id)
		}
	}
	if h2 != h && rev2 == rev && compacted2 == compacted {
		c.errorf("found hash mismatch: revision-1=%d compact-revision-1=%d hash-1=%d revision-2=%d compact-revision-2=%d hash-2=%d",
			rev, compacted, h, rev2, compacted2, h2)
		mismatch(self)
	}
	checked := 0
	for _, p := range peers {
		if p.resp == nil {
			continue
		}
		checked++
		if r := p.resp.GetHeader().GetRevision(); r > rev2 {
			c.errorf("revision from follower must be less than or equal to leader's: leader-revision=%d follower-revision=%d follower-peer-id=%x", rev2, r, p.id)
			mismatch(p.id)
		}
		if p.resp.CompactRevision > compacted2 {
			c.errorf("compact revision from follower must be less than or equal to leader's: leader-compact-revision=%d follower-compact-revision=%d follower-peer-id=%x",
				compacted2, p.resp.CompactRevision, p.id)
			mismatch(p.id)
		}
		if p.resp.CompactRevision == compacted && p.resp.Hash != h {
			c.errorf("same compact revision then hashes must match: leader-compact-revision=%d leader-hash=%d follower-compact-revision=%d follower-hash=%d follower-peer-id=%x",
				compacted2, h, p.resp.CompactRevision, p.resp.Hash, p.id)
			mismatch(p.id)
		}
	}
	c.infof("finished peer corruption check: number-of-peers-checked=%d", checked)
	return nil
}

// compactHashCheck is check 3 (see corruptChecker), run by the leader.
func (c *corruptChecker) compactHashCheck() {
	s := c.s
	self := s.node.Status().MemberID
	c.infof("starting compact hash check: local-member-id=%x timeout=%v", self, c.timeout)
	c.mu.Lock()
	last := c.latestChecked
	c.mu.Unlock()
	hashes := s.store.CompactionHashes()
	slices.Reverse(hashes) // newest first
	if i := slices.IndexFunc(hashes, func(h mvcc.CompactionHash) bool { return h.Revision <= last }); i >= 0 {
		hashes = hashes[:i]
	}
	members := s.node.Members()
	for i, h := range hashes {
		if c.ctx.Err() != nil {
			return
		}
		peers := c.peerHashes(self, members, h.Revision)
		if len(peers) == 0 {
			continue
		}
		if c.checkPeerHashes(self, h, peers) {
			c.infof("finished compaction hash check: number-of-hashes-checked=%d", i+1)
			return
		}
	}
	c.infof("finished compaction hash check: number-of-hashes-checked=%d", len(hashes))
}

// checkPeerHashes compares the leader's hash at a compaction with its
// peers' and raises the alarms (etcd's checkPeerHashes); it reports
// whether the older compactions need no check.
func (c *corruptChecker) checkPeerHashes(self uint64, lh mvcc.CompactionHash, peers []*peerHash) bool {
	byHash := map[uint32][]uint64{lh.Hash: {self}}
	checked := 0
	for _, p := range peers {
		reason := ""
		switch {
		case p.resp == nil:
			reason = "no response"
		case p.resp.CompactRevision != lh.CompactRevision:
			reason = fmt.Sprintf("the peer's CompactRevision %d doesn't match leader's CompactRevision %d", p.resp.CompactRevision, lh.CompactRevision)
		}
		if reason != "" {
			c.errorf("Skipped peer's hash: number-of-peers=%d leader-id=%x peer-id=%x reason=%q", len(peers), self, p.id, reason)
			continue
		}
		checked++
		byHash[p.resp.Hash] = append(byHash[p.resp.Hash], p.id)
	}
	if len(byHash) == 1 {
		if checked == len(peers) {
			c.infof("successfully checked hash on whole cluster: number-of-peers-checked=%d revision=%d compactRevision=%d", checked, lh.Revision, lh.CompactRevision)
			c.mu.Lock()
			c.latestChecked = max(c.latestChecked, lh.Revision)
			c.mu.Unlock()
			return true
		}
		c.errorf("skipped revision in compaction hash check; was not able to check all peers: number-of-peers-checked=%d number-of-peers=%d revision=%d compactRevision=%d",
			checked, len(peers), lh.Revision, lh.CompactRevision)
		return false
	}
	quorum := (len(peers)+1)/2 + 1
	quorumExists := false
	for k, ids := range byHash {
		if len(ids) >= quorum {
			quorumExists = true
			delete(byHash, k)
			break
		}
	}
	if !quorumExists {
		c.errorf("Detected compaction hash mismatch but cannot identify the corrupted members, so intentionally set the memberID as 0: leader-id=%x leader-revision=%d leader-compact-revision=%d leader-hash=%d",
			self, lh.Revision, lh.CompactRevision, lh.Hash)
		c.alarm(0)
	}
	for _, k := range slices.Sorted(maps.Keys(byHash)) {
		ids := byHash[k]
		if quorumExists {
			for _, id := range ids {
				c.alarm(id)
			}
		}
		c.errorf("Detected compaction hash mismatch: leader-id=%x leader-revision=%d leader-compact-revision=%d leader-hash=%d peer-hash=%d peer-ids=%s quorum-exist=%v",
			self, lh.Revision, lh.CompactRevision, lh.Hash, k, hexIDs(ids), quorumExists)
	}
	return true
}

func hexIDs(ids []uint64) string {
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = fmt.Sprintf("%x", id)
	}
	return strings.Join(parts, ",")
}

// raise proposes the CORRUPT alarm for member id (0: the whole cluster),
// unless it is raised already (etcd's triggerCorruptAlarm).
func (c *corruptChecker) raise(id uint64) {
	s := c.s
	if s.apply.alarms.has(id, pb.AlarmType_CORRUPT) {
		return
	}
	ctx, cancel := context.WithTimeout(s.streams, c.timeout)
	defer cancel()
	_, err := s.propose(ctx, &pb.InternalRaftRequest{Alarm: &pb.AlarmRequest{
		Action: pb.AlarmRequest_ACTIVATE, MemberID: id, Alarm: pb.AlarmType_CORRUPT}})
	if err != nil {
		c.errorf("raising the CORRUPT alarm for member %x failed: %v", id, err)
	}
}

// run runs the periodic and compact hash checks, each on its interval
// while this member leads, until ctx ends (etcd's monitorKVHash and
// monitorCompactHash).
func (c *corruptChecker) run(ctx context.Context) {
	defer close(c.done)
	c.ctx = ctx
	if ph, ok := c.s.node.(cluster.PeerHTTP); ok {
		c.peerDo = ph.DoPeer
	}
	sc := c.s.cfg.Server
	var periodic, compact <-chan time.Time
	if sc.CorruptCheckIntervalMS > 0 {
		t := time.NewTicker(time.Duration(sc.CorruptCheckIntervalMS) * time.Millisecond)
		defer t.Stop()
		periodic = t.C
		c.infof("enabled corruption checking: local-member-id=%x interval=%v", c.s.node.Status().MemberID, time.Duration(sc.CorruptCheckIntervalMS)*time.Millisecond)
	}
	if sc.CompactHashCheck {
		t := time.NewTicker(time.Duration(sc.CompactHashCheckIntervalMS) * time.Millisecond)
		defer t.Stop()
		compact = t.C
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-periodic:
			if c.leads() {
				if err := c.periodicCheck(); err != nil && ctx.Err() == nil {
					c.errorf("failed to check hash KV: %v", err)
				}
			}
		case <-compact:
			if c.leads() {
				c.compactHashCheck()
			}
		}
	}
}

func (c *corruptChecker) leads() bool {
	st := c.s.node.Status()
	return st.Leader != 0 && st.Leader == st.MemberID
}

// startCorruptChecks runs the initial check, when configured, on a member
// that starts with data, before its raft node starts; and makes the
// checker of the periodic and compact hash checks (nil when neither is
// on, or without [cluster]). Start calls it after the store opened.
func (s *Server) startCorruptChecks() (*corruptChecker, error) {
	sc := s.cfg.Server
	if !s.cfg.Cluster.Enabled() || !(sc.InitialCorruptCheck || sc.CorruptCheckIntervalMS > 0 || sc.CompactHashCheck) {
		return nil, nil
	}
	c, err := newCorruptChecker(s)
	if err != nil {
		return nil, err
	}
	if sc.InitialCorruptCheck && memberInitialized(s.cfg) {
		self, peers, err := c.peersBeforeStart()
		if err != nil {
			c.errorf("initial corruption check skipped: %v", err)
		} else if err := c.initialCheck(self, peers); err != nil {
			c.errorf("checkInitialHashKV failed: %v", err)
			return nil, err
		}
	}
	if sc.CorruptCheckIntervalMS == 0 && !sc.CompactHashCheck {
		return nil, nil
	}
	return c, nil
}

// memberInitialized reports whether the member starts with a raft log
// (a restart), as etcd checks for its WAL: a new member has nothing to
// compare.
func memberInitialized(cfg *config.Config) bool {
	ents, err := os.ReadDir(cfg.Cluster.RaftDirFor(cfg.DBPath))
	return err == nil && len(ents) > 0
}

// peersBeforeStart learns this member's ID and the members (with their
// peer and client URLs) from the first configured peer whose /raft/members answers.
func (c *corruptChecker) peersBeforeStart() (uint64, []cluster.Member, error) {
	cc := c.s.cfg.Cluster
	client, err := peerClient(c.s.cfg)
	if err != nil {
		return 0, nil, err
	}
	var errs []error
	for _, m := range cc.Members {
		if m.Name == cc.Name {
			continue
		}
		var view struct {
			Members []cluster.Member `json:"members"`
		}
		err := getJSON(client, strings.TrimSuffix(m.PeerURL, "/")+"/raft/members", &view)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", m.PeerURL, err))
			continue
		}
		for _, v := range view.Members {
			if v.Name == cc.Name {
				return v.ID, view.Members, nil
			}
		}
		errs = append(errs, fmt.Errorf("%s: its member list has no member named %q", m.PeerURL, cc.Name))
	}
	if len(errs) == 0 {
		return 0, nil, errors.New("no peer configured")
	}
	return 0, nil, fmt.Errorf("no peer told its member list: %w", errors.Join(errs...))
}

func getJSON(client *http.Client, u string, v any) error {
	resp, err := client.Get(u)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s", resp.Status)
	}
	return json.NewDecoder(io.LimitReader(resp.Body, 16<<20)).Decode(v)
}
