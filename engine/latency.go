package engine

import (
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/prometheus/client_golang/prometheus"
)

// The engine's latency histograms are kept as Pebble keeps its WAL fsync
// latencies: in nanoseconds, with pebble.FsyncLatencyBuckets (100 µs steps
// up to 5 ms, then ~17% steps up to 10 s), so that one reader turns both
// into seconds (the server exports them under etcd's names,
// etcd_disk_wal_fsync_duration_seconds and
// etcd_disk_backend_commit_duration_seconds).

func newLatencyHistogram() prometheus.Histogram {
	return prometheus.NewHistogram(prometheus.HistogramOpts{Buckets: pebble.FsyncLatencyBuckets})
}

// WALFsyncLatency returns Pebble's live histogram of the fsyncs of the
// database's WAL files, in nanoseconds: every fsync that makes writes
// durable (each commit's, or a group of commits', with sync = true; with
// sync = false only those at WAL rotation and close). It is nil for a
// read-only database.
func (db *DB) WALFsyncLatency() prometheus.Histogram { return db.pdb.Metrics().LogWriter.FsyncLatency }

// CommitLatency returns the histogram of batch commits, in nanoseconds:
// from Commit (or CommitNoSyncWait) until the batch is applied and, with
// sync = true, durable (its SyncWait returned).
func (db *DB) CommitLatency() prometheus.Histogram { return db.commitLatency }

// observeCommit records a commit that started at start.
func (db *DB) observeCommit(start time.Time) {
	db.commitLatency.Observe(float64(time.Since(start)))
}
