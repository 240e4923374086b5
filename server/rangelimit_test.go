package server

import (
	"bytes"
	"context"
	"fmt"
	"runtime"
	"runtime/debug"
	rtmetrics "runtime/metrics"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// putMiB puts n values of 1 MiB under prefix.
func putMiB(t *testing.T, c *clientv3.Client, prefix string, n int) {
	t.Helper()
	v := string(bytes.Repeat([]byte{'v'}, 1<<20))
	for i := range n {
		if _, err := c.Put(testCtx(t), fmt.Sprintf("%s%03d", prefix, i), v); err != nil {
			t.Fatal(err)
		}
	}
}

// TestRangeOverSendLimit: a Range whose keys and values pass the send
// limit fails with gRPC's ResourceExhausted, as etcd's does past its
// math.MaxInt32 (lowered here to 4 MiB), and one under it is answered,
// also when it is read as a big Range (past the free bytes).
func TestRangeOverSendLimit(t *testing.T) {
	s := startServer(t, testConfig(t))
	s.ranges.free.Store(1 << 20)
	s.ranges.limit.Store(4 << 20)
	c := newClient(t, s, nil)
	putMiB(t, c, "big/", 6)

	_, err := c.Get(testCtx(t), "big/", clientv3.WithPrefix())
	if status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("Range of 6 MiB over a 4 MiB limit: %v, want code ResourceExhausted", err)
	}
	resp, err := c.Get(testCtx(t), "big/", clientv3.WithPrefix(), clientv3.WithLimit(2))
	if err != nil || len(resp.Kvs) != 2 || resp.Count != 6 || !resp.More {
		t.Fatalf("Range of 2 MiB (3 read): %v, %+v", err, resp)
	}
	// The token is back: the next big Range is answered.
	resp, err = c.Get(testCtx(t), "big/", clientv3.WithPrefix(), clientv3.WithLimit(2))
	if err != nil || len(resp.Kvs) != 2 {
		t.Fatalf("second Range of 2 MiB: %v", err)
	}
}

// TestBigRangesAtOnce: eight lists of 16 MiB at once raise the process's
// heap (the server's and the clients' in this test) by what a few take,
// not eight times that: waiting lists hold nothing, and one is read,
// encoded and sent at a time. Measured from the runtime's heap, sampled
// while they run, with the collector made eager so that the heap follows
// what is live. Without the gate (free bytes past the lists' size) the
// heap grew by 280-310 MiB in five runs. With the token given back once a
// response was encoded, not sent, by 146-205 MiB (267 in a CI run): the
// encodings waited in gRPC's send queue. Given back once sent, by 80-94
// MiB in ten runs, with both cores kept busy beside four of them. The
// bound is the eight lists' own size.
func TestBigRangesAtOnce(t *testing.T) {
	s := startServer(t, testConfig(t))
	s.ranges.free.Store(1 << 20)
	const lists, listBytes = 8, 16 << 20
	c := newClient(t, s, nil)
	putMiB(t, c, "big/", listBytes>>20)

	defer debug.SetGCPercent(debug.SetGCPercent(10))
	runtime.GC()
	sample := []rtmetrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	heap := func() int64 { rtmetrics.Read(sample); return int64(sample[0].Value.Uint64()) }
	base := heap()
	var peak atomic.Int64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			if h := heap(); h > peak.Load() {
				peak.Store(h)
			}
			select {
			case <-stop:
				return
			case <-time.After(200 * time.Microsecond):
			}
		}
	}()
	var wg sync.WaitGroup
	errs := make(chan error, lists)
	for range lists {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := c.Get(testCtx(t), "big/", clientv3.WithPrefix())
			if err == nil && len(resp.Kvs) != listBytes>>20 {
				err = fmt.Errorf("%d keys, want %d", len(resp.Kvs), listBytes>>20)
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(stop)
	<-sampled
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	grew := peak.Load() - base
	t.Logf("%d lists of %d MiB at once: heap grew by %d MiB at most", lists, listBytes>>20, grew>>20)
	// The clients decode all the lists (their copies may all be live until
	// the test's collector runs) and the server has one in flight: read,
	// encoded, in gRPC's frames and in the client's receive buffer. Under
	// a loaded CI host that peaked at 138 MiB; with every list read at
	// once (no big Range token) it took 226-278 MiB. The token's hold
	// until gRPC has sent the encoding is TestBigRangeTokenHeldUntilSent's.
	if limit := int64(lists*listBytes + 4*listBytes); grew > limit {
		t.Errorf("%d lists of %d MiB at once grew the heap by %d MiB, want under %d MiB (one list read, encoded and sent at a time in the server, the clients' decoding, garbage)",
			lists, listBytes>>20, grew>>20, limit>>20)
	}
}

// TestBigRangeTokenHeldUntilSent: a big Range's token stays taken while
// gRPC holds the response's encoding, also after the call has ended (gRPC
// ends a unary call once the response is queued, not written), comes back
// when gRPC frees the encoding (after writing it to the connection), and
// comes back after sendWait if gRPC never does.
func TestBigRangeTokenHeldUntilSent(t *testing.T) {
	g := newRangeGate()
	codec := newRangeCodec(g)
	bigResponse := func(ctx context.Context) *pb.RangeResponse {
		g.token <- struct{}{} // what read does for a big Range
		var once sync.Once
		resp := &pb.RangeResponse{Kvs: []*mvccpb.KeyValue{{Key: []byte("k"), Value: bytes.Repeat([]byte{'v'}, 4<<20)}}}
		g.hold(ctx, resp, func() { once.Do(func() { <-g.token }) })
		return resp
	}
	ctx, endCall := context.WithCancel(context.Background())
	out, err := codec.Marshal(bigResponse(ctx))
	if err != nil {
		t.Fatal(err)
	}
	endCall()
	time.Sleep(20 * time.Millisecond) // the call's end runs hold's AfterFunc
	if len(g.token) != 1 {
		t.Fatal("the token came back before the response was sent")
	}
	out.Free()
	if len(g.token) != 0 {
		t.Fatal("the token did not come back when gRPC freed the sent encoding")
	}

	g.sendWait = 20 * time.Millisecond
	if _, err := codec.Marshal(bigResponse(context.Background())); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(g.token) != 0 {
		if time.Now().After(deadline) {
			t.Fatal("an encoding gRPC never freed kept the token past sendWait")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
