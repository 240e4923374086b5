package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
)

// PatroniOptions are the settings of RunPatroni: the servers, their
// auto-compaction, and the Patroni load run against each at once.
type PatroniOptions struct {
	Programs Programs
	// Servers are the servers run side by side, each with the same etcd
	// command line (StartEtcdFlags): strata and etcd34.
	Servers []Kind
	// Dir holds the servers' data directories ("" is the system's
	// temporary directory).
	Dir string
	// Pin runs the servers on Pin.ServerCPUs and the load on Pin.LoadCPUs.
	Pin Pinning
	// Progress receives progress lines.
	Progress io.Writer
	// Retention is --auto-compaction-retention with
	// --auto-compaction-mode=periodic (etcd's 1h in production, scaled
	// down with the load); 0 runs without auto-compaction, as etcd's
	// default does.
	Retention time.Duration
	// QuotaBytes is --quota-backend-bytes; 0 leaves each server's default.
	QuotaBytes int64
	// SampleEvery is how often the disk, the revision and the compacted
	// revision are read.
	SampleEvery time.Duration
	// Load is the Patroni load; its Endpoints are each server's.
	Load PatroniLoad
}

// Validate reports every bad setting at once, each naming its field.
func (o PatroniOptions) Validate() error {
	var errs []error
	if len(o.Servers) == 0 {
		errs = append(errs, errors.New("Servers: empty: name strata, etcd34 or both"))
	}
	for _, k := range o.Servers {
		if k != KindStrata && k != KindEtcd34 {
			errs = append(errs, fmt.Errorf("Servers: %s: the Patroni load runs strata and etcd34 (etcd's command line)", k))
		}
	}
	if o.Retention < 0 || (o.Retention > 0 && o.Retention < time.Second) || o.Retention%time.Second != 0 {
		errs = append(errs, fmt.Errorf("Retention = %s: must be 0 (no auto-compaction) or whole seconds >= 1s", o.Retention))
	}
	if o.QuotaBytes < 0 {
		errs = append(errs, fmt.Errorf("QuotaBytes = %d: must be >= 0", o.QuotaBytes))
	}
	if o.SampleEvery <= 0 {
		errs = append(errs, fmt.Errorf("SampleEvery = %s: must be > 0", o.SampleEvery))
	}
	l := o.Load
	l.Endpoints = []string{"-"}
	errs = append(errs, l.validate())
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("%w: %w", ErrPatroniLoad, err)
	}
	return nil
}

// Flags is the etcd command line every server runs with, after its name,
// data dir and URLs.
func (o PatroniOptions) Flags() []string {
	var fs []string
	if o.Retention > 0 {
		fs = append(fs, "--auto-compaction-mode=periodic", "--auto-compaction-retention="+o.Retention.String())
	}
	if o.QuotaBytes > 0 {
		fs = append(fs, fmt.Sprintf("--quota-backend-bytes=%d", o.QuotaBytes))
	}
	return fs
}

// PatroniServer is what the load did on one server and what was read
// from it.
type PatroniServer struct {
	Kind Kind   `json:"kind"`
	Name string `json:"name"`
	PatroniCounts
	// Samples are the gauges read every SampleEvery.
	Samples []PatroniSample `json:"samples"`
	// OldRevision is the revision read about 3×Retention before the end,
	// and OldRead what a Range at it returned at the end ("ErrCompacted"
	// once the history was compacted past it); both empty when the load
	// was shorter than 3×Retention or ran without auto-compaction.
	OldRevision int64  `json:"old_revision"`
	OldRead     string `json:"old_read"`
	// Err is what stopped the server's load or sampling early.
	Err string `json:"error,omitempty"`

	// mu guards Samples while the load runs (the progress lines read
	// them).
	mu sync.Mutex
}

func (ps *PatroniServer) addSample(s PatroniSample) {
	ps.mu.Lock()
	ps.Samples = append(ps.Samples, s)
	ps.mu.Unlock()
}

func (ps *PatroniServer) lastSample() (PatroniSample, bool) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if len(ps.Samples) == 0 {
		return PatroniSample{}, false
	}
	return ps.Samples[len(ps.Samples)-1], true
}

// PatroniRun is the result of RunPatroni.
type PatroniRun struct {
	Options PatroniOptions   `json:"-"`
	Servers []*PatroniServer `json:"servers"`
}

// RunPatroni starts every server with the same etcd flags, runs the
// Patroni load against all of them at once for Load.Duration, samples
// their disk and history as it runs, and stops them.
func RunPatroni(ctx context.Context, o PatroniOptions) (*PatroniRun, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	if err := o.Pin.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrPatroniLoad, err)
	}
	fmt.Fprintf(o.Progress, "%s\n", o.Pin)
	unpin, err := o.Pin.PinSelf()
	if err != nil {
		return nil, fmt.Errorf("%w: pinning the load: %w", ErrPatroniLoad, err)
	}
	defer unpin()

	res := &PatroniRun{Options: o}
	var servers []*Server
	defer func() {
		for _, s := range servers {
			s.Stop()
		}
	}()
	for _, k := range o.Servers {
		fmt.Fprintf(o.Progress, "starting %s with %s\n", k, strings.Join(o.Flags(), " "))
		s, err := StartEtcdFlags(ctx, k, o.Programs, o.Dir, o.Pin, o.Flags()...)
		if err != nil {
			return nil, err
		}
		servers = append(servers, s)
		res.Servers = append(res.Servers, &PatroniServer{Kind: k, Name: s.Name})
	}
	start := time.Now()
	var wg sync.WaitGroup
	errs := make([]error, len(servers))
	loadCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	for i, s := range servers {
		wg.Go(func() { errs[i] = runPatroniOn(loadCtx, o, s, res.Servers[i], start) })
	}
	progCtx, progStop := context.WithCancel(ctx)
	go patroniProgress(progCtx, o.Progress, start, o.Load.Duration, func() string {
		var parts []string
		for _, ps := range res.Servers {
			if last, ok := ps.lastSample(); ok {
				parts = append(parts, fmt.Sprintf("%s rev %d, compacted to %d, db %.1f MB, dir %.1f MB", ps.Name, last.Revision, last.CompactRevision, mb(last.DBSize), mb(last.DirBytes)))
			}
		}
		return strings.Join(parts, "; ")
	})
	wg.Wait()
	progStop()
	for i, err := range errs {
		if err != nil {
			res.Servers[i].Err = err.Error()
		}
	}
	for _, s := range servers {
		if err := s.Stop(); err != nil {
			errs = append(errs, err)
		}
	}
	servers = nil
	return res, errors.Join(errs...)
}

// runPatroniOn runs the load against s and samples it until the load
// ends, then reads at an old revision.
func runPatroniOn(ctx context.Context, o PatroniOptions, s *Server, ps *PatroniServer, start time.Time) error {
	admin, err := dialPatroni([]string{s.Endpoint})
	if err != nil {
		return err
	}
	defer admin.Close()
	load := o.Load
	load.Endpoints = []string{s.Endpoint}
	sampleCtx, stopSampling := context.WithCancel(ctx)
	var sampleErr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(o.SampleEvery)
		defer t.Stop()
		for {
			select {
			case <-sampleCtx.Done():
				return
			case <-t.C:
			}
			smp, err := samplePatroni(sampleCtx, admin, s, time.Since(start))
			if err != nil {
				if sampleCtx.Err() == nil {
					sampleErr = fmt.Errorf("sampling %s: %w", s.Name, err)
				}
				continue
			}
			ps.addSample(smp)
		}
	}()
	counts, err := load.Run(ctx)
	stopSampling()
	<-done
	ps.PatroniCounts = counts
	if err != nil {
		return err
	}
	// A last sample, after the load.
	if smp, err := samplePatroni(ctx, admin, s, time.Since(start)); err == nil {
		ps.addSample(smp)
	}
	if rev := oldRevision(ps.Samples, time.Since(start), o.Retention); rev > 0 {
		ps.OldRevision = rev
		ps.OldRead = checkCompacted(ctx, admin, rev)
	}
	return sampleErr
}

// oldRevision is the last revision sampled at least 3×retention before
// end: periodic compaction has compacted it by the end, whether it runs
// every retention (etcd 3.4, keeping up to twice the retention) or every
// retention/10 (etcd 3.5+). 0 when no sample is that old.
func oldRevision(samples []PatroniSample, end, retention time.Duration) int64 {
	if retention <= 0 {
		return 0
	}
	var rev int64
	for _, s := range samples {
		if s.At <= end-3*retention {
			rev = s.Revision
		}
	}
	return rev
}

// quantile returns the sample at fraction f of the run: the last one read
// at or before f × the run's length.
func (ps *PatroniServer) quantile(f float64) PatroniSample {
	if len(ps.Samples) == 0 {
		return PatroniSample{}
	}
	end := ps.Samples[len(ps.Samples)-1].At
	i := 0
	for j, s := range ps.Samples {
		if float64(s.At) <= f*float64(end) {
			i = j
		}
	}
	return ps.Samples[i]
}

// peak returns the largest value of field over the samples at or after
// fraction from of the run.
func (ps *PatroniServer) peak(from float64, field func(PatroniSample) int64) int64 {
	if len(ps.Samples) == 0 {
		return 0
	}
	end := ps.Samples[len(ps.Samples)-1].At
	var n int64
	for _, s := range ps.Samples {
		if float64(s.At) >= from*float64(end) {
			n = max(n, field(s))
		}
	}
	return n
}
