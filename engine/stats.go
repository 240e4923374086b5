package engine

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/stratadb/strata/compression"
	"github.com/stratadb/strata/internal/pebbleconf"
	"github.com/stratadb/strata/tiering"
)

// Stats returns a readable multi-line report in the spirit of RocksDB's
// rocksdb.stats, in two parts. First what the database itself holds, the
// same in every process: per level the files, size, score, configured
// codec, the codecs tables actually carry and the tables not written with
// their level's options, then the tables per db_paths entry. Then the
// counters of this process since it opened the database (Metrics.Since):
// bytes in and written and write amplification, block cache, bloom
// filters, WAL, stalls, compactions, rewrites. A fresh process, such as
// `strata stats` after `strata compact`, shows zero there, and the report
// says so rather than let a zero pass for the database's history.
func (db *DB) Stats() (string, error) {
	m, err := db.Metrics()
	if err != nil {
		return "", err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "** Strata DB Stats: %s **\n", db.cfg.DBPath)
	b.WriteString("The database (its tables as they are on disk):\n")
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "Level\tFiles\tSize(MB)\tScore\tCompression (requested)\tStored as\tTables carry\tNeed rewrite\t")
	var files, bytes int64
	mismatched := 0
	for l, lm := range m.Levels {
		fmt.Fprintf(tw, "L%d\t%d\t%.2f\t%.2f\t%s\t%s\t%s\t%d\t\n", l, lm.Tables, mb(lm.Bytes), lm.Score,
			lm.Codec, lm.StoredCodec, cmp.Or(pebbleconf.FormatCodecCounts(lm.TableCodecs), "-"), lm.Mismatched)
		files += lm.Tables
		bytes += lm.Bytes
		mismatched += lm.Mismatched
	}
	fmt.Fprintf(tw, "Sum\t%d\t%.2f\t\t\t\t\t%d\t\n", files, mb(bytes), mismatched)
	_ = tw.Flush()

	fmt.Fprintf(&b, "Compression: %s; data blocks: L0-L5 %d bytes, L6 %d bytes (bottommost_block_size)\n",
		db.res.DescribeCodecs(), db.cfg.LevelBlockSize(0), db.cfg.LevelBlockSize(NumLevels-1))
	if slices.ContainsFunc(db.res.Codecs[:], func(c compression.Codec) bool { return c.Algorithm == compression.LZ4 }) {
		b.WriteString("  lz4 is stored as MinLZ: Pebble's table format has no LZ4 block codec.\n")
	}
	if mismatched > 0 {
		fmt.Fprintf(&b, "  %d table(s) were not written with their level's options (codec, block size, index block size, filter): moved down unchanged, or written under another config; a full compaction (strata compact) rewrites them.\n", mismatched)
	}
	if t := m.Tiering; t != nil {
		writeTieringStats(&b, t)
	}
	if db.cfg.EnableBlobFiles {
		bf := m.BlobFiles
		fmt.Fprintf(&b, "Blob files (values of %d bytes and more): %d files, %.2f MB on disk; %.2f MB of values, %.2f MB still referenced",
			db.popts.Experimental.ValueSeparationPolicy().MinimumSize, bf.Files, mb(int64(bf.Bytes)), mb(int64(bf.ValueBytes)), mb(int64(bf.ReferencedValueBytes)))
		if !db.cfg.EnableBlobGarbageCollection {
			b.WriteString(" (enable_blob_garbage_collection = false: garbage stays until no key refers to a file)")
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "Disk usage %.2f MB\n", mb(int64(m.DiskUsageBytes)))

	fmt.Fprintf(&b, "\nThis process, since it opened the database %s ago (counters start at zero at every open: a new process such as `strata stats` shows only its own work, not the database's history):\n",
		time.Since(m.Since).Round(time.Millisecond))
	tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "Level\tIn(MB)\tWrite(MB)\tW-Amp\t")
	for l, lm := range m.Levels {
		wamp := 0.0
		if lm.BytesIn > 0 {
			wamp = float64(lm.BytesWritten) / float64(lm.BytesIn)
		}
		fmt.Fprintf(tw, "L%d\t%.2f\t%.2f\t%.2f\t\n", l, mb(int64(lm.BytesIn)), mb(int64(lm.BytesWritten)), wamp)
	}
	fmt.Fprintf(tw, "Sum\t%.2f\t%.2f\t%.2f\t\n", mb(int64(m.UserBytesIn)), mb(int64(m.TableBytesWritten)), m.WriteAmp)
	_ = tw.Flush()
	fmt.Fprintf(&b, "Write amplification: %.2f (%.2f MB written to tables for %.2f MB of user writes)\n", m.WriteAmp, mb(int64(m.TableBytesWritten)), mb(int64(m.UserBytesIn)))
	c := m.BlockCache
	fmt.Fprintf(&b, "Block cache: %.2f MB of blocks in a %.2f MB cache (block share %.2f MB + memtable budget %.2f MB, %.2f MB reserved by memtables now), %d blocks, hits %d, misses %d, hit rate %.1f%%\n",
		mb(c.UsedBytes), mb(c.CapacityBytes), mb(c.BlockShareBytes), mb(c.MemTableBudgetBytes), mb(c.MemTableReservedBytes), c.Blocks, c.Hits, c.Misses, 100*c.HitRate)
	fmt.Fprintf(&b, "Bloom filter: %d bits/key, L6 filters consulted %v (optimize_filters_for_hits = %v), useful %d, not useful %d, usefulness %.1f%%\n",
		db.cfg.BloomBitsPerKey, db.useL6Filters(), db.cfg.OptimizeFiltersForHits, m.Filter.Hits, m.Filter.Misses, 100*m.Filter.Usefulness)
	if m.WAL.Enabled {
		fmt.Fprintf(&b, "WAL: dir %s, sync %v, %d live files (%.2f MB), %.2f MB logical in, %.2f MB written, %d syncs, %d files created\n",
			m.WAL.Dir, m.WAL.Sync, m.WAL.LiveFiles, mb(int64(m.WAL.LiveBytes)), mb(int64(m.WAL.BytesIn)), mb(m.WAL.FS.BytesWritten), m.WAL.FS.Syncs, m.WAL.FS.Files)
	} else {
		b.WriteString("WAL: disabled (enable_wal = false): writes not yet flushed are lost in a crash\n")
	}
	fmt.Fprintf(&b, "Stalls: %d, total %s", m.Stalls.Count, m.Stalls.Total.Round(1e6))
	if m.Stalls.LastReason != "" {
		fmt.Fprintf(&b, ", last reason %q", m.Stalls.LastReason)
	}
	b.WriteString("\n")
	if e := m.BackgroundErrors; e.Count > 0 {
		fmt.Fprintf(&b, "Background errors: %d, last: %v\n", e.Count, e.Last)
	}
	fmt.Fprintf(&b, "Compactions: %d (%d moves), %d running, pending %.2f MB, %s; flushes %d, %d running\n",
		m.Compaction.Count, m.Compaction.MoveCount, m.Compaction.InProgress, mb(int64(m.Compaction.EstimatedDebtBytes)), m.Compaction.Duration.Round(1e6),
		m.Compaction.Flushes, m.Compaction.FlushesInProgress)
	r := m.Rewrites
	fmt.Fprintf(&b, "Codec rewrites: %d tables (%.2f MB), %d by Pebble's compaction (%d compactions), %d in %d chunks (%.2f MB out, %d retried after racing writes, %d gated); %d failed\n",
		r.Tables, mb(int64(r.BytesIn)), r.ByCompaction, r.Compactions, r.Tables-r.ByCompaction, r.Chunks, mb(int64(r.BytesOut)), r.Retries, r.Gated, r.Failed)
	if d := m.DirectIO; d.Reads || d.Writes {
		fmt.Fprintf(&b, "Direct I/O: reads %v, flush/compaction writes %v; %d direct reads (%.2f MB), %d direct writes (%.2f MB)",
			d.Reads, d.Writes, d.DirectReads, mb(d.DirectReadBytes), d.DirectWrites, mb(d.DirectWriteBytes))
		if len(d.FallbackPaths) > 0 {
			fmt.Fprintf(&b, "; buffered fallback in %s", strings.Join(d.FallbackPaths, ", "))
		}
		b.WriteString("\n")
	} else {
		b.WriteString("Direct I/O: off (buffered reads and writes)\n")
	}
	fmt.Fprintf(&b, "Memtables: %d, %.2f MB; open snapshots: %d\n", m.MemTableCount, mb(int64(m.MemTableBytes)), m.OpenSnapshots)
	if len(m.NotApplicable) > 0 {
		b.WriteString("Settings without effect on Pebble:\n")
		for _, n := range m.NotApplicable {
			fmt.Fprintf(&b, "  %s = %v: %s\n", n.Key, n.Value, n.Reason)
		}
	}
	return b.String(), nil
}

// writeTieringStats writes the level-to-path map and one line per
// db_paths entry: the tables, bytes and target really there.
func writeTieringStats(b *strings.Builder, t *tiering.Stats) {
	if t.Inspected {
		fmt.Fprintf(b, "Tiered layout (db_paths): level-to-path map %s; read from disk (read-only open: no mover running)\n", t.Plan.String())
	} else {
		fmt.Fprintf(b, "Tiered layout (db_paths): level-to-path map %s; mover moved %d files (%.2f MB, %.1f%% of table bytes written), %d failures\n",
			t.Plan.String(), t.MovedFiles, mb(t.MovedBytes), 100*t.MovedShare(), t.MoveFailures)
	}
	for i, p := range t.Paths {
		role := fmt.Sprintf("db_paths[%d]", i)
		if p.Draining {
			role = "draining"
		}
		fmt.Fprintf(b, "  %s %s: %d files, %.2f MB of %.2f MB target (%.1f%%), levels %v",
			role, p.Dir, p.Files, mb(p.Bytes), mb(int64(p.TargetSize)), p.FillPercent, p.Levels)
		if p.Full || p.SpilledFiles > 0 {
			fmt.Fprintf(b, "; full %v (ENOSPC), %d new tables sent to a later path", p.Full, p.SpilledFiles)
		}
		b.WriteByte('\n')
	}
}

func mb(n int64) float64 { return float64(n) / (1 << 20) }
