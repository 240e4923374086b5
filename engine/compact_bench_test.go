package engine

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stratadb/strata/config"
)

// BenchmarkCompactAllPutLatency measures what writers feel during
// CompactAll: a database of STRATA_BENCH_COMPACT_MB (default 128) MB is
// written and fully compacted with compression_bottommost = "lz4", reopened
// with "zstd" (so every L6 table must be rewritten), and CompactAll runs
// while one writer puts unique values into random keys over the whole key
// space. It reports the worst and the 99.9th percentile Put latency during
// CompactAll, CompactAll's wall time, and checks afterwards that every key
// holds the last value acknowledged for it. Run by hand (the set-up writes
// the whole database):
//
//	go test ./engine/ -run '^$' -bench CompactAllPutLatency -benchtime 1x
//
// It uses only the public API, so the same file measures older versions.
func BenchmarkCompactAllPutLatency(b *testing.B) {
	mb := 128
	if s := os.Getenv("STRATA_BENCH_COMPACT_MB"); s != "" {
		mb, _ = strconv.Atoi(s)
	}
	// writer=before starts the writer 50 ms before CompactAll, so its
	// flushed writes overlap every table and Pebble's own compaction
	// rewrites them; writer=during starts it 20 ms after CompactAll began,
	// once Pebble has found nothing to merge, so the writes race Strata's
	// codec rewrite of the moved tables. writer=alone is the peer: the same
	// database and writer for 2 s without CompactAll, so the figures can be
	// read against what the machine does to a writer anyway.
	for _, start := range []struct {
		name  string
		delay time.Duration
		alone bool
	}{{"before", -50 * time.Millisecond, false}, {"during", 20 * time.Millisecond, false}, {"alone", -50 * time.Millisecond, true}} {
		b.Run("writer="+start.name, func(b *testing.B) { benchCompactAllPutLatency(b, mb, start.delay, start.alone) })
	}
}

func benchCompactAllPutLatency(b *testing.B, mb int, delay time.Duration, alone bool) {
	const valueSize = 1000
	n := mb << 20 / valueSize
	for b.Loop() {
		b.StopTimer()
		cfg := config.Default()
		cfg.DBPath = filepath.Join(b.TempDir(), "db")
		cfg.CompressionBottommost = "lz4"
		cfg.BlockCacheSizeMB = 64
		cfg.MemtableSizeMB = 64
		db, err := Open(cfg)
		if err != nil {
			b.Fatal(err)
		}
		for i := 0; i < n; i += 1000 {
			batch := db.NewBatch()
			for j := i; j < min(n, i+1000); j++ {
				if err := batch.Put(key(j), doc(j, valueSize)); err != nil {
					b.Fatal(err)
				}
			}
			if err := batch.Commit(); err != nil {
				b.Fatal(err)
			}
			_ = batch.Close()
		}
		if err := db.CompactAll(); err != nil {
			b.Fatal(err)
		}
		if err := db.Close(); err != nil {
			b.Fatal(err)
		}
		cfg.CompressionBottommost = "zstd"
		if db, err = Open(cfg); err != nil {
			b.Fatal(err)
		}

		var stop atomic.Bool
		var wg sync.WaitGroup
		var lat []time.Duration
		last := map[int][]byte{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if delay > 0 {
				time.Sleep(delay)
			}
			r := rand.New(rand.NewPCG(1, 2))
			for seq := 0; !stop.Load(); seq++ {
				i := r.IntN(n)
				v := []byte(fmt.Sprintf("unique value %d", seq))
				began := time.Now()
				if err := db.Put(key(i), v); err != nil {
					b.Error(err)
					return
				}
				lat = append(lat, time.Since(began))
				last[i] = v
			}
		}()
		if delay < 0 {
			time.Sleep(-delay)
		}
		b.StartTimer()
		cpuBefore := cpuSeconds()
		began := time.Now()
		if alone {
			time.Sleep(2 * time.Second)
		} else {
			err = db.CompactAll()
		}
		elapsed := time.Since(began)
		cpu := cpuSeconds() - cpuBefore
		b.StopTimer()
		stop.Store(true)
		wg.Wait()
		if err != nil {
			b.Fatal(err)
		}
		for i, v := range last {
			got, err := db.Get(key(i))
			if err != nil || !bytes.Equal(got, v) {
				b.Fatalf("key %d: %q, %v; want the last acknowledged %q", i, got, err, v)
			}
		}
		m, err := db.Metrics()
		if err != nil {
			b.Fatal(err)
		}
		tables, err := db.Tables()
		if err != nil {
			b.Fatal(err)
		}
		stale := 0
		for _, t := range tables {
			if t.Level == 6 && t.Codec != "ZSTD" {
				stale++
			}
		}
		if err := db.Close(); err != nil {
			b.Fatal(err)
		}
		slices.Sort(lat)
		b.ReportMetric(float64(lat[len(lat)-1].Microseconds())/1000, "worst-put-ms")
		b.ReportMetric(float64(lat[len(lat)*999/1000].Microseconds())/1000, "p999-put-ms")
		b.ReportMetric(elapsed.Seconds(), "compactall-s")
		b.ReportMetric(cpu, "cpu-s")
		b.ReportMetric(float64(len(lat)), "puts")
		b.ReportMetric(float64(stale), "stale-L6-tables")
		b.ReportMetric(float64(m.Stalls.Count), "stalls")
		b.ReportMetric(m.Stalls.Total.Seconds()*1000, "stall-ms")
		b.ReportMetric(float64(m.Rewrites.Tables), "rewritten-tables")
		b.StartTimer()
	}
}

// cpuSeconds is the process's user plus system CPU time so far.
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}
