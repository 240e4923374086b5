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
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// Peer traffic is plain HTTP/1.1 (or HTTPS) on the peer URLs:
//
//	POST /raft/message   a batch of raft messages: uvarint length + protobuf each
//	POST /raft/snapshot  one MsgSnap, then the state machine's snapshot in
//	                     chunks (uvarint length + bytes; 0 ends), then the
//	                     8-byte index the snapshot was taken at
//	GET  /raft/members   this member's view: cluster ID, member list, applied
//	                     index (start-time checks and members that join)
//
// Every POST names the sender's cluster and member ID in headers; a member
// of another cluster is refused with 412, a removed member with 410.
const (
	pathMessage  = "/raft/message"
	pathSnapshot = "/raft/snapshot"
	pathMembers  = "/raft/members"

	headerClusterID = "X-Strata-Cluster-Id"
	headerFrom      = "X-Strata-From"

	// peerQueueLen bounds the messages queued for one peer; when it is full
	// (the peer is slow or down) messages are dropped and raft, told the
	// peer is unreachable, resends from its own log.
	peerQueueLen = 4096
	// maxBatch bounds the messages sent in one POST.
	maxBatch = 512
	// maxMessageBody bounds a /raft/message body.
	maxMessageBody = 256 << 20
)

// transport sends raft messages to the other members and serves theirs.
type transport struct {
	n      *raftNode
	client *http.Client
	srv    *http.Server
	ln     net.Listener

	mu    sync.Mutex
	peers map[uint64]*peer
	wg    sync.WaitGroup
	stopc chan struct{}
}

// peer is the sending side towards one member: a bounded queue drained by
// one goroutine that POSTs batches, so messages to one peer stay in order
// and a slow peer never blocks the Ready loop.
type peer struct {
	id   uint64
	urls []string
	q    chan *pb.Message
	stop chan struct{}
	// snapshotting is set while a snapshot is being streamed to the peer.
	snapshotting atomic.Bool
	// warned limits the log to one line per kind of failure in a row.
	warned atomic.Bool
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
		n:      n,
		client: &http.Client{Transport: tr},
		peers:  map[uint64]*peer{},
		stopc:  make(chan struct{}),
	}
}

// serve starts serving peer traffic on ln.
func (t *transport) serve(ln net.Listener, serverTLS *tls.Config) {
	mux := http.NewServeMux()
	mux.HandleFunc(pathMessage, t.handleMessage)
	mux.HandleFunc(pathSnapshot, t.handleSnapshot)
	mux.HandleFunc(pathMembers, t.handleMembers)
	t.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, TLSConfig: serverTLS}
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
		if m, ok := members[id]; !ok || !equalStrings(m.PeerURLs, p.urls) {
			close(p.stop)
			delete(t.peers, id)
		}
	}
	for id, m := range members {
		if id == t.n.id || t.peers[id] != nil || len(m.PeerURLs) == 0 {
			continue
		}
		p := &peer{id: id, urls: append([]string(nil), m.PeerURLs...), q: make(chan *pb.Message, peerQueueLen), stop: make(chan struct{})}
		t.peers[id] = p
		t.wg.Add(1)
		go t.runPeer(p)
	}
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
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
		select {
		case p.q <- m:
		default:
			if m.GetType() == pb.MsgApp {
				t.n.raft.ReportUnreachable(p.id)
			}
		}
	}
}

// runPeer drains p's queue in batches, one POST at a time.
func (t *transport) runPeer(p *peer) {
	defer t.wg.Done()
	batch := make([]*pb.Message, 0, maxBatch)
	var buf bytes.Buffer
	urlIdx := 0
	for {
		batch = batch[:0]
		select {
		case m := <-p.q:
			batch = append(batch, m)
		case <-p.stop:
			return
		}
	drain:
		for len(batch) < maxBatch {
			select {
			case m := <-p.q:
				batch = append(batch, m)
			default:
				break drain
			}
		}
		buf.Reset()
		var lenBuf [binary.MaxVarintLen64]byte
		for _, m := range batch {
			b, err := proto.Marshal(m)
			if err != nil {
				t.n.logf("cannot marshal a raft message to %x: %v", p.id, err)
				continue
			}
			buf.Write(lenBuf[:binary.PutUvarint(lenBuf[:], uint64(len(b)))])
			buf.Write(b)
		}
		u := p.urls[urlIdx%len(p.urls)]
		if err := t.post(p, u+pathMessage, bytes.NewReader(buf.Bytes())); err != nil {
			urlIdx++
			t.n.raft.ReportUnreachable(p.id)
			if p.warned.CompareAndSwap(false, true) {
				t.n.logf("peer %x (%s) unreachable: %v", p.id, u, err)
			}
			// Do not spin against a peer that is down: raft resends.
			select {
			case <-time.After(50 * time.Millisecond):
			case <-p.stop:
				return
			}
			continue
		}
		if p.warned.CompareAndSwap(true, false) {
			t.n.logf("peer %x (%s) reachable again", p.id, u)
		}
	}
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
	req.Header.Set(headerClusterID, strconv.FormatUint(t.n.clusterID, 16))
	req.Header.Set(headerFrom, strconv.FormatUint(t.n.id, 16))
	req.Header.Set("Content-Type", "application/octet-stream")
	resp, err := t.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	switch resp.StatusCode {
	case http.StatusNoContent, http.StatusOK:
		return nil
	case http.StatusGone:
		// This member was removed from the cluster: stop, as etcd does.
		t.n.fail(fmt.Errorf("%w (peer %x says: %s)", ErrRemoved, p.id, bytes.TrimSpace(msg)))
		return fmt.Errorf("removed from the cluster")
	default:
		return fmt.Errorf("%s: %s", resp.Status, bytes.TrimSpace(msg))
	}
}

// checkSender validates the cluster and member headers of a peer request.
func (t *transport) checkSender(w http.ResponseWriter, r *http.Request) (from uint64, ok bool) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "method "+r.Method+" not allowed: use POST", http.StatusMethodNotAllowed)
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

func (t *transport) handleMessage(w http.ResponseWriter, r *http.Request) {
	from, ok := t.checkSender(w, r)
	if !ok {
		return
	}
	br := bufio.NewReader(io.LimitReader(r.Body, maxMessageBody))
	for {
		n, err := binary.ReadUvarint(br)
		if err == io.EOF {
			break
		}
		if err != nil || n > maxMessageBody {
			http.Error(w, "malformed message batch", http.StatusBadRequest)
			return
		}
		b := make([]byte, n)
		if _, err := io.ReadFull(br, b); err != nil {
			http.Error(w, "truncated message batch", http.StatusBadRequest)
			return
		}
		m := &pb.Message{}
		if err := proto.Unmarshal(b, m); err != nil {
			http.Error(w, "malformed raft message: "+err.Error(), http.StatusBadRequest)
			return
		}
		if m.GetFrom() != from {
			http.Error(w, "message sender does not match "+headerFrom, http.StatusBadRequest)
			return
		}
		if err := t.n.raft.Step(r.Context(), m); err != nil {
			http.Error(w, "raft: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
	}
	w.WriteHeader(http.StatusNoContent)
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
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}
