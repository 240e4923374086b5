package server

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"google.golang.org/grpc"
	"google.golang.org/grpc/status"
)

// metrics are the server's Prometheus metrics, in a registry of its own
// (so several servers can run in one process, as in tests), served on
// /metrics with the engine's metrics and Go's runtime metrics.
type metrics struct {
	registry *prometheus.Registry
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	// proposalsPending and proposalsFailed are etcd's (see etcdMetrics).
	proposalsPending prometheus.Gauge
	proposalsFailed  prometheus.Counter
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
	}
	m.proposalsPending = prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "etcd", Subsystem: "server", Name: "proposals_pending",
		Help: "The number of writes proposed and not yet applied (etcd's name)."})
	m.proposalsFailed = prometheus.NewCounter(prometheus.CounterOpts{Namespace: "etcd", Subsystem: "server", Name: "proposals_failed_total",
		Help: "The number of failed proposals: no leader, a timeout, a stopped member (etcd's name)."})
	m.registry.MustRegister(m.proposalsPending, m.proposalsFailed)
	m.registry.MustRegister(etcdMetrics(s)...)
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
// leader, frequent leader changes, failed proposals, database size) work
// on Strata unchanged.
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
	return []prometheus.Collector{
		gauge("server", "has_leader", "1 if the member knows a leader.", func() float64 { return bit(s.node.Status().Leader != 0) }),
		gauge("server", "is_leader", "1 if the member is the leader.", func() float64 { return bit(s.node.Status().IsLeader) }),
		counter("server", "leader_changes_seen_total", "The number of leader changes the member has seen.",
			func() float64 { return float64(s.node.Status().LeaderChanges) }),
		gauge("server", "proposals_committed_total", "The log index committed (etcd exports it as a gauge).",
			func() float64 { return float64(s.node.Status().CommitIndex) }),
		gauge("server", "proposals_applied_total", "The log index applied (etcd exports it as a gauge).",
			func() float64 { return float64(s.node.Status().AppliedIndex) }),
		dbSizeCollector{s},
	}
}

// dbSizeCollector exports etcd_mvcc_db_total_size_in_bytes and
// etcd_mvcc_db_total_size_in_use_in_bytes from one read of the engine's
// metrics per scrape.
type dbSizeCollector struct{ s *Server }

var (
	dbSizeDesc  = prometheus.NewDesc("etcd_mvcc_db_total_size_in_bytes", "The database's size on disk.", nil, nil)
	dbInUseDesc = prometheus.NewDesc("etcd_mvcc_db_total_size_in_use_in_bytes",
		"The database's size in use: live tables and WAL.", nil, nil)
)

func (c dbSizeCollector) Describe(ch chan<- *prometheus.Desc) { ch <- dbSizeDesc; ch <- dbInUseDesc }

func (c dbSizeCollector) Collect(ch chan<- prometheus.Metric) {
	size, inUse := c.s.dbSizes()
	ch <- prometheus.MustNewConstMetric(dbSizeDesc, prometheus.GaugeValue, float64(size))
	ch <- prometheus.MustNewConstMetric(dbInUseDesc, prometheus.GaugeValue, float64(inUse))
}

func (m *metrics) observe(api, method, code string, start time.Time) {
	m.requests.WithLabelValues(api, method, code).Inc()
	m.latency.WithLabelValues(api, method).Observe(time.Since(start).Seconds())
}

// unary counts and times each gRPC call.
func (m *metrics) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	start := time.Now()
	resp, err := h(ctx, req)
	m.observe("v3", info.FullMethod, status.Code(err).String(), start)
	return resp, err
}

// stream counts and times each gRPC stream.
func (m *metrics) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	start := time.Now()
	err := h(srv, ss)
	m.observe("v3", info.FullMethod, status.Code(err).String(), start)
	return err
}

// http counts and times each HTTP request of handler name.
func (m *metrics) http(name string, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w, code: http.StatusOK}
		h.ServeHTTP(sw, r)
		m.observe("http", name+" "+methodLabel(r.Method), strconv.Itoa(sw.code), start)
	})
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
