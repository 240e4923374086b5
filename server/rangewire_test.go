package server

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"google.golang.org/protobuf/proto"
)

// pageOfPods is a Range's response of n pods of about size bytes, with
// every field set somewhere: empty and small values among the large ones,
// leases, negative and large revisions.
func pageOfPods(rng *rand.Rand, n, size int) *pb.RangeResponse {
	r := &pb.RangeResponse{Header: &pb.ResponseHeader{ClusterId: 1, MemberId: 2, Revision: int64(n) * 3, RaftTerm: 4},
		More: n%2 == 1, Count: int64(n) * 7}
	for i := 0; i < n; i++ {
		kv := &mvccpb.KeyValue{Key: []byte(fmt.Sprintf("/registry/pods/default/pod-%d", i)),
			CreateRevision: rng.Int64N(1 << 40), ModRevision: rng.Int64N(1 << 40), Version: rng.Int64N(100)}
		switch i % 5 {
		case 0: // empty
		case 1:
			kv.Value = bytes.Repeat([]byte{byte(i)}, inPlaceValue-1)
		case 2:
			kv.Value = bytes.Repeat([]byte{byte(i)}, inPlaceValue)
			kv.Lease = rng.Int64N(math.MaxInt64)
		case 3:
			kv.CreateRevision, kv.Version = -1, math.MinInt64
			kv.Value = bytes.Repeat([]byte{byte(i)}, 5)
		default:
			kv.Value = make([]byte, size/2+rng.IntN(size))
			for j := range kv.Value {
				kv.Value[j] = byte(rng.IntN(256))
			}
		}
		r.Kvs = append(r.Kvs, kv)
	}
	return r
}

// TestRangeWireEncodesAsProto: a Range's response encoded in place is
// proto.Marshal's encoding, byte for byte, and decodes to the response;
// one with no large value, or with unknown fields, is left to
// proto.Marshal.
func TestRangeWireEncodesAsProto(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	cases := []*pb.RangeResponse{
		pageOfPods(rng, 3, 14000),
		pageOfPods(rng, 500, 14000),
		pageOfPods(rng, 8, 2*inPlaceValue),
		{Kvs: []*mvccpb.KeyValue{{Key: []byte("k"), Value: bytes.Repeat([]byte("v"), 3000)}}}, // no header, no count
		{Header: &pb.ResponseHeader{}, Kvs: []*mvccpb.KeyValue{{Value: bytes.Repeat([]byte("v"), 1<<20)}}},
	}
	c := newWireCodec()
	for i, r := range cases {
		want, err := proto.MarshalOptions{Deterministic: true}.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := marshalRangeInPlace(r)
		if !ok {
			t.Fatalf("response %d: not encoded in place", i)
		}
		if g := got.Materialize(); !bytes.Equal(g, want) {
			t.Fatalf("response %d: %d bytes differ from proto.Marshal's %d", i, len(g), len(want))
		}
		viaCodec, err := c.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		back := &pb.RangeResponse{}
		if err := c.Unmarshal(viaCodec, back); err != nil {
			t.Fatal(err)
		}
		if !proto.Equal(back, r) {
			t.Fatalf("response %d: decodes to another response", i)
		}
	}

	small := &pb.RangeResponse{Kvs: []*mvccpb.KeyValue{{Key: []byte("k"), Value: []byte("v")}}}
	if _, ok := marshalRangeInPlace(small); ok {
		t.Fatal("a response of small values was encoded in place")
	}
	unknown := pageOfPods(rng, 3, 14000)
	unknown.Kvs[2].ProtoReflect().SetUnknown([]byte{0x78, 0x01}) // field 15, varint 1
	if _, ok := marshalRangeInPlace(unknown); ok {
		t.Fatal("a response with unknown fields was encoded in place")
	}
}

// TestRangeWireRefersToValues: the codec's encoding of a page of pods
// refers to each pod's value where the response holds it rather than
// copying it: a value changed after the encoding shows in it.
func TestRangeWireRefersToValues(t *testing.T) {
	r := pageOfPods(rand.New(rand.NewPCG(3, 4)), 10, 14000)
	out, err := newWireCodec().Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	v := r.Kvs[4].Value
	before := out.Materialize()
	at := bytes.Index(before, v)
	if at < 0 {
		t.Fatal("the value is not in the encoding")
	}
	v[0]++
	if after := out.Materialize(); after[at] != v[0] {
		t.Fatal("the encoding holds a copy of the value")
	}
}

// BenchmarkRangeWire encodes a page of a Kubernetes list, 500 pods of
// about 14 KB, in place and with proto.Marshal (gRPC's codec).
func BenchmarkRangeWire(b *testing.B) {
	r := &pb.RangeResponse{Header: &pb.ResponseHeader{Revision: 160000}, More: true, Count: 80000}
	for i := 0; i < 500; i++ {
		r.Kvs = append(r.Kvs, &mvccpb.KeyValue{Key: []byte(fmt.Sprintf("/registry/pods/default/pod-%d", i)),
			CreateRevision: int64(1000 + i), ModRevision: int64(90000 + i), Version: 2, Value: bytes.Repeat([]byte{byte(i)}, 14000)})
	}
	b.Run("in-place", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			out, _ := marshalRangeInPlace(r)
			out.Free()
		}
	})
	b.Run("proto", func(b *testing.B) {
		c := newWireCodec()
		for i := 0; i < b.N; i++ {
			out, err := c.marshal(r, c.pool)
			if err != nil {
				b.Fatal(err)
			}
			out.Free()
		}
	})
}
