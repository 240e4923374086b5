package server

import (
	"context"
	"errors"
	"io"
	"sync"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	"github.com/stratadb/strata/auth"
	"github.com/stratadb/strata/cluster"
	"github.com/stratadb/strata/mvcc"
)

// watchServer is etcd's Watch service: each stream carries any number of
// watchers, created and cancelled by the client's requests.
// As etcd's v3rpc watchServer, it holds only what it uses.
type watchServer struct {
	pb.UnimplementedWatchServer
	store *mvcc.Store
	auth  *auth.Store
	hdr   memberHeader
	node  interface{ Status() cluster.Status }
	// streams ends every stream when the server stops.
	streams context.Context
	// progressEvery is server.watch_progress_notify_interval_ms;
	// maxRequestBytes is server.max_request_bytes, past which a
	// fragmenting watcher's responses are split.
	progressEvery   time.Duration
	maxRequestBytes int
}

// watchStream is one client stream: its watchers share one
// mvcc.WatchStream, and one goroutine (sendLoop) sends all their events,
// progress notifications and stop replies, as etcd's sendLoop does, so a
// stream costs two goroutines (receive and send) whatever its number of
// watchers.
//
// Locks, in the order they are taken: sendMu, then mu, then the store's.
type watchStream struct {
	s      *watchServer
	stream pb.Watch_WatchServer
	ctx    context.Context
	cancel context.CancelFunc
	mws    *mvcc.WatchStream

	// sendMu serializes Send, which gRPC allows on one goroutine at a
	// time. create and cancel hold it across their change and reply, so
	// the created reply goes out before any event of the watcher and no
	// event follows the canceled one.
	sendMu sync.Mutex
	// closed is set (under sendMu) when the handler returns: gRPC takes
	// no Send after that.
	closed bool

	mu       sync.Mutex
	watchers map[int64]*streamWatcher
	byMVCC   map[*mvcc.Watcher]*streamWatcher
	// notifying holds the watchers created with progress_notify.
	notifying map[*streamWatcher]struct{}
	nextID    int64

	// progressReq carries a client's progress request to sendLoop.
	progressReq chan struct{}

	// scratch is the response deliver fills for each batch, used by
	// sendLoop alone.
	scratch eventScratch
}

// eventScratch holds the messages of one events response, reused from
// batch to batch: gRPC encodes a message before Send returns and keeps no
// reference to it, so a stream's single sender needs one set, not five
// allocations per watcher and revision. With 10,000 watchers on distinct
// keys each response carries one event, and the allocations took about
// 0.4 us of the 3 us each event cost the server
// (docs/data/watch-scale.md).
type eventScratch struct {
	resp   pb.WatchResponse
	hdr    pb.ResponseHeader
	events []*mvccpb.Event
	evs    []mvccpb.Event
	kvs    []mvccpb.KeyValue
}

// scratchKeep bounds the events a stream's scratch keeps room for between
// batches: a catch-up batch of thousands gets arrays of its own, dropped
// once sent.
const scratchKeep = 64

// fill sets the scratch to n events; the caller fills them.
func (sc *eventScratch) fill(n int) {
	if cap(sc.evs) < n {
		sc.evs = make([]mvccpb.Event, n)
		sc.events = make([]*mvccpb.Event, n)
		sc.kvs = make([]mvccpb.KeyValue, 2*n) // a value and its previous one
	}
	sc.evs, sc.events, sc.kvs = sc.evs[:n], sc.events[:0], sc.kvs[:2*n]
}

// release clears the messages, so that the next response starts from
// nothing of this one and the stream keeps no key or value alive, and
// drops room past scratchKeep.
func (sc *eventScratch) release() {
	clear(sc.evs)
	clear(sc.events[:cap(sc.events)])
	clear(sc.kvs)
	sc.resp, sc.hdr = pb.WatchResponse{}, pb.ResponseHeader{}
	if cap(sc.evs) > scratchKeep {
		sc.evs, sc.events, sc.kvs = nil, nil, nil
	}
}

// streamWatcher is one watcher of a stream.
type streamWatcher struct {
	id       int64
	w        *mvcc.Watcher
	noPut    bool
	noDelete bool
	// fragment: the client asked for responses over
	// server.max_request_bytes to be split (WatchCreateRequest.fragment).
	fragment bool
	// cancelled is set (under mu) when the client cancelled it (its
	// canceled reply is sent).
	cancelled bool
	// sent: an event went out since the last progress tick (sendLoop's).
	sent bool
}

func (ws *watchServer) Watch(stream pb.Watch_WatchServer) error {
	// clientv3.WithRequireLeader: a member without a leader refuses the
	// stream, as etcd does, so the client can try another member.
	if md, ok := metadata.FromIncomingContext(stream.Context()); ok && len(md.Get(rpctypes.MetadataRequireLeaderKey)) > 0 &&
		md.Get(rpctypes.MetadataRequireLeaderKey)[0] == rpctypes.MetadataHasLeader && ws.node.Status().Leader == 0 {
		return rpctypes.ErrGRPCNoLeader
	}
	ctx, cancel := context.WithCancel(stream.Context())
	stop := context.AfterFunc(ws.streams, cancel)
	defer stop()
	st := &watchStream{s: ws, stream: stream, ctx: ctx, cancel: cancel, mws: ws.store.NewWatchStream(),
		watchers: map[int64]*streamWatcher{}, byMVCC: map[*mvcc.Watcher]*streamWatcher{},
		notifying: map[*streamWatcher]struct{}{}, progressReq: make(chan struct{}, 1)}
	sent := make(chan struct{})
	go func() {
		defer close(sent)
		st.sendLoop()
	}()
	defer func() {
		cancel() // ends sendLoop
		<-sent
		st.sendMu.Lock()
		st.closed = true
		st.sendMu.Unlock()
		st.mws.Close()
	}()

	// A client that closes its sending side (io.EOF; the gateway does,
	// once it has sent the request body) still gets its watchers' events
	// until it ends the stream, as in etcd.
	errc := make(chan error, 1)
	go func() {
		if err := st.recvLoop(); err != nil {
			errc <- err
		}
	}()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
		if ws.streams.Err() != nil {
			return rpctypes.ErrGRPCStopped
		}
		return ctx.Err()
	}
}

func (st *watchStream) recvLoop() error {
	for {
		req, err := st.stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		switch r := req.RequestUnion.(type) {
		case *pb.WatchRequest_CreateRequest:
			if err := st.create(r.CreateRequest); err != nil {
				return err
			}
		case *pb.WatchRequest_CancelRequest:
			if err := st.cancelWatch(r.CancelRequest.WatchId); err != nil {
				return err
			}
		case *pb.WatchRequest_ProgressRequest:
			select {
			case st.progressReq <- struct{}{}:
			default: // one is pending: it answers this one too
			}
		}
	}
}

// sendLocked sends r; the caller holds sendMu.
func (st *watchStream) sendLocked(r *pb.WatchResponse) error {
	if st.closed {
		return context.Canceled
	}
	return st.stream.Send(r)
}

func (st *watchStream) send(r *pb.WatchResponse) error {
	st.sendMu.Lock()
	defer st.sendMu.Unlock()
	return st.sendLocked(r)
}

// create starts a watcher. etcd always answers created; a watcher that
// cannot start (a compacted start revision, a bad range) is then
// cancelled in a second reply, with compact_revision for compaction, which
// clientv3 reports as ErrCompacted so the client can resume from it.
func (st *watchStream) create(r *pb.WatchCreateRequest) error {
	if err := checkWatch(st.stream.Context(), st.s.auth, r); err != nil {
		// etcd's answer: created and canceled at once, with no watch ID.
		return st.send(&pb.WatchResponse{Header: st.s.hdr.fill(nil), WatchId: -1, Created: true, Canceled: true, CancelReason: watchDenied(err)})
	}
	st.sendMu.Lock()
	defer st.sendMu.Unlock()
	st.mu.Lock()
	id := r.WatchId
	if id == 0 {
		for st.watchers[st.nextID] != nil {
			st.nextID++
		}
		id = st.nextID
		st.nextID++
	} else if st.watchers[id] != nil {
		st.mu.Unlock()
		return st.sendLocked(&pb.WatchResponse{Header: st.s.hdr.fill(nil), WatchId: id, Created: true, Canceled: true,
			CancelReason: "etcdserver: duplicate watch ID"})
	}
	var opts []mvcc.WatchOption
	if r.PrevKv {
		opts = append(opts, mvcc.WithPrevKV())
	}
	w, err := st.mws.Watch(r.Key, r.RangeEnd, r.StartRevision, opts...)
	if err == nil {
		sw := &streamWatcher{id: id, w: w, fragment: r.Fragment}
		for _, f := range r.Filters {
			switch f {
			case pb.WatchCreateRequest_NOPUT:
				sw.noPut = true
			case pb.WatchCreateRequest_NODELETE:
				sw.noDelete = true
			}
		}
		st.watchers[id] = sw
		st.byMVCC[w] = sw
		if r.ProgressNotify {
			st.notifying[sw] = struct{}{}
		}
	}
	st.mu.Unlock()
	// sendLoop sends the watcher's events only after this: it needs sendMu.
	if err := st.sendLocked(&pb.WatchResponse{Header: st.s.hdr.fill(nil), WatchId: id, Created: true}); err != nil || w != nil {
		return err
	}
	return st.sendLocked(st.canceled(id, err))
}

// canceled is the reply that ends watcher id because of err.
func (st *watchStream) canceled(id int64, err error) *pb.WatchResponse {
	r := &pb.WatchResponse{Header: st.s.hdr.fill(nil), WatchId: id, Canceled: true}
	if errors.Is(err, mvcc.ErrCompacted) {
		r.CompactRevision = st.s.store.CompactRev()
		r.CancelReason = rpctypes.ErrCompacted.Error()
	} else if err != nil {
		r.CancelReason = toGRPC(err).Error()
	}
	return r
}

// progressPollEvery is how often a progress request is tried again while
// some watcher of the stream is still catching up.
const progressPollEvery = 10 * time.Millisecond

// sendLoop sends everything the stream's watchers have, then waits for
// more: events (mvcc's Ready), a client's progress request, the tick of
// server.watch_progress_notify_interval_ms. Progress is worked out here,
// between two batches, after every batch taken from the store went out,
// so a notification never overtakes an event it covers.
func (st *watchStream) sendLoop() {
	tick := time.NewTicker(st.s.progressEvery)
	defer tick.Stop()
	progressPending := false
	var poll <-chan time.Time
	for {
		for {
			b, ok := st.mws.Next()
			if !ok {
				break
			}
			if err := st.deliver(b); err != nil {
				st.cancel()
				return
			}
		}
		if progressPending && poll == nil {
			if st.progressAll() {
				progressPending = false
			} else {
				poll = time.After(progressPollEvery)
			}
		}
		select {
		case <-st.mws.Ready():
		case <-st.progressReq:
			progressPending = true
		case <-poll:
			poll = nil
		case <-tick.C:
			st.progressTick()
		case <-st.ctx.Done():
			return
		}
	}
}

// deliver sends one batch of the store: a watcher's events, with its
// filters applied, or the reply that ends it.
func (st *watchStream) deliver(b mvcc.WatchBatch) error {
	st.mu.Lock()
	sw := st.byMVCC[b.Watcher]
	st.mu.Unlock()
	if sw == nil {
		return nil // cancelled
	}
	if b.Err != nil {
		st.finish(sw, b.Err)
		return nil
	}
	sc := &st.scratch
	defer sc.release()
	sc.fill(len(b.Events))
	var last int64
	for i := range b.Events {
		e := &b.Events[i]
		last = e.KV.ModRevision
		if e.Type == mvcc.EventPut && sw.noPut || e.Type == mvcc.EventDelete && sw.noDelete {
			continue
		}
		pe, kv := &sc.evs[i], &sc.kvs[2*i]
		setPBKV(kv, &e.KV)
		pe.Kv = kv
		if e.Type == mvcc.EventDelete {
			pe.Type = mvccpb.DELETE
		}
		if e.PrevKV != nil {
			prev := &sc.kvs[2*i+1]
			setPBKV(prev, e.PrevKV)
			pe.PrevKv = prev
		}
		sc.events = append(sc.events, pe)
	}
	if len(sc.events) == 0 {
		return nil
	}
	sc.hdr.Revision = last
	sc.resp.Header, sc.resp.WatchId, sc.resp.Events = st.s.hdr.fill(&sc.hdr), sw.id, sc.events
	st.sendMu.Lock()
	defer st.sendMu.Unlock()
	st.mu.Lock()
	live := !sw.cancelled
	st.mu.Unlock()
	if !live {
		return nil // the client cancelled it meanwhile: nothing after its canceled reply
	}
	sw.sent = true
	return st.sendEventsLocked(&sc.resp, sw.fragment)
}

// progressTick sends, for each watcher created with progress_notify that
// sent no event since the last tick, an empty response whose header
// revision is the one the watcher has delivered every event up to, as
// etcd does (clientv3's IsProgressNotify). A watcher still catching up
// is skipped, as etcd skips it.
func (st *watchStream) progressTick() {
	st.mu.Lock()
	ws := make([]*streamWatcher, 0, len(st.notifying))
	for sw := range st.notifying {
		ws = append(ws, sw)
	}
	st.mu.Unlock()
	for _, sw := range ws {
		if sw.sent {
			sw.sent = false
			continue
		}
		rev, ok := sw.w.Progress()
		if !ok {
			continue
		}
		st.sendMu.Lock()
		st.mu.Lock()
		live := !sw.cancelled
		st.mu.Unlock()
		if live {
			_ = st.sendLocked(&pb.WatchResponse{Header: st.s.hdr.fill(&pb.ResponseHeader{Revision: rev}), WatchId: sw.id})
		}
		st.sendMu.Unlock()
	}
}

// progressAll answers a progress request as etcd does, if every watcher
// of the stream has sent all events up to a revision: a response with
// watch ID -1 and that revision (the store's, with no watchers), which
// tells the client it has seen every change to its ranges up to there
// (Kubernetes' consistent reads from its watch cache rely on it). It
// returns false, sending nothing, while one is still catching up.
func (st *watchStream) progressAll() bool {
	st.mu.Lock()
	ws := make([]*streamWatcher, 0, len(st.watchers))
	for _, sw := range st.watchers {
		ws = append(ws, sw)
	}
	st.mu.Unlock()
	rev := st.s.store.Rev()
	for _, sw := range ws {
		r, ok := sw.w.Progress()
		if !ok {
			return false
		}
		rev = min(rev, r)
	}
	_ = st.send(&pb.WatchResponse{Header: st.s.hdr.fill(&pb.ResponseHeader{Revision: rev}), WatchId: -1})
	return true
}

// sendEventsLocked sends a response with events; with fragment, one larger
// than server.max_request_bytes goes out as etcd's fragments: responses
// of whole events, each under the limit unless a single event is larger,
// all but the last marked Fragment, which clientv3 joins again.
func (st *watchStream) sendEventsLocked(r *pb.WatchResponse, fragment bool) error {
	limit := st.s.maxRequestBytes
	if !fragment || len(r.Events) < 2 || proto.Size(r) < limit {
		return st.sendLocked(r)
	}
	events := r.Events
	for len(events) > 0 {
		part := &pb.WatchResponse{Header: r.Header, WatchId: r.WatchId, Fragment: true}
		n := 1 // at least one event, whatever its size
		for ; n < len(events); n++ {
			part.Events = events[:n+1]
			if proto.Size(part) >= limit {
				break
			}
		}
		part.Events, events = events[:n], events[n:]
		part.Fragment = len(events) > 0
		if err := st.sendLocked(part); err != nil {
			return err
		}
	}
	return nil
}

// finish removes a watcher the store stopped and, unless the stream is
// ending or the store closing, tells the client why.
func (st *watchStream) finish(sw *streamWatcher, err error) {
	st.sendMu.Lock()
	defer st.sendMu.Unlock()
	st.mu.Lock()
	st.forgetLocked(sw)
	cancelled := sw.cancelled
	st.mu.Unlock()
	if cancelled || st.ctx.Err() != nil || errors.Is(err, mvcc.ErrClosed) {
		return
	}
	_ = st.sendLocked(st.canceled(sw.id, err))
}

// forgetLocked removes sw from the stream; the caller holds mu.
func (st *watchStream) forgetLocked(sw *streamWatcher) {
	if st.watchers[sw.id] == sw {
		delete(st.watchers, sw.id)
	}
	delete(st.byMVCC, sw.w)
	delete(st.notifying, sw)
}

// cancelWatch stops watcher id at the client's request and confirms it.
func (st *watchStream) cancelWatch(id int64) error {
	st.sendMu.Lock()
	defer st.sendMu.Unlock()
	st.mu.Lock()
	sw := st.watchers[id]
	if sw != nil {
		sw.cancelled = true
		st.forgetLocked(sw)
	}
	st.mu.Unlock()
	if sw == nil {
		return nil
	}
	sw.w.Close()
	return st.sendLocked(&pb.WatchResponse{Header: st.s.hdr.fill(nil), WatchId: id, Canceled: true})
}
