package admin

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestServeKeepsLargeValuesInBlobFiles: with the server's defaults, values
// of a kilobyte and more (Kubernetes' pods) go to blob files, as the
// server's /metrics reports them, and read back unchanged through clientv3.
func TestServeKeepsLargeValuesInBlobFiles(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, c := startServe(t, t.TempDir())
	// Random hex: the server compresses values against a dictionary of
	// earlier ones (server.compress_values), and these stay 8 KB.
	value := func(i int) string {
		r := rand.New(rand.NewPCG(uint64(i), 1))
		b := make([]byte, 0, 4096)
		for len(b) < cap(b) {
			b = binary.LittleEndian.AppendUint64(b, r.Uint64())
		}
		return fmt.Sprintf("%08d%x", i, b)
	}
	const n = 600 // 4.9 MB: more than the 2 MB memtable of a 16 MB budget, so it flushes
	for i := range n {
		if _, err := c.Put(ctx, fmt.Sprintf("/registry/pods/default/p%04d", i), value(i)); err != nil {
			t.Fatal(err)
		}
	}
	url := "http://" + s.Addr().String() + "/metrics"
	var blobBytes float64
	for deadline := time.Now().Add(30 * time.Second); blobBytes == 0 && time.Now().Before(deadline); {
		blobBytes = scrapeGauge(t, url, "strata_blob_file_bytes")
		if blobBytes == 0 {
			time.Sleep(50 * time.Millisecond) // the flush runs in the background
		}
	}
	if blobBytes == 0 {
		t.Fatal("strata_blob_file_bytes stayed 0: the server kept its large values in the tables")
	}
	for i := 0; i < n; i += 37 {
		r, err := c.Get(ctx, fmt.Sprintf("/registry/pods/default/p%04d", i))
		if err != nil || len(r.Kvs) != 1 || string(r.Kvs[0].Value) != value(i) {
			t.Fatalf("Get pod %d: %v, %d kvs", i, err, len(r.Kvs))
		}
	}
}

// scrapeGauge reads one unlabelled metric from a Prometheus text page.
func scrapeGauge(t *testing.T, url, name string) float64 {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			return f
		}
	}
	t.Fatalf("%s not in %s", name, url)
	return 0
}
