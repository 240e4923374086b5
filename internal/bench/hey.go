package bench

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/url"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Result is what one load run measured.
type Result struct {
	// Requests is the number of requests that succeeded.
	Requests int `json:"requests"`
	// Errors counts the requests that failed: transport errors, timeouts
	// and unexpected HTTP statuses.
	Errors int `json:"errors"`
	// Seconds is the wall time of the run.
	Seconds float64 `json:"seconds"`
	// QPS is successful requests per second of wall time.
	QPS float64 `json:"qps"`
	// P90 is the 90th percentile of the latency of the successful
	// requests.
	P90 time.Duration `json:"p90_ns"`
	// LoadCPUSeconds is the CPU time (user + system) the load tool used:
	// hey's process, or this process for the v3 generator. On a machine
	// shared by the load tool and the server it bounds what any server
	// could reach: QPS <= cores / (load + server CPU per request).
	LoadCPUSeconds float64 `json:"load_cpu_seconds"`
}

// HeyRun is one run of the HTTP load tool hey against one URL.
type HeyRun struct {
	// Hey is the hey executable.
	Hey string
	// URL is the target, such as http://127.0.0.1:2379/v2/keys/foo.
	URL string
	// Value, if not empty, makes the run PUT the form value=Value (the
	// etcd v2 write); otherwise it GETs.
	Value string
	// Clients is hey's -c, the number of concurrent workers, each with its
	// own connection.
	Clients int
	// Requests is hey's -n. hey gives each worker Requests/Clients
	// requests, so Requests is rounded down to a multiple of Clients
	// (see Sent).
	Requests int
	// Timeout bounds the whole run; hey is killed after it.
	Timeout time.Duration
}

// Sent is the number of requests hey sends: Requests/Clients per worker.
func (h HeyRun) Sent() int { return h.Requests / h.Clients * h.Clients }

// args are hey's arguments: -t bounds each request at 10 s.
func (h HeyRun) args() []string {
	a := []string{"-n", strconv.Itoa(h.Requests), "-c", strconv.Itoa(h.Clients), "-t", "10"}
	if h.Value != "" {
		body := url.Values{"value": {h.Value}}.Encode()
		a = append(a, "-m", "PUT", "-T", "application/x-www-form-urlencoded", "-d", body)
	}
	return append(a, h.URL)
}

// ErrHeyOutput is returned when hey's output cannot be read.
var ErrHeyOutput = errors.New("bench: unexpected hey output")

// Run runs hey and parses its summary. Statuses other than 200 (and 201
// for a PUT, etcd's answer to the first write of a key) count as errors;
// a run whose request count does not add up to Sent is an error.
func (h HeyRun) Run(ctx context.Context) (Result, error) {
	if h.Clients < 1 || h.Requests < h.Clients {
		return Result{}, fmt.Errorf("bench: hey needs clients >= 1 and requests >= clients, not %d and %d", h.Clients, h.Requests)
	}
	ctx, cancel := context.WithTimeout(ctx, h.Timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, h.Hey, h.args()...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if ctx.Err() != nil {
		return Result{}, fmt.Errorf("bench: hey %s did not finish within %s", strings.Join(h.args(), " "), h.Timeout)
	}
	if err != nil {
		return Result{}, fmt.Errorf("bench: hey %s: %w: %s", strings.Join(h.args(), " "), err, bytes.TrimSpace(stderr.Bytes()))
	}
	s, err := ParseHey(out)
	if err != nil {
		return Result{}, err
	}
	ok := s.Statuses[200]
	if h.Value != "" {
		ok += s.Statuses[201]
	}
	r := Result{
		Requests:       ok,
		Errors:         s.Total() - ok,
		Seconds:        s.Seconds,
		P90:            s.P90,
		LoadCPUSeconds: (cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()).Seconds(),
	}
	if r.Seconds > 0 {
		r.QPS = float64(r.Requests) / r.Seconds
	}
	if s.Total() != h.Sent() {
		return r, fmt.Errorf("%w: %d responses and errors counted, %d requests sent (-n %d -c %d)", ErrHeyOutput, s.Total(), h.Sent(), h.Requests, h.Clients)
	}
	return r, nil
}

// HeySummary is hey's default (summary) output, parsed.
type HeySummary struct {
	// Seconds is "Total:", the wall time of the run.
	Seconds float64
	// RequestsPerSec is hey's "Requests/sec:", all responses (any status)
	// per second.
	RequestsPerSec float64
	// P90 is "90% in ... secs" of the latency distribution, which hey
	// computes over the requests that got a response; 0 if none did.
	P90 time.Duration
	// Statuses counts responses by HTTP status.
	Statuses map[int]int
	// ErrorCount counts the requests that got no response, by message.
	ErrorCount map[string]int
}

// Total is the number of requests hey counted: responses plus errors.
func (s HeySummary) Total() int {
	n := 0
	for _, c := range s.Statuses {
		n += c
	}
	for _, c := range s.ErrorCount {
		n += c
	}
	return n
}

var (
	heyTotal    = regexp.MustCompile(`^\s*Total:\s+([0-9.]+) secs`)
	heyRPS      = regexp.MustCompile(`^\s*Requests/sec:\s+([0-9.]+)`)
	heyP90      = regexp.MustCompile(`^\s*90% in ([0-9.]+) secs`)
	heyStatus   = regexp.MustCompile(`^\s*\[(\d+)\]\s+(\d+) responses`)
	heyErrorRow = regexp.MustCompile(`^\s*\[(\d+)\]\s+(.*)$`)
)

// ParseHey parses hey's summary output (hey 0.1.x, as Debian ships it).
// Seconds and the status section must be present; a run in which every
// request failed has no latency distribution and no statuses, only errors.
func ParseHey(out []byte) (HeySummary, error) {
	s := HeySummary{Statuses: map[int]int{}, ErrorCount: map[string]int{}}
	section := ""
	haveTotal := false
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		switch {
		case strings.HasSuffix(trimmed, ":") && !strings.HasPrefix(line, " "):
			section = strings.TrimSuffix(trimmed, ":")
			continue
		case trimmed == "":
			continue
		}
		switch section {
		case "Summary":
			if m := heyTotal.FindStringSubmatch(line); m != nil {
				v, err := strconv.ParseFloat(m[1], 64)
				if err != nil {
					return s, fmt.Errorf("%w: %q: %v", ErrHeyOutput, line, err)
				}
				s.Seconds, haveTotal = v, true
			} else if m := heyRPS.FindStringSubmatch(line); m != nil {
				v, err := strconv.ParseFloat(m[1], 64)
				if err != nil {
					return s, fmt.Errorf("%w: %q: %v", ErrHeyOutput, line, err)
				}
				s.RequestsPerSec = v
			}
		case "Latency distribution":
			if m := heyP90.FindStringSubmatch(line); m != nil {
				v, err := strconv.ParseFloat(m[1], 64)
				if err != nil {
					return s, fmt.Errorf("%w: %q: %v", ErrHeyOutput, line, err)
				}
				s.P90 = time.Duration(v * float64(time.Second))
			}
		case "Status code distribution":
			m := heyStatus.FindStringSubmatch(line)
			if m == nil {
				return s, fmt.Errorf("%w: status line %q", ErrHeyOutput, line)
			}
			code, _ := strconv.Atoi(m[1])
			n, _ := strconv.Atoi(m[2])
			s.Statuses[code] += n
		case "Error distribution":
			m := heyErrorRow.FindStringSubmatch(line)
			if m == nil {
				return s, fmt.Errorf("%w: error line %q", ErrHeyOutput, line)
			}
			n, _ := strconv.Atoi(m[1])
			s.ErrorCount[m[2]] += n
		}
	}
	if err := sc.Err(); err != nil {
		return s, err
	}
	if !haveTotal {
		return s, fmt.Errorf("%w: no \"Total: ... secs\" line in the summary (output starts %q)", ErrHeyOutput, truncate(out))
	}
	if s.Total() == 0 {
		return s, fmt.Errorf("%w: no status or error counts (output starts %q)", ErrHeyOutput, truncate(out))
	}
	return s, nil
}
