// Package floorserver is the transport floor of `strata bench qps` and
// `strata bench kube`: a measurement baseline, not a server anyone could
// run. It answers etcd's v3 KV, Watch and Lease calls (grpc-go, etcd's
// api/v3 stubs) and the v2 keys API's GET and PUT (net/http, JSON) from
// memory, under one mutex: the latest version of each key in a map, their
// order in a B-tree for ranges, and the watchers. It has no persistence,
// no raft, no revision history (a range at a past revision is answered
// with the latest values), no lease expiry and no auth. What it costs per
// request is what the transport alone costs (HTTP/2, gRPC and protobuf;
// or HTTP/1.1 and JSON) beside a lookup in memory: a part of every figure
// of Strata and of etcd that no storage engine can remove.
//
// For Kubernetes' traffic it serves what the apiserver sends: txns with
// compares and puts or gets, ranges with limit, count and revision,
// leases granted, compaction (reads below the compacted revision are
// refused as etcd refuses them), and watches from the next revision with
// previous values and progress requests, one response per revision per
// watcher as etcd sends them. Anything else answers Unimplemented.
//
// Its transport is configured as `strata serve` configures its own
// (server/listen.go), so that the floor is the same transport with the
// storage taken away:
//
//   - one listener, split by cmux: HTTP/2 to grpc-go, the rest to net/http;
//   - grpc.MaxRecvMsgSize (Strata's default max_request_bytes plus
//     etcd's 512 KiB of gRPC overhead), MaxSendMsgSize (MaxInt32),
//     MaxConcurrentStreams (the default max_concurrent_streams),
//     NumStreamWorkers(64)
//     and etcd's keepalive enforcement policy (5 s, without streams);
//   - grpc-go's default protobuf codec.
//
// It has none of Strata's interceptors (the Prometheus metrics and the
// caught-up gate, on both gRPC and HTTP) and no gRPC health service: these
// are a server's choices, not the transport's. Its v2 JSON is
// encoding/json's (Strata writes the same bytes without reflection).
package floorserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/btree"
	"github.com/soheilhy/cmux"
	"github.com/stratadb/strata/config"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/status"
)

// Name is what /version reports in its "floor" field.
const Name = "transport floor (grpc-go " + grpc.Version + ")"

// Transport settings of server/listen.go, which keeps them unexported.
const (
	grpcOverheadBytes = 512 * 1024
	streamWorkers     = 64
)

// maxRequestBytes and maxStreams are Strata's default max_request_bytes
// and max_concurrent_streams.
var (
	maxRequestBytes = config.Default().Server.MaxRequestBytes
	maxStreams      = uint32(config.Default().Server.MaxConcurrentStreams)
)

// The IDs and term every answer's header carries: constants, as the
// floor is one member that never elects.
const (
	clusterID = 0x5354524154414c4c
	memberID  = 0x464c4f4f52
	raftTerm  = 2
)

// store is the floor's whole state under one mutex: the latest version
// of each key, the keys in order, the revision, the compacted revision,
// the leases granted and the watchers. A stored KeyValue is never changed
// after it is stored (a put stores a new one), so answers share it.
type store struct {
	mu        sync.Mutex
	rev       int64
	compacted int64
	kvs       map[string]*mvccpb.KeyValue
	keys      *btree.BTreeG[string]
	leases    map[int64]bool
	nextLease int64
	watchers  watcherSet
}

func newStore() *store {
	return &store{rev: 1, kvs: map[string]*mvccpb.KeyValue{}, keys: btree.NewG(32, func(a, b string) bool { return a < b }),
		leases: map[int64]bool{}, watchers: newWatcherSet()}
}

// get returns key's KeyValue (nil if absent) and the revision.
func (s *store) get(key string) (*mvccpb.KeyValue, int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.kvs[key], s.rev
}

// put stores value under key at the next revision, tells the watchers,
// and returns the new KeyValue, the previous one (nil if none) and the
// new revision.
func (s *store) put(key string, value []byte) (kv, prev *mvccpb.KeyValue, rev int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ev := s.putAloneLocked(key, value, 0)
	return ev.Kv, ev.PrevKv, s.rev
}

// putAloneLocked is a put that is its own revision: it advances the
// revision, stores the value and tells the watchers.
func (s *store) putAloneLocked(key string, value []byte, lease int64) *mvccpb.Event {
	s.rev++
	ev := s.putLocked(key, value, lease)
	s.notifyLocked([]*mvccpb.Event{ev})
	return ev
}

// putLocked stores value under key at the current revision, which the
// caller has advanced, and returns the event.
func (s *store) putLocked(key string, value []byte, lease int64) *mvccpb.Event {
	prev := s.kvs[key]
	kv := &mvccpb.KeyValue{Key: []byte(key), Value: value, CreateRevision: s.rev, ModRevision: s.rev, Version: 1, Lease: lease}
	if prev != nil {
		kv.CreateRevision, kv.Version = prev.CreateRevision, prev.Version+1
	} else {
		s.keys.ReplaceOrInsert(key)
	}
	s.kvs[key] = kv
	return &mvccpb.Event{Type: mvccpb.PUT, Kv: kv, PrevKv: prev}
}

func header(rev int64) *pb.ResponseHeader {
	return &pb.ResponseHeader{ClusterId: clusterID, MemberId: memberID, Revision: rev, RaftTerm: raftTerm}
}

// errUnsupported is the answer to every request the floor does not
// measure.
func errUnsupported(what string) error {
	return status.Errorf(codes.Unimplemented, "the transport floor does not serve %s", what)
}

// kvServer is etcd's KV service on the store: Range, Put, Txn (compares,
// puts and ranges) and Compact; DeleteRange answers Unimplemented.
type kvServer struct {
	pb.UnimplementedKVServer
	st *store
}

func (k *kvServer) Range(_ context.Context, r *pb.RangeRequest) (*pb.RangeResponse, error) {
	if len(r.RangeEnd) == 0 && r.Revision == 0 && !r.KeysOnly {
		// One key at the latest revision: the QPS table's read, a map
		// lookup and no more.
		kv, rev := k.st.get(string(r.Key))
		resp := &pb.RangeResponse{Header: header(rev)}
		if kv != nil {
			resp.Count = 1
			if !r.CountOnly {
				resp.Kvs = []*mvccpb.KeyValue{kv}
			}
		}
		return resp, nil
	}
	k.st.mu.Lock()
	defer k.st.mu.Unlock()
	return k.st.rangeLocked(r)
}

func (k *kvServer) Put(_ context.Context, r *pb.PutRequest) (*pb.PutResponse, error) {
	k.st.mu.Lock()
	defer k.st.mu.Unlock()
	if err := k.st.checkPutLocked(r); err != nil {
		return nil, err
	}
	ev := k.st.putAloneLocked(string(r.Key), r.Value, r.Lease)
	resp := &pb.PutResponse{Header: header(k.st.rev)}
	if r.PrevKv {
		resp.PrevKv = ev.PrevKv
	}
	return resp, nil
}

// v2Node and v2Event are etcd's v2 JSON, as `strata serve` answers it.
type v2Node struct {
	Key           string  `json:"key"`
	Value         *string `json:"value,omitempty"`
	ModifiedIndex int64   `json:"modifiedIndex,omitempty"`
	CreatedIndex  int64   `json:"createdIndex,omitempty"`
}

type v2Event struct {
	Action   string  `json:"action"`
	Node     *v2Node `json:"node"`
	PrevNode *v2Node `json:"prevNode,omitempty"`
}

func nodeOf(key string, kv *mvccpb.KeyValue) *v2Node {
	v := string(kv.Value)
	return &v2Node{Key: key, Value: &v, ModifiedIndex: kv.ModRevision, CreatedIndex: kv.CreateRevision}
}

const v2Prefix = "/v2/keys"

// v2Keys serves GET and PUT of /v2/keys/<key> from the store the v3 API
// serves: v2 key /foo is store key "/foo", as in `strata serve`.
func (st *store) v2Keys(w http.ResponseWriter, r *http.Request) {
	key := path.Clean("/" + strings.TrimPrefix(r.URL.Path, v2Prefix))
	if key == "/" {
		v2Fail(w, http.StatusForbidden, 102, "Not a file", key, st.revision())
		return
	}
	if r.Method == http.MethodPut {
		r.Body = http.MaxBytesReader(w, r.Body, maxRequestBytes)
	}
	if err := r.ParseForm(); err != nil {
		v2Fail(w, http.StatusBadRequest, 210, "Invalid POST form", key+": "+err.Error(), st.revision())
		return
	}
	switch r.Method {
	case http.MethodGet:
		kv, rev := st.get(key)
		if kv == nil {
			v2Fail(w, http.StatusNotFound, 100, "Key not found", key, rev)
			return
		}
		v2Write(w, http.StatusOK, rev, &v2Event{Action: "get", Node: nodeOf(key, kv)})
	case http.MethodPut:
		kv, prev, rev := st.put(key, []byte(r.Form.Get("value")))
		ev := &v2Event{Action: "set", Node: nodeOf(key, kv)}
		code := http.StatusCreated
		if prev != nil {
			ev.PrevNode, code = nodeOf(key, prev), http.StatusOK
		}
		v2Write(w, code, rev, ev)
	default:
		w.Header().Set("Allow", "GET, PUT")
		http.Error(w, "Method Not Allowed: the transport floor serves GET and PUT", http.StatusMethodNotAllowed)
	}
}

func (st *store) revision() int64 {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.rev
}

// v2Write sends a v2 answer with etcd's headers.
func v2Write(w http.ResponseWriter, code int, rev int64, body any) {
	b, err := json.Marshal(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("X-Etcd-Cluster-Id", strconv.FormatUint(clusterID, 16))
	h.Set("X-Etcd-Index", strconv.FormatInt(rev, 10))
	h.Set("X-Raft-Index", strconv.FormatInt(rev, 10))
	h.Set("X-Raft-Term", strconv.Itoa(raftTerm))
	w.WriteHeader(code)
	_, _ = w.Write(append(b, '\n'))
}

// v2Fail sends etcd's v2 error body.
func v2Fail(w http.ResponseWriter, code, errorCode int, message, cause string, rev int64) {
	v2Write(w, code, rev, struct {
		ErrorCode int    `json:"errorCode"`
		Message   string `json:"message"`
		Cause     string `json:"cause,omitempty"`
		Index     int64  `json:"index"`
	}{errorCode, message, cause, rev})
}

// Server is the transport floor on one listener.
type Server struct {
	grpc *grpc.Server
	http *http.Server
	mux  cmux.CMux
}

// New builds the floor's gRPC and HTTP servers around a new, empty store.
func New() *Server {
	st := newStore()
	g := grpc.NewServer(
		grpc.MaxRecvMsgSize(int(maxRequestBytes)+grpcOverheadBytes),
		grpc.MaxSendMsgSize(math.MaxInt32),
		grpc.MaxConcurrentStreams(maxStreams),
		grpc.NumStreamWorkers(streamWorkers),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 5 * time.Second, PermitWithoutStream: true}),
	)
	pb.RegisterKVServer(g, &kvServer{st: st})
	pb.RegisterWatchServer(g, &watchServer{st: st})
	pb.RegisterLeaseServer(g, &leaseServer{st: st})
	mux := http.NewServeMux()
	mux.HandleFunc(v2Prefix, st.v2Keys)
	mux.HandleFunc(v2Prefix+"/", st.v2Keys)
	mux.HandleFunc("/health", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(`{"health":"true","reason":""}`))
	})
	mux.HandleFunc("/version", func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]string{"floor": Name})
	})
	return &Server{grpc: g, http: &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, MaxHeaderBytes: 1 << 20}}
}

// Serve serves l until Stop; it returns nil after Stop.
func (s *Server) Serve(l net.Listener) error {
	s.mux = cmux.New(l)
	grpcL := s.mux.Match(cmux.HTTP2())
	httpL := s.mux.Match(cmux.Any())
	errc := make(chan error, 3)
	go func() { errc <- s.grpc.Serve(grpcL) }()
	go func() { errc <- s.http.Serve(httpL) }()
	go func() { errc <- s.mux.Serve() }()
	err := <-errc
	if err == nil || errors.Is(err, http.ErrServerClosed) || errors.Is(err, grpc.ErrServerStopped) ||
		errors.Is(err, net.ErrClosed) || errors.Is(err, cmux.ErrListenerClosed) || errors.Is(err, cmux.ErrServerClosed) {
		return nil
	}
	return fmt.Errorf("floor: %w", err)
}

// Stop closes the listener and every connection.
func (s *Server) Stop() {
	if s.mux != nil {
		s.mux.Close()
	}
	s.grpc.Stop()
	_ = s.http.Close()
}
