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
	m.registry.MustRegister(m.requests, m.latency,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		s.db.Collector(),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "strata", Subsystem: "mvcc", Name: "revision",
			Help: "The store's current revision."}, func() float64 { return float64(s.store.Rev()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "strata", Subsystem: "mvcc", Name: "compact_revision",
			Help: "The revision of the last compaction."}, func() float64 { return float64(s.store.CompactRev()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "strata", Subsystem: "server", Name: "is_leader",
			Help: "1 if this member is the leader."}, func() float64 {
			if s.node.Status().IsLeader {
				return 1
			}
			return 0
		}),
	)
	return m
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
