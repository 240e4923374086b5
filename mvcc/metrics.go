package mvcc

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// compactionMetrics are etcd's compaction metrics, under the names, help
// and buckets of etcd 3.7's storage/mvcc/metrics.go, so that what an
// operator graphs or alerts on for etcd's compactions reads the same on
// Strata. What each one times differs with the design (docs/server-reference.md):
//
//   - index pause: the one walk of the key index that drops the history,
//     which readers and writers wait for, as they wait for etcd's
//     treeIndex compaction;
//   - total: from the walk until the finish marker is committed (the
//     sort, the ingestion of the tombstone tables, the marker), the span
//     etcd's covers from its walk to its last batch;
//   - keys: the revisions deleted from storage;
//   - last: the Unix time of the last compaction finished.
//
// etcd's db_compaction_pause_duration_milliseconds, the time each batch of
// deletions holds its writers, has no counterpart: the deletions are
// ingested as tables and hold no writer, so Strata does not export it.
type compactionMetrics struct {
	indexPause prometheus.Histogram
	total      prometheus.Histogram
	keys       prometheus.Counter
	last       prometheus.Gauge
}

func newCompactionMetrics() *compactionMetrics {
	return &compactionMetrics{
		indexPause: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "etcd_debugging", Subsystem: "mvcc", Name: "index_compaction_pause_duration_milliseconds",
			Help:    "Bucketed histogram of index compaction pause duration.",
			Buckets: prometheus.ExponentialBuckets(0.5, 2, 14),
		}),
		total: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "etcd_debugging", Subsystem: "mvcc", Name: "db_compaction_total_duration_milliseconds",
			Help:    "Bucketed histogram of db compaction total duration.",
			Buckets: prometheus.ExponentialBuckets(100, 2, 14),
		}),
		keys: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "etcd_debugging", Subsystem: "mvcc", Name: "db_compaction_keys_total",
			Help: "Total number of db keys compacted.",
		}),
		last: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "etcd_debugging", Subsystem: "mvcc", Name: "db_compaction_last",
			Help: "The unix time of the last db compaction. Resets to 0 on start.",
		}),
	}
}

// Collectors returns the store's compaction metrics, for a registry: see
// compactionMetrics.
func (s *Store) Collectors() []prometheus.Collector {
	m := s.metrics
	return []prometheus.Collector{m.indexPause, m.total, m.keys, m.last}
}

// millis is d in etcd's unit for these histograms, milliseconds, with
// the fraction etcd truncates (a walk of a small index takes well under
// one).
func millis(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// logInfof and logErrorf write to Options.Logger, if set.
func (s *Store) logInfof(format string, args ...any) {
	if l := s.opts.Logger; l != nil {
		l.Infof(format, args...)
	}
}

func (s *Store) logErrorf(format string, args ...any) {
	if l := s.opts.Logger; l != nil {
		l.Errorf(format, args...)
	}
}
