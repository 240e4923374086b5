package cluster

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	pathpkg "path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// Peer traffic is plain HTTP/1.1 (or HTTPS) on the peer URLs:
//
//	GET  /raft/stream    a long-lived stream of raft messages from the
//	                     member asked to the member asking (uvarint length
//	                     + protobuf each, flushed per batch): every member
//	                     keeps one open to each peer, as etcd's rafthttp
//	                     streams, so a message costs a write, not a request
//	POST /raft/snapshot  one MsgSnap, then the state machine's snapshot in
//	                     chunks (uvarint length + bytes; 0 ends), then the
//	                     8-byte index the snapshot was taken at
//	GET  /raft/members   this member's view: cluster ID, member list, applied
//	                     index (start-time checks and members that join)
//	GET  /raft/probing   an empty answer, timed by every peer for its
//	                     etcd_network_peer_round_trip_time_seconds
//	GET  /raft/state     ?applied=A, on the leader: its state machine's data
//	                     once it has applied A (chunks as /raft/snapshot's,
//	                     then the 8-byte index), for a member that repairs
//	                     its damaged state (repair.go)
//
// Beside them the peer URLs serve what the server registers with
// PeerHTTP.HandlePeer (its /members/hashkv, as etcd's peer listener).
//
// Every stream and snapshot request names the asking member's cluster and
// member ID in headers; a member of another cluster is refused with 412, a
// removed member with 410 (which stops it).
const (
	pathStream   = "/raft/stream"
	pathSnapshot = "/raft/snapshot"
	pathMembers  = "/raft/members"
	pathProbe    = "/raft/probing"

	headerClusterID = "X-Strata-Cluster-Id"
	headerFrom      = "X-Strata-From"
	// headerIncarnation, on a stream's response, names the process that
	// serves it: a new one after a restart (deadleader.go).
	headerIncarnation = "X-Strata-Incarnation"

	// peerQueueLen bounds the messages queued for one peer; when it is full
	// (the peer is slow) messages are dropped and raft, told the peer is
	// unreachable, resends from its own log.
	peerQueueLen = 4096
	// maxBatch bounds the messages written to a stream between flushes.
	maxBatch = 512
	// maxMessageBytes bounds one message on a stream.
	maxMessageBytes = 256 << 20
)

// probeInterval is how often a member times a round trip to each peer
// (etcd's prober interval); probeRetry is the wait after a probe failed,
// shorter so that a peer that comes up is timed soon.
var probeInterval, probeRetry = 4 * time.Second, time.Second

// transport sends raft messages to the other members and serves theirs.
type transport struct {
	n      *raftNode
	client *http.Client
	srv    *http.Server
	ln     net.Listener
	// mux serves the peer URLs: the raft paths (serve) and the handlers
	// added by HandlePeer (extra, their paths), before or after serve.
	mux     *http.ServeMux
	extraMu sync.Mutex
	extra   map[string]bool

	mu    sync.Mutex
	peers map[uint64]*peer
	wg    sync.WaitGroup
	stopc chan struct{}

	metrics *peerMetrics
	// incarnation names this process to its peers (headerIncarnation).
	incarnation string
}

// peer is one other member: a bounded queue of messages for it, drained
// by the stream it keeps open to this member (so messages to one peer stay
// in order and a slow peer never blocks the Ready loop), and the reader of
// the stream this member keeps open to it.
type peer struct {
	id   uint64
	urls []string
	q    chan *pb.Message
	// props holds the proposals p forwarded to this member (stepProposals).
	props chan *pb.Message
	stop  chan struct{}
	// streams counts the streams the peer has open to this member; with
	// none, appends for it are dropped at once (raft resends).
	streams atomic.Int32
	// snapshotting is set while a snapshot is being streamed to the peer.
	snapshotting atomic.Bool
	// warned limits the log to one line per kind of failure in a row.
	warned atomic.Bool
	// incarnation is the process that served the last stream from p
	// (headerIncarnation); read and written by the stream's reader only.
	incarnation string
}

func newTransport(n *raftNode, clientTLS *tls.Config) *transport {
	tr := &http.Transport{
		DialContext:           (&net.Dialer{Timeout: time.Second, KeepAlive: 30 * time.Second}).DialContext,
		TLSClientConfig:       clientTLS,
		MaxIdleConnsPerHost:   4,
		IdleConnTimeout:       90 * time.Second,
		ResponseHeaderTimeout: 10 * time.Second,
		ForceAttemptHTTP2:     false,
	}
	return &transport{
		n:       n,
		client:  &http.Client{Transport: tr},
		mux:     http.NewServeMux(),
		extra:   map[string]bool{},
		peers:   map[uint64]*peer{},
		stopc:   make(chan struct{}),
		metrics: newPeerMetrics(),

		incarnation: strconv.FormatUint(rand.Uint64(), 16),
	}
}

// serve starts serving peer traffic on ln.
func (t *transport) serve(ln net.Listener, serverTLS *tls.Config) {
	mux := t.mux
	mux.HandleFunc(pathStream, t.handleStream)
	mux.HandleFunc(pathSnapshot, t.handleSnapshot)
	mux.HandleFunc(pathMembers, t.handleMembers)
	mux.HandleFunc(pathState, t.handleState) // repair.go
	mux.HandleFunc(pathProbe, func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })
	// net/http writes its HTTP/2 defaults into the server's tls.Config, so
	// each server gets its own copy: members started from one config share
	// a *tls.Config otherwise (a data race).
	t.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, TLSConfig: serverTLS.Clone()}
	t.ln = ln
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		var err error
		if serverTLS != nil {
			err = t.srv.ServeTLS(ln, "", "")
		} else {
			err = t.srv.Serve(ln)
		}
		if err != nil && !errors.Is(err, http.ErrServerClosed) {
			t.n.logf("peer server on %s stopped: %v", ln.Addr(), err)
		}
	}()
}

// PeerHTTP is implemented by the Node StartRaft returns: the server
// serves its own handlers on the member's peer URLs and asks its peers
// there, over the peer transport (cluster.peer_cert_file and
// peer_trusted_ca_file), as etcd's server serves /members/hashkv beside
// raft. Peers are authenticated as raft's traffic is, by the peer TLS:
// with a CA set, only a client certificate it signed is served.
type PeerHTTP interface {
	// HandlePeer serves h at path (a net/http ServeMux pattern without
	// method or host) on this member's peer URLs, from now on. path must
	// begin with "/", lie outside /raft/ (the member's own) and not be
	// registered already.
	HandlePeer(path string, h http.Handler) error
	// DoPeer sends req, addressed to a peer URL, with this member's peer
	// transport (its peer client TLS); redirects are not followed. The
	// caller closes the response body and bounds the request with its
	// context.
	DoPeer(req *http.Request) (*http.Response, error)
}

var _ PeerHTTP = (*raftNode)(nil)

// HandlePeer implements PeerHTTP.
func (n *raftNode) HandlePeer(path string, h http.Handler) error { return n.tr.handle(path, h) }

// DoPeer implements PeerHTTP.
func (n *raftNode) DoPeer(req *http.Request) (*http.Response, error) { return n.tr.do(req) }

// handle adds h at path to the peer mux (HandlePeer).
func (t *transport) handle(path string, h http.Handler) error {
	switch {
	case h == nil:
		return fmt.Errorf("cluster: peer handler for %q is nil", path)
	case !strings.HasPrefix(path, "/") || strings.ContainsAny(path, " {}"):
		return fmt.Errorf("cluster: peer handler path %q: must be a path beginning with \"/\", without method, host or wildcards", path)
	case path == "/raft" || strings.HasPrefix(path, "/raft/"):
		return fmt.Errorf("cluster: peer handler path %q: /raft/ is the member's own", path)
	case path == "/":
		return fmt.Errorf("cluster: peer handler path %q: must name a path, not every path", path)
	}
	if clean := pathpkg.Clean(path); clean != strings.TrimSuffix(path, "/") {
		return fmt.Errorf("cluster: peer handler path %q: not a clean path (%q)", path, clean)
	}
	t.extraMu.Lock()
	defer t.extraMu.Unlock()
	if t.extra[path] {
		return fmt.Errorf("cluster: peer handler path %q: registered already", path)
	}
	t.extra[path] = true
	t.mux.Handle(path, h)
	return nil
}

// do sends req with the peer client, following no redirect (DoPeer).
func (t *transport) do(req *http.Request) (*http.Response, error) {
	c := &http.Client{Transport: t.client.Transport, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	return c.Do(req)
}

// stop closes the listener and every peer's sender.
func (t *transport) stop() {
	close(t.stopc)
	if t.srv != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_ = t.srv.Shutdown(ctx)
		cancel()
		_ = t.srv.Close()
	}
	t.mu.Lock()
	for id, p := range t.peers {
		close(p.stop)
		delete(t.peers, id)
	}
	t.mu.Unlock()
	t.wg.Wait()
	t.client.CloseIdleConnections()
}

// setPeers makes the senders match members (all but this member).
func (t *transport) setPeers(members map[uint64]*Member) {
	t.mu.Lock()
	defer t.mu.Unlock()
	select {
	case <-t.stopc:
		return
	default:
	}
	for id, p := range t.peers {
		if m, ok := members[id]; !ok || !slices.Equal(m.PeerURLs, p.urls) {
			close(p.stop)
			delete(t.peers, id)
		}
	}
	for id, m := range members {
		if id == t.n.id || t.peers[id] != nil || len(m.PeerURLs) == 0 {
			continue
		}
		p := &peer{id: id, urls: append([]string(nil), m.PeerURLs...), q: make(chan *pb.Message, peerQueueLen),
			props: make(chan *pb.Message, peerQueueLen), stop: make(chan struct{})}
		t.peers[id] = p
		t.wg.Add(3)
		go t.readStream(p)
		go t.stepProposals(p)
		go t.probe(p)
	}
}

// send queues msgs for their peers; it never blocks.
func (t *transport) send(msgs []*pb.Message) {
	if len(msgs) == 0 {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, m := range msgs {
		p := t.peers[m.GetTo()]
		if p == nil {
			continue // removed, or not known yet: raft resends
		}
		if m.GetType() == pb.MsgSnap {
			if p.snapshotting.CompareAndSwap(false, true) {
				t.wg.Add(1)
				go t.sendSnapshot(p, m)
			} else {
				t.n.raft.ReportSnapshot(p.id, raft.SnapshotFailure)
			}
			continue
		}
		if p.streams.Load() == 0 && m.GetType() == pb.MsgApp {
			// No stream yet (the peer is starting) or any more (it is
			// down): appends, the only big messages, are dropped and raft
			// probes again; the small ones (a forwarded proposal, a vote,
			// a heartbeat) wait in the queue for the stream.
			t.n.raft.ReportUnreachable(p.id)
			t.metrics.sendFailed(p.id)
			continue
		}
		select {
		case p.q <- m:
		default:
			t.metrics.sendFailed(p.id)
			if m.GetType() == pb.MsgApp {
				t.n.raft.ReportUnreachable(p.id)
			}
		}
	}
}

// handleStream serves GET /raft/stream: the asking member's messages are
// written to it as they come, each batch flushed, until either side stops.
//
// The connection is taken over from net/http once the request is checked
// (Hijack), and the messages are written to it raw after a response head
// without a length (the body ends when the connection closes): through
// net/http's chunked encoding, a flush of a batch cost three writes to
// the socket (the chunk's size, its bytes, its end) and the reader a
// small read for each chunk's size; here a batch is one write.
func (t *transport) handleStream(w http.ResponseWriter, r *http.Request) {
	from, ok := t.checkSender(w, r, http.MethodGet)
	if !ok {
		return
	}
	t.mu.Lock()
	p := t.peers[from]
	t.mu.Unlock()
	if p == nil {
		http.Error(w, fmt.Sprintf("member %x is not a member known to %x (yet)", from, t.n.id), http.StatusNotFound)
		return
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return
	}
	conn, rw, err := hj.Hijack()
	if err != nil {
		t.n.logf("stream to peer %x: %v", p.id, err)
		return
	}
	defer conn.Close()
	// net/http may have set deadlines for the request; the stream has none.
	_ = conn.SetDeadline(time.Time{})
	// The peer sends nothing after its request: a read returns when the
	// connection closes, which ends the stream even while no message is
	// waiting for it.
	closed := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, rw.Reader)
		close(closed)
	}()
	bw := bufio.NewWriterSize(conn, 64<<10)
	bw.WriteString("HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nConnection: close\r\n" + headerIncarnation + ": " + t.incarnation + "\r\n\r\n")
	if err := bw.Flush(); err != nil {
		return
	}
	p.streams.Add(1)
	defer p.streams.Add(-1)
	var lenBuf [binary.MaxVarintLen64]byte
	var buf []byte
	for {
		var m *pb.Message
		select {
		case m = <-p.q:
		case <-p.stop:
			return
		case <-t.stopc:
			return
		case <-closed:
			return
		}
		unflushed := 0
		for n := 0; m != nil && n < maxBatch; n++ {
			var err error
			if buf, err = (proto.MarshalOptions{}).MarshalAppend(buf[:0], m); err != nil {
				t.n.logf("cannot marshal a raft message to %x: %v", p.id, err)
			} else {
				k := binary.PutUvarint(lenBuf[:], uint64(len(buf)))
				bw.Write(lenBuf[:k])
				if _, err := bw.Write(buf); err != nil {
					t.metrics.sendFailed(p.id)
					return
				}
				unflushed += k + len(buf)
			}
			select {
			case m = <-p.q:
			default:
				m = nil
			}
		}
		if err := bw.Flush(); err != nil {
			t.metrics.sendFailed(p.id)
			return
		}
		t.metrics.sent(p.id, unflushed)
	}
}

// readStream keeps a stream open from p to this member and steps the
// messages it brings, reconnecting while p is a member.
func (t *transport) readStream(p *peer) {
	defer t.wg.Done()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-p.stop:
		case <-t.stopc:
		}
		cancel()
	}()
	for attempt := 0; ; attempt++ {
		u := p.urls[attempt%len(p.urls)]
		err := t.stream(ctx, p, u)
		if ctx.Err() != nil {
			return
		}
		if errors.Is(err, syscall.ECONNREFUSED) {
			t.n.leaderGone(p.id, "its peer port refuses connections")
		}
		if p.warned.CompareAndSwap(false, true) {
			t.n.logf("stream from peer %x (%s) down: %v", p.id, u, err)
		}
		select {
		case <-time.After(100 * time.Millisecond):
		case <-ctx.Done():
			return
		}
	}
}

// stream reads one stream from p at u until it breaks.
func (t *transport) stream(ctx context.Context, p *peer, u string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u+pathStream, nil)
	if err != nil {
		return err
	}
	t.setHeaders(req)
	resp, err := t.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if err := t.checkResponse(p, resp); err != nil {
		return err
	}
	if inc := resp.Header.Get(headerIncarnation); inc != "" {
		if p.incarnation != "" && inc != p.incarnation {
			t.n.leaderGone(p.id, "it restarted")
		}
		p.incarnation = inc
	}
	if p.warned.CompareAndSwap(true, false) {
		t.n.logf("stream from peer %x (%s) up", p.id, u)
	}
	t.metrics.connected(t.n.id, p.id, true)
	defer t.metrics.connected(t.n.id, p.id, false)
	err = t.readMessages(ctx, p, resp.Body)
	if ctx.Err() == nil {
		t.metrics.receiveFailed(p.id)
	}
	return err
}

// readMessages steps the messages of an open stream from p until it
// breaks.
func (t *transport) readMessages(ctx context.Context, p *peer, body io.Reader) error {
	br := bufio.NewReaderSize(body, 64<<10)
	var b []byte
	for {
		n, err := binary.ReadUvarint(br)
		if err != nil {
			return err
		}
		if n > maxMessageBytes {
			return fmt.Errorf("a message of %d bytes", n)
		}
		if uint64(cap(b)) < n {
			b = make([]byte, n)
		}
		b = b[:n]
		if _, err := io.ReadFull(br, b); err != nil {
			return err
		}
		t.metrics.received(p.id, uvarintLen(n)+len(b))
		m := &pb.Message{}
		if err := proto.Unmarshal(b, m); err != nil {
			return fmt.Errorf("malformed raft message: %w", err)
		}
		if m.GetFrom() != p.id {
			return fmt.Errorf("a message from %x on the stream of %x", m.GetFrom(), p.id)
		}
		if m.GetType() == pb.MsgProp {
			// A proposal forwarded to this member waits in raft until it
			// knows a leader; it must not hold up the stream (which may
			// bring that leader's heartbeat), so it goes to its own queue.
			select {
			case p.props <- m:
			default: // full: the proposer times out, as for a lost message
			}
			continue
		}
		if err := t.n.raft.Step(ctx, m); err != nil {
			return err
		}
	}
}

// uvarintLen is the length of n's uvarint encoding.
func uvarintLen(n uint64) int {
	var buf [binary.MaxVarintLen64]byte
	return binary.PutUvarint(buf[:], n)
}

// probe times a round trip to p (a GET of /raft/probing) every
// probeInterval while p is a member, as etcd's prober does.
func (t *transport) probe(p *peer) {
	defer t.wg.Done()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { // a probe in flight ends with the peer
		select {
		case <-p.stop:
		case <-t.stopc:
		case <-ctx.Done():
		}
		cancel()
	}()
	for attempt := 0; ; attempt++ {
		wait := probeRetry
		if rtt, err := t.probeOnce(ctx, p.urls[attempt%len(p.urls)]); err == nil {
			t.metrics.rtt(p.id, rtt)
			wait = probeInterval
		}
		select {
		case <-time.After(wait):
		case <-p.stop:
			return
		case <-t.stopc:
			return
		}
	}
}

// probeOnce times one GET of u's /raft/probing.
func (t *transport) probeOnce(ctx context.Context, u string) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, probeInterval)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u+pathProbe, nil)
	if err != nil {
		return 0, err
	}
	start := time.Now()
	resp, err := t.client.Do(req)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		return 0, fmt.Errorf("%s", resp.Status)
	}
	return time.Since(start), nil
}

// stepProposals steps the proposals p forwarded to this member, each
// given up after the request timeout (its proposer has given up by then).
func (t *transport) stepProposals(p *peer) {
	defer t.wg.Done()
	for {
		select {
		case m := <-p.props:
			ctx, cancel := context.WithTimeout(context.Background(), t.n.cfg.RequestTimeout)
			_ = t.n.raft.Step(ctx, m)
			cancel()
		case <-p.stop:
			return
		case <-t.stopc:
			return
		}
	}
}

func (t *transport) setHeaders(req *http.Request) {
	setPeerHeaders(req, t.n.clusterID, t.n.id)
}

// setPeerHeaders names the sender of a peer request: member from of
// cluster clusterID.
func setPeerHeaders(req *http.Request, clusterID, from uint64) {
	req.Header.Set(headerClusterID, strconv.FormatUint(clusterID, 16))
	req.Header.Set(headerFrom, strconv.FormatUint(from, 16))
}

// checkResponse turns a peer's refusal into an error; 410 (this member
// was removed) stops the member, as etcd does.
func (t *transport) checkResponse(p *peer, resp *http.Response) error {
	if resp.StatusCode == http.StatusOK || resp.StatusCode == http.StatusNoContent {
		return nil
	}
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode == http.StatusGone {
		t.n.fail(fmt.Errorf("%w (peer %x says: %s)", ErrRemoved, p.id, bytes.TrimSpace(msg)))
		return fmt.Errorf("removed from the cluster")
	}
	return fmt.Errorf("%s: %s", resp.Status, bytes.TrimSpace(msg))
}

// post sends one request body to a peer and checks the reply.
func (t *transport) post(p *peer, u string, body io.Reader) error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-p.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, body)
	if err != nil {
		return err
	}
	t.setHeaders(req)
	req.Header.Set("Content-Type", "application/octet-stream")
	resp, err := t.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	return t.checkResponse(p, resp)
}

// checkSender validates the cluster and member headers of a peer request.
func (t *transport) checkSender(w http.ResponseWriter, r *http.Request, method string) (from uint64, ok bool) {
	if r.Method != method {
		w.Header().Set("Allow", method)
		http.Error(w, "method "+r.Method+" not allowed: use "+method, http.StatusMethodNotAllowed)
		return 0, false
	}
	cid, err := strconv.ParseUint(r.Header.Get(headerClusterID), 16, 64)
	if err != nil {
		http.Error(w, "missing or bad "+headerClusterID+" header", http.StatusBadRequest)
		return 0, false
	}
	if cid != t.n.clusterID {
		t.n.logf("refused peer traffic from %s: it belongs to cluster %x, this member to cluster %x", r.RemoteAddr, cid, t.n.clusterID)
		http.Error(w, fmt.Sprintf("cluster ID mismatch: this member (%x) belongs to cluster %x, the sender to cluster %x", t.n.id, t.n.clusterID, cid), http.StatusPreconditionFailed)
		return 0, false
	}
	from, err = strconv.ParseUint(r.Header.Get(headerFrom), 16, 64)
	if err != nil {
		http.Error(w, "missing or bad "+headerFrom+" header", http.StatusBadRequest)
		return 0, false
	}
	if t.n.isRemoved(from) {
		http.Error(w, fmt.Sprintf("member %x was removed from cluster %x", from, t.n.clusterID), http.StatusGone)
		return 0, false
	}
	return from, true
}

// membersView is the JSON of GET /raft/members.
type membersView struct {
	ClusterID string   `json:"cluster_id"`
	MemberID  string   `json:"member_id"`
	Name      string   `json:"name"`
	Applied   uint64   `json:"applied"`
	Members   []Member `json:"members"`
	// Started lists the members that have run (published their name).
	Started []string `json:"started"`
	// Removed lists the members removed from the cluster.
	Removed []string `json:"removed"`
	// Acked lists, when this member leads, the members that have
	// acknowledged entries of its log (raft's progress Match > 0).
	Acked []string `json:"acked,omitempty"`
}

func (t *transport) handleMembers(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", http.MethodGet)
		http.Error(w, "method "+r.Method+" not allowed: use GET", http.StatusMethodNotAllowed)
		return
	}
	v := membersView{
		ClusterID: strconv.FormatUint(t.n.clusterID, 16),
		MemberID:  strconv.FormatUint(t.n.id, 16),
		Name:      t.n.cfg.Name,
		Applied:   t.n.applied.Load(),
		Members:   t.n.Members(),
	}
	t.n.membersMu.RLock()
	for id := range t.n.members.Started {
		v.Started = append(v.Started, strconv.FormatUint(id, 16))
	}
	for id := range t.n.members.Removed {
		v.Removed = append(v.Removed, strconv.FormatUint(id, 16))
	}
	t.n.membersMu.RUnlock()
	if st := t.n.raft.Status(); st.RaftState == raft.StateLeader {
		for id, pr := range st.Progress {
			if pr.Match > 0 {
				v.Acked = append(v.Acked, strconv.FormatUint(id, 16))
			}
		}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}
