package server

import (
	"bytes"
	"context"
	"math"

	"github.com/stratadb/strata/auth"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// RangeStream is etcd 3.7's streamed Range: the result of a Range in
// chunks, so that a large list (Kubernetes' apiserver lists through it
// when the server offers it) is neither built whole in memory nor sent
// as one message. Merged (proto.Merge), the chunks are the Range's
// response: each carries a disjoint run of keys, in order, and the last
// one the header, more and count.
func (k *kvServer) RangeStream(r *pb.RangeRequest, rs pb.KV_RangeStreamServer) error {
	if err := checkRangeStreamRequest(r); err != nil {
		return err
	}
	ctx := rs.Context()
	err := k.auth.Serve(ctx, func(ai *auth.Info) error { return k.auth.CheckRange(ai, r.Key, r.RangeEnd) },
		func() error {
			return k.kv.rangeStream(ctx, r, func(resp *pb.RangeResponse) error {
				if resp.Header != nil {
					k.hdr.fill(resp.Header)
				}
				return rs.Send(&pb.RangeStreamResponse{RangeResponse: resp})
			})
		})
	return toGRPC(err)
}

// checkRangeStreamRequest is etcd's: a sort other than by key ascending,
// or a revision filter, would need every key before the first chunk.
func checkRangeStreamRequest(r *pb.RangeRequest) error {
	if len(r.Key) == 0 {
		return rpctypes.ErrGRPCEmptyKey
	}
	if _, ok := pb.RangeRequest_SortOrder_name[int32(r.SortOrder)]; !ok {
		return rpctypes.ErrGRPCInvalidSortOption
	}
	if _, ok := pb.RangeRequest_SortTarget_name[int32(r.SortTarget)]; !ok {
		return rpctypes.ErrGRPCInvalidSortOption
	}
	if r.SortOrder != pb.RangeRequest_NONE && (r.SortTarget != pb.RangeRequest_KEY || r.SortOrder != pb.RangeRequest_ASCEND) {
		return status.Error(codes.Unimplemented, "RangeStream does not support custom sort orders")
	}
	if r.MinModRevision != 0 || r.MaxModRevision != 0 || r.MinCreateRevision != 0 || r.MaxCreateRevision != 0 {
		return status.Error(codes.Unimplemented, "RangeStream does not support revision filters")
	}
	return nil
}

// firstStreamChunk is the number of keys of the first chunk, etcd's
// initialStreamChunkLimit.
const firstStreamChunk = 10

// rangeStream reads r chunk by chunk, as etcd 3.7 does, and passes each
// chunk to send. After one read barrier (unless serializable), every
// chunk reads at the revision of the first (the latest then, unless r
// names one), each from the key after the last one sent, so the chunks
// are one consistent snapshot; a compaction past that revision while
// streaming ends the stream with ErrCompacted. The first chunk has 10
// keys; each next one doubles the count while the last chunk's encoding
// was under half of server.max_request_bytes and halves it while over
// twice that. The last chunk carries the header (the store's revision
// when the first chunk was read), more, and count (the keys sent plus
// those after them in the range, if a limit stopped the stream).
func (s *Server) rangeStream(ctx context.Context, r *pb.RangeRequest, send func(*pb.RangeResponse) error) error {
	q := proto.Clone(r).(*pb.RangeRequest)
	if !q.Serializable {
		if err := s.readBarrier(ctx); err != nil {
			return err
		}
	}
	if q.CountOnly {
		resp, err := s.readChunk(q)
		if err != nil {
			return err
		}
		return send(&pb.RangeResponse{Header: header(resp.Header.Revision), Count: resp.Count})
	}
	total := q.Limit
	if total <= 0 { // as in Range, a negative limit is none
		total = math.MaxInt64
	}
	q.Limit = min(firstStreamChunk, total)
	var rev, sent int64
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		resp, err := s.readChunk(q)
		if err != nil {
			return err
		}
		if rev == 0 {
			rev = resp.Header.Revision
			if q.Revision == 0 {
				q.Revision = rev
			}
		}
		sent += int64(len(resp.Kvs))
		var next []byte
		if resp.More {
			next = append(bytes.Clone(resp.Kvs[len(resp.Kvs)-1].Key), 0)
		}
		out := &pb.RangeResponse{Kvs: resp.Kvs}
		done := !resp.More || sent == total
		if done {
			out.Header, out.More, out.Count = header(rev), resp.More, sent
			if resp.More {
				rest, err := s.readChunk(&pb.RangeRequest{Key: next, RangeEnd: q.RangeEnd, Revision: q.Revision, CountOnly: true})
				if err != nil {
					return err
				}
				out.Count += rest.Count
			}
		}
		if err := send(out); err != nil {
			return err
		}
		if done {
			return nil
		}
		// etcd sizes the chunk it read: its count there is the keys read,
		// the limit's and the one more that says there are more.
		size := proto.Size(&pb.RangeResponse{Header: header(resp.Header.Revision), Kvs: resp.Kvs, More: true, Count: int64(len(resp.Kvs)) + 1})
		q.Key = next
		q.Limit = min(nextChunkLimit(q.Limit, size, int(s.cfg.Server.MaxRequestBytes)), total-sent)
	}
}

// readChunk reads one chunk of a stream, or its count, from the store.
// A chunk's own count is never sent, so the store does not count past
// the chunk (mvcc.RangeOptions.SkipCount).
func (s *Server) readChunk(q *pb.RangeRequest) (*pb.RangeResponse, error) {
	key, end, opts, err := rangeOptions(q)
	if err != nil {
		return nil, err
	}
	opts.SkipCount = true
	return s.readRange(q, key, end, opts)
}

// nextChunkLimit is etcd's adjustChunkLimit: double the number of keys
// while a chunk encodes to under half the target size, halve it while
// over twice the target, never below 1.
func nextChunkLimit(last int64, size, target int) int64 {
	switch {
	case size < target/2:
		last *= 2
	case size > target*2:
		last /= 2
	}
	return max(last, 1)
}
