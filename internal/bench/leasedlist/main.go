// Command leasedlist measures a full paginated list of pods on a server
// that also holds many leased keys (Kubernetes' events), the case where
// the leases' in-memory key sets weigh on the Go collector:
//
//	leasedlist load ENDPOINT EVENTS PODS   # EVENTS keys on 100 leases, then PODS pods
//	leasedlist list ENDPOINT N             # N full lists of /registry/pods/ in pages of 500
//
// load writes the events in txns of 100 puts and the pods one put each
// (workload.Pods, seed 1), from 8 clients; list prints each list's pods
// and time. docs/data/leased-keys-list.md has the procedure and figures.
package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/stratadb/strata/internal/bench"
	"github.com/stratadb/strata/internal/workload"
	clientv3 "go.etcd.io/etcd/client/v3"
)

const usage = "usage: leasedlist load ENDPOINT EVENTS PODS | leasedlist list ENDPOINT N"

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "leasedlist:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) < 3 {
		return fmt.Errorf("%d arguments: %s", len(args), usage)
	}
	counts := make([]int, len(args)-2)
	for i, a := range args[2:] {
		n, err := strconv.Atoi(a)
		if err != nil || n < 0 {
			return fmt.Errorf("argument %d = %q: want a count >= 0: %s", i+3, a, usage)
		}
		counts[i] = n
	}
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{args[1]}, DialTimeout: 5 * time.Second, MaxCallRecvMsgSize: 1 << 30})
	if err != nil {
		return err
	}
	defer c.Close()
	switch {
	case args[0] == "load" && len(counts) == 2:
		return load(c, counts[0], counts[1])
	case args[0] == "list" && len(counts) == 1:
		return list(c, counts[0])
	}
	return fmt.Errorf("%q with %d counts: %s", args[0], len(counts), usage)
}

// eventKey is event i's key, as long as the apiserver's event names.
func eventKey(i int) string {
	return fmt.Sprintf("/registry/events/namespace-%03d/pod-%08d.%016x", i%300, i, i*7919)
}

func load(c *clientv3.Client, events, pods int) error {
	ctx := context.Background()
	var leases []clientv3.LeaseID
	for range 100 {
		l, err := c.Grant(ctx, 36000)
		if err != nil {
			return err
		}
		leases = append(leases, l.ID)
	}
	val := string(make([]byte, 200))
	start := time.Now()
	const workers, perTxn = 8, 100
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for b := w * perTxn; b < events; b += workers * perTxn {
				var ops []clientv3.Op
				for i := b; i < min(b+perTxn, events); i++ {
					ops = append(ops, clientv3.OpPut(eventKey(i), val, clientv3.WithLease(leases[i%len(leases)])))
				}
				if _, err := c.Txn(ctx).Then(ops...).Commit(); err != nil {
					errs <- err
					return
				}
			}
			p := workload.NewPods(1)
			for i := w; i < pods; i += workers {
				if _, err := c.Put(ctx, p.Key(i), string(p.Pod(i, 0))); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return err
	}
	fmt.Printf("loaded %d events and %d pods in %.1f s\n", events, pods, time.Since(start).Seconds())
	return nil
}

func list(c *clientv3.Client, n int) error {
	untimed := func(_ string, req func() error) error { return req() }
	for range n {
		start := time.Now()
		count, err := bench.ListAll(context.Background(), c, "/registry/pods/", 500, untimed)
		if err != nil {
			return err
		}
		fmt.Printf("%d pods in %.2f s\n", count, time.Since(start).Seconds())
	}
	return nil
}
