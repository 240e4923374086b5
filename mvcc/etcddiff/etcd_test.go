package etcddiff

import (
	"context"
	"errors"
	"path/filepath"
	"sort"
	"sync"
	"testing"

	"github.com/coreos/go-semver/semver"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	etcderrors "go.etcd.io/etcd/server/v3/etcdserver/errors"
	"go.etcd.io/etcd/server/v3/lease"
	"go.etcd.io/etcd/server/v3/storage/backend"
	emvcc "go.etcd.io/etcd/server/v3/storage/mvcc"
	"go.uber.org/zap"

	"github.com/stratadb/strata/mvcc"
)

// etcdSide is etcd's storage stack as etcdserver assembles it: a bbolt
// backend, the lessor, the watchable mvcc store, one watch stream.
type etcdSide struct {
	lg     *zap.Logger
	b      backend.Backend
	le     lease.Lessor
	kv     emvcc.WatchableKV
	ws     emvcc.WatchStream
	events *etcdEvents
	done   chan struct{}
}

// fakeCluster reports the cluster version the lessor asks for.
type fakeCluster struct{}

func (fakeCluster) Version() *semver.Version { return semver.New("3.7.0") }

func newEtcdSide(t *testing.T) *etcdSide {
	lg := zap.NewNop()
	bcfg := backend.DefaultBackendConfig(lg)
	bcfg.Path = filepath.Join(t.TempDir(), "etcd.db")
	e := &etcdSide{lg: lg, b: backend.New(bcfg)}
	e.open()
	return e
}

// open builds the lessor and store on the backend, restoring what it holds.
func (e *etcdSide) open() {
	e.le = lease.NewLessor(e.lg, e.b, fakeCluster{}, lease.LessorConfig{MinLeaseTTL: 1})
	e.kv = emvcc.New(e.lg, e.b, e.le, emvcc.StoreConfig{})
	e.ws = e.kv.NewWatchStream()
	e.events = &etcdEvents{byID: map[emvcc.WatchID]*etcdWatch{}}
	e.done = make(chan struct{})
	go func(ws emvcc.WatchStream, ev *etcdEvents, done chan struct{}) {
		defer close(done)
		for resp := range ws.Chan() {
			ev.add(resp)
		}
	}(e.ws, e.events, e.done)
}

// close stops the store and lessor (the backend stays, for a reopen).
func (e *etcdSide) close() {
	e.ws.Close()
	<-e.done
	_ = e.kv.Close()
	e.le.Stop()
}

// etcdEvents collects the watch stream's responses per watch.
type etcdEvents struct {
	mu   sync.Mutex
	byID map[emvcc.WatchID]*etcdWatch
}

type etcdWatch struct {
	events     []mvcc.Event
	compactRev int64
	progress   int
}

func (ev *etcdEvents) get(id emvcc.WatchID) *etcdWatch {
	w := ev.byID[id]
	if w == nil {
		w = &etcdWatch{}
		ev.byID[id] = w
	}
	return w
}

func (ev *etcdEvents) add(resp emvcc.WatchResponse) {
	ev.mu.Lock()
	defer ev.mu.Unlock()
	w := ev.get(resp.WatchID)
	switch {
	case resp.CompactRevision != 0:
		w.compactRev = resp.CompactRevision
	case len(resp.Events) == 0:
		w.progress++
	}
	for _, e := range resp.Events {
		ev := mvcc.Event{Type: mvcc.EventPut, KV: fromKV(e.Kv)}
		if e.Type == mvccpb.DELETE {
			ev.Type = mvcc.EventDelete
		}
		w.events = append(w.events, ev)
	}
}

// snapshot returns a copy of a watch's state.
func (ev *etcdEvents) snapshot(id emvcc.WatchID) etcdWatch {
	ev.mu.Lock()
	defer ev.mu.Unlock()
	w := *ev.get(id)
	w.events = append([]mvcc.Event(nil), w.events...)
	return w
}

func fromKV(kv *mvccpb.KeyValue) mvcc.KeyValue {
	if kv == nil {
		return mvcc.KeyValue{}
	}
	out := mvcc.KeyValue{Key: kv.Key, Value: kv.Value, CreateRevision: kv.CreateRevision,
		ModRevision: kv.ModRevision, Version: kv.Version, Lease: kv.Lease}
	if len(out.Value) == 0 {
		out.Value = nil
	}
	return out
}

func fromKVs(kvs []*mvccpb.KeyValue) []mvcc.KeyValue {
	var out []mvcc.KeyValue
	for _, kv := range kvs {
		out = append(out, fromKV(kv))
	}
	return out
}

// errClass names an error by its meaning, the same for both stores.
func errClass(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, mvcc.ErrCompacted), errors.Is(err, emvcc.ErrCompacted):
		return "compacted"
	case errors.Is(err, mvcc.ErrFutureRev), errors.Is(err, emvcc.ErrFutureRev):
		return "future revision"
	case errors.Is(err, mvcc.ErrLeaseNotFound), errors.Is(err, lease.ErrLeaseNotFound):
		return "lease not found"
	case errors.Is(err, mvcc.ErrLeaseExists), errors.Is(err, lease.ErrLeaseExists):
		return "lease exists"
	case errors.Is(err, mvcc.ErrKeyNotFound), errors.Is(err, etcderrors.ErrKeyNotFound):
		return "key not found"
	case errors.Is(err, mvcc.ErrEmptyWatchRange), errors.Is(err, emvcc.ErrEmptyWatcherRange):
		return "empty watch range"
	}
	return "other: " + err.Error()
}

var bg = context.Background()

// The requests, in etcd's protobuf form.

func rangeRequest(op mvcc.Op) *pb.RangeRequest {
	return &pb.RangeRequest{Key: op.Key, RangeEnd: op.End, Revision: op.Options.Rev, Limit: op.Options.Limit,
		KeysOnly: op.Options.KeysOnly, CountOnly: op.Options.CountOnly}
}

func putRequest(op mvcc.Op) *pb.PutRequest {
	return &pb.PutRequest{Key: op.Key, Value: op.Value, Lease: op.Lease, PrevKv: op.PrevKV,
		IgnoreValue: op.IgnoreValue, IgnoreLease: op.IgnoreLease}
}

func deleteRequest(op mvcc.Op) *pb.DeleteRangeRequest {
	return &pb.DeleteRangeRequest{Key: op.Key, RangeEnd: op.End, PrevKv: op.PrevKV}
}

func requestOps(ops []mvcc.Op) []*pb.RequestOp {
	var out []*pb.RequestOp
	for _, op := range ops {
		switch op.Type {
		case mvcc.OpPut:
			out = append(out, &pb.RequestOp{Request: &pb.RequestOp_RequestPut{RequestPut: putRequest(op)}})
		case mvcc.OpDelete:
			out = append(out, &pb.RequestOp{Request: &pb.RequestOp_RequestDeleteRange{RequestDeleteRange: deleteRequest(op)}})
		case mvcc.OpRange:
			out = append(out, &pb.RequestOp{Request: &pb.RequestOp_RequestRange{RequestRange: rangeRequest(op)}})
		case mvcc.OpTxn:
			out = append(out, &pb.RequestOp{Request: &pb.RequestOp_RequestTxn{RequestTxn: txnRequest(*op.Txn)}})
		}
	}
	return out
}

var (
	compareResults = map[mvcc.CompareResult]pb.Compare_CompareResult{
		mvcc.Equal: pb.Compare_EQUAL, mvcc.NotEqual: pb.Compare_NOT_EQUAL, mvcc.Less: pb.Compare_LESS, mvcc.Greater: pb.Compare_GREATER,
	}
	compareTargets = map[mvcc.CompareTarget]pb.Compare_CompareTarget{
		mvcc.CompareValue: pb.Compare_VALUE, mvcc.CompareVersion: pb.Compare_VERSION, mvcc.CompareCreateRevision: pb.Compare_CREATE,
		mvcc.CompareModRevision: pb.Compare_MOD, mvcc.CompareLease: pb.Compare_LEASE,
	}
)

func txnRequest(req mvcc.TxnRequest) *pb.TxnRequest {
	out := &pb.TxnRequest{Success: requestOps(req.Success), Failure: requestOps(req.Failure)}
	for _, c := range req.Compare {
		pc := &pb.Compare{Key: c.Key, RangeEnd: c.End, Result: compareResults[c.Result], Target: compareTargets[c.Target]}
		switch c.Target {
		case mvcc.CompareValue:
			pc.TargetUnion = &pb.Compare_Value{Value: c.Value}
		case mvcc.CompareVersion:
			pc.TargetUnion = &pb.Compare_Version{Version: c.Rev}
		case mvcc.CompareCreateRevision:
			pc.TargetUnion = &pb.Compare_CreateRevision{CreateRevision: c.Rev}
		case mvcc.CompareModRevision:
			pc.TargetUnion = &pb.Compare_ModRevision{ModRevision: c.Rev}
		case mvcc.CompareLease:
			pc.TargetUnion = &pb.Compare_Lease{Lease: c.Rev}
		}
		out.Compare = append(out.Compare, pc)
	}
	return out
}

// etcdLeases lists etcd's leases as mvcc.Lease values.
func (e *etcdSide) leases() []mvcc.Lease {
	var out []mvcc.Lease
	for _, l := range e.le.Leases() {
		ml := mvcc.Lease{ID: int64(l.ID), TTL: l.TTL(), Keys: [][]byte{}}
		keys := l.Keys()
		sort.Strings(keys)
		for _, k := range keys {
			ml.Keys = append(ml.Keys, []byte(k))
		}
		out = append(out, ml)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}
