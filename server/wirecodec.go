package server

import (
	"fmt"
	"math/bits"
	"sync"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc/encoding"
	grpcproto "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
)

// wireCodec is gRPC's proto codec with a buffer pool that does not clear
// its buffers. gRPC's default pool clears a pooled buffer's whole capacity
// on every Get, and its tiers jump from 32 KiB to 1 MiB: a watch response
// carrying a 14 KB pod and its 14 KB previous value (Kubernetes' watch,
// with prevKV) cleared a 1 MiB buffer to send 30 KB, and so did each
// snapshot chunk. Over a Kubernetes-shaped run with a snapshot that
// clearing was 7% of the server's CPU, 2% of the writes'
// (docs/data/wire-codec.md). Marshal writes every byte it sends and sends
// only those, so the clearing protects nothing here.
type wireCodec struct {
	encoding.CodecV2 // gRPC's, for Unmarshal and Name
	pool             *wirePool
}

func newWireCodec() wireCodec {
	return wireCodec{CodecV2: encoding.GetCodecV2(grpcproto.Name), pool: newWirePool()}
}

func (c wireCodec) Marshal(v any) (mem.BufferSlice, error) {
	if r, ok := v.(*pb.RangeResponse); ok {
		if out, ok := marshalRangeInPlace(r); ok {
			return out, nil
		}
	}
	return c.marshal(v, c.pool)
}

// marshal encodes v; an encoding large enough to be pooled goes back to
// pool when gRPC frees it.
func (c wireCodec) marshal(v any, pool mem.BufferPool) (mem.BufferSlice, error) {
	m, ok := v.(proto.Message)
	if !ok {
		return c.CodecV2.Marshal(v)
	}
	size := proto.Size(m)
	// UseCachedSize reuses the sizes proto.Size just computed, as gRPC's
	// codec does; the message is not changed in between.
	opts := proto.MarshalOptions{UseCachedSize: true}
	if mem.IsBelowBufferPoolingThreshold(size) {
		b, err := opts.Marshal(m)
		if err != nil {
			return nil, err
		}
		return mem.BufferSlice{mem.SliceBuffer(b)}, nil
	}
	buf := pool.Get(size)
	out, err := opts.MarshalAppend((*buf)[:0], m)
	if err != nil {
		c.pool.Put(buf)
		return nil, err
	}
	if len(out) != size {
		// The message changed between Size and Marshal (a bug of the
		// caller's): fail the call rather than send a wrong encoding. At
		// exactly size bytes the append stayed in buf, whose capacity is
		// at least size.
		c.pool.Put(buf)
		return nil, fmt.Errorf("server: encoding %T: %d bytes where its size was %d", v, len(out), size)
	}
	*buf = out
	return mem.BufferSlice{mem.NewBuffer(buf, pool)}, nil
}

// wirePool is a mem.BufferPool of buffers handed out as they were left:
// power-of-two classes from 1 KiB to 1 MiB, gRPC's largest tier, and above
// it, as gRPC does, one pool of buffers of any size, where a Get takes a
// buffer if it is large enough and allocates one (rounded up to a page)
// if not. Pooled in classes, a 16 MiB list would keep a 32 MiB buffer, and
// the server's bound on big Ranges' memory (rangelimit.go) counts on the
// large ones being reused as gRPC reuses them.
type wirePool struct {
	classes [wireClassMax - wireClassMin + 1]sync.Pool
	large   sync.Pool
}

const (
	wireClassMin = 10 // 1 KiB
	wireClassMax = 20 // 1 MiB
	wirePage     = 4 << 10
)

func newWirePool() *wirePool { return &wirePool{} }

// Get returns a buffer of length n, its contents whatever they were.
func (p *wirePool) Get(n int) *[]byte {
	exp := max(bits.Len(uint(max(n, 1)-1)), wireClassMin)
	if exp > wireClassMax {
		if b, ok := p.large.Get().(*[]byte); ok {
			if cap(*b) >= n {
				*b = (*b)[:n]
				return b
			}
			p.large.Put(b)
		}
		b := make([]byte, n, (n+wirePage-1)&^(wirePage-1))
		return &b
	}
	if b, ok := p.classes[exp-wireClassMin].Get().(*[]byte); ok {
		*b = (*b)[:n]
		return b
	}
	b := make([]byte, n, 1<<exp)
	return &b
}

// Put keeps buf for a later Get: in its class if its capacity is a
// class's, with the large ones if it is over the largest class.
func (p *wirePool) Put(buf *[]byte) {
	c := cap(*buf)
	switch {
	case c > 1<<wireClassMax:
		p.large.Put(buf)
	case c >= 1<<wireClassMin && c&(c-1) == 0:
		p.classes[bits.Len(uint(c))-1-wireClassMin].Put(buf)
	}
}
