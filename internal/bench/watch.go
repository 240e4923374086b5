package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/stratadb/strata/internal/report"
)

// WatchOptions configure RunWatch: puts to the watched keys of a fresh
// server with no watcher, then with Watchers watchers on distinct keys and
// PrefixWatchers on one shared prefix, set up as etcd's `benchmark watch`
// does (watchers spread over Streams gRPC streams), for each server.
type WatchOptions struct {
	// Servers are the servers to run, each in turn.
	Servers []Kind
	// Programs say how to start them.
	Programs Programs
	// Dir holds the servers' data directories ("" for the system's
	// temporary directory).
	Dir string
	// Watchers watch one key each, /w/00000, /w/00001, ...;
	// PrefixWatchers watch the prefix /w/00 (the first 1,000 keys, 10%
	// of 10,000), so a put to one of those keys has PrefixWatchers+1
	// watchers and the others one.
	Watchers, PrefixWatchers int
	// Streams is the number of gRPC streams (one connection each) the
	// watchers are spread over.
	Streams int
	// Puts is the number of puts, to the watched keys in turn, from
	// Clients concurrent clients over Conns connections; ValueSize their
	// value's size in bytes.
	Puts, Clients, Conns, ValueSize int
	// Pin runs each server on Pin.ServerCPUs and the load, which runs in
	// this process, on Pin.LoadCPUs; the zero Pinning pins nothing.
	Pin Pinning
	// Timeout bounds each run.
	Timeout time.Duration
	// Progress receives a line per run; nil discards them.
	Progress io.Writer
}

// WatchSample is one run: a server with or without watchers.
type WatchSample struct {
	Server   string
	Watchers int
	// PutsPerSec, PutP50 and PutP99 are the puts' throughput and latency.
	PutsPerSec     float64
	PutP50, PutP99 time.Duration
	// CPUPer1000 is the server's CPU seconds (user + system) per 1000
	// puts, from the first put until every event was received.
	CPUPer1000 float64
	// Events is the number of events received; Expected the number the
	// puts make (each put, once per watcher of its key). Disorder counts
	// events received at a revision below their watcher's previous one.
	Events, Expected, Disorder int
	// SetupSeconds is the time to create the watchers.
	SetupSeconds float64
}

// WatchRun is what RunWatch measured.
type WatchRun struct {
	Options WatchOptions
	Samples []WatchSample
}

// ErrWatchLoad reports a run that failed, or lost or repeated events.
var ErrWatchLoad = errors.New("bench: watch load")

func (o *WatchOptions) validate() error {
	var errs []error
	for _, f := range []struct {
		name   string
		v, min int
	}{{"watchers", o.Watchers, 0}, {"prefix watchers", o.PrefixWatchers, 0}, {"streams", o.Streams, 1}, {"puts", o.Puts, 1}, {"clients", o.Clients, 1}, {"conns", o.Conns, 1}, {"value size", o.ValueSize, 0}} {
		if f.v < f.min {
			errs = append(errs, fmt.Errorf("%w: %s %d: must be >= %d", ErrWatchLoad, f.name, f.v, f.min))
		}
	}
	if o.Conns > o.Clients {
		errs = append(errs, fmt.Errorf("%w: conns %d: must be <= clients (%d)", ErrWatchLoad, o.Conns, o.Clients))
	}
	if o.Watchers > 100000 {
		errs = append(errs, fmt.Errorf("%w: watchers %d: at most 100000 (keys /w/00000 to /w/99999)", ErrWatchLoad, o.Watchers))
	}
	if o.Timeout <= 0 {
		errs = append(errs, fmt.Errorf("%w: timeout %s: must be > 0", ErrWatchLoad, o.Timeout))
	}
	if err := o.Pin.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("%w: %w", ErrWatchLoad, err))
	}
	return errors.Join(errs...)
}

// watchKey is the i-th watched key.
func watchKey(i int) string { return fmt.Sprintf("/w/%05d", i) }

// watchPrefix is the prefix the prefix watchers share: keys 0 to 999.
const watchPrefix = "/w/00"

// RunWatch runs, for each server, puts without watchers and then with
// them, each on a fresh server.
func RunWatch(ctx context.Context, o WatchOptions) (*WatchRun, error) {
	if err := o.validate(); err != nil {
		return nil, err
	}
	progress := o.Progress
	if progress == nil {
		progress = io.Discard
	}
	fmt.Fprintf(progress, "%s\n", o.Pin)
	unpin, err := o.Pin.PinSelf()
	if err != nil {
		return nil, fmt.Errorf("%w: pinning the load: %w", ErrWatchLoad, err)
	}
	defer unpin()
	run := &WatchRun{Options: o}
	for _, k := range o.Servers {
		for _, watched := range []bool{false, true} {
			s, err := o.runOne(ctx, k, watched)
			if err != nil {
				return run, err
			}
			fmt.Fprintf(progress, "%s, %d watchers: %.0f puts/s, p99 %.1f ms, %.2f CPU-s/1000 puts, %d/%d events\n",
				s.Server, s.Watchers, s.PutsPerSec, ms(s.PutP99), s.CPUPer1000, s.Events, s.Expected)
			run.Samples = append(run.Samples, s)
			if s.Events != s.Expected || s.Disorder > 0 {
				return run, fmt.Errorf("%w: %s: %d events received, %d expected, %d out of order", ErrWatchLoad, s.Server, s.Events, s.Expected, s.Disorder)
			}
		}
	}
	return run, nil
}

func (o *WatchOptions) runOne(ctx context.Context, k Kind, watched bool) (WatchSample, error) {
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	srv, err := StartServer(ctx, k, o.Programs, o.Dir, StartOptions{Pin: o.Pin})
	if err != nil {
		return WatchSample{}, err
	}
	defer srv.Stop()
	sample := WatchSample{Server: srv.Name}
	keys := max(o.Watchers, 1)
	w := &watchSet{}
	if watched {
		sample.Watchers = o.Watchers + o.PrefixWatchers
		t0 := time.Now()
		if err := w.open(ctx, srv.Endpoint, o.Watchers, o.PrefixWatchers, o.Streams); err != nil {
			w.close()
			return sample, err
		}
		defer w.close()
		sample.SetupSeconds = time.Since(t0).Seconds()
		for i := range o.Puts {
			sample.Expected += w.watchersOf(i % keys)
		}
	}

	value := strings.Repeat("v", o.ValueSize)
	lat := make([]time.Duration, o.Puts)
	load := V3Load{
		Endpoint: srv.Endpoint, Clients: o.Clients, Conns: o.Conns, Total: o.Puts, Timeout: o.Timeout,
		NoLatencies: true,
		Op: func(ctx context.Context, kv clientv3.KV, _, i int) error {
			t0 := time.Now()
			_, err := kv.Put(ctx, watchKey(i%keys), value)
			lat[i] = time.Since(t0)
			return err
		},
	}
	cpu0, err := srv.CPU()
	if err != nil {
		return sample, err
	}
	res, err := load.Run(ctx)
	if err != nil {
		return sample, err
	}
	if res.Errors > 0 {
		return sample, fmt.Errorf("%w: %s: %d of %d puts failed", ErrWatchLoad, srv.Name, res.Errors, o.Puts)
	}
	// Every event, or what arrives in 30 s more.
	deadline := time.Now().Add(30 * time.Second)
	for w.events.Load() < int64(sample.Expected) && time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(10 * time.Millisecond)
	}
	cpu1, err := srv.CPU()
	if err != nil {
		return sample, err
	}
	time.Sleep(100 * time.Millisecond) // room for an extra, repeated event
	sample.Events, sample.Disorder = int(w.events.Load()), int(w.disorder.Load())
	slices.Sort(lat)
	sample.PutsPerSec = res.QPS
	sample.PutP50, sample.PutP99 = percentile(lat, 50), percentile(lat, 99)
	sample.CPUPer1000 = (cpu1 - cpu0) / float64(o.Puts) * 1000
	return sample, nil
}

// watchSet is the watchers of a run and what they received.
type watchSet struct {
	clients          []*clientv3.Client
	cancel           context.CancelFunc
	wg               sync.WaitGroup
	keys, prefixes   int
	events, disorder atomic.Int64
}

// watchersOf is the number of watchers of key i.
func (w *watchSet) watchersOf(i int) int {
	n := 0
	if i < w.keys {
		n++
	}
	if watchKey(i)[:len(watchPrefix)] == watchPrefix {
		n += w.prefixes
	}
	return n
}

// open creates the watchers, round-robin over streams clients, and
// starts counting their events.
func (w *watchSet) open(ctx context.Context, endpoint string, keys, prefixes, streams int) error {
	w.keys, w.prefixes = keys, prefixes
	wctx, cancel := context.WithCancel(context.Background())
	w.cancel = cancel
	for range streams {
		c, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 5 * time.Second, Logger: nopLogger})
		if err != nil {
			return fmt.Errorf("%w: connecting to %s: %w", ErrWatchLoad, endpoint, err)
		}
		w.clients = append(w.clients, c)
	}
	errs := make(chan error, streams)
	var opened sync.WaitGroup
	for s, c := range w.clients {
		opened.Add(1)
		go func() {
			defer opened.Done()
			watch := func(key string, opts ...clientv3.OpOption) error {
				wc := c.Watch(wctx, key, append(opts, clientv3.WithCreatedNotify())...)
				select {
				case r := <-wc:
					if !r.Created {
						return fmt.Errorf("%w: watch %q: no created response (%v)", ErrWatchLoad, key, r.Err())
					}
				case <-ctx.Done():
					return ctx.Err()
				}
				w.wg.Add(1)
				go w.count(wc)
				return nil
			}
			for i := s; i < keys; i += streams {
				if err := watch(watchKey(i)); err != nil {
					errs <- err
					return
				}
			}
			for i := s; i < prefixes; i += streams {
				if err := watch(watchPrefix, clientv3.WithPrefix()); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	opened.Wait()
	close(errs)
	return <-errs
}

// count counts a watcher's events and those out of revision order.
func (w *watchSet) count(wc clientv3.WatchChan) {
	defer w.wg.Done()
	var last int64
	for r := range wc {
		for _, e := range r.Events {
			if e.Kv.ModRevision < last {
				w.disorder.Add(1)
			}
			last = e.Kv.ModRevision
		}
		w.events.Add(int64(len(r.Events)))
	}
}

func (w *watchSet) close() {
	if w.cancel != nil {
		w.cancel()
	}
	for _, c := range w.clients {
		c.Close()
	}
	w.wg.Wait()
}

// Table shows each server with and without watchers, and the change.
func (r *WatchRun) Table() *report.Table {
	t := &report.Table{Columns: []report.Column{
		{Name: "Server"},
		{Name: "Watchers"},
		{Name: "Puts", Unit: "/s", Format: "%.0f"},
		{Name: "Puts vs none", Unit: "%", Format: "%+.0f"},
		{Name: "p99", Unit: "ms", Format: "%.1f"},
		{Name: "p99 vs none", Unit: "%", Format: "%+.0f"},
		{Name: "CPU/1000 puts", Unit: "s", Format: "%.2f"},
		{Name: "Events", Unit: "got/want"},
	}}
	var base WatchSample
	for _, s := range r.Samples {
		if s.Watchers == 0 {
			base = s
		}
		dq, dp := 0.0, 0.0
		if base.PutsPerSec > 0 && base.PutP99 > 0 {
			dq = 100 * (s.PutsPerSec/base.PutsPerSec - 1)
			dp = 100 * (float64(s.PutP99)/float64(base.PutP99) - 1)
		}
		t.Rows = append(t.Rows, []any{s.Server, s.Watchers, s.PutsPerSec, dq, ms(s.PutP99), dp, s.CPUPer1000, fmt.Sprintf("%d/%d", s.Events, s.Expected)})
	}
	o := r.Options
	t.Notes = []string{
		fmt.Sprintf("%d puts of %d B to keys /w/00000.. in turn, %d clients over %d connections; watchers: %d on distinct keys and %d on the prefix %s (keys 0 to 999), over %d streams; every put fsynced.",
			o.Puts, o.ValueSize, o.Clients, o.Conns, o.Watchers, o.PrefixWatchers, watchPrefix, o.Streams),
		"vs none: against the same server with no watcher. CPU: the server's user+system time from the first put until every event arrived. Events: received / made by the puts (each once per watcher of its key), each counted once; out-of-order events fail the run.",
	}
	return t
}
