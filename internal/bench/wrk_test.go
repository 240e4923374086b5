package bench

import (
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
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

// TestParseWrkPut reads a real wrk run of PUTs against strata serve.
func TestParseWrkPut(t *testing.T) {
	s, err := ParseWrk(readTestdata(t, "wrk-put.txt"))
	if err != nil {
		t.Fatal(err)
	}
	want := WrkSummary{Requests: 1501, Seconds: 1.00, P50: 1870 * time.Microsecond, P90: 9330 * time.Microsecond, P99: 61870 * time.Microsecond}
	if s != want {
		t.Errorf("got %+v, want %+v", s, want)
	}
}

// TestParseWrkNon2xx reads a run of GETs of a missing key: every response
// is a 404, which wrk counts as "Non-2xx or 3xx".
func TestParseWrkNon2xx(t *testing.T) {
	s, err := ParseWrk(readTestdata(t, "wrk-get-404.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if s.Requests != 9878 || s.Non2xx != 9878 || s.Seconds != 1.01 || s.P50 != 105*time.Microsecond {
		t.Errorf("got %+v", s)
	}
}

func TestParseWrkUnitsAndErrors(t *testing.T) {
	out := "  Latency Distribution\n     50%  812.00us\n     75%    1.00s\n     90%    1.50s\n     99%    2.00m\n" +
		"  120 requests in 1.00m, 1.00MB read\n  Socket errors: connect 1, read 2, write 3, timeout 4\n  Non-2xx or 3xx responses: 5\n"
	s, err := ParseWrk([]byte(out))
	if err != nil {
		t.Fatal(err)
	}
	want := WrkSummary{Requests: 120, Seconds: 60, P50: 812 * time.Microsecond, P90: 1500 * time.Millisecond, P99: 2 * time.Minute, Non2xx: 5, SocketErrors: 10}
	if s != want {
		t.Errorf("got %+v, want %+v", s, want)
	}
	// Without --latency there is no distribution: an error, not zeros.
	_, err = ParseWrk([]byte("  120 requests in 1.00s, 1.00MB read\n"))
	if !errors.Is(err, ErrWrkOutput) || !strings.Contains(err.Error(), "50% latency") {
		t.Errorf("err = %v", err)
	}
}

func TestPutScript(t *testing.T) {
	got := putScript("a b")
	want := "wrk.method = \"PUT\"\nwrk.body = \"value=a+b\"\nwrk.headers[\"Content-Type\"] = \"application/x-www-form-urlencoded\"\n"
	if got != want {
		t.Errorf("script %q, want %q", got, want)
	}
}

// TestWrkRefused runs wrk against a port nobody listens on: the run
// fails with wrk's message, it does not report zero requests.
func TestWrkRefused(t *testing.T) {
	wrk, err := exec.LookPath("wrk")
	if err != nil {
		t.Skip("wrk is not on PATH (apt-get install wrk)")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	_, err = WrkRun{Wrk: wrk, URL: "http://" + addr + "/v2/keys/foo", Clients: 1, Duration: time.Second}.Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "bench: wrk") {
		t.Errorf("err = %v, want wrk's failure", err)
	}
}
