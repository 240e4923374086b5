// Command compactlog shows what the engine does after a store compaction:
// the compactions, flushes and blob rewrites Pebble reports, by kind, in
// the 10-second windows before and after it.
//
//	go build -o /tmp/compactlog ./internal/bench/compactlog
//	taskset -c 0 /tmp/compactlog -pods 100000 -updates 300000 -dir /tmp/compactlog-db
//
// It opens an embedded store with strata serve's defaults (config.ServeDefault
// and its memory budget, server.reclaim_history unless -reclaim=false),
// creates -pods pods (workload.Pods, seed 1) and updates random ones
// -updates times from 16 goroutines. Two thirds into the updates it
// compacts at the revision reached a third into them, while the last third
// goes on. Every write is synced, as the server's. With -events it also
// lists each compaction from 2 s before to 30 s after, with its input
// levels. docs/mvcc-compaction.md has the figures.
package main

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/stratadb/strata/config"
	"github.com/stratadb/strata/engine"
	"github.com/stratadb/strata/internal/workload"
	"github.com/stratadb/strata/mvcc"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "compactlog:", err)
		os.Exit(1)
	}
}

// event is one engine job that ended.
type event struct {
	at      time.Duration // since the start
	kind    string        // Pebble's compaction reason, "flush" or "blob rewrite"
	in, out uint64        // bytes
	took    time.Duration
	levels  string
}

type recorder struct {
	start  time.Time
	mu     sync.Mutex
	events []event
}

func (r *recorder) add(e event) {
	e.at = time.Since(r.start)
	r.mu.Lock()
	r.events = append(r.events, e)
	r.mu.Unlock()
}

func (r *recorder) listener() *pebble.EventListener {
	return &pebble.EventListener{
		CompactionEnd: func(ci pebble.CompactionInfo) {
			e := event{kind: ci.Reason, took: ci.Duration}
			for _, l := range ci.Input {
				for _, t := range l.Tables {
					e.in += t.Size
				}
				e.levels += fmt.Sprintf("L%d:%d ", l.Level, len(l.Tables))
			}
			for _, t := range ci.Output.Tables {
				e.out += t.Size
			}
			e.levels += fmt.Sprintf("-> L%d", ci.Output.Level)
			r.add(e)
		},
		FlushEnd: func(fi pebble.FlushInfo) {
			r.add(event{kind: "flush", in: fi.InputBytes, took: fi.Duration})
		},
		BlobFileRewriteEnd: func(bi pebble.BlobFileRewriteInfo) {
			r.add(event{kind: "blob rewrite", in: bi.Input.Size, out: bi.Output.Size, took: bi.Duration})
		},
	}
}

func run() error {
	pods := flag.Int("pods", 100000, "pods to create")
	updates := flag.Int("updates", 300000, "pod updates")
	dir := flag.String("dir", "", "database directory, created afresh (required; its contents are removed)")
	reclaim := flag.Bool("reclaim", true, "server.reclaim_history")
	events := flag.Bool("events", false, "list each compaction around the store's")
	flag.Parse()
	switch {
	case *dir == "":
		return fmt.Errorf("-dir is required: a directory for the database")
	case *pods < 1:
		return fmt.Errorf("-pods = %d: must be at least 1", *pods)
	case *updates < 3:
		return fmt.Errorf("-updates = %d: must be at least 3", *updates)
	}
	if err := os.RemoveAll(*dir); err != nil {
		return err
	}
	cfg := config.ServeDefault()
	cfg.DBPath = *dir
	cfg.ApplyMemoryBudget()
	rec := &recorder{start: time.Now()}
	db, err := engine.Open(cfg, engine.Options{EventListener: rec.listener()})
	if err != nil {
		return err
	}
	defer db.Close()
	st, err := mvcc.Open(db, mvcc.Options{ReclaimHistory: *reclaim})
	if err != nil {
		return err
	}
	defer st.Close()

	gen := workload.NewPods(1)
	gens := make([]atomic.Int32, *pods)
	put := func(p int) error {
		_, err := st.Put([]byte(gen.Key(p)), gen.Pod(p, int(gens[p].Add(1))))
		return err
	}
	rng := rand.New(rand.NewPCG(2, 0))
	order := make([]int, *updates)
	for i := range order {
		order[i] = rng.IntN(*pods)
	}
	third := *updates / 3
	creates := make([]int, *pods)
	for i := range creates {
		creates[i] = i
	}
	if err := writeAll(creates, put); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "%5.1f s: %d creates, revision %d\n", time.Since(rec.start).Seconds(), *pods, st.Rev())
	if err := writeAll(order[:third], put); err != nil {
		return err
	}
	at := st.Rev()
	if err := writeAll(order[third:2*third], put); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "%5.1f s: %d updates, revision %d\n", time.Since(rec.start).Seconds(), 2*third, st.Rev())
	compacted := make(chan error, 1)
	var compactAt, compactTook time.Duration
	go func() {
		time.Sleep(2 * time.Second)
		compactAt = time.Since(rec.start)
		err := st.Compact(at)
		compactTook = time.Since(rec.start) - compactAt
		compacted <- err
	}()
	if err := writeAll(order[2*third:], put); err != nil {
		return err
	}
	if err := <-compacted; err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "%5.1f s: compacted at revision %d in %.3f s, 2 s into the last %d updates; all done\n",
		compactAt.Seconds(), at, compactTook.Seconds(), *updates-2*third)
	report(rec, compactAt, *events)
	return nil
}

// writeAll writes pods[i] for every i from 16 goroutines.
func writeAll(pods []int, put func(p int) error) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1)) - 1; i < len(pods); i = int(next.Add(1)) - 1 {
				if err := put(pods[i]); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// report prints the engine's jobs by kind in 10-second windows around the
// store's compaction at compactAt.
func report(rec *recorder, compactAt time.Duration, list bool) {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	slices.SortFunc(rec.events, func(a, b event) int { return int(a.at - b.at) })
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "window from the compaction\tkind\tjobs\tin, MB\tout, MB\tseconds\t")
	for from := -20; from < 30; from += 10 {
		lo, hi := compactAt+time.Duration(from)*time.Second, compactAt+time.Duration(from+10)*time.Second
		type sum struct {
			jobs    int
			in, out uint64
			took    time.Duration
		}
		sums := map[string]*sum{}
		for _, e := range rec.events {
			if e.at >= lo && e.at < hi {
				s := sums[e.kind]
				if s == nil {
					s = &sum{}
					sums[e.kind] = s
				}
				s.jobs++
				s.in += e.in
				s.out += e.out
				s.took += e.took
			}
		}
		kinds := make([]string, 0, len(sums))
		for k := range sums {
			kinds = append(kinds, k)
		}
		slices.Sort(kinds)
		for _, k := range kinds {
			s := sums[k]
			fmt.Fprintf(w, "%+d to %+d s\t%s\t%d\t%.1f\t%.1f\t%.2f\t\n", from, from+10, k, s.jobs, float64(s.in)/1e6, float64(s.out)/1e6, s.took.Seconds())
		}
	}
	_ = w.Flush()
	if !list {
		return
	}
	fmt.Println()
	for _, e := range rec.events {
		if e.kind != "flush" && e.kind != "blob rewrite" && e.at > compactAt-2*time.Second && e.at < compactAt+30*time.Second {
			fmt.Printf("%+6.1f s  %-18s in %6.1f MB  out %6.1f MB  %.2f s  %s\n", (e.at - compactAt).Seconds(), e.kind, float64(e.in)/1e6, float64(e.out)/1e6, e.took.Seconds(), e.levels)
		}
	}
}
