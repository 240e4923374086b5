package server

import (
	"bytes"
	"fmt"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"google.golang.org/grpc/encoding"
	grpcproto "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
)

// watchResponse is a watch response of n events whose values and
// previous values are size bytes of fill.
func watchResponse(n, size int, fill byte) *pb.WatchResponse {
	r := &pb.WatchResponse{Header: &pb.ResponseHeader{Revision: 7}, WatchId: 3}
	for i := 0; i < n; i++ {
		key := []byte(fmt.Sprintf("/registry/pods/default/pod-%d", i))
		r.Events = append(r.Events, &mvccpb.Event{
			Kv:     &mvccpb.KeyValue{Key: key, Value: bytes.Repeat([]byte{fill}, size), ModRevision: 7},
			PrevKv: &mvccpb.KeyValue{Key: key, Value: bytes.Repeat([]byte{fill + 1}, size), ModRevision: 5},
		})
	}
	return r
}

// TestWireCodecEncodesAsGRPC: the codec's encodings are gRPC's, byte for
// byte, also when its pool hands back a buffer that held a larger
// response (the pool does not clear them), and decode to the message.
func TestWireCodecEncodesAsGRPC(t *testing.T) {
	c := newWireCodec()
	grpcs := encoding.GetCodecV2(grpcproto.Name)
	msgs := []proto.Message{
		watchResponse(1, 30000, 0xAA), // 64 KiB class, filled
		watchResponse(1, 20000, 0x11), // the same class, shorter: reuses the dirty buffer
		watchResponse(40, 14000, 0x22),
		&pb.RangeResponse{Header: &pb.ResponseHeader{Revision: 1}, Count: 1,
			Kvs: []*mvccpb.KeyValue{{Key: []byte("k"), Value: bytes.Repeat([]byte("v"), 3000)}}},
		&pb.PutResponse{Header: &pb.ResponseHeader{Revision: 2}}, // under gRPC's pooling threshold
		watchResponse(300, 14000, 0x33),                          // over the largest class
	}
	for round := 0; round < 2; round++ {
		for i, m := range msgs {
			got, err := c.Marshal(m)
			if err != nil {
				t.Fatalf("round %d, message %d: %v", round, i, err)
			}
			want, err := grpcs.Marshal(m)
			if err != nil {
				t.Fatal(err)
			}
			if g, w := got.Materialize(), want.Materialize(); !bytes.Equal(g, w) {
				t.Fatalf("round %d, message %d (%T): %d bytes differ from gRPC's %d", round, i, m, len(g), len(w))
			}
			back := m.ProtoReflect().New().Interface()
			if err := c.Unmarshal(got, back); err != nil {
				t.Fatal(err)
			}
			if !proto.Equal(back, m) {
				t.Fatalf("round %d, message %d: decodes to another message", round, i)
			}
			got.Free()
			want.Free()
		}
	}
}

// TestWirePoolClasses: buffers come back with the length asked for, from
// the power-of-two class that holds it (past 1 MiB, rounded up to a page),
// and only such capacities are kept in a class.
func TestWirePoolClasses(t *testing.T) {
	p := newWirePool()
	for _, n := range []int{1, 1024, 1025, 30000, 1 << 20, 1<<20 + 1, 7 << 20} {
		b := p.Get(n)
		if len(*b) != n {
			t.Fatalf("Get(%d): length %d", n, len(*b))
		}
		want := 1 << 10
		for want < n {
			want <<= 1
		}
		if n > 1<<20 {
			want = (n + 4095) &^ 4095
		}
		if cap(*b) != want {
			t.Fatalf("Get(%d): capacity %d, want %d", n, cap(*b), want)
		}
		p.Put(b)
	}
	odd := make([]byte, 3000)
	p.Put(&odd) // not a class's capacity: dropped, not handed out as 4 KiB
	if b := p.Get(4000); cap(*b) != 4096 {
		t.Fatalf("Get(4000) after Put of a 3000-byte buffer: capacity %d", cap(*b))
	}
}

// BenchmarkWatchResponseMarshal: a watch response with one pod and its
// previous value (30 KB), encoded by gRPC's codec and by the server's.
func BenchmarkWatchResponseMarshal(b *testing.B) {
	m := watchResponse(1, 17000, 'x')
	for _, c := range []struct {
		name  string
		codec encoding.CodecV2
	}{{"grpc", encoding.GetCodecV2(grpcproto.Name)}, {"wire", newWireCodec()}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(proto.Size(m)))
			for b.Loop() {
				bs, err := c.codec.Marshal(m)
				if err != nil {
					b.Fatal(err)
				}
				bs.Free()
			}
		})
	}
}

var _ mem.BufferPool = (*wirePool)(nil)
