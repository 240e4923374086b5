package server

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// TestWatchManyWatchersEveryEventOnce sets watchers up as etcd's
// `benchmark watch` does, 10,000 on distinct keys and 100 on a shared
// prefix, spread over ten clients (ten gRPC streams), writes every key
// twice from concurrent clients, 50 keys to a revision, and checks through clientv3 that each
// watcher got exactly the writes to its range, each once, in revision
// order: none missing, none twice, none out of order. A progress request
// after the last write bounds the wait: its answer follows every event up
// to its revision, so nothing can arrive after it unseen. (-short: 1,000
// and 10.)
func TestWatchManyWatchersEveryEventOnce(t *testing.T) {
	keys, prefixWatchers := 10000, 100
	if testing.Short() {
		keys, prefixWatchers = 1000, 10
	}
	const clients, rounds, perTxn = 10, 2, 50
	const prefix = "w/0" // the first tenth of the keys
	s := startServer(t, testConfig(t))
	ctx := testCtx(t)
	key := func(i int) string { return fmt.Sprintf("w/%05d", i*100000/keys) }

	type watch struct {
		client int
		key    string
		wc     clientv3.WatchChan
	}
	cs := make([]*clientv3.Client, clients)
	watches := make([][]watch, clients)
	var g group
	for c := range clients {
		cs[c] = newClient(t, s, nil)
		g.Go(func() error {
			open := func(k string, opts ...clientv3.OpOption) error {
				wc := cs[c].Watch(ctx, k, append(opts, clientv3.WithCreatedNotify())...)
				if r := <-wc; !r.Created {
					return fmt.Errorf("watch %q: no created response: %v", k, r.Err())
				}
				watches[c] = append(watches[c], watch{client: c, key: k, wc: wc})
				return nil
			}
			for i := c; i < keys; i += clients {
				if err := open(key(i)); err != nil {
					return err
				}
			}
			for i := c; i < prefixWatchers; i += clients {
				if err := open(prefix, clientv3.WithPrefix()); err != nil {
					return err
				}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}

	// Writers: each owns a tenth of the keys, so a key's writes are in
	// order, and puts them perTxn to a revision; every write's revision
	// is recorded.
	type put struct {
		key, value string
		rev        int64
	}
	var mu sync.Mutex
	var puts []put
	for w := range clients {
		g.Go(func() error {
			for r := range rounds {
				v := fmt.Sprint(r)
				var ops []clientv3.Op
				var ks []string
				for i := w; i < keys; i += clients {
					ops = append(ops, clientv3.OpPut(key(i), v))
					ks = append(ks, key(i))
					if len(ops) < perTxn && i+clients < keys {
						continue
					}
					resp, err := cs[w].Txn(ctx).Then(ops...).Commit()
					if err != nil {
						return err
					}
					mu.Lock()
					for _, k := range ks {
						puts = append(puts, put{k, v, resp.Header.Revision})
					}
					mu.Unlock()
					ops, ks = ops[:0], ks[:0]
				}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	slices.SortStableFunc(puts, func(a, b put) int { return int(a.rev - b.rev) })
	last := puts[len(puts)-1].rev
	want := map[string][]string{} // by watched key (or prefix)
	for _, p := range puts {
		ev := fmt.Sprintf("%s=%s@%d", p.key, p.value, p.rev)
		want[p.key] = append(want[p.key], ev)
		if strings.HasPrefix(p.key, prefix) {
			want[prefix] = append(want[prefix], ev)
		}
	}
	for c := range clients {
		if err := cs[c].RequestProgress(ctx); err != nil {
			t.Fatal(err)
		}
	}
	failures := 0
	for c := range clients {
		for _, w := range watches[c] {
			var got []string
			for done := false; !done; {
				r := nextResponse(t, w.wc)
				if err := r.Err(); err != nil {
					t.Fatalf("watch %q: %v", w.key, err)
				}
				for _, e := range r.Events {
					got = append(got, fmt.Sprintf("%s=%s@%d", e.Kv.Key, e.Kv.Value, e.Kv.ModRevision))
				}
				done = r.IsProgressNotify() && r.Header.Revision >= last
			}
			if exp := want[w.key]; !slices.Equal(got, exp) && failures < 5 {
				failures++
				i := 0
				for i < len(got) && i < len(exp) && got[i] == exp[i] {
					i++
				}
				t.Errorf("client %d, watch %q: got %d events, want %d; they differ from event %d: got %v, want %v",
					c, w.key, len(got), len(exp), i, got[i:min(i+3, len(got))], exp[i:min(i+3, len(exp))])
			}
		}
	}
}

// group runs functions in goroutines and returns the first error of
// those started since the last Wait.
type group struct {
	wg  sync.WaitGroup
	mu  sync.Mutex
	err error
}

func (g *group) Go(fn func() error) {
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		if err := fn(); err != nil {
			g.mu.Lock()
			if g.err == nil {
				g.err = err
			}
			g.mu.Unlock()
		}
	}()
}

func (g *group) Wait() error {
	g.wg.Wait()
	g.mu.Lock()
	defer g.mu.Unlock()
	err := g.err
	g.err = nil
	return err
}

// TestWatchUnreadStreamDoesNotBlockWriters: a client that stops reading
// its watch stream (gRPC flow control then blocks the stream's sender)
// holds up no writer: 20 MB of events are written while it does not
// read, the watcher's buffer overflows and it falls back to storage, and
// when the client reads again every event arrives, once, in order.
func TestWatchUnreadStreamDoesNotBlockWriters(t *testing.T) {
	s := startServer(t, testConfig(t))
	c := newClient(t, s, nil)
	ctx := testCtx(t)
	stream := rawWatch(t, c, &pb.WatchRequest{RequestUnion: &pb.WatchRequest_CreateRequest{CreateRequest: &pb.WatchCreateRequest{
		Key: []byte("s/"), RangeEnd: []byte("s0")}}})
	if r, err := stream.Recv(); err != nil || !r.Created {
		t.Fatalf("created: %+v, %v", r, err)
	}
	const txns, perTxn = 200, 100
	value := strings.Repeat("v", 1024)
	var revs []int64
	for i := range txns {
		ops := make([]clientv3.Op, perTxn)
		for j := range ops {
			ops[j] = clientv3.OpPut(fmt.Sprintf("s/%03d", j), value)
		}
		resp, err := c.Txn(ctx).Then(ops...).Commit()
		if err != nil {
			t.Fatalf("txn %d while the watch stream is not read: %v", i, err)
		}
		revs = append(revs, resp.Header.Revision)
	}
	n := 0
	for n < txns*perTxn {
		r, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range r.Events {
			if want, key := revs[n/perTxn], fmt.Sprintf("s/%03d", n%perTxn); e.Kv.ModRevision != want || string(e.Kv.Key) != key {
				t.Fatalf("event %d: %s@%d, want %s@%d", n, e.Kv.Key, e.Kv.ModRevision, key, want)
			}
			n++
		}
	}
}
