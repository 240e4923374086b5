package server

import (
	"bytes"
	"fmt"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/protobuf/proto"

	"github.com/stratadb/strata/config"
	"github.com/stratadb/strata/engine"
	"github.com/stratadb/strata/mvcc"
)

// openApplier opens an applier over a store in a temporary directory,
// with the engine's sync = true (so each engine commit is one WAL sync),
// closed with the test.
func openApplier(t testing.TB) (*applier, *engine.DB) {
	t.Helper()
	cfg := config.ServeDefault()
	cfg.DBPath = t.TempDir()
	cfg.Sync = true
	db, err := engine.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	st, err := mvcc.Open(db, mvcc.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = st.Close()
		_ = db.Close()
	})
	a, err := newApplier(config.ServeDefault(), st)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.auth.Close() })
	return a, db
}

// applyCommands is a log of commands of every kind: puts whose results
// depend on the ones before (prev_kv, compares, ranges, deletes), values
// too large for mvcc's record cache, commands rejected for themselves,
// one that does not decode, one the store does not know, and a
// compaction and lease grants and revocations, which apply by
// themselves between staged runs.
func applyCommands(t testing.TB) [][]byte {
	big := func(c byte) []byte { return bytes.Repeat([]byte{c}, 3<<10) }
	put := func(k string, v []byte, prev bool) *pb.InternalRaftRequest {
		return &pb.InternalRaftRequest{Put: &pb.PutRequest{Key: []byte(k), Value: v, PrevKv: prev}}
	}
	reqs := []*pb.InternalRaftRequest{
		put("a", big('1'), false),
		put("a", big('2'), true),
		{LeaseGrant: &pb.LeaseGrantRequest{ID: 7, TTL: 60}},
		{Put: &pb.PutRequest{Key: []byte("l"), Value: []byte("v"), Lease: 7}},
		{Txn: &pb.TxnRequest{
			Compare: []*pb.Compare{{Key: []byte("a"), Target: pb.Compare_VALUE, Result: pb.Compare_EQUAL, TargetUnion: &pb.Compare_Value{Value: big('2')}}},
			Success: []*pb.RequestOp{
				{Request: &pb.RequestOp_RequestPut{RequestPut: &pb.PutRequest{Key: []byte("b"), Value: big('b')}}},
				{Request: &pb.RequestOp_RequestRange{RequestRange: &pb.RangeRequest{Key: []byte("a"), RangeEnd: []byte("z")}}},
			},
		}},
		{Txn: &pb.TxnRequest{Success: []*pb.RequestOp{ // a duplicate key: rejected
			{Request: &pb.RequestOp_RequestPut{RequestPut: &pb.PutRequest{Key: []byte("c")}}},
			{Request: &pb.RequestOp_RequestPut{RequestPut: &pb.PutRequest{Key: []byte("c")}}},
		}}},
		put("c", []byte("x"), false),
		{Compaction: &pb.CompactionRequest{Revision: 3}},
		{Compaction: &pb.CompactionRequest{Revision: 1}}, // compacted: rejected
		put("a", big('3'), true),
		{Put: &pb.PutRequest{Key: []byte("d"), Lease: 99}}, // unknown lease: rejected
		{DeleteRange: &pb.DeleteRangeRequest{Key: []byte("a"), RangeEnd: []byte("c"), PrevKv: true}},
		{}, // nothing the store knows: its index is kept
		{LeaseRevoke: &pb.LeaseRevokeRequest{ID: 7}},
		put("e", big('e'), false),
		put("e", []byte("small"), true),
		{Txn: &pb.TxnRequest{Success: []*pb.RequestOp{ // nested: decided on the staged "small"
			{Request: &pb.RequestOp_RequestPut{RequestPut: &pb.PutRequest{Key: []byte("f"), Value: []byte("1")}}},
			{Request: &pb.RequestOp_RequestTxn{RequestTxn: &pb.TxnRequest{
				Compare: []*pb.Compare{{Key: []byte("e"), Target: pb.Compare_VALUE, Result: pb.Compare_EQUAL, TargetUnion: &pb.Compare_Value{Value: []byte("small")}}},
				Success: []*pb.RequestOp{
					{Request: &pb.RequestOp_RequestRange{RequestRange: &pb.RangeRequest{Key: []byte("e"), RangeEnd: []byte("g")}}},
					{Request: &pb.RequestOp_RequestPut{RequestPut: &pb.PutRequest{Key: []byte("g"), Value: big('g'), PrevKv: true}}},
				},
				Failure: []*pb.RequestOp{{Request: &pb.RequestOp_RequestPut{RequestPut: &pb.PutRequest{Key: []byte("h")}}}},
			}}},
		}}},
		{Txn: &pb.TxnRequest{Success: []*pb.RequestOp{ // nested duplicate key: rejected
			{Request: &pb.RequestOp_RequestPut{RequestPut: &pb.PutRequest{Key: []byte("x")}}},
			{Request: &pb.RequestOp_RequestTxn{RequestTxn: &pb.TxnRequest{Success: []*pb.RequestOp{
				{Request: &pb.RequestOp_RequestPut{RequestPut: &pb.PutRequest{Key: []byte("x")}}},
			}}}},
		}}},
	}
	var cmds [][]byte
	for i, r := range reqs {
		b, err := proto.Marshal(r)
		if err != nil {
			t.Fatalf("command %d: %v", i, err)
		}
		cmds = append(cmds, b)
		if i == 3 {
			cmds = append(cmds, []byte{0xff, 0xff}) // does not decode
		}
	}
	return cmds
}

// applyRun stages cmds, the log entries from index first on (first 0:
// commands without a log position, as a single member's), in one batch
// and commits it.
func applyRun(a *applier, first uint64, cmds [][]byte) ([]any, error) {
	b := a.NewBatch()
	results := make([]any, len(cmds))
	for i, c := range cmds {
		index := first
		if first != 0 {
			index += uint64(i)
		}
		res, err := b.Stage(index, c)
		if err != nil {
			_ = b.Commit()
			return nil, err
		}
		results[i] = res
	}
	return results, b.Commit()
}

// TestApplyBatchSameAsApply applies the same log to stores one command
// per batch and in runs (of 3, and of all commands), and as a single
// member does (no log positions, in one run): every result, the
// contents, revision and (with a log) applied index are the same; and a
// run of puts, deletes and txns costs one WAL sync (one engine commit)
// where batches of one cost one per command.
func TestApplyBatchSameAsApply(t *testing.T) {
	cmds := applyCommands(t)
	one, _ := openApplier(t)
	var want []any
	for i, c := range cmds {
		res, err := applyRun(one, uint64(i+1), [][]byte{c})
		if err != nil {
			t.Fatalf("apply of command %d: %v", i+1, err)
		}
		want = append(want, res[0])
	}
	for _, run := range []int{3, len(cmds), 0} {
		name := fmt.Sprintf("runs_of_%d", run)
		if run == 0 {
			name, run = "no_log", len(cmds)
		}
		t.Run(name, func(t *testing.T) {
			batched, _ := openApplier(t)
			var got []any
			for first := 0; first < len(cmds); first += run {
				batch := cmds[first:min(first+run, len(cmds))]
				index := uint64(first + 1)
				if name == "no_log" {
					index = 0
				}
				res, err := applyRun(batched, index, batch)
				if err != nil {
					t.Fatalf("apply of commands %d-%d: %v", first+1, first+len(batch), err)
				}
				got = append(got, res...)
			}
			for i := range want {
				w, g := want[i].(*applyResult), got[i].(*applyResult)
				if !proto.Equal(w.resp, g.resp) || fmt.Sprint(w.err) != fmt.Sprint(g.err) {
					t.Fatalf("command %d: alone gave %v, %v; in runs %v, %v", i+1, w.resp, w.err, g.resp, g.err)
				}
			}
			sameStores(t, one.store, batched.store, name != "no_log")
		})
	}
	var rejected int
	for _, r := range want {
		if r.(*applyResult).err != nil {
			rejected++
		}
	}
	if rejected != 6 { // 2 duplicate keys, bad bytes, compacted, unknown lease, unknown command
		t.Fatalf("%d commands rejected, want 6", rejected)
	}
	nested := want[len(want)-2].(*applyResult).resp.(*pb.TxnResponse)
	inner := nested.Responses[1].GetResponseTxn()
	if !inner.Succeeded || len(inner.Responses[0].GetResponseRange().Kvs) != 2 || inner.Responses[1].GetResponsePut().Header.Revision != nested.Header.Revision {
		t.Fatalf("nested txn: %v; want its success branch, reading e and f, at the txn's revision", nested)
	}

	// Only puts, deletes and txns: one run, one commit.
	var puts [][]byte
	for i := range 20 {
		b, _ := proto.Marshal(&pb.InternalRaftRequest{Put: &pb.PutRequest{Key: fmt.Appendf(nil, "k%d", i%5), Value: []byte("v"), PrevKv: true}})
		puts = append(puts, b)
	}
	syncs := func(db *engine.DB) int64 {
		m, err := db.Metrics()
		if err != nil {
			t.Fatal(err)
		}
		return m.WAL.FS.Syncs
	}
	a1, db1 := openApplier(t)
	before := syncs(db1)
	for i, c := range puts {
		if _, err := applyRun(a1, uint64(i+1), [][]byte{c}); err != nil {
			t.Fatal(err)
		}
	}
	apply := syncs(db1) - before
	a2, db2 := openApplier(t)
	before = syncs(db2)
	if _, err := applyRun(a2, 1, puts); err != nil {
		t.Fatal(err)
	}
	batch := syncs(db2) - before
	t.Logf("%d puts: %d WAL syncs in batches of one, %d in one batch", len(puts), apply, batch)
	if apply < int64(len(puts)) || batch != 1 {
		t.Fatalf("%d puts: %d WAL syncs in batches of one (want one each), %d in one batch (want 1)", len(puts), apply, batch)
	}
	sameStores(t, a1.store, a2.store, true)
}

// sameStores fails unless a and b hold the same keys at the same
// revision and (with index set) applied index.
func sameStores(t *testing.T, a, b *mvcc.Store, index bool) {
	t.Helper()
	if a.Rev() != b.Rev() || (index && a.AppliedIndex() != b.AppliedIndex()) || a.CompactRev() != b.CompactRev() {
		t.Fatalf("revision %d / %d, applied index %d / %d, compacted %d / %d", a.Rev(), b.Rev(), a.AppliedIndex(), b.AppliedIndex(), a.CompactRev(), b.CompactRev())
	}
	ra, err := a.Range([]byte{0}, []byte{0}, mvcc.RangeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rb, err := b.Range([]byte{0}, []byte{0}, mvcc.RangeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(ra.KVs) != fmt.Sprint(rb.KVs) {
		t.Fatalf("contents differ:\n%v\n%v", ra.KVs, rb.KVs)
	}
	if fmt.Sprint(a.Leases()) != fmt.Sprint(b.Leases()) {
		t.Fatalf("leases differ: %v / %v", a.Leases(), b.Leases())
	}
}

// BenchmarkApply measures what a member spends applying one command of
// the cluster's write benchmark (a v2 set: a Txn putting one key with
// prev_kv, 64 B) to a store with sync = false, as a cluster member's is:
// one batch per command (one engine commit each) and in the runs a
// member gets at 64 and 256 writers (batches of 10 and 33 commands, one
// engine commit each). ns/op is per command.
func BenchmarkApply(b *testing.B) {
	cmd, err := proto.Marshal(&pb.InternalRaftRequest{Txn: &pb.TxnRequest{Success: []*pb.RequestOp{
		{Request: &pb.RequestOp_RequestPut{RequestPut: &pb.PutRequest{Key: []byte("foo"), Value: bytes.Repeat([]byte("a"), 64), PrevKv: true}}},
	}}})
	if err != nil {
		b.Fatal(err)
	}
	for _, run := range []int{1, 10, 33} {
		b.Run(fmt.Sprintf("run=%d", run), func(b *testing.B) {
			cfg := config.ServeDefault()
			cfg.DBPath = b.TempDir()
			cfg.Sync = false
			db, err := engine.Open(cfg)
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			st, err := mvcc.Open(db, mvcc.Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			a, err := newApplier(config.ServeDefault(), st)
			if err != nil {
				b.Fatal(err)
			}
			batch := make([][]byte, run)
			for i := range batch {
				batch[i] = cmd
			}
			b.ReportAllocs()
			b.ResetTimer()
			for index := uint64(1); index <= uint64(b.N); {
				n := min(uint64(run), uint64(b.N)+1-index)
				if _, err := applyRun(a, index, batch[:n]); err != nil {
					b.Fatal(err)
				}
				index += n
			}
		})
	}
}

// TestStageTakesProposedRequest: Stage applies the request its proposer
// recorded when it gets the very slice the proposer encoded (a single
// member's Local), and decodes any other slice (a raft member's log
// entry) and a slice whose proposer has returned.
func TestStageTakesProposedRequest(t *testing.T) {
	a, _ := openApplier(t)
	put := func(k string) *pb.InternalRaftRequest {
		return &pb.InternalRaftRequest{Put: &pb.PutRequest{Key: []byte(k), Value: []byte("v")}}
	}
	cmd, err := proto.Marshal(put("encoded"))
	if err != nil {
		t.Fatal(err)
	}
	stage := func(cmd []byte) {
		t.Helper()
		b := a.NewBatch()
		if _, err := b.Stage(0, cmd); err != nil {
			t.Fatal(err)
		}
		if err := b.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	has := func(k string) bool {
		t.Helper()
		res, err := a.store.Range([]byte(k), nil, mvcc.RangeOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return len(res.KVs) == 1
	}
	// A recorded request that differs from its bytes shows which one
	// applied.
	a.proposed.add(cmd, put("recorded"))
	stage(cmd)
	if !has("recorded") || has("encoded") {
		t.Fatalf("the slice the proposer encoded: recorded applied %v, encoded %v; want the recorded request", has("recorded"), has("encoded"))
	}
	stage(bytes.Clone(cmd))
	if !has("encoded") {
		t.Fatal("a copy of the slice (a log entry) was not decoded")
	}
	a.proposed.remove(cmd)
	if r := a.proposed.get(cmd); r != nil {
		t.Fatalf("after remove: %v", r)
	}
}

// TestProposeForgetsItsRequest: every request leaves the table of
// proposals in flight once its proposer returns, applied or refused.
func TestProposeForgetsItsRequest(t *testing.T) {
	s := startServer(t, testConfig(t))
	ctx := testCtx(t)
	for i := range 20 {
		r := &pb.InternalRaftRequest{Put: &pb.PutRequest{Key: []byte(fmt.Sprint("k", i)), Value: []byte("v")}}
		if i%2 == 1 {
			r.Put.Key = nil // refused: an empty key
		}
		_, _ = s.propose(ctx, r)
	}
	s.apply.proposed.mu.Lock()
	n := len(s.apply.proposed.m)
	s.apply.proposed.mu.Unlock()
	if n != 0 {
		t.Fatalf("%d requests left in the table of proposals in flight", n)
	}
}
