package cluster

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Instrumented is implemented by a Node with figures of its own to
// export: a raft member's peer traffic and the fsyncs of its raft log.
// The server registers them with its own metrics.
type Instrumented interface {
	// PeerMetrics exports etcd's etcd_network_peer_* and
	// etcd_network_{active,disconnected}_peers metrics, fed by the
	// transport.
	PeerMetrics() prometheus.Collector
	// LogFsyncLatency is the histogram of the raft log's fsyncs (the log
	// is what makes a write durable on a member), in nanoseconds with the
	// buckets of engine.DB.WALFsyncLatency.
	LogFsyncLatency() prometheus.Histogram
	// LogSyncInFlight returns how long the raft log's fsync in flight has
	// run, ok = false when none is: a disk that stalls shows here, while
	// LogFsyncLatency only records the fsyncs that returned.
	LogSyncInFlight() (d time.Duration, ok bool)
}

// PeerMetrics implements Instrumented.
func (n *raftNode) PeerMetrics() prometheus.Collector { return n.tr.metrics }

// LogFsyncLatency implements Instrumented.
func (n *raftNode) LogFsyncLatency() prometheus.Histogram { return n.log.wal.FsyncLatency() }

// LogSyncInFlight implements Instrumented.
func (n *raftNode) LogSyncInFlight() (time.Duration, bool) { return n.log.wal.SyncInFlight() }

// peerMetrics are a member's peer metrics under etcd's names, labels and
// buckets (etcd's server/etcdserver/api/rafthttp/metrics.go), one set per
// transport so that several members can run in one process. Peers are
// labelled by member ID in hex, as etcd's types.ID prints them.
type peerMetrics struct {
	sentBytes, receivedBytes       *prometheus.CounterVec
	sentFailures, receivedFailures *prometheus.CounterVec
	roundTrip                      *prometheus.HistogramVec
	active                         *prometheus.GaugeVec
	disconnected                   *prometheus.CounterVec
}

func newPeerMetrics() *peerMetrics {
	counter := func(name, help, label string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "etcd", Subsystem: "network", Name: name, Help: help}, []string{label})
	}
	return &peerMetrics{
		sentBytes:        counter("peer_sent_bytes_total", "The total number of bytes sent to peers.", "To"),
		receivedBytes:    counter("peer_received_bytes_total", "The total number of bytes received from peers.", "From"),
		sentFailures:     counter("peer_sent_failures_total", "The total number of send failures from peers.", "To"),
		receivedFailures: counter("peer_received_failures_total", "The total number of receive failures from peers.", "From"),
		roundTrip: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "etcd", Subsystem: "network",
			Name: "peer_round_trip_time_seconds", Help: "Round-Trip-Time histogram between peers",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16)}, []string{"To"}),
		active: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "etcd", Subsystem: "network", Name: "active_peers",
			Help: "The current number of active peer connections."}, []string{"Local", "Remote"}),
		disconnected: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "etcd", Subsystem: "network", Name: "disconnected_peers_total",
			Help: "The total number of disconnected peers."}, []string{"Local", "Remote"}),
	}
}

func (m *peerMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.sentBytes, m.receivedBytes, m.sentFailures, m.receivedFailures, m.roundTrip, m.active, m.disconnected}
}

// Describe implements prometheus.Collector.
func (m *peerMetrics) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range m.collectors() {
		c.Describe(ch)
	}
}

// Collect implements prometheus.Collector.
func (m *peerMetrics) Collect(ch chan<- prometheus.Metric) {
	for _, c := range m.collectors() {
		c.Collect(ch)
	}
}

// peerLabel is a member ID as etcd labels peers: hex.
func peerLabel(id uint64) string { return strconv.FormatUint(id, 16) }

func (m *peerMetrics) sent(to uint64, n int) {
	m.sentBytes.WithLabelValues(peerLabel(to)).Add(float64(n))
}
func (m *peerMetrics) received(from uint64, n int) {
	m.receivedBytes.WithLabelValues(peerLabel(from)).Add(float64(n))
}
func (m *peerMetrics) sendFailed(to uint64) { m.sentFailures.WithLabelValues(peerLabel(to)).Inc() }
func (m *peerMetrics) receiveFailed(from uint64) {
	m.receivedFailures.WithLabelValues(peerLabel(from)).Inc()
}
func (m *peerMetrics) rtt(to uint64, d time.Duration) {
	m.roundTrip.WithLabelValues(peerLabel(to)).Observe(d.Seconds())
}

// connected records a stream from remote coming up (up) or going down.
func (m *peerMetrics) connected(local, remote uint64, up bool) {
	l, r := peerLabel(local), peerLabel(remote)
	if up {
		m.active.WithLabelValues(l, r).Inc()
		return
	}
	m.active.WithLabelValues(l, r).Dec()
	m.disconnected.WithLabelValues(l, r).Inc()
}
