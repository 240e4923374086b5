package server

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"net"
	"net/http"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/stratadb/strata/auth"
	"github.com/stratadb/strata/cluster"
	"github.com/stratadb/strata/config"
	"github.com/stratadb/strata/engine"
	"github.com/stratadb/strata/mvcc"
)

// ShutdownTimeout is how long Close waits for requests in flight before
// it cuts the remaining connections.
const ShutdownTimeout = 10 * time.Second

// Options are the run-time hooks of a Server that do not belong in a
// config file.
type Options struct {
	// Logger receives the server's and the engine's log lines; nil is
	// silent.
	Logger engine.Logger
	// NewNode builds the apply path over the server's state machine; nil
	// means cluster.NewLocal, a single member. The raft cluster passes its
	// own, so the server code does not fork on "clustered or not".
	NewNode func(sm cluster.StateMachine, ids IDs) (cluster.Node, error)
}

// IDs are the identities a single member reports in every response
// header, derived from db_path so they survive restarts.
type IDs struct {
	ClusterID, MemberID uint64
	Name                string
}

// Server serves etcd's v2 keys API and v3 gRPC API over one mvcc store.
// Start it with Start, stop it with Close.
type Server struct {
	cfg   *config.Config
	log   engine.Logger
	db    *engine.DB
	store *mvcc.Store
	node  cluster.Node
	apply *applier
	auth  *auth.Store
	lease *lessor
	ids   IDs

	ln net.Listener
	// metricsLns are server.listen_metrics_urls (metricslisten.go).
	metricsLns []*extraListener
	// clientLns are server.listen_client_urls (listenclient.go).
	clientLns []*extraListener
	grpc      *grpc.Server
	http      *http.Server
	// closeGateway ends the gRPC gateway's connection to grpc.
	closeGateway func()
	serving      sync.WaitGroup
	serveMu      sync.Mutex
	serveEr      error
	// failed is closed when serveEr is set: serving stopped by itself.
	failed  chan struct{}
	metrics *metrics
	// ranges bounds the memory of big Ranges (rangelimit.go).
	ranges *rangeGate

	// streams is cancelled at shutdown: it ends watch and lease
	// keep-alive streams, which would otherwise never finish.
	streams       context.Context
	cancelStreams context.CancelFunc

	// leaseIDs chooses the IDs of leases granted without one, before
	// proposing, so every member applies the same (etcd's idutil).
	leaseIDs  atomic.Uint64
	closeOnce sync.Once
	closeErr  error
	// caughtUp holds client requests back until the member has applied
	// what the cluster committed before it started (ready.go).
	caughtUp catchUp
	// clusterHex is the cluster ID of the v2 API's headers, formatted
	// once (clusterIDHex).
	clusterHex atomic.Pointer[idHex]
	// space is the quota and free-space guard (quota.go); spaceCause
	// the reason it last raised this member's NOSPACE alarm, and selfID
	// this member's ID in the Node (for the alarm's log line).
	space      *spaceGuard
	spaceCause atomic.Pointer[string]
	selfID     atomic.Uint64
	// spaceDone is closed when the guard's goroutine returned.
	spaceDone chan struct{}
	// compactor is server.auto_compaction_* (autocompact.go); nil when
	// off.
	compactor *autoCompactor
	// corrupt raises CORRUPT on damage the engine meets (corrupt.go);
	// stall watches the disk for stalls (stall.go).
	corrupt *corruptWatch
	stall   *stallWatch
	// checker runs the periodic and compact hash checks (corruptcheck.go);
	// nil when neither is on.
	checker *corruptChecker
}

// Start opens the store that cfg describes, starts listening on
// cfg.Server.Listen and serves until Close. cfg is not modified; the
// memory budget of [server] is applied to a copy.
func Start(cfg *config.Config, opts Options) (*Server, error) {
	cfg = cfg.Clone()
	cfg.ApplyMemoryBudget()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, log: opts.Logger, failed: make(chan struct{})}
	s.ids = deriveIDs(cfg.DBPath)
	var err error
	engineCfg := cfg
	if cfg.Cluster.Enabled() {
		// The raft log, fsynced on a majority before an entry applies, is
		// the durable record: the store runs without a WAL of its own, so
		// an entry's bytes are written to one log per member, not two; the
		// store flushes its memtables before the log is truncated
		// (applier.Sync), and a restart replays the log after the store's
		// flushed applied index. See docs/cluster-internals.md.
		engineCfg = cfg.Clone()
		engineCfg.Sync, engineCfg.EnableWAL = false, false
	}
	s.corrupt, s.stall = newCorruptWatch(opts.Logger), newStallWatch(opts.Logger)
	if s.db, err = engine.Open(engineCfg, s.engineOptions(opts)); err != nil {
		return nil, err
	}
	fail := func(err error) (*Server, error) {
		if s.node != nil {
			_ = s.node.Stop()
		}
		if s.ln != nil {
			_ = s.ln.Close()
		}
		closeListeners(context.Background(), s.metricsLns)
		closeListeners(context.Background(), s.clientLns)
		if s.auth != nil {
			_ = s.auth.Close()
		}
		if s.store != nil {
			_ = s.store.Close()
		}
		_ = s.db.Close()
		return nil, err
	}
	storeOpts := mvcc.Options{ReclaimHistory: cfg.Server.ReclaimHistory, RawValues: !cfg.Server.CompressValues,
		Logger: opts.Logger, HashCompactions: cfg.Server.CompactHashCheck}
	s.store, err = mvcc.Open(s.db, storeOpts)
	if err != nil && cfg.Cluster.Enabled() && errors.Is(err, engine.ErrCorruption) {
		// A damaged table: the member takes the leader's state (repair.go).
		if err = s.repairAtStart(cfg, err); err == nil {
			s.store, err = mvcc.Open(s.db, storeOpts)
		}
	}
	if err != nil {
		return fail(err)
	}
	if s.apply, err = newApplier(cfg, s.store); err != nil {
		return fail(err)
	}
	s.auth = s.apply.auth
	s.apply.alarms.log, s.apply.alarms.cause = opts.Logger, s.alarmCause
	s.space = newSpaceGuard(cfg, func() int64 { size, _ := dbSizes(s.db); return size })
	s.space.sample()
	s.apply.written = s.space.kick
	// The initial corruption check runs before the member joins or serves.
	if s.checker, err = s.startCorruptChecks(); err != nil {
		return fail(err)
	}
	if s.ln, err = net.Listen("tcp", cfg.Server.Listen); err != nil {
		return fail(fmt.Errorf("server: listen = %q: %w", cfg.Server.Listen, err))
	}
	if s.metricsLns, err = openListeners("listen_metrics_urls", cfg.Server.ListenMetricsURLs); err != nil {
		return fail(err)
	}
	if s.clientLns, err = openListeners("listen_client_urls", cfg.Server.ListenClientURLs); err != nil {
		return fail(err)
	}
	url := clientURL(cfg, s.ln.Addr())
	newNode := opts.NewNode
	if newNode == nil && cfg.Cluster.Enabled() {
		newNode = func(sm cluster.StateMachine, _ IDs) (cluster.Node, error) {
			return cluster.StartFromConfig(cfg, sm, opts.Logger)
		}
	}
	if newNode == nil {
		newNode = func(sm cluster.StateMachine, ids IDs) (cluster.Node, error) {
			// Without a log every simple token names index 0, and no
			// index is ever to be waited for: a token naming another is
			// simply unknown (invalid), not early.
			s.auth.Applied(math.MaxUint64)
			return cluster.NewLocal(sm, cluster.LocalConfig{ClusterID: ids.ClusterID, MemberID: ids.MemberID,
				Name: ids.Name, ClientURLs: []string{url}})
		}
	}
	if s.node, err = newNode(s.apply, s.ids); err != nil {
		return fail(err)
	}
	if inst, ok := s.node.(cluster.Instrumented); ok {
		s.stall.raftSync = inst.LogSyncInFlight
	}
	if err := s.servePeerHashKV(); err != nil {
		return fail(err)
	}
	autoCompact, err := cfg.Server.AutoCompaction()
	if err != nil {
		return fail(err)
	}
	s.compactor = s.newAutoCompactor(autoCompact)
	s.selfID.Store(s.node.Status().MemberID)
	// etcd's idutil: the member ID's low 16 bits, the start time in ms,
	// then a counter, so IDs stay unique across restarts.
	s.leaseIDs.Store(s.ids.MemberID&0xffff<<48 | uint64(time.Now().UnixMilli())&(1<<40-1)<<8)
	s.streams, s.cancelStreams = context.WithCancel(context.Background())
	s.metrics = newMetrics(s)
	s.lease = newLessor(s)
	s.caughtUp.done = make(chan struct{})
	go s.awaitCaughtUp()
	s.spaceDone = make(chan struct{})
	go func() {
		defer close(s.spaceDone)
		s.space.run(s.streams, s.raiseNoSpace)
	}()
	go s.corrupt.run(s.streams, s.raiseCorrupt)
	if s.checker != nil {
		go s.checker.run(s.streams)
	}
	if err := s.serve(); err != nil {
		s.cancelStreams()
		return fail(err)
	}
	s.lease.start()
	if s.compactor != nil {
		s.compactor.start()
	}
	return s, nil
}

// Failed is closed when the server stopped serving by itself (a listener
// failed); Err says why. Close it then.
func (s *Server) Failed() <-chan struct{} { return s.failed }

// Addr returns the address the server listens on (with the port chosen
// when the configuration said port 0).
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// IndexOrigin says how the store built its key index when the server
// started (loaded from the checkpoint the last clean stop wrote, or
// rebuilt from the revisions) and how long that took.
func (s *Server) IndexOrigin() (mvcc.IndexOrigin, time.Duration) {
	return s.store.IndexOrigin(), s.store.RebuildDuration()
}

// ClosingCheckpoint says what Close did about the store's key index
// checkpoint (the zero report before Close).
func (s *Server) ClosingCheckpoint() mvcc.CheckpointReport { return s.store.CheckpointAtClose() }

// Node returns the apply path (for tests and the cluster).
func (s *Server) Node() cluster.Node { return s.node }

// Close shuts down gracefully: it stops accepting connections, ends watch
// and keep-alive streams, waits up to ShutdownTimeout for the requests in
// flight (each write either finishes and is acknowledged, or was never
// applied), then stops the node and closes the store and the engine.
// Every write acknowledged before Close is durable (with sync = true).
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		s.compactor.stop()
		s.lease.stop()
		s.shutdownListeners()
		<-s.spaceDone // it stops with the streams
		<-s.corrupt.done
		if s.checker != nil {
			<-s.checker.done
		}
		var errs []error
		// An entry whose commit waits for space (the disk full) would
		// hold the node's Stop until space returns: it gives up instead,
		// unapplied, and is applied again at the next start.
		s.store.AbandonSpaceWaits()
		if err := s.node.Stop(); err != nil && !errors.Is(err, cluster.ErrStopped) {
			errs = append(errs, err)
		}
		_ = s.auth.Close()
		if err := s.store.Close(); err != nil {
			errs = append(errs, err)
		}
		if err := s.db.Close(); err != nil {
			errs = append(errs, err)
		}
		s.closeErr = errors.Join(errs...)
	})
	return s.closeErr
}

// Err returns the error that stopped serving, if any (nil after Close).
func (s *Server) Err() error {
	s.serveMu.Lock()
	defer s.serveMu.Unlock()
	return s.serveEr
}

func (s *Server) setServeErr(err error) {
	s.serveMu.Lock()
	defer s.serveMu.Unlock()
	if s.serveEr == nil {
		s.serveEr = err
		close(s.failed)
	}
}

// requestTimeout bounds a write or a read barrier whose client set no
// deadline: etcd's request timeout, 5 s plus twice its 1 s election
// timeout. Past it the client gets ErrGRPCTimeout (the outcome of a write
// is then unknown, as in etcd). A variable so tests can shorten it.
var requestTimeout = 7 * time.Second

// readBarrier waits until a linearizable read may be served here.
func (s *Server) readBarrier(ctx context.Context) error { return awaitReadable(ctx, s.node) }

// awaitReadable waits, at most the request timeout, until node has
// applied every write committed before the call. The node bounds the wait
// itself (cluster.Node's ReadBarrier): a raft member on a timer it shares
// among the reads of the same instant, which a context of the server's
// own here would replace with one per read.
func awaitReadable(ctx context.Context, node cluster.Node) error {
	return node.ReadBarrier(ctx)
}

// propose sends a write through the apply path and returns its etcd
// response or the error the command caused.
func (s *Server) propose(ctx context.Context, r *pb.InternalRaftRequest) (proto.Message, error) {
	ctx, cancel := withRequestTimeout(ctx)
	defer cancel()
	// The command carries no request ID of its own: the Node tags the
	// proposal with the one ID its proposer waits on.
	if err := s.auth.SetUser(ctx, r); err != nil {
		return nil, err
	}
	data, err := proto.Marshal(r)
	if err != nil {
		return nil, err
	}
	if err := s.checkRequestSize(len(data)); err != nil {
		return nil, err
	}
	s.metrics.proposalsPending.Inc()
	s.apply.proposed.add(data, r)
	res, err := s.node.Propose(ctx, data)
	s.apply.proposed.remove(data)
	s.metrics.proposalsPending.Dec()
	if err != nil {
		s.metrics.proposalsFailed.Inc()
		return nil, err
	}
	ar, ok := res.(*applyResult)
	if !ok {
		return nil, fmt.Errorf("server: apply returned %T", res)
	}
	return ar.resp, ar.err
}

// memberHeader completes response headers with the member's identity
// (etcd's v3rpc header): every service holds one.
type memberHeader struct {
	node  interface{ Status() cluster.Status }
	store interface{ Rev() int64 }
}

// fill completes h with the member's identity; a nil h is a header at
// the store's current revision.
func (m memberHeader) fill(h *pb.ResponseHeader) *pb.ResponseHeader {
	if h == nil {
		h = &pb.ResponseHeader{Revision: m.store.Rev()}
	}
	st := m.node.Status()
	h.ClusterId, h.MemberId, h.RaftTerm = st.ClusterID, st.MemberID, st.Term
	return h
}

// header returns the services' memberHeader.
func (s *Server) header() memberHeader { return memberHeader{node: s.node, store: s.store} }

// fill is memberHeader.fill.
func (s *Server) fill(h *pb.ResponseHeader) *pb.ResponseHeader { return s.header().fill(h) }

// deriveIDs hashes the absolute db_path into stable, non-zero IDs.
func deriveIDs(dbPath string) IDs {
	abs, err := filepath.Abs(dbPath)
	if err != nil {
		abs = dbPath
	}
	hash := func(s string) uint64 {
		h := fnv.New64a()
		_, _ = h.Write([]byte(s))
		if v := h.Sum64(); v != 0 {
			return v
		}
		return 1
	}
	m := hash("strata member " + abs)
	return IDs{MemberID: m, ClusterID: hash(fmt.Sprintf("strata cluster %x", m)), Name: "strata"}
}

// clientURL is the URL clients reach the server at.
func clientURL(cfg *config.Config, addr net.Addr) string {
	scheme := "http"
	if cfg.Server.CertFile != "" {
		scheme = "https"
	}
	return scheme + "://" + addr.String()
}
