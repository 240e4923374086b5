package bench

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func readTestdata(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestParseHeyPut reads a real hey run against etcd 3.4.23: the first PUT
// of a key answers 201, the others 200.
func TestParseHeyPut(t *testing.T) {
	s, err := ParseHey(readTestdata(t, "hey-put.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if s.Statuses[200] != 39 || s.Statuses[201] != 1 || len(s.Statuses) != 2 || len(s.ErrorCount) != 0 {
		t.Errorf("statuses %v, errors %v; want 39 x 200, 1 x 201", s.Statuses, s.ErrorCount)
	}
	if s.Total() != 40 {
		t.Errorf("Total() = %d, want 40", s.Total())
	}
	if s.Seconds <= 0 || s.RequestsPerSec <= 0 || s.P90 <= 0 {
		t.Errorf("seconds %v, requests/sec %v, p90 %v: want all > 0", s.Seconds, s.RequestsPerSec, s.P90)
	}
}

// TestParseHeyErrors reads a run where no request got a response: the
// errors are counted, and there is no latency.
func TestParseHeyErrors(t *testing.T) {
	s, err := ParseHey(readTestdata(t, "hey-refused.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Statuses) != 0 || s.Total() != 20 || s.P90 != 0 {
		t.Errorf("statuses %v, total %d, p90 %v; want none, 20 errors, 0", s.Statuses, s.Total(), s.P90)
	}
	for msg := range s.ErrorCount {
		if !strings.Contains(msg, "connection refused") {
			t.Errorf("error message %q", msg)
		}
	}
}

func TestParseHeyExact(t *testing.T) {
	out := "\nSummary:\n  Total:\t2.5000 secs\n  Requests/sec:\t40.0000\n\nLatency distribution:\n" +
		"  10% in 0.0005 secs\n  90% in 0.0123 secs\n  99% in 0.0400 secs\n\n" +
		"Status code distribution:\n  [200]\t90 responses\n  [404]\t7 responses\n\n" +
		"Error distribution:\n  [2]\tPut \"http://x\": EOF\n  [1]\tPut \"http://x\": context deadline exceeded (Client.Timeout exceeded while awaiting headers)\n"
	s, err := ParseHey([]byte(out))
	if err != nil {
		t.Fatal(err)
	}
	if s.Seconds != 2.5 || s.RequestsPerSec != 40 || s.P90 != 12300*time.Microsecond {
		t.Errorf("seconds %v rps %v p90 %v", s.Seconds, s.RequestsPerSec, s.P90)
	}
	if s.Statuses[200] != 90 || s.Statuses[404] != 7 || s.Total() != 100 {
		t.Errorf("statuses %v errors %v total %d", s.Statuses, s.ErrorCount, s.Total())
	}
}

func TestParseHeyBad(t *testing.T) {
	for name, out := range map[string]string{
		"empty":          "",
		"no total":       "Summary:\n  Requests/sec:\t4.0\n\nStatus code distribution:\n  [200]\t4 responses\n",
		"no counts":      "Summary:\n  Total:\t1.0 secs\n",
		"garbled status": "Summary:\n  Total:\t1.0 secs\n\nStatus code distribution:\n  200 four\n",
		"garbled error":  "Summary:\n  Total:\t1.0 secs\n\nError distribution:\n  oops\n",
		"usage":          "Usage: hey [options...] <url>\n",
	} {
		if _, err := ParseHey([]byte(out)); !errors.Is(err, ErrHeyOutput) {
			t.Errorf("%s: err = %v, want ErrHeyOutput", name, err)
		}
	}
}

// fakeHey writes a script that prints out whatever its arguments.
func fakeHey(t *testing.T, out string) string {
	t.Helper()
	dir := t.TempDir()
	data := filepath.Join(dir, "out.txt")
	if err := os.WriteFile(data, []byte(out), 0o644); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "hey")
	if err := os.WriteFile(p, []byte("#!/bin/sh\ncat '"+data+"'\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func heyOutput(statuses string) string {
	return "Summary:\n  Total:\t2.0000 secs\n  Requests/sec:\t100.0\n\nLatency distribution:\n  90% in 0.0020 secs\n\nStatus code distribution:\n" + statuses
}

// TestHeyRunCounts checks Run against hey's rule that each of -c workers
// sends -n/-c requests: 300 requests on 64 clients are 256.
func TestHeyRunCounts(t *testing.T) {
	h := HeyRun{URL: "http://127.0.0.1:1/v2/keys/foo", Value: "aaaa", Clients: 64, Requests: 300, Timeout: 10 * time.Second}
	if h.Sent() != 256 {
		t.Fatalf("Sent() = %d, want 256", h.Sent())
	}
	h.Hey = fakeHey(t, heyOutput("  [201]\t1 responses\n  [200]\t250 responses\n  [500]\t5 responses\n"))
	r, err := h.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if r.Requests != 251 || r.Errors != 5 || r.QPS != 125.5 || r.P90 != 2*time.Millisecond {
		t.Errorf("result %+v: want 251 requests, 5 errors, 125.5 QPS, p90 2ms", r)
	}

	// A GET answered 201 is not a read.
	h.Value = ""
	r, err = h.Run(context.Background())
	if err != nil || r.Requests != 250 || r.Errors != 6 {
		t.Errorf("GET: result %+v, err %v: want 250 requests, 6 errors", r, err)
	}

	// Counts that do not add up to what hey was asked to send.
	h.Hey = fakeHey(t, heyOutput("  [200]\t300 responses\n"))
	if _, err := h.Run(context.Background()); !errors.Is(err, ErrHeyOutput) {
		t.Errorf("300 responses counted for 256 sent: err = %v, want ErrHeyOutput", err)
	}
}

func TestHeyRunTimeout(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "hey")
	if err := os.WriteFile(p, []byte("#!/bin/sh\nexec sleep 30\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	h := HeyRun{Hey: p, URL: "http://x", Clients: 1, Requests: 1, Timeout: 200 * time.Millisecond}
	start := time.Now()
	_, err := h.Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "did not finish within") {
		t.Errorf("err = %v, want a timeout", err)
	}
	if time.Since(start) > 10*time.Second {
		t.Errorf("Run took %s: hey was not killed at the timeout", time.Since(start))
	}
}

func TestHeyRunBadArgs(t *testing.T) {
	if _, err := (HeyRun{Hey: "hey", Clients: 8, Requests: 4, Timeout: time.Second}).Run(context.Background()); err == nil {
		t.Error("4 requests on 8 clients: no error")
	}
}
