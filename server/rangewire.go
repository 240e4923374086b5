package server

import (
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// The encoding of a Range's response that refers to its values where the
// response holds them. proto.Marshal copies every value into one buffer
// the size of the response, and a page of a Kubernetes list is 500 pods
// of 14 KB: each page in flight took its values twice, and twelve lists
// at once peaked at 343-353 MB of RSS against 250-262 MB encoded in place
// (docs/data/list-in-place.md; the CPU of a list did not change: the
// values are written into fresh memory once either way). gRPC sends an
// encoding made of several buffers as it sends one (its writer gathers
// them into HTTP/2 frames), so the encoding here is the protobuf framing
// in one buffer, cut where each large value goes, with the values between
// the cuts. The bytes are proto.Marshal's: fields in number order, zero
// values left out, as TestRangeWireEncodesAsProto checks.

// inPlaceValue is the size from which a value is referred to rather than
// copied: below it, a copy costs less than a buffer of its own.
const inPlaceValue = 1 << 10

// marshalRangeInPlace encodes r so, or returns false when r has nothing to
// gain from it (no value of inPlaceValue bytes) or holds fields this
// encoder does not write (unknown fields), for proto.Marshal to encode.
// The values must not change until gRPC has sent the encoding: a Range's
// values are its own (mvcc.Store.Range copies them out of the store).
func marshalRangeInPlace(r *pb.RangeResponse) (mem.BufferSlice, bool) {
	if len(r.ProtoReflect().GetUnknown()) > 0 {
		return nil, false
	}
	framing, large := 0, 0
	for _, kv := range r.Kvs {
		if kv == nil || len(kv.ProtoReflect().GetUnknown()) > 0 {
			return nil, false
		}
		n := keyValueSize(kv)
		framing += protowire.SizeTag(2) + protowire.SizeVarint(uint64(n)) + n
		if len(kv.Value) >= inPlaceValue {
			framing -= len(kv.Value)
			large++
		}
	}
	if large == 0 {
		return nil, false
	}
	var header []byte
	if r.Header != nil {
		var err error
		if header, err = proto.Marshal(r.Header); err != nil {
			return nil, false
		}
	}
	b := make([]byte, 0, framing+len(header)+32)
	out := make(mem.BufferSlice, 0, 2*large+1)
	cut := 0 // where the framing not yet in out starts
	if r.Header != nil {
		b = protowire.AppendTag(b, 1, protowire.BytesType)
		b = protowire.AppendBytes(b, header)
	}
	for _, kv := range r.Kvs {
		b = protowire.AppendTag(b, 2, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(keyValueSize(kv)))
		b = appendBytesField(b, 1, kv.Key)
		b = appendIntField(b, 2, kv.CreateRevision)
		b = appendIntField(b, 3, kv.ModRevision)
		b = appendIntField(b, 4, kv.Version)
		if len(kv.Value) >= inPlaceValue {
			b = protowire.AppendTag(b, 5, protowire.BytesType)
			b = protowire.AppendVarint(b, uint64(len(kv.Value)))
			out = append(out, mem.SliceBuffer(b[cut:len(b):len(b)]), mem.SliceBuffer(kv.Value))
			cut = len(b)
		} else {
			b = appendBytesField(b, 5, kv.Value)
		}
		b = appendIntField(b, 6, kv.Lease)
	}
	if r.More {
		b = protowire.AppendTag(b, 3, protowire.VarintType)
		b = protowire.AppendVarint(b, 1)
	}
	b = appendIntField(b, 4, r.Count)
	if cut < len(b) {
		out = append(out, mem.SliceBuffer(b[cut:]))
	}
	return out, true
}

// keyValueSize is the size of kv's encoding, without its tag and length.
func keyValueSize(kv *mvccpb.KeyValue) int {
	return bytesFieldSize(1, kv.Key) + intFieldSize(2, kv.CreateRevision) + intFieldSize(3, kv.ModRevision) +
		intFieldSize(4, kv.Version) + bytesFieldSize(5, kv.Value) + intFieldSize(6, kv.Lease)
}

// bytesFieldSize and intFieldSize are the sizes of proto3 fields, which
// are left out when empty or zero; appendBytesField and appendIntField
// append them.
func bytesFieldSize(num protowire.Number, v []byte) int {
	if len(v) == 0 {
		return 0
	}
	return protowire.SizeTag(num) + protowire.SizeBytes(len(v))
}

func intFieldSize(num protowire.Number, v int64) int {
	if v == 0 {
		return 0
	}
	return protowire.SizeTag(num) + protowire.SizeVarint(uint64(v))
}

func appendBytesField(b []byte, num protowire.Number, v []byte) []byte {
	if len(v) == 0 {
		return b
	}
	return protowire.AppendBytes(protowire.AppendTag(b, num, protowire.BytesType), v)
}

func appendIntField(b []byte, num protowire.Number, v int64) []byte {
	if v == 0 {
		return b
	}
	return protowire.AppendVarint(protowire.AppendTag(b, num, protowire.VarintType), uint64(v))
}
