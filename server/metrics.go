package server

import (
	"context"
	"net/http"
	"strconv"
	"sync"
	"time"

	grpcprom "github.com/grpc-ecosystem/go-grpc-middleware/providers/prometheus"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/grpc"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/stratadb/strata/cluster"
)

// metrics are the server's Prometheus metrics, in a registry of its own
// (so several servers can run in one process, as in tests), served on
// /metrics with the engine's metrics and Go's runtime metrics. Every
// metric that etcd's own alerts and dashboards (etcd's contrib/mixin)
// query is among them, under etcd's name and labels: see etcdMetrics and
// docs/server-reference.md.
type metrics struct {
	registry *prometheus.Registry
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	// proposalsPending and proposalsFailed are etcd's (see etcdMetrics).
	proposalsPending prometheus.Gauge
	proposalsFailed  prometheus.Counter
	// grpc is go-grpc-middleware's Prometheus provider: etcd's
	// grpc_server_{started,handled,msg_received,msg_sent}_total and
	// grpc_server_handling_seconds, from the same code etcd's come from.
	grpc *grpcprom.ServerMetrics
	// grpcUnary and grpcStream are grpc's interceptors.
	grpcUnary  grpc.UnaryServerInterceptor
	grpcStream grpc.StreamServerInterceptor
	// clientBytes counts the gRPC messages' bytes.
	clientBytes clientBytes
	// healthMetrics count /health and the probes' checks (probes.go).
	healthMetrics
}

func newMetrics(s *Server) *metrics {
	m := &metrics{
		registry: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "strata", Subsystem: "server", Name: "requests_total",
			Help: "Requests served, by API (v2, v3 or http), method and result code (HTTP status or gRPC code).",
		}, []string{"api", "method", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "strata", Subsystem: "server", Name: "request_duration_seconds",
			Help:    "Time to serve a request, by API and method (streams: their lifetime).",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 18),
		}, []string{"api", "method"}),
		// etcd enables the handling time histogram with the default
		// buckets (--metrics=extensive); its alerts need it.
		grpc: grpcprom.NewServerMetrics(grpcprom.WithServerHandlingTimeHistogram()),
		clientBytes: clientBytes{
			sent: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "etcd", Subsystem: "network", Name: "client_grpc_sent_bytes_total",
				Help: "The total number of bytes sent to grpc clients."}),
			received: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "etcd", Subsystem: "network", Name: "client_grpc_received_bytes_total",
				Help: "The total number of bytes received from grpc clients."}),
		},
	}
	m.grpcUnary, m.grpcStream = m.grpc.UnaryServerInterceptor(), m.grpc.StreamServerInterceptor()
	m.healthMetrics = newHealthMetrics()
	m.registry.MustRegister(m.healthMetrics.collectors()...)
	m.proposalsPending = prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "etcd", Subsystem: "server", Name: "proposals_pending",
		Help: "The number of writes proposed and not yet applied (etcd's name)."})
	m.proposalsFailed = prometheus.NewCounter(prometheus.CounterOpts{Namespace: "etcd", Subsystem: "server", Name: "proposals_failed_total",
		Help: "The number of failed proposals: no leader, a timeout, a stopped member (etcd's name)."})
	m.registry.MustRegister(m.proposalsPending, m.proposalsFailed, m.grpc, m.clientBytes.sent, m.clientBytes.received)
	m.registry.MustRegister(etcdMetrics(s)...)
	m.registry.MustRegister(s.stall.stalls)
	m.registry.MustRegister(s.store.Collectors()...)
	m.registry.MustRegister(m.requests, m.latency,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		s.db.Collector(),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "strata", Subsystem: "mvcc", Name: "revision",
			Help: "The store's current revision."}, func() float64 { return float64(s.store.Rev()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "strata", Subsystem: "mvcc", Name: "compact_revision",
			Help: "The revision of the last compaction."}, func() float64 { return float64(s.store.CompactRev()) }),
	)
	return m
}

// etcdMetrics are the member's figures under the names etcd exports, so
// that the dashboards and alerts written for etcd (etcd's mixin: no
// leader, frequent leader changes, failed proposals, slow fsyncs and
// commits, database size and quota, peer traffic) work on Strata
// unchanged.
func etcdMetrics(s *Server) []prometheus.Collector {
	gauge := func(subsystem, name, help string, f func() float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "etcd", Subsystem: subsystem, Name: name, Help: help}, f)
	}
	counter := func(subsystem, name, help string, f func() float64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: "etcd", Subsystem: subsystem, Name: name, Help: help}, f)
	}
	bit := func(b bool) float64 {
		if b {
			return 1
		}
		return 0
	}
	// The WAL whose fsync makes a write durable: the raft log's on a
	// cluster member (its store runs with sync off), the engine's on a
	// single member.
	walFsync := s.db.WALFsyncLatency()
	inst, clustered := s.node.(cluster.Instrumented)
	if clustered {
		walFsync = inst.LogFsyncLatency()
	}
	out := []prometheus.Collector{
		gauge("server", "has_leader", "1 if the member knows a leader.", func() float64 { return bit(s.node.Status().Leader != 0) }),
		gauge("server", "is_leader", "1 if the member is the leader.", func() float64 { return bit(s.node.Status().IsLeader) }),
		counter("server", "leader_changes_seen_total", "The number of leader changes the member has seen.",
			func() float64 { return float64(s.node.Status().LeaderChanges) }),
		gauge("server", "proposals_committed_total", "The log index committed (etcd exports it as a gauge).",
			func() float64 { return float64(s.node.Status().CommitIndex) }),
		gauge("server", "proposals_applied_total", "The log index applied (etcd exports it as a gauge).",
			func() float64 { return float64(s.node.Status().AppliedIndex) }),
		dbSizeCollector{s},
		nanosHistogram{desc: prometheus.NewDesc("etcd_disk_wal_fsync_duration_seconds",
			"The latency distributions of fsync called by WAL (the raft log's on a cluster member, the engine's on a single member).", nil, nil),
			h: walFsync},
		nanosHistogram{desc: prometheus.NewDesc("etcd_disk_backend_commit_duration_seconds",
			"The latency distributions of commit called by backend: the store's engine batch commits, until durable when sync is on.", nil, nil),
			h: s.db.CommitLatency()},
	}
	if clustered {
		out = append(out, inst.PeerMetrics())
	}
	return out
}

// dbSizeCollector exports etcd_mvcc_db_total_size_in_bytes,
// etcd_mvcc_db_total_size_in_use_in_bytes and etcd_server_quota_backend_bytes
// from one read of the engine's metrics per scrape.
type dbSizeCollector struct{ s *Server }

var (
	dbSizeDesc  = prometheus.NewDesc("etcd_mvcc_db_total_size_in_bytes", "The database's size on disk.", nil, nil)
	dbInUseDesc = prometheus.NewDesc("etcd_mvcc_db_total_size_in_use_in_bytes",
		"The database's size in use: live tables and WAL.", nil, nil)
	quotaDesc = prometheus.NewDesc("etcd_server_quota_backend_bytes",
		"Current backend storage quota size in bytes (quota_backend_bytes).", nil, nil)
)

func (c dbSizeCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- dbSizeDesc
	ch <- dbInUseDesc
	ch <- quotaDesc
}

func (c dbSizeCollector) Collect(ch chan<- prometheus.Metric) {
	size, inUse := dbSizes(c.s.db)
	ch <- prometheus.MustNewConstMetric(dbSizeDesc, prometheus.GaugeValue, float64(size))
	ch <- prometheus.MustNewConstMetric(dbInUseDesc, prometheus.GaugeValue, float64(inUse))
	ch <- prometheus.MustNewConstMetric(quotaDesc, prometheus.GaugeValue, float64(quotaGauge(c.s.cfg)))
}

// nanosHistogram exports a histogram the engine keeps in nanoseconds
// (engine.DB.WALFsyncLatency, CommitLatency) in seconds, as etcd's disk
// histograms are, with the engine's bucket bounds (finer than etcd's
// powers of two from 1 ms; histogram_quantile reads either).
type nanosHistogram struct {
	desc *prometheus.Desc
	h    prometheus.Histogram
}

func (c nanosHistogram) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c nanosHistogram) Collect(ch chan<- prometheus.Metric) {
	if c.h == nil {
		return
	}
	var m dto.Metric
	if err := c.h.Write(&m); err != nil {
		ch <- prometheus.NewInvalidMetric(c.desc, err)
		return
	}
	h := m.GetHistogram()
	buckets := make(map[float64]uint64, len(h.GetBucket()))
	for _, b := range h.GetBucket() {
		buckets[b.GetUpperBound()/1e9] = b.GetCumulativeCount()
	}
	ch <- prometheus.MustNewConstHistogram(c.desc, h.GetSampleCount(), h.GetSampleSum()/1e9, buckets)
}

// clientBytes counts the messages received from and sent to gRPC clients
// by their encoded size, as etcd counts them in its codec:
// etcd_network_client_grpc_{received,sent}_bytes_total. (A gRPC stats
// handler would give the same figures, for some 19 allocations a call.)
type clientBytes struct{ sent, received prometheus.Counter }

// encodedSize is the size a message is sent with (uncompressed).
func encodedSize(msg any) float64 {
	if m, ok := msg.(proto.Message); ok {
		return float64(proto.Size(m))
	}
	return 0
}

// countingStream counts a stream's messages in clientBytes.
type countingStream struct {
	grpc.ServerStream
	bytes *clientBytes
}

func (s *countingStream) SendMsg(msg any) error {
	err := s.ServerStream.SendMsg(msg)
	if err == nil {
		s.bytes.sent.Add(encodedSize(msg))
	}
	return err
}

func (s *countingStream) RecvMsg(msg any) error {
	err := s.ServerStream.RecvMsg(msg)
	if err == nil {
		s.bytes.received.Add(encodedSize(msg))
	}
	return err
}

func (m *metrics) observe(api, method, code string, start time.Time) {
	m.requests.WithLabelValues(api, method, code).Inc()
	m.latency.WithLabelValues(api, method).Observe(time.Since(start).Seconds())
}

// unary counts and times each gRPC call, in Strata's metrics and etcd's.
func (m *metrics) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	start := time.Now()
	m.clientBytes.received.Add(encodedSize(req))
	resp, err := m.grpcUnary(ctx, req, info, h)
	if err == nil {
		m.clientBytes.sent.Add(encodedSize(resp))
	}
	m.observe("v3", info.FullMethod, status.Code(err).String(), start)
	return resp, err
}

// stream counts and times each gRPC stream, in Strata's metrics and
// etcd's.
func (m *metrics) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	start := time.Now()
	err := m.grpcStream(srv, &countingStream{ServerStream: ss, bytes: &m.clientBytes}, info, h)
	m.observe("v3", info.FullMethod, status.Code(err).String(), start)
	return err
}

// http counts and times each HTTP request of handler name.
func (m *metrics) http(name string, h http.Handler) http.Handler {
	hs := &httpSeries{m: m, name: name, byKey: map[httpKey]httpSeriesPair{}}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w, code: http.StatusOK}
		h.ServeHTTP(sw, r)
		p := hs.get(methodLabel(r.Method), sw.code)
		p.requests.Inc()
		p.latency.Observe(time.Since(start).Seconds())
	})
}

// httpSeries holds the series of one HTTP handler's requests by method
// and status, each looked up once: WithLabelValues hashes and checks the
// labels and allocates on every call, which was a part of the CPU of a
// v2 request. Methods are bounded by methodLabel and statuses by
// net/http (100-999), so the map is too.
type httpSeries struct {
	m    *metrics
	name string

	mu    sync.RWMutex
	byKey map[httpKey]httpSeriesPair
}

// httpKey is a request's method label and status.
type httpKey struct {
	method string
	code   int
}

// httpSeriesPair is the request counter and the latency histogram of a
// key.
type httpSeriesPair struct {
	requests prometheus.Counter
	latency  prometheus.Observer
}

// get returns the series of method and code, the labels observe gives
// them.
func (hs *httpSeries) get(method string, code int) httpSeriesPair {
	k := httpKey{method, code}
	hs.mu.RLock()
	p, ok := hs.byKey[k]
	hs.mu.RUnlock()
	if ok {
		return p
	}
	label := hs.name + " " + method
	p = httpSeriesPair{
		requests: hs.m.requests.WithLabelValues("http", label, strconv.Itoa(code)),
		latency:  hs.m.latency.WithLabelValues("http", label),
	}
	hs.mu.Lock()
	hs.byKey[k] = p
	hs.mu.Unlock()
	return p
}

// statusWriter remembers the status code written.
type statusWriter struct {
	http.ResponseWriter
	code int
}

func (w *statusWriter) WriteHeader(code int) {
	w.code = code
	w.ResponseWriter.WriteHeader(code)
}

// Flush passes a flush on, so that streamed responses (the gateway's
// watch) reach the client as they are written.
func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap gives http.ResponseController the connection's writer.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// methodLabel bounds the label values a client can create: the methods
// the server answers, and OTHER.
func methodLabel(m string) string {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPut, http.MethodPost, http.MethodDelete:
		return m
	}
	return "OTHER"
}
