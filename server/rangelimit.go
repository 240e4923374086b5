package server

import (
	"context"
	"errors"
	"math"
	"sync"
	"sync/atomic"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"

	"github.com/stratadb/strata/mvcc"
)

// Large Ranges. etcd builds a Range's response whole, then gRPC encodes
// it into a second buffer of the same size and refuses it with
// ResourceExhausted if it is over the send limit (math.MaxInt32 bytes):
// a list of 100,000 Kubernetes objects takes twice its size, and a few
// such lists at once take the server's memory, whatever the outcome.
// Strata answers the same (the same responses, ResourceExhausted past the
// same limit) within a bound that does not grow with their number:
//
//  1. A Range reads its first rangeFreeBytes of keys and values freely,
//     as every page of a paginated list does (500 pods of 14 KB).
//  2. Past them, it drops what it has read and waits for the one big
//     Range token, then reads again (a later revision, which a
//     linearizable read may return; one at a given revision reads that).
//     Waiting Ranges hold nothing.
//  3. With the token, it stops with ResourceExhausted as soon as its keys
//     and values pass the send limit, before the response exists; under
//     it, it keeps the token until gRPC has written the encoded response
//     to the connection and given its buffer back (rangeCodec), so one
//     big response or its encoding is in memory at a time. Given back
//     when the response was only encoded, the encodings of lists that
//     clients were slow to receive piled up in gRPC's send queue: eight
//     lists of 16 MiB at once grew the heap by up to 267 MiB.
//  4. A client that takes longer than bigRangeSendWait to receive one
//     response no longer holds the others back: the token is given back
//     then, sent or not (and if gRPC never gave the buffer back).
const (
	rangeFreeBytes   = 32 << 20
	maxSendBytes     = math.MaxInt32
	bigRangeSendWait = 30 * time.Second
)

// rangeGate is the server's big Range token and its limits.
type rangeGate struct {
	token chan struct{}
	// pending maps a big Range's response, not yet encoded, to the
	// release of its token.
	pending sync.Map
	// free and limit are rangeFreeBytes and maxSendBytes, lowered by
	// tests.
	free, limit atomic.Int64
	// sendWait is bigRangeSendWait, lowered by tests.
	sendWait time.Duration
}

var errBigRange = errors.New("server: a big range waits for its turn")

func newRangeGate() *rangeGate {
	g := &rangeGate{token: make(chan struct{}, 1), sendWait: bigRangeSendWait}
	g.free.Store(rangeFreeBytes)
	g.limit.Store(maxSendBytes)
	return g
}

// read calls read with opts, then, if the range passes the free bytes,
// again with the token (see above). A big Range's release, not nil, gives
// the token back: hand it to hold with the response, or call it. On an
// error the token is already back.
func (g *rangeGate) read(ctx context.Context, opts mvcc.RangeOptions, read func(mvcc.RangeOptions) error) (release func(), err error) {
	if opts.CountOnly || opts.KeysOnly {
		return nil, read(opts)
	}
	var taken int64
	free := g.free.Load()
	opts.Charge = func(n int) error {
		if taken += int64(n); taken > free {
			return errBigRange
		}
		return nil
	}
	if err := read(opts); !errors.Is(err, errBigRange) {
		return nil, err
	}
	select {
	case g.token <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	var once sync.Once
	release = func() { once.Do(func() { <-g.token }) }
	taken = 0
	limit := g.limit.Load()
	opts.Charge = func(n int) error {
		if taken += int64(n); taken > limit {
			return status.Errorf(codes.ResourceExhausted, "grpc: trying to send message larger than max (more than %d vs. %d)", limit, limit)
		}
		return nil
	}
	if err := read(opts); err != nil {
		release()
		return nil, err
	}
	return release, nil
}

// hold keeps a big Range's token (release; nil for others) until its
// response is sent (rangeCodec), or the call ends before it is encoded.
func (g *rangeGate) hold(ctx context.Context, resp *pb.RangeResponse, release func()) {
	if release == nil {
		return
	}
	g.pending.Store(resp, release)
	context.AfterFunc(ctx, func() {
		// Once encoded, the response is no longer pending: its token goes
		// back when gRPC is done with the encoding, which may be after
		// the call's end.
		if _, ok := g.pending.LoadAndDelete(resp); ok {
			release()
		}
	})
}

// rangeCodec is the server's codec (wireCodec), which gives a big Range's
// token back once gRPC has sent its response.
type rangeCodec struct {
	wireCodec
	gate *rangeGate
}

func newRangeCodec(g *rangeGate) rangeCodec {
	return rangeCodec{wireCodec: newWireCodec(), gate: g}
}

func (c rangeCodec) Marshal(v any) (mem.BufferSlice, error) {
	r, ok := v.(*pb.RangeResponse)
	if !ok {
		return c.wireCodec.Marshal(v)
	}
	held, ok := c.gate.pending.LoadAndDelete(r)
	if !ok {
		return c.wireCodec.Marshal(v)
	}
	release := held.(func())
	sent := &sendingPool{wirePool: c.pool, release: release}
	sent.timer = time.AfterFunc(c.gate.sendWait, release)
	out, err := c.wireCodec.marshal(v, sent)
	if err != nil || !sent.pooled {
		// No encoding of the pool's for gRPC to give back.
		sent.timer.Stop()
		release()
	}
	return out, err
}

// sendingPool takes one big Range's encoding back from gRPC, which gives a
// buffer back once it has written it to the connection (or dropped it
// with the connection), and then gives the Range's token back.
type sendingPool struct {
	*wirePool
	release func()
	timer   *time.Timer
	pooled  bool // the encoding is in a buffer of the pool's
}

func (p *sendingPool) Get(n int) *[]byte {
	p.pooled = true
	return p.wirePool.Get(n)
}

func (p *sendingPool) Put(buf *[]byte) {
	p.wirePool.Put(buf)
	p.timer.Stop()
	p.release()
}

// holdRange is the KV service's way to rangeGate.hold.
func (s *Server) holdRange(ctx context.Context, resp *pb.RangeResponse, release func()) {
	s.ranges.hold(ctx, resp, release)
}
