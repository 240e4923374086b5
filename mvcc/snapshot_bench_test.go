package mvcc

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

var restoreMB = flag.String("restore-mb", "64,256", "BenchmarkRestoreSnapshot: the sizes of the snapshots' values in MB, comma-separated")

// BenchmarkRestoreSnapshot restores a snapshot of a store holding size MB (-restore-mb)
// of values (1 KB each, about half compressible, 1,000 puts per revision)
// over a store holding 16 MB of other keys, from a file, as a raft member
// does. Besides the time (MB/s of snapshot) it reports peak-heap-MB, the
// most the Go heap in use grew over its size before the restore (sampled
// every 2 ms), and peak-rss-MB, the process's peak resident set during the
// restore (Linux: VmHWM after resetting it), which also counts memory
// Pebble allocates outside the Go heap.
func BenchmarkRestoreSnapshot(b *testing.B) {
	for _, field := range strings.Split(*restoreMB, ",") {
		mb, err := strconv.Atoi(field)
		if err != nil || mb < 1 {
			b.Fatalf("-restore-mb %q: %q is not a size in MB (a whole number >= 1)", *restoreMB, field)
		}
		b.Run(fmt.Sprintf("size=%dMB", mb), func(b *testing.B) {
			src := openStore(b, benchDB(b), Options{})
			defer src.Close()
			loadRandomValues(b, src, "key/", mb<<10, 1)
			path := filepath.Join(b.TempDir(), "snapshot")
			size := writeSnapshotFile(b, src, path)
			dst := openStore(b, benchDB(b), Options{})
			defer dst.Close()
			loadRandomValues(b, dst, "old/", 16<<10, 2)
			f, err := os.Open(path)
			if err != nil {
				b.Fatal(err)
			}
			defer f.Close()
			b.SetBytes(size)
			var heap, rss float64
			for b.Loop() {
				if _, err := f.Seek(0, io.SeekStart); err != nil {
					b.Fatal(err)
				}
				runtime.GC()
				before := heapInUse()
				resetPeakRSS()
				stop := sampleHeap()
				err := dst.RestoreSnapshot(f)
				peak := stop()
				if err != nil {
					b.Fatal(err)
				}
				heap = max(heap, float64(peak-min(peak, before))/(1<<20))
				rss = max(rss, float64(peakRSS())/(1<<20))
			}
			if dst.Rev() != src.Rev() {
				b.Fatalf("restored at revision %d, source %d", dst.Rev(), src.Rev())
			}
			b.ReportMetric(heap, "peak-heap-MB")
			b.ReportMetric(rss, "peak-rss-MB")
		})
	}
}

// loadRandomValues puts n keys prefix000000000000.. with 1 KB values of
// random letters a..p (about half compressible), 1,000 per revision.
func loadRandomValues(b *testing.B, s *Store, prefix string, n int, seed uint64) {
	b.Helper()
	r := rand.New(rand.NewPCG(seed, 3))
	for i := 0; i < n; i += 1000 {
		var ops []Op
		for j := i; j < min(n, i+1000); j++ {
			v := make([]byte, 1024)
			for k := range v {
				v[k] = 'a' + byte(r.IntN(16))
			}
			ops = append(ops, PutOp(fmt.Appendf(nil, "%s%012d", prefix, j), v))
		}
		if _, err := s.Txn(TxnRequest{Success: ops}); err != nil {
			b.Fatal(err)
		}
	}
}

// writeSnapshotFile writes s's snapshot to path and returns its size.
func writeSnapshotFile(b *testing.B, s *Store, path string) int64 {
	b.Helper()
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	w := bufio.NewWriter(f)
	if _, err := s.WriteSnapshot(w); err != nil {
		b.Fatal(err)
	}
	if err := w.Flush(); err != nil {
		b.Fatal(err)
	}
	st, err := f.Stat()
	if err != nil {
		b.Fatal(err)
	}
	return st.Size()
}

func heapInUse() uint64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

// sampleHeap samples the heap in use every 2 ms until the returned
// function is called, which returns the largest sample.
func sampleHeap() (stop func() uint64) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	var peak uint64
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(2 * time.Millisecond)
		defer t.Stop()
		for {
			peak = max(peak, heapInUse())
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	return func() uint64 {
		close(done)
		wg.Wait()
		return max(peak, heapInUse())
	}
}

// resetPeakRSS resets the process's peak resident set (Linux; elsewhere
// it does nothing and peakRSS reports 0).
func resetPeakRSS() { _ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) }

// peakRSS is VmHWM of /proc/self/status in bytes, 0 if unknown.
func peakRSS() uint64 {
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(status), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}
