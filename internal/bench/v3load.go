package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stratadb/strata/internal/procfs"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// V3Op is one request of a V3Load: request number i (0 <= i < Total) of
// the run, sent by client worker on kv.
type V3Op func(ctx context.Context, kv clientv3.KV, worker, i int) error

// V3Load is a closed-loop load generator on etcd's v3 gRPC API, shaped as
// etcd's tools/benchmark: Clients goroutines share Conns clientv3
// connections (client c uses connection c mod Conns), and each sends its
// next request as soon as the previous one is answered, until Total
// requests have been sent or Timeout has passed.
type V3Load struct {
	// Endpoint is the server's HOST:PORT.
	Endpoint string
	// Clients is the number of concurrent requesters.
	Clients int
	// Conns is the number of gRPC connections they share, 1 <= Conns <=
	// Clients.
	Conns int
	// Total is the number of requests to send.
	Total int
	// Timeout bounds the whole run: requests not sent by then are not
	// sent, and the run reports the ones that were.
	Timeout time.Duration
	// RequestTimeout bounds each request. The default value is 10 s.
	RequestTimeout time.Duration
	// Op sends one request.
	Op V3Op
	// NoLatencies skips recording latencies (P90 is then 0), for long
	// loads where only throughput matters.
	NoLatencies bool
}

// nopLogger silences clientv3, whose log would mix with the progress lines.
var nopLogger = zap.NewNop()

// ErrV3Load is returned when a v3 load cannot run at all.
var ErrV3Load = errors.New("bench: v3 load")

// Run runs the load. Failed requests are counted in Result.Errors; the
// error return is for a load that could not run (no connection).
func (l V3Load) Run(ctx context.Context) (Result, error) {
	if l.Clients < 1 || l.Conns < 1 || l.Conns > l.Clients || l.Total < 1 {
		return Result{}, fmt.Errorf("%w: need 1 <= conns (%d) <= clients (%d) and total (%d) >= 1", ErrV3Load, l.Conns, l.Clients, l.Total)
	}
	reqTimeout := l.RequestTimeout
	if reqTimeout == 0 {
		reqTimeout = 10 * time.Second
	}
	conns := make([]*clientv3.Client, 0, l.Conns)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for range l.Conns {
		c, err := clientv3.New(clientv3.Config{
			Endpoints:   []string{l.Endpoint},
			DialTimeout: 5 * time.Second,
			Logger:      nopLogger,
		})
		if err != nil {
			return Result{}, fmt.Errorf("%w: connecting to %s: %w", ErrV3Load, l.Endpoint, err)
		}
		conns = append(conns, c)
	}

	ctx, cancel := context.WithTimeout(ctx, l.Timeout)
	defer cancel()
	var lat []time.Duration
	if !l.NoLatencies {
		lat = make([]time.Duration, l.Total)
	}
	var (
		next   atomic.Int64 // the next request number to send
		errs   atomic.Int64
		wg     sync.WaitGroup
		mu     sync.Mutex
		lastOK time.Time
	)
	cpu0, cpuErr := procfs.CPU(os.Getpid())
	start := time.Now()
	for w := range l.Clients {
		kv := conns[w%len(conns)].KV
		wg.Add(1)
		go func() {
			defer wg.Done()
			var end time.Time
			for ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if i >= l.Total {
					break
				}
				rctx, rcancel := context.WithTimeout(ctx, reqTimeout)
				t0 := time.Now()
				err := l.Op(rctx, kv, w, i)
				end = time.Now()
				rcancel()
				if err != nil {
					errs.Add(1)
					if lat != nil {
						lat[i] = -1
					}
					continue
				}
				if lat != nil {
					lat[i] = end.Sub(t0)
				}
			}
			mu.Lock()
			if end.After(lastOK) {
				lastOK = end
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	sent := min(int(next.Load()), l.Total)
	r := Result{Errors: int(errs.Load())}
	if cpu1, err := procfs.CPU(os.Getpid()); err == nil && cpuErr == nil {
		r.LoadCPUSeconds = cpu1 - cpu0
	}
	r.Requests = sent - r.Errors
	if !lastOK.IsZero() {
		r.Seconds = lastOK.Sub(start).Seconds()
	}
	if r.Seconds > 0 {
		r.QPS = float64(r.Requests) / r.Seconds
	}
	if lat != nil {
		ok := make([]time.Duration, 0, r.Requests)
		for _, d := range lat[:sent] {
			if d >= 0 {
				ok = append(ok, d)
			}
		}
		slices.Sort(ok)
		r.P90, r.P99 = percentile(ok, 90), percentile(ok, 99)
	}
	return r, nil
}
