package floorserver

import (
	"bytes"
	"context"
	"errors"
	"io"
	"sync"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// This file serves what Kubernetes' apiserver sends beyond single keys:
// ranges, txns, compaction, leases and watches, on the same store.

// rangeLocked answers r from the latest values: the floor keeps no
// history, so a read at a past revision (a paginated list pinned to its
// first page's revision) sees the latest values, as it would with no
// writes in between. Reads below the compacted revision or past the
// current one are refused as etcd refuses them.
func (s *store) rangeLocked(r *pb.RangeRequest) (*pb.RangeResponse, error) {
	if r.SortOrder != pb.RangeRequest_NONE || r.MinModRevision != 0 || r.MaxModRevision != 0 ||
		r.MinCreateRevision != 0 || r.MaxCreateRevision != 0 {
		return nil, errUnsupported("sorted ranges or ranges filtered by revision")
	}
	if r.Revision > 0 && r.Revision < s.compacted {
		return nil, rpctypes.ErrGRPCCompacted
	}
	if r.Revision > s.rev {
		return nil, rpctypes.ErrGRPCFutureRev
	}
	resp := &pb.RangeResponse{Header: header(s.rev)}
	add := func(kv *mvccpb.KeyValue) bool {
		resp.Count++
		if r.CountOnly || (r.Limit > 0 && int64(len(resp.Kvs)) >= r.Limit) {
			resp.More = r.Limit > 0 && resp.Count > r.Limit
			return true
		}
		if r.KeysOnly {
			kv = &mvccpb.KeyValue{Key: kv.Key, CreateRevision: kv.CreateRevision, ModRevision: kv.ModRevision, Version: kv.Version, Lease: kv.Lease}
		}
		resp.Kvs = append(resp.Kvs, kv)
		return true
	}
	switch {
	case len(r.RangeEnd) == 0:
		if kv := s.kvs[string(r.Key)]; kv != nil {
			add(kv)
		}
	case bytes.Equal(r.RangeEnd, []byte{0}):
		s.keys.AscendGreaterOrEqual(string(r.Key), func(k string) bool { return add(s.kvs[k]) })
	default:
		s.keys.AscendRange(string(r.Key), string(r.RangeEnd), func(k string) bool { return add(s.kvs[k]) })
	}
	return resp, nil
}

// checkPutLocked refuses a put as etcd would (no key, a lease never
// granted) or as the floor must (ignore_value, ignore_lease).
func (s *store) checkPutLocked(r *pb.PutRequest) error {
	if len(r.Key) == 0 {
		return rpctypes.ErrGRPCEmptyKey
	}
	if r.IgnoreValue || r.IgnoreLease {
		return errUnsupported("ignore_value or ignore_lease")
	}
	if r.Lease != 0 && !s.leases[r.Lease] {
		return rpctypes.ErrGRPCLeaseNotFound
	}
	return nil
}

// compareLocked is etcd's compare on one key's latest version; an absent
// key compares as zero revisions, version and lease, and fails a compare
// on its value, as in etcd.
func (s *store) compareLocked(c *pb.Compare) (bool, error) {
	if len(c.RangeEnd) > 0 {
		return false, errUnsupported("compares over a range of keys")
	}
	kv := s.kvs[string(c.Key)]
	if kv == nil {
		if c.Target == pb.Compare_VALUE {
			return false, nil
		}
		kv = &mvccpb.KeyValue{}
	}
	var cmp int
	switch c.Target {
	case pb.Compare_VERSION:
		cmp = compareInt(kv.Version, c.GetVersion())
	case pb.Compare_CREATE:
		cmp = compareInt(kv.CreateRevision, c.GetCreateRevision())
	case pb.Compare_MOD:
		cmp = compareInt(kv.ModRevision, c.GetModRevision())
	case pb.Compare_LEASE:
		cmp = compareInt(kv.Lease, c.GetLease())
	case pb.Compare_VALUE:
		cmp = bytes.Compare(kv.Value, c.GetValue())
	default:
		return false, errUnsupported("compare target " + c.Target.String())
	}
	switch c.Result {
	case pb.Compare_EQUAL:
		return cmp == 0, nil
	case pb.Compare_NOT_EQUAL:
		return cmp != 0, nil
	case pb.Compare_GREATER:
		return cmp > 0, nil
	case pb.Compare_LESS:
		return cmp < 0, nil
	}
	return false, errUnsupported("compare result " + c.Result.String())
}

func compareInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// Txn applies r atomically under the store's mutex: the compares, then
// the puts and ranges of the branch they choose, every put at one new
// revision, and the watchers told once, as etcd tells them of a txn.
func (k *kvServer) Txn(_ context.Context, r *pb.TxnRequest) (*pb.TxnResponse, error) {
	st := k.st
	st.mu.Lock()
	defer st.mu.Unlock()
	ok := true
	for _, c := range r.Compare {
		match, err := st.compareLocked(c)
		if err != nil {
			return nil, err
		}
		ok = ok && match
	}
	ops := r.Failure
	if ok {
		ops = r.Success
	}
	writes := false
	for _, op := range ops {
		switch {
		case op.GetRequestPut() != nil:
			if err := st.checkPutLocked(op.GetRequestPut()); err != nil {
				return nil, err
			}
			writes = true
		case op.GetRequestRange() == nil:
			return nil, errUnsupported("deletes or nested txns in a txn")
		}
	}
	if writes {
		st.rev++
	}
	resp := &pb.TxnResponse{Succeeded: ok, Responses: make([]*pb.ResponseOp, 0, len(ops))}
	var events []*mvccpb.Event
	for _, op := range ops {
		if p := op.GetRequestPut(); p != nil {
			ev := st.putLocked(string(p.Key), p.Value, p.Lease)
			events = append(events, ev)
			pr := &pb.PutResponse{Header: header(st.rev)}
			if p.PrevKv {
				pr.PrevKv = ev.PrevKv
			}
			resp.Responses = append(resp.Responses, &pb.ResponseOp{Response: &pb.ResponseOp_ResponsePut{ResponsePut: pr}})
			continue
		}
		rr, err := st.rangeLocked(op.GetRequestRange())
		if err != nil {
			return nil, err
		}
		resp.Responses = append(resp.Responses, &pb.ResponseOp{Response: &pb.ResponseOp_ResponseRange{ResponseRange: rr}})
	}
	st.notifyLocked(events)
	resp.Header = header(st.rev)
	return resp, nil
}

// Compact records the compacted revision: the floor has no history to
// drop, but refuses reads below it as etcd does.
func (k *kvServer) Compact(_ context.Context, r *pb.CompactionRequest) (*pb.CompactionResponse, error) {
	st := k.st
	st.mu.Lock()
	defer st.mu.Unlock()
	if r.Revision <= st.compacted {
		return nil, rpctypes.ErrGRPCCompacted
	}
	if r.Revision > st.rev {
		return nil, rpctypes.ErrGRPCFutureRev
	}
	st.compacted = r.Revision
	return &pb.CompactionResponse{Header: header(st.rev)}, nil
}

// leaseServer grants leases, which never expire: the apiserver's events
// are put under a lease of an hour.
type leaseServer struct {
	pb.UnimplementedLeaseServer
	st *store
}

func (l *leaseServer) LeaseGrant(_ context.Context, r *pb.LeaseGrantRequest) (*pb.LeaseGrantResponse, error) {
	st := l.st
	st.mu.Lock()
	defer st.mu.Unlock()
	id := r.ID
	if id == 0 {
		st.nextLease++
		id = st.nextLease
	}
	if st.leases[id] {
		return nil, rpctypes.ErrGRPCLeaseExist
	}
	st.leases[id] = true
	return &pb.LeaseGrantResponse{Header: header(st.rev), ID: id, TTL: r.TTL}, nil
}

// watcher is one watch of a stream: a key or range, from a revision.
type watcher struct {
	id       int64
	key, end []byte
	from     int64
	prevKV   bool
	out      *watchOut
}

func (w *watcher) matches(key []byte) bool {
	switch {
	case len(w.end) == 0:
		return bytes.Equal(key, w.key)
	case bytes.Equal(w.end, []byte{0}):
		return bytes.Compare(key, w.key) >= 0
	}
	return bytes.Compare(key, w.key) >= 0 && bytes.Compare(key, w.end) < 0
}

// watchOut is a stream's queue of responses, filled under the store's
// mutex (so in revision order) and drained by the stream's sender.
type watchOut struct {
	mu      sync.Mutex
	pending []*pb.WatchResponse
	wake    chan struct{}
}

func (o *watchOut) push(r *pb.WatchResponse) {
	o.mu.Lock()
	o.pending = append(o.pending, r)
	o.mu.Unlock()
	select {
	case o.wake <- struct{}{}:
	default:
	}
}

func (o *watchOut) take() []*pb.WatchResponse {
	o.mu.Lock()
	defer o.mu.Unlock()
	p := o.pending
	o.pending = nil
	return p
}

// watcherSet is the watchers, found by key as etcd's watchable store
// finds them: a map of the watchers of one key, and the range watchers
// tested one by one (etcd keeps those in an interval tree). A put then
// costs the floor a map lookup, not a test of every watcher, so that
// `strata bench watch`'s 10,000 key watchers measure the events' transport.
type watcherSet struct {
	byKey  map[string]map[*watcher]bool
	ranges map[*watcher]bool
}

func newWatcherSet() watcherSet {
	return watcherSet{byKey: map[string]map[*watcher]bool{}, ranges: map[*watcher]bool{}}
}

func (ws watcherSet) add(w *watcher) {
	if len(w.end) > 0 {
		ws.ranges[w] = true
		return
	}
	k := string(w.key)
	if ws.byKey[k] == nil {
		ws.byKey[k] = map[*watcher]bool{}
	}
	ws.byKey[k][w] = true
}

func (ws watcherSet) remove(w *watcher) {
	if len(w.end) > 0 {
		delete(ws.ranges, w)
		return
	}
	k := string(w.key)
	delete(ws.byKey[k], w)
	if len(ws.byKey[k]) == 0 {
		delete(ws.byKey, k)
	}
}

// of calls f for each watcher of key.
func (ws watcherSet) of(key []byte, f func(*watcher)) {
	for w := range ws.byKey[string(key)] {
		f(w)
	}
	for w := range ws.ranges {
		if w.matches(key) {
			f(w)
		}
	}
}

// notifyLocked sends the events of one revision to every watcher they
// match: one response per watcher, with or without previous values.
func (s *store) notifyLocked(events []*mvccpb.Event) {
	var order []*watcher
	got := map[*watcher][]*mvccpb.Event{}
	for _, ev := range events {
		s.watchers.of(ev.Kv.Key, func(w *watcher) {
			if s.rev < w.from {
				return
			}
			e := ev
			if !w.prevKV && ev.PrevKv != nil {
				e = &mvccpb.Event{Type: ev.Type, Kv: ev.Kv}
			}
			if _, ok := got[w]; !ok {
				order = append(order, w)
			}
			got[w] = append(got[w], e)
		})
	}
	for _, w := range order {
		w.out.push(&pb.WatchResponse{Header: header(s.rev), WatchId: w.id, Events: got[w]})
	}
}

// watchServer is etcd's Watch service: watches from the next revision
// on (the floor keeps no history to replay), cancels, and progress
// requests answered at the current revision once every event up to it is
// queued. It sends no periodic progress notifications (etcd's come every
// 10 minutes).
type watchServer struct {
	pb.UnimplementedWatchServer
	st *store
}

func (ws *watchServer) Watch(stream pb.Watch_WatchServer) error {
	out := &watchOut{wake: make(chan struct{}, 1)}
	mine := map[int64]*watcher{}
	defer func() {
		ws.st.mu.Lock()
		for _, w := range mine {
			ws.st.watchers.remove(w)
		}
		ws.st.mu.Unlock()
	}()
	errc := make(chan error, 1)
	go func() { errc <- ws.receive(stream, out, mine) }()
	for {
		select {
		case err := <-errc:
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		case <-stream.Context().Done():
			return stream.Context().Err()
		case <-out.wake:
		}
		for _, r := range out.take() {
			if err := stream.Send(r); err != nil {
				return err
			}
		}
	}
}

// receive handles the stream's requests until it ends. mine is the
// stream's watchers by id, changed only under the store's mutex.
func (ws *watchServer) receive(stream pb.Watch_WatchServer, out *watchOut, mine map[int64]*watcher) error {
	st := ws.st
	var nextID int64
	for {
		req, err := stream.Recv()
		if err != nil {
			return err
		}
		st.mu.Lock()
		switch {
		case req.GetCreateRequest() != nil:
			c := req.GetCreateRequest()
			resp := &pb.WatchResponse{Header: header(st.rev), WatchId: nextID, Created: true}
			switch {
			case len(c.Filters) > 0 || c.Fragment || c.WatchId != 0:
				resp.Canceled, resp.CancelReason = true, "the transport floor does not serve watch filters, fragments or chosen watch ids"
			case c.StartRevision != 0 && c.StartRevision <= st.rev:
				resp.Canceled, resp.CancelReason = true, "the transport floor keeps no history: a watch starts at the next revision or later"
			default:
				w := &watcher{id: nextID, key: c.Key, end: c.RangeEnd, from: c.StartRevision, prevKV: c.PrevKv, out: out}
				mine[w.id] = w
				st.watchers.add(w)
			}
			nextID++
			out.push(resp)
		case req.GetCancelRequest() != nil:
			id := req.GetCancelRequest().WatchId
			if w := mine[id]; w != nil {
				delete(mine, id)
				st.watchers.remove(w)
				out.push(&pb.WatchResponse{Header: header(st.rev), WatchId: id, Canceled: true})
			}
		case req.GetProgressRequest() != nil:
			out.push(&pb.WatchResponse{Header: header(st.rev), WatchId: -1})
		default:
			st.mu.Unlock()
			return status.Error(codes.InvalidArgument, "the transport floor got an empty watch request")
		}
		st.mu.Unlock()
	}
}
