package server

import (
	"context"
	"fmt"
	"strings"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"google.golang.org/protobuf/proto"
)

// streamChunks collects a RangeStream's chunks, each without the header
// fields that name the cluster, member and term.
func streamChunks(ctx context.Context, c *clientv3.Client, key string, opts ...clientv3.OpOption) ([]*pb.RangeResponse, error) {
	ch, err := c.GetStream(ctx, key, opts...)
	if err != nil {
		return nil, err
	}
	var chunks []*pb.RangeResponse
	for r := range ch {
		if err := r.Err(); err != nil {
			return chunks, err
		}
		chunk := proto.Clone(r.RangeResponse).(*pb.RangeResponse)
		if h := chunk.Header; h != nil {
			h.ClusterId, h.MemberId, h.RaftTerm = 0, 0, 0
		}
		chunks = append(chunks, chunk)
	}
	return chunks, nil
}

// TestRangeStreamLikeEtcd loads the same keys into Strata and etcd 3.7,
// streams ranges from both with clientv3's GetStream (KV.RangeStream) and
// requires the same chunks: the same keys in each (etcd's chunk sizes,
// from 10 keys up, grown and shrunk against max_request_bytes), and the
// header, more and count on the last. Merged, Strata's chunks equal its
// Range's response; a compacted revision, a custom sort and a revision
// filter fail as in etcd.
func TestRangeStreamLikeEtcd(t *testing.T) {
	if testing.Short() {
		t.Skip("starts etcd 3.7")
	}
	ctx := testCtx(t)
	cfg := testConfig(t)
	// Chunks grow up to the size rules sooner with a small limit.
	cfg.Server.MaxRequestBytes = 64 << 10
	strata := newClient(t, startServer(t, cfg), nil)
	etcd := startEtcd37(t, func(c *embed.Config) { c.MaxRequestBytes = uint(cfg.Server.MaxRequestBytes) })

	value := strings.Repeat("v", 300)
	var oldRev int64
	for round := range 2 {
		for first := 0; first < 1500; first += 100 {
			var ops []clientv3.Op
			for i := first; i < first+100; i++ {
				if round == 1 && i%3 != 0 {
					continue
				}
				ops = append(ops, clientv3.OpPut(fmt.Sprintf("key/%05d", i), fmt.Sprintf("%s%d.%d", value, round, i)))
			}
			for _, c := range []*clientv3.Client{strata, etcd} {
				if _, err := c.Txn(ctx).Then(ops...).Commit(); err != nil {
					t.Fatal(err)
				}
			}
		}
		if round == 0 {
			resp, err := strata.Get(ctx, "key/00000")
			if err != nil {
				t.Fatal(err)
			}
			oldRev = resp.Header.Revision
		}
	}

	for _, tc := range []struct {
		name string
		key  string
		opts []clientv3.OpOption
	}{
		{"all", "key/", []clientv3.OpOption{clientv3.WithPrefix()}},
		{"limit 25", "key/", []clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithLimit(25)}},
		{"limit 700", "key/", []clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithLimit(700)}},
		{"limit of every key", "key/", []clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithLimit(1500)}},
		{"keys only", "key/", []clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithKeysOnly()}},
		{"count only", "key/", []clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithCountOnly()}},
		{"an older revision", "key/", []clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithRev(oldRev)}},
		{"serializable, from a key on", "key/01400", []clientv3.OpOption{clientv3.WithFromKey(), clientv3.WithSerializable()}},
		{"one key", "key/00007", nil},
		{"no key", "nokey/", []clientv3.OpOption{clientv3.WithPrefix()}},
	} {
		schunks, serr := streamChunks(ctx, strata, tc.key, tc.opts...)
		echunks, eerr := streamChunks(ctx, etcd, tc.key, tc.opts...)
		if serr != nil || eerr != nil {
			t.Fatalf("%s: Strata %v, etcd %v", tc.name, serr, eerr)
		}
		if len(schunks) != len(echunks) {
			t.Errorf("%s: Strata sent %d chunks (%v), etcd %d (%v)", tc.name, len(schunks), chunkSizes(schunks), len(echunks), chunkSizes(echunks))
			continue
		}
		for i := range schunks {
			if !proto.Equal(schunks[i], echunks[i]) {
				t.Errorf("%s: chunk %d of %d differs: Strata %d keys, header %v, more %v, count %d; etcd %d keys, header %v, more %v, count %d",
					tc.name, i, len(schunks), len(schunks[i].Kvs), schunks[i].Header, schunks[i].More, schunks[i].Count,
					len(echunks[i].Kvs), echunks[i].Header, echunks[i].More, echunks[i].Count)
			}
		}
		merged := &pb.RangeResponse{}
		for _, c := range schunks {
			proto.Merge(merged, c)
		}
		get, err := strata.Get(ctx, tc.key, tc.opts...)
		if err != nil {
			t.Fatal(err)
		}
		want := (*pb.RangeResponse)(proto.Clone((*pb.RangeResponse)(get)).(*pb.RangeResponse))
		want.Header.ClusterId, want.Header.MemberId, want.Header.RaftTerm = 0, 0, 0
		if !proto.Equal(merged, want) {
			t.Errorf("%s: merged chunks (%d keys, count %d, more %v) differ from Range (%d keys, count %d, more %v)",
				tc.name, len(merged.Kvs), merged.Count, merged.More, len(want.Kvs), want.Count, want.More)
		}
		t.Logf("%s: %d chunks %v", tc.name, len(schunks), chunkSizes(schunks))
	}

	// Errors, as etcd's.
	for _, c := range []*clientv3.Client{strata, etcd} {
		if _, err := c.Compact(ctx, oldRev); err != nil {
			t.Fatal(err)
		}
	}
	for name, opts := range map[string][]clientv3.OpOption{
		"a compacted revision": {clientv3.WithPrefix(), clientv3.WithRev(oldRev - 1)},
		"a future revision":    {clientv3.WithPrefix(), clientv3.WithRev(oldRev + 10000)},
		"a custom sort":        {clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByModRevision, clientv3.SortDescend)},
		"a revision filter":    {clientv3.WithPrefix(), clientv3.WithMinModRev(3)},
	} {
		_, serr := streamChunks(ctx, strata, "key/", opts...)
		_, eerr := streamChunks(ctx, etcd, "key/", opts...)
		if serr == nil || eerr == nil || serr.Error() != eerr.Error() {
			t.Errorf("%s: Strata %v, etcd %v; want the same error", name, serr, eerr)
		}
	}
	if _, err := streamChunks(ctx, strata, "key/", clientv3.WithPrefix(), clientv3.WithRev(oldRev-1)); err != rpctypes.ErrCompacted {
		t.Errorf("stream at a compacted revision: %v, want %v", err, rpctypes.ErrCompacted)
	}
}

// chunkSizes lists the number of keys of each chunk.
func chunkSizes(chunks []*pb.RangeResponse) []int {
	var n []int
	for _, c := range chunks {
		n = append(n, len(c.Kvs))
	}
	return n
}

// TestRangeStreamOneRevision writes and compacts while a stream is
// between chunks: the chunks still read the revision of the first (a put
// after it is not seen, and the header keeps that revision), and a
// compaction past it ends the stream with ErrCompacted.
func TestRangeStreamOneRevision(t *testing.T) {
	ctx := testCtx(t)
	s := startServer(t, testConfig(t))
	c := newClient(t, s, nil)
	for i := range 100 {
		if _, err := c.Put(ctx, fmt.Sprintf("k%03d", i), "v"); err != nil {
			t.Fatal(err)
		}
	}
	before, err := c.Get(ctx, "k", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	r := &pb.RangeRequest{Key: []byte("k"), RangeEnd: []byte("l")}
	merged := &pb.RangeResponse{}
	chunks := 0
	err = s.rangeStream(ctx, r, func(resp *pb.RangeResponse) error {
		chunks++
		proto.Merge(merged, resp)
		if chunks == 1 {
			_, err := c.Put(ctx, "k050", "changed")
			return err
		}
		return nil
	})
	if err != nil || chunks < 3 {
		t.Fatalf("stream: %d chunks, %v", chunks, err)
	}
	if merged.Header.Revision != before.Header.Revision || merged.Count != before.Count || len(merged.Kvs) != len(before.Kvs) {
		t.Fatalf("stream: revision %d, count %d, %d keys; want the state when it began: %d, %d, %d",
			merged.Header.Revision, merged.Count, len(merged.Kvs), before.Header.Revision, before.Count, len(before.Kvs))
	}
	for i, kv := range merged.Kvs {
		if !proto.Equal(kv, before.Kvs[i]) {
			t.Fatalf("key %d: %v, want %v", i, kv, before.Kvs[i])
		}
	}

	chunks = 0
	err = s.rangeStream(ctx, r, func(resp *pb.RangeResponse) error {
		chunks++
		if chunks == 1 {
			_, err := c.Put(ctx, "k050", "again")
			if err == nil {
				_, err = c.Compact(ctx, s.store.Rev())
			}
			return err
		}
		return nil
	})
	if toGRPC(err) != rpctypes.ErrGRPCCompacted || chunks != 1 {
		t.Fatalf("stream with a compaction between chunks: %v after %d chunks, want %v after 1", err, chunks, rpctypes.ErrGRPCCompacted)
	}
}
