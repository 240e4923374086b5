package server

import (
	"context"
	"errors"
	"io"
	"sync"
	"sync/atomic"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	"github.com/stratadb/strata/mvcc"
)

// watchServer is etcd's Watch service: each stream carries any number of
// watchers, created and cancelled by the client's requests, each fed by
// an mvcc.Watcher.
type watchServer struct {
	pb.UnimplementedWatchServer
	s *Server
}

// watchStream is one client stream and its watchers.
type watchStream struct {
	s      *Server
	stream pb.Watch_WatchServer
	ctx    context.Context

	// sendMu serializes Send, which gRPC allows on one goroutine at a time.
	sendMu sync.Mutex

	mu       sync.Mutex
	watchers map[int64]*streamWatcher
	nextID   int64
	wg       sync.WaitGroup

	// progressPending is set while a progress request waits for the
	// stream's watchers to catch up; later requests join it.
	progressPending atomic.Bool
}

// streamWatcher is one watcher of a stream.
type streamWatcher struct {
	w        *mvcc.Watcher
	noPut    bool
	noDelete bool
	// progress ticks every server.watch_progress_notify_interval_ms for
	// a watcher created with progress_notify, nil otherwise.
	progress *time.Ticker
	// fragment: the client asked for responses over
	// server.max_request_bytes to be split (WatchCreateRequest.fragment).
	fragment bool
	// probe asks the watcher's deliver goroutine, between two batches,
	// for the revision it has sent every event up to (see progressAll).
	probe chan chan progressReply
	// done is closed when the deliver goroutine has ended.
	done chan struct{}
	// cancelled is set when the client cancelled it (its canceled reply
	// is already sent).
	cancelled bool
}

func (ws *watchServer) Watch(stream pb.Watch_WatchServer) error {
	// clientv3.WithRequireLeader: a member without a leader refuses the
	// stream, as etcd does, so the client can try another member.
	if md, ok := metadata.FromIncomingContext(stream.Context()); ok && len(md.Get(rpctypes.MetadataRequireLeaderKey)) > 0 &&
		md.Get(rpctypes.MetadataRequireLeaderKey)[0] == rpctypes.MetadataHasLeader && ws.s.node.Status().Leader == 0 {
		return rpctypes.ErrGRPCNoLeader
	}
	ctx, cancel := context.WithCancel(stream.Context())
	stop := context.AfterFunc(ws.s.streams, cancel)
	defer stop()
	st := &watchStream{s: ws.s, stream: stream, ctx: ctx, watchers: map[int64]*streamWatcher{}}
	defer func() {
		cancel() // unblocks senders and ends the store's watchers
		st.closeAll()
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
		if ws.s.streams.Err() != nil {
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
			if err := st.cancel(r.CancelRequest.WatchId); err != nil {
				return err
			}
		case *pb.WatchRequest_ProgressRequest:
			if st.progressPending.CompareAndSwap(false, true) {
				st.wg.Add(1)
				go st.progressAll()
			}
		}
	}
}

func (st *watchStream) send(r *pb.WatchResponse) error {
	st.sendMu.Lock()
	defer st.sendMu.Unlock()
	return st.stream.Send(r)
}

// create starts a watcher. etcd always answers created; a watcher that
// cannot start (a compacted start revision, a bad range) is then
// cancelled in a second reply, with compact_revision for compaction, which
// clientv3 reports as ErrCompacted so the client can resume from it.
func (st *watchStream) create(r *pb.WatchCreateRequest) error {
	if err := st.s.checkWatch(st.stream.Context(), r); err != nil {
		// etcd's answer: created and canceled at once, with no watch ID.
		return st.send(&pb.WatchResponse{Header: st.s.fill(nil), WatchId: -1, Created: true, Canceled: true, CancelReason: watchDenied(err)})
	}
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
		return st.send(&pb.WatchResponse{Header: st.s.fill(nil), WatchId: id, Created: true, Canceled: true,
			CancelReason: "etcdserver: duplicate watch ID"})
	}
	var opts []mvcc.WatchOption
	if r.PrevKv {
		opts = append(opts, mvcc.WithPrevKV())
	}
	w, err := st.s.store.Watch(st.ctx, r.Key, r.RangeEnd, r.StartRevision, opts...)
	sw := &streamWatcher{w: w, fragment: r.Fragment, probe: make(chan chan progressReply, 1), done: make(chan struct{})}
	if err == nil && r.ProgressNotify {
		sw.progress = time.NewTicker(time.Duration(st.s.cfg.Server.WatchProgressNotifyIntervalMS) * time.Millisecond)
	}
	for _, f := range r.Filters {
		switch f {
		case pb.WatchCreateRequest_NOPUT:
			sw.noPut = true
		case pb.WatchCreateRequest_NODELETE:
			sw.noDelete = true
		}
	}
	if err == nil {
		st.watchers[id] = sw
		// The created reply goes out before any event of the watcher: the
		// sender loop starts after it.
		st.sendMu.Lock()
		st.mu.Unlock()
		err := st.stream.Send(&pb.WatchResponse{Header: st.s.fill(nil), WatchId: id, Created: true})
		st.sendMu.Unlock()
		if err != nil {
			return err
		}
		st.wg.Add(1)
		go st.deliver(id, sw)
		return nil
	}
	st.mu.Unlock()
	if err := st.send(&pb.WatchResponse{Header: st.s.fill(nil), WatchId: id, Created: true}); err != nil {
		return err
	}
	return st.send(st.canceled(id, err))
}

// canceled is the reply that ends watcher id because of err.
func (st *watchStream) canceled(id int64, err error) *pb.WatchResponse {
	r := &pb.WatchResponse{Header: st.s.fill(nil), WatchId: id, Canceled: true}
	if errors.Is(err, mvcc.ErrCompacted) {
		r.CompactRevision = st.s.store.CompactRev()
		r.CancelReason = rpctypes.ErrCompacted.Error()
	} else if err != nil {
		r.CancelReason = toGRPC(err).Error()
	}
	return r
}

// deliver sends the watcher's events until it stops and, for a watcher
// created with progress_notify, a progress notification at each tick of
// its interval in which it sent no event: an empty response whose header
// revision is the one the watcher has delivered every event up to, as
// etcd sends (clientv3's IsProgressNotify). The notification goes out
// from this goroutine, between two batches, so it can never overtake an
// event it covers.
func (st *watchStream) deliver(id int64, sw *streamWatcher) {
	defer st.wg.Done()
	defer close(sw.done)
	var tick <-chan time.Time
	if sw.progress != nil {
		tick = sw.progress.C
		defer sw.progress.Stop()
	}
	sent := false // an event went out since the last tick
	for {
		var evs []mvcc.Event
		select {
		case batch, ok := <-sw.w.C:
			if !ok {
				st.finish(id, sw)
				return
			}
			evs = batch
		case reply := <-sw.probe:
			rev, ok := sw.w.Progress()
			reply <- progressReply{rev: rev, ok: ok}
			continue
		case <-tick:
			if sent {
				sent = false
				continue
			}
			rev, ok := sw.w.Progress()
			if !ok {
				continue // still catching up: etcd skips it too
			}
			if err := st.send(&pb.WatchResponse{Header: st.s.fill(&pb.ResponseHeader{Revision: rev}), WatchId: id}); err != nil {
				sw.w.Close()
				return
			}
			continue
		}
		out := make([]*mvccpb.Event, 0, len(evs))
		var last int64
		for i := range evs {
			e := &evs[i]
			last = e.KV.ModRevision
			if e.Type == mvcc.EventPut && sw.noPut || e.Type == mvcc.EventDelete && sw.noDelete {
				continue
			}
			pe := &mvccpb.Event{Kv: toPBKV(&e.KV)}
			if e.Type == mvcc.EventDelete {
				pe.Type = mvccpb.DELETE
			}
			if e.PrevKV != nil {
				pe.PrevKv = toPBKV(e.PrevKV)
			}
			out = append(out, pe)
		}
		if len(out) == 0 {
			continue
		}
		h := st.s.fill(&pb.ResponseHeader{Revision: last})
		if err := st.sendEvents(&pb.WatchResponse{Header: h, WatchId: id, Events: out}, sw.fragment); err != nil {
			sw.w.Close()
			return
		}
		sent = true
	}
}

// progressReply is a watcher's answer to a probe: Watcher.Progress, asked
// by its deliver goroutine, so every event up to rev has been sent.
type progressReply struct {
	rev int64
	ok  bool
}

// progressPollEvery is how often a progress request asks again while
// some watcher of the stream is still catching up.
const progressPollEvery = 10 * time.Millisecond

// progressAll answers a progress request as etcd does: once every watcher
// of the stream has sent all events up to a revision, a response with
// watch ID -1 and that revision (the store's, with no watchers), which
// tells the client it has seen every change to its ranges up to there
// (Kubernetes' consistent reads from its watch cache rely on it). Each
// watcher is asked through its own deliver goroutine, between two
// batches, so the answer never overtakes an event it covers; while one
// is still catching up, it asks again.
func (st *watchStream) progressAll() {
	defer st.wg.Done()
	defer st.progressPending.Store(false)
	for {
		st.mu.Lock()
		ws := make([]*streamWatcher, 0, len(st.watchers))
		for _, sw := range st.watchers {
			ws = append(ws, sw)
		}
		st.mu.Unlock()
		rev, all := st.s.store.Rev(), true
		for _, sw := range ws {
			reply := make(chan progressReply, 1)
			r := progressReply{ok: true, rev: rev} // a stopped watcher has nothing more to send
			select {
			case sw.probe <- reply:
				select {
				case r = <-reply:
				case <-sw.done:
				case <-st.ctx.Done():
					return
				}
			case <-sw.done:
			case <-st.ctx.Done():
				return
			}
			if !r.ok {
				all = false
				break
			}
			rev = min(rev, r.rev)
		}
		if all {
			_ = st.send(&pb.WatchResponse{Header: st.s.fill(&pb.ResponseHeader{Revision: rev}), WatchId: -1})
			return
		}
		select {
		case <-time.After(progressPollEvery):
		case <-st.ctx.Done():
			return
		}
	}
}

// sendEvents sends a response with events; with fragment, one larger
// than server.max_request_bytes goes out as etcd's fragments: responses
// of whole events, each under the limit unless a single event is larger,
// all but the last marked Fragment, which clientv3 joins again.
func (st *watchStream) sendEvents(r *pb.WatchResponse, fragment bool) error {
	limit := int(st.s.cfg.Server.MaxRequestBytes)
	if !fragment || len(r.Events) < 2 || proto.Size(r) < limit {
		return st.send(r)
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
		if err := st.send(part); err != nil {
			return err
		}
	}
	return nil
}

// finish removes a watcher that stopped and, unless the client cancelled
// it or the stream is ending, tells the client why.
func (st *watchStream) finish(id int64, sw *streamWatcher) {
	err := sw.w.Err()
	st.mu.Lock()
	cancelled := sw.cancelled
	if st.watchers[id] == sw {
		delete(st.watchers, id)
	}
	st.mu.Unlock()
	if cancelled || st.ctx.Err() != nil || errors.Is(err, mvcc.ErrClosed) {
		return
	}
	_ = st.send(st.canceled(id, err))
}

// cancel stops watcher id at the client's request and confirms it.
func (st *watchStream) cancel(id int64) error {
	st.mu.Lock()
	sw := st.watchers[id]
	if sw != nil {
		sw.cancelled = true
		delete(st.watchers, id)
	}
	st.mu.Unlock()
	if sw == nil {
		return nil
	}
	sw.w.Close()
	return st.send(&pb.WatchResponse{Header: st.s.fill(nil), WatchId: id, Canceled: true})
}

func (st *watchStream) closeAll() {
	st.mu.Lock()
	for _, sw := range st.watchers {
		sw.w.Close()
	}
	st.mu.Unlock()
	st.wg.Wait()
}
