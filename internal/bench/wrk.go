package bench

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// WrkRun is one run of the HTTP load tool wrk (Debian's wrk 4.1) against
// one URL: Clients connections, each sending its next request as soon as
// the previous one is answered, for Duration. wrk is an event loop in C,
// so on the load tool's CPU it costs several times less per request than
// hey, which would otherwise bound what a pinned server can be shown to
// do.
type WrkRun struct {
	// Wrk is the wrk executable.
	Wrk string
	// URL is the target, such as http://127.0.0.1:2379/v2/keys/foo.
	URL string
	// Value, if not empty, makes the run PUT the form value=Value (the
	// etcd v2 write, sent by a Lua script written to Dir); otherwise it
	// GETs.
	Value string
	// Clients is wrk's -c, the number of connections.
	Clients int
	// Threads is wrk's -t, at most Clients. The default value is 1, one
	// event loop: the load tool pinned to one CPU needs no more.
	Threads int
	// Duration is wrk's -d, in whole seconds (at least 1).
	Duration time.Duration
	// Dir is where the PUT script is written; "" is os.TempDir().
	Dir string
	// Pin runs wrk on Pin.LoadCPUs; the zero Pinning leaves it unpinned.
	Pin Pinning
}

// ErrWrkOutput is returned when wrk's output cannot be read.
var ErrWrkOutput = errors.New("bench: unexpected wrk output")

// wrkRequestTimeout is wrk's --timeout: a request unanswered this long
// counts as an error.
const wrkRequestTimeout = 10 * time.Second

// putScript is the Lua script of a PUT run: wrk's request table is set
// once and sent as is.
func putScript(value string) string {
	body := url.Values{"value": {value}}.Encode()
	return fmt.Sprintf("wrk.method = \"PUT\"\nwrk.body = %q\nwrk.headers[\"Content-Type\"] = \"application/x-www-form-urlencoded\"\n", body)
}

// args are wrk's arguments, with script the PUT script's path ("" for a
// GET).
func (w WrkRun) args(script string) []string {
	secs := max(1, int(w.Duration.Round(time.Second)/time.Second))
	a := []string{"-t", strconv.Itoa(max(1, w.Threads)), "-c", strconv.Itoa(w.Clients),
		"-d", fmt.Sprintf("%ds", secs), "--timeout", fmt.Sprintf("%ds", int(wrkRequestTimeout/time.Second)), "--latency"}
	if script != "" {
		a = append(a, "-s", script)
	}
	return append(a, w.URL)
}

// Run runs wrk and reads its summary. Responses other than 2xx and 3xx
// and socket errors (connect, read, write, timeout) count as errors.
func (w WrkRun) Run(ctx context.Context) (Result, error) {
	if w.Clients < 1 || w.Threads > w.Clients || w.Duration < time.Second {
		return Result{}, fmt.Errorf("bench: wrk needs clients >= 1, threads <= clients and a duration >= 1s, not %d, %d and %s", w.Clients, w.Threads, w.Duration)
	}
	script := ""
	if w.Value != "" {
		f, err := os.CreateTemp(w.Dir, "wrk-put-*.lua")
		if err != nil {
			return Result{}, fmt.Errorf("bench: wrk PUT script: %w", err)
		}
		script = f.Name()
		defer os.Remove(script)
		_, err = f.WriteString(putScript(w.Value))
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return Result{}, fmt.Errorf("bench: wrk PUT script: %w", err)
		}
	}
	args := w.args(script)
	ctx, cancel := context.WithTimeout(ctx, w.Duration+wrkRequestTimeout+time.Minute)
	defer cancel()
	cmd := w.Pin.Command(w.Pin.LoadCPUs, w.Wrk, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		return Result{}, fmt.Errorf("bench: wrk: %w", err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-ctx.Done():
		_ = cmd.Process.Kill()
		<-done
		return Result{}, fmt.Errorf("bench: wrk %s did not finish: %w", strings.Join(args, " "), ctx.Err())
	}
	if err != nil {
		return Result{}, fmt.Errorf("bench: wrk %s: %w: %s", strings.Join(args, " "), err, bytes.TrimSpace(append(stdout.Bytes(), stderr.Bytes()...)))
	}
	s, err := ParseWrk(stdout.Bytes())
	if err != nil {
		return Result{}, err
	}
	errs := s.Non2xx + s.SocketErrors
	r := Result{
		Requests:       s.Requests - s.Non2xx,
		Errors:         errs,
		Seconds:        s.Seconds,
		P90:            s.P90,
		P99:            s.P99,
		LoadCPUSeconds: (cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()).Seconds(),
	}
	if r.Seconds > 0 {
		r.QPS = float64(r.Requests) / r.Seconds
	}
	return r, nil
}

// WrkSummary is wrk's output with --latency, parsed.
type WrkSummary struct {
	// Requests is "N requests in ...": responses of any status.
	Requests int
	// Seconds is the duration of that line.
	Seconds float64
	// P50, P90 and P99 are the latency distribution's percentiles.
	P50, P90, P99 time.Duration
	// Non2xx is "Non-2xx or 3xx responses:", 0 when absent.
	Non2xx int
	// SocketErrors sums "Socket errors: connect, read, write, timeout",
	// 0 when absent.
	SocketErrors int
}

var (
	wrkRequests = regexp.MustCompile(`^\s*(\d+) requests in ([0-9.]+)(us|ms|s|m|h),`)
	wrkPercent  = regexp.MustCompile(`^\s*(50|90|99)%\s+([0-9.]+)(us|ms|s|m|h)\s*$`)
	wrkNon2xx   = regexp.MustCompile(`^\s*Non-2xx or 3xx responses:\s+(\d+)`)
	wrkSocket   = regexp.MustCompile(`^\s*Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)`)
)

// wrkUnits are wrk's time units.
var wrkUnits = map[string]time.Duration{"us": time.Microsecond, "ms": time.Millisecond, "s": time.Second, "m": time.Minute, "h": time.Hour}

// ParseWrk parses the output of wrk 4.1 run with --latency. The requests
// line and the 50, 90 and 99% lines must be present.
func ParseWrk(out []byte) (WrkSummary, error) {
	var s WrkSummary
	have := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		if m := wrkRequests.FindStringSubmatch(line); m != nil {
			n, err1 := strconv.Atoi(m[1])
			d, err2 := strconv.ParseFloat(m[2], 64)
			if err1 != nil || err2 != nil {
				return s, fmt.Errorf("%w: %q", ErrWrkOutput, line)
			}
			s.Requests, s.Seconds = n, d*wrkUnits[m[3]].Seconds()
			have["requests"] = true
		} else if m := wrkPercent.FindStringSubmatch(line); m != nil {
			v, err := strconv.ParseFloat(m[2], 64)
			if err != nil {
				return s, fmt.Errorf("%w: %q", ErrWrkOutput, line)
			}
			d := time.Duration(v * float64(wrkUnits[m[3]]))
			switch m[1] {
			case "50":
				s.P50 = d
			case "90":
				s.P90 = d
			case "99":
				s.P99 = d
			}
			have[m[1]] = true
		} else if m := wrkNon2xx.FindStringSubmatch(line); m != nil {
			s.Non2xx, _ = strconv.Atoi(m[1])
		} else if m := wrkSocket.FindStringSubmatch(line); m != nil {
			for _, f := range m[1:] {
				n, _ := strconv.Atoi(f)
				s.SocketErrors += n
			}
		}
	}
	if err := sc.Err(); err != nil {
		return s, err
	}
	for _, k := range []string{"requests", "50", "90", "99"} {
		if !have[k] {
			what := k + "% latency"
			if k == "requests" {
				what = `"N requests in D"`
			}
			return s, fmt.Errorf("%w: no %s line (wrk run without --latency?); output starts %q", ErrWrkOutput, what, truncate(out))
		}
	}
	return s, nil
}
