package etcddiff

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/pkg/v3/traceutil"
	etxn "go.etcd.io/etcd/server/v3/etcdserver/txn"
	"go.etcd.io/etcd/server/v3/lease"
	emvcc "go.etcd.io/etcd/server/v3/storage/mvcc"

	"github.com/stratadb/strata/config"
	"github.com/stratadb/strata/engine"
	"github.com/stratadb/strata/mvcc"
)

var (
	seedFlag = flag.Uint64("seed", 0, "seed of TestAgainstEtcd (0: random; also $ETCDDIFF_SEED)")
	opsFlag  = flag.Int("ops", 0, "operations of TestAgainstEtcd (0: 25000, 5000 with -short)")
)

// TestAgainstEtcd runs random operations against mvcc and against etcd's
// storage code and fails on the first difference in any result: values,
// revisions (header, create, mod), versions, leases, counts, more,
// deleted counts, prev_kv, txn branches, errors, watch events, lease key
// sets. The op sequence depends only on the seed (printed; -seed replays).
func TestAgainstEtcd(t *testing.T) {
	seed := *seedFlag
	if s := os.Getenv("ETCDDIFF_SEED"); seed == 0 && s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	if seed == 0 {
		seed = rand.Uint64()
	}
	ops := *opsFlag
	if ops == 0 {
		ops = 25000
		if testing.Short() {
			ops = 5000
		}
	}
	t.Logf("seed %d, %d operations (replay: go test ./mvcc/etcddiff -run TestAgainstEtcd -seed %d -ops %d)", seed, ops, seed, ops)
	h := newHarness(t, seed)
	defer h.close()
	start := time.Now()
	h.emptyStore()
	for h.step = 0; h.step < ops; h.step++ {
		h.randomOp()
	}
	h.checkWatches(true)
	h.checkState()
	t.Logf("%d operations in %v: %v", ops, time.Since(start).Round(time.Millisecond), h.counts)
}

type harness struct {
	t      *testing.T
	seed   uint64
	r      *rand.Rand
	e      *etcdSide
	db     *engine.DB
	s      *mvcc.Store
	keys   []string
	step   int
	recent []string
	counts map[string]int
	pairs  []*watchPair
}

func newHarness(t *testing.T, seed uint64) *harness {
	h := &harness{t: t, seed: seed, r: rand.New(rand.NewPCG(seed, 77)), counts: map[string]int{}}
	for i := range 14 {
		h.keys = append(h.keys, fmt.Sprintf("k%02d", i))
	}
	h.keys = append(h.keys, "a", "k", "k0", "z\xff")
	h.e = newEtcdSide(t)
	cfg := config.Default()
	cfg.DBPath = "/db"
	cfg.MemtableSizeMB, cfg.BlockCacheSizeMB = 4, 8
	db, err := engine.Open(cfg, engine.Options{FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	h.db = db
	h.s, err = mvcc.Open(db, mvcc.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func (h *harness) close() {
	h.closeWatches()
	h.e.close()
	_ = h.e.b.Close()
	_ = h.s.Close()
	_ = h.db.Close()
}

// fail stops the test with the difference, the seed and the last ops.
func (h *harness) fail(format string, args ...any) {
	h.t.Helper()
	h.t.Fatalf("step %d (seed %d): %s\nlast operations:\n  %s", h.step, h.seed, fmt.Sprintf(format, args...), strings.Join(h.recent, "\n  "))
}

func (h *harness) note(format string, args ...any) {
	h.recent = append(h.recent, fmt.Sprintf("%d: ", h.step)+fmt.Sprintf(format, args...))
	if len(h.recent) > 12 {
		h.recent = h.recent[1:]
	}
}

// sameErr compares the two outcomes; true if both succeeded.
func (h *harness) sameErr(what string, eerr, oerr error) bool {
	h.t.Helper()
	if ec, oc := errClass(eerr), errClass(oerr); ec != oc {
		h.fail("%s: etcd %s (%v), mvcc %s (%v)", what, ec, eerr, oc, oerr)
	}
	if eerr != nil {
		h.counts["error: "+errClass(eerr)]++
	}
	return eerr == nil
}

func (h *harness) same(what string, etcd, ours any) {
	h.t.Helper()
	if !reflect.DeepEqual(etcd, ours) {
		h.fail("%s:\n etcd %+v\n mvcc %+v", what, etcd, ours)
	}
}

// Random inputs.

func (h *harness) key() []byte { return []byte(h.keys[h.r.IntN(len(h.keys))]) }

func (h *harness) value() []byte {
	if h.r.IntN(8) == 0 {
		return nil
	}
	return fmt.Appendf(nil, "v%d", h.r.IntN(1000))
}

func (h *harness) rangeEnd(key []byte) []byte {
	switch h.r.IntN(6) {
	case 0, 1:
		return nil
	case 2:
		return []byte{0}
	case 3:
		return mvcc.PrefixEnd(key[:1])
	}
	end := h.key()
	if bytes.Compare(end, key) < 0 {
		return mvcc.PrefixEnd(key)
	}
	return end
}

func (h *harness) leaseID() int64 { return int64(h.r.IntN(6)) } // 0: none

// rev picks a revision around the interesting edges.
func (h *harness) rev() int64 {
	cur, compacted := h.s.Rev(), h.s.CompactRev()
	switch h.r.IntN(8) {
	case 0:
		return cur
	case 1:
		return cur + 1
	case 2:
		return max(compacted-1, 0)
	case 3:
		return compacted
	case 4, 5:
		lo := max(compacted, 1)
		return lo + h.r.Int64N(cur-lo+1)
	case 6:
		if h.r.IntN(4) == 0 {
			return -1 - h.r.Int64N(3) // etcd: the latest for a Range, compacted in a Txn
		}
	}
	return 0
}

func (h *harness) rangeOptions() mvcc.RangeOptions {
	o := mvcc.RangeOptions{Rev: h.rev()}
	switch h.r.IntN(12) {
	case 0, 1, 2, 3:
		o.Limit = 1 + h.r.Int64N(4)
	case 4:
		o.Limit = -1 // no limit, as 0
	}
	switch h.r.IntN(10) {
	case 0, 1:
		o.KeysOnly = true
	case 2:
		o.CountOnly = true
	}
	return o
}

func (h *harness) putOp() mvcc.Op {
	op := mvcc.PutOp(h.key(), h.value())
	op.PrevKV = h.r.IntN(3) == 0
	if h.r.IntN(4) == 0 {
		op.Lease = h.leaseID()
	}
	switch h.r.IntN(20) {
	case 0:
		op.IgnoreValue, op.Value = true, nil
	case 1:
		op.IgnoreLease, op.Lease = true, 0
	}
	return op
}

func (h *harness) deleteOp() mvcc.Op {
	k := h.key()
	op := mvcc.DeleteOp(k, h.rangeEnd(k))
	op.PrevKV = h.r.IntN(3) == 0
	return op
}

func (h *harness) rangeOp() mvcc.Op {
	k := h.key()
	return mvcc.RangeOp(k, h.rangeEnd(k), h.rangeOptions())
}

// branch returns up to 3 random ops, with nested txns down to depth 2
// (etcd's RequestOp_RequestTxn).
func (h *harness) branch(depth int) []mvcc.Op {
	var ops []mvcc.Op
	puts := map[string]bool{}
	for range h.r.IntN(4) {
		switch p := h.r.IntN(12); {
		case p < 4:
			op := h.putOp()
			if puts[string(op.Key)] {
				continue
			}
			puts[string(op.Key)] = true
			ops = append(ops, op)
		case p < 6:
			ops = append(ops, h.deleteOp())
		case p < 9 && depth < 2:
			req := h.txnRequest(depth + 1)
			for k := range puts {
				// A compare on a key this branch has just put: etcd
				// decides on the state before the txn.
				req.Compare = append(req.Compare, h.compareOn([]byte(k)))
				break
			}
			ops = append(ops, mvcc.TxnOp(req))
		default:
			ops = append(ops, h.rangeOp())
		}
	}
	return ops
}

// txnRequest returns a random txn at nesting depth depth (0: the outer).
func (h *harness) txnRequest(depth int) mvcc.TxnRequest {
	req := mvcc.TxnRequest{Success: h.branch(depth), Failure: h.branch(depth)}
	for range h.r.IntN(3) {
		req.Compare = append(req.Compare, h.compare())
	}
	return req
}

func (h *harness) compare() mvcc.Compare { return h.compareOn(h.key()) }

// compareOn returns a random compare on k, its operand near k's current
// version.
func (h *harness) compareOn(k []byte) mvcc.Compare {
	c := mvcc.Compare{Key: k, Target: mvcc.CompareTarget(h.r.IntN(5)), Result: mvcc.CompareResult(h.r.IntN(4))}
	if h.r.IntN(4) == 0 {
		c.End = h.rangeEnd(k)
	}
	res, err := h.s.Range(k, nil, mvcc.RangeOptions{})
	if err != nil {
		h.fail("Range for a compare: %v", err)
	}
	var kv mvcc.KeyValue
	if len(res.KVs) == 1 {
		kv = res.KVs[0]
	}
	d := int64(h.r.IntN(3) - 1)
	switch c.Target {
	case mvcc.CompareValue:
		c.Value = kv.Value
		if h.r.IntN(2) == 0 {
			c.Value = h.value()
		}
	case mvcc.CompareVersion:
		c.Rev = kv.Version + d
	case mvcc.CompareCreateRevision:
		c.Rev = kv.CreateRevision + d
	case mvcc.CompareModRevision:
		c.Rev = kv.ModRevision + d
	case mvcc.CompareLease:
		c.Rev = h.leaseID()
	}
	return c
}

func (h *harness) randomOp() {
	switch p := h.r.IntN(1000); {
	case p < 250:
		h.put(h.putOp())
	case p < 350:
		h.deleteRange(h.deleteOp())
	case p < 550:
		h.rangeRead(h.rangeOp())
	case p < 800:
		h.txn()
	case p < 830:
		h.compact()
	case p < 870:
		h.grant()
	case p < 900:
		h.revoke()
	case p < 920:
		h.checkLeases()
	case p < 925:
		h.watch()
	case p < 945:
		h.checkWatches(false)
	case p < 946:
		h.reopen()
	default:
		h.checkState()
	}
}

// emptyStore runs the edge cases of an empty store: its revision, reads
// at revisions 0 to 2, and a compaction at 0 or 1 (etcd allows either
// once), then again at 0.
func (h *harness) emptyStore() {
	h.checkState()
	for rev := range int64(3) {
		h.rangeRead(mvcc.RangeOp([]byte{0}, []byte{0}, mvcc.RangeOptions{Rev: rev}))
	}
	h.compactAt(h.r.Int64N(2))
	h.compactAt(0)
	h.checkState()
}

// The operations.

func (h *harness) put(op mvcc.Op) {
	h.note("put %q=%q lease %d prev %v ignore value %v lease %v", op.Key, op.Value, op.Lease, op.PrevKV, op.IgnoreValue, op.IgnoreLease)
	h.counts["put"]++
	eresp, _, eerr := etxn.Put(bg, h.e.lg, h.e.le, h.e.kv, putRequest(op))
	oresp, oerr := h.s.Txn(mvcc.TxnRequest{Success: []mvcc.Op{op}})
	if !h.sameErr("put", eerr, oerr) {
		return
	}
	h.same("put: header revision", eresp.Header.Revision, oresp.Rev)
	var prev *mvcc.KeyValue
	if eresp.PrevKv != nil {
		kv := fromKV(eresp.PrevKv)
		prev = &kv
	}
	h.same("put: prev_kv", prev, oresp.Responses[0].PrevKV)
}

func (h *harness) deleteRange(op mvcc.Op) {
	h.note("delete [%q, %q) prev %v", op.Key, op.End, op.PrevKV)
	h.counts["delete"]++
	eresp, _, eerr := etxn.DeleteRange(bg, h.e.lg, h.e.kv, deleteRequest(op))
	oresp, oerr := h.s.Txn(mvcc.TxnRequest{Success: []mvcc.Op{op}})
	if !h.sameErr("delete", eerr, oerr) {
		return
	}
	h.same("delete: header revision", eresp.Header.Revision, oresp.Rev)
	h.same("delete: deleted", eresp.Deleted, oresp.Responses[0].Deleted)
	h.same("delete: prev_kvs", fromKVs(eresp.PrevKvs), oresp.Responses[0].PrevKVs)
}

// sameRange compares a range result; more is etcd's, derived from Count.
func (h *harness) sameRange(what string, op mvcc.Op, eresp *pbRange, ours mvcc.RangeResult) {
	h.t.Helper()
	h.same(what+": header revision", eresp.rev, ours.Rev)
	h.same(what+": kvs", eresp.kvs, ours.KVs)
	h.same(what+": count", eresp.count, ours.Count)
	more := op.Options.Limit > 0 && !op.Options.CountOnly && ours.Count > op.Options.Limit
	h.same(what+": more", eresp.more, more)
}

type pbRange struct {
	rev, count int64
	kvs        []mvcc.KeyValue
	more       bool
}

func (h *harness) rangeRead(op mvcc.Op) {
	h.note("range [%q, %q) %+v", op.Key, op.End, op.Options)
	h.counts["range"]++
	eresp, _, eerr := etxn.Range(bg, h.e.lg, h.e.kv, rangeRequest(op), true)
	ores, oerr := h.s.Range(op.Key, op.End, op.Options)
	if !h.sameErr("range", eerr, oerr) {
		return
	}
	h.sameRange("range", op, &pbRange{eresp.Header.Revision, eresp.Count, fromKVs(eresp.Kvs), eresp.More}, ores)
}

func (h *harness) txn() {
	depth := 2 // no nested txns
	if h.r.IntN(2) == 0 {
		depth = 0
	}
	req := h.txnRequest(depth)
	h.note("txn %+v", req)
	oresp, oerr := h.s.Txn(req)
	if errors.Is(oerr, mvcc.ErrDuplicateKeyInTxn) {
		// etcd checks duplicates in its gRPC layer, not in etcdserver/txn.
		h.counts["txn with duplicate keys (not compared)"]++
		return
	}
	h.counts["txn"]++
	if nested(req) {
		h.counts["txn with nested txns"]++
	}
	eresp, _, eerr := etxn.Txn(bg, h.e.lg, txnRequest(req), false, h.e.kv, h.e.le, false)
	if !h.sameErr("txn", eerr, oerr) {
		return
	}
	h.sameTxn("txn", req, eresp, oresp)
}

// nested reports whether req holds a nested txn.
func nested(req mvcc.TxnRequest) bool {
	for _, op := range append(req.Success[:len(req.Success):len(req.Success)], req.Failure...) {
		if op.Type == mvcc.OpTxn {
			return true
		}
	}
	return false
}

// sameTxn compares a txn's responses, nested ones included.
func (h *harness) sameTxn(what string, req mvcc.TxnRequest, eresp *pb.TxnResponse, oresp mvcc.TxnResponse) {
	h.t.Helper()
	h.same(what+": succeeded", eresp.Succeeded, oresp.Succeeded)
	h.same(what+": header revision", eresp.Header.Revision, oresp.Rev)
	ops := req.Success
	if !oresp.Succeeded {
		ops = req.Failure
	}
	h.same(what+": responses", len(eresp.Responses), len(oresp.Responses))
	for i, op := range ops {
		what := fmt.Sprintf("%s op %d (%v)", what, i, op.Type)
		o := oresp.Responses[i]
		switch op.Type {
		case mvcc.OpPut:
			r := eresp.Responses[i].GetResponsePut()
			h.same(what+": header revision", r.Header.Revision, o.Rev)
			var prev *mvcc.KeyValue
			if r.PrevKv != nil {
				kv := fromKV(r.PrevKv)
				prev = &kv
			}
			h.same(what+": prev_kv", prev, o.PrevKV)
		case mvcc.OpDelete:
			r := eresp.Responses[i].GetResponseDeleteRange()
			h.same(what+": header revision", r.Header.Revision, o.Rev)
			h.same(what+": deleted", r.Deleted, o.Deleted)
			h.same(what+": prev_kvs", fromKVs(r.PrevKvs), o.PrevKVs)
		case mvcc.OpRange:
			r := eresp.Responses[i].GetResponseRange()
			h.sameRange(what, op, &pbRange{r.Header.Revision, r.Count, fromKVs(r.Kvs), r.More}, o.Range)
			h.same(what+": op revision", o.Range.Rev, o.Rev)
		case mvcc.OpTxn:
			r := eresp.Responses[i].GetResponseTxn()
			if r == nil || o.Txn == nil {
				h.fail("%s: etcd %v, mvcc %v", what, r, o.Txn)
			}
			h.sameTxn(what, *op.Txn, r, *o.Txn)
		}
	}
}

func (h *harness) compact() {
	cur, compacted := h.s.Rev(), h.s.CompactRev()
	var rev int64
	switch h.r.IntN(6) {
	case 0:
		rev = compacted
	case 1:
		rev = cur + 1
	case 2:
		rev = 0
	default:
		lo := compacted + 1
		rev = lo + h.r.Int64N(max(cur-lo+1, 1))
	}
	h.compactAt(rev)
}

func (h *harness) compactAt(rev int64) {
	h.note("compact %d (current %d, compacted %d)", rev, h.s.Rev(), h.s.CompactRev())
	h.counts["compact"]++
	h.catchUpWatches()
	ch, eerr := h.e.kv.Compact(traceutil.TODO(), rev)
	if eerr == nil {
		<-ch
	}
	oerr := h.s.Compact(rev)
	if h.sameErr("compact", eerr, oerr) && h.r.IntN(3) == 0 && len(h.pairs) < 6 {
		// A watch from exactly the compacted revision sees its events,
		// deletions included.
		h.watchFrom([]byte{0}, []byte{0}, rev)
	}
}

func (h *harness) grant() {
	id, ttl := 1+int64(h.r.IntN(5)), 1+int64(h.r.IntN(100))
	h.note("grant lease %d ttl %d", id, ttl)
	h.counts["lease grant"]++
	_, eerr := h.e.le.Grant(lease.LeaseID(id), ttl)
	oerr := h.s.GrantLease(id, ttl)
	h.sameErr("lease grant", eerr, oerr)
}

func (h *harness) revoke() {
	id := 1 + int64(h.r.IntN(5))
	h.note("revoke lease %d", id)
	h.counts["lease revoke"]++
	eerr := h.e.le.Revoke(lease.LeaseID(id))
	orev, oerr := h.s.RevokeLease(id)
	if h.sameErr("lease revoke", eerr, oerr) {
		h.same("lease revoke: revision", h.e.kv.Rev(), orev)
	}
}

func (h *harness) checkLeases() {
	h.counts["lease list"]++
	ours := h.s.Leases()
	for i := range ours {
		if ours[i].Keys == nil {
			ours[i].Keys = [][]byte{}
		}
	}
	etcd := h.e.leases()
	if len(etcd) == 0 && len(ours) == 0 {
		return
	}
	h.same("leases", etcd, ours)
}

// checkState compares the revisions and every key at sampled retained
// revisions.
func (h *harness) checkState() {
	h.counts["state check"]++
	rt := h.e.kv.Read(emvcc.ConcurrentReadTxMode, traceutil.TODO())
	erev, efirst := rt.Rev(), rt.FirstRev()
	rt.End()
	h.same("current revision", erev, h.s.Rev())
	h.same("compacted revision", max(efirst, 0), h.s.CompactRev())
	lo := max(h.s.CompactRev(), 1)
	for range 4 {
		rev := lo + h.r.Int64N(erev-lo+1)
		op := mvcc.RangeOp([]byte{0}, []byte{0}, mvcc.RangeOptions{Rev: rev})
		h.note("full range at %d", rev)
		h.rangeRead(op)
	}
}

// reopen restarts both stores on their storage.
func (h *harness) reopen() {
	h.note("reopen")
	h.counts["reopen"]++
	h.checkWatches(true)
	h.closeWatches()
	h.e.close()
	h.e.open()
	if err := h.s.Close(); err != nil {
		h.fail("Close: %v", err)
	}
	s, err := mvcc.Open(h.db, mvcc.Options{})
	if err != nil {
		h.fail("reopen: %v", err)
	}
	h.s = s
	h.checkState()
	h.checkLeases()
}

// Watches.

// watchPair is one watch on both stores; ours is collected by a goroutine.
type watchPair struct {
	desc string
	from int64
	id   emvcc.WatchID
	w    *mvcc.Watcher
	mu   sync.Mutex
	ours []mvcc.Event
	done chan struct{}
}

func (p *watchPair) snapshot() []mvcc.Event {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]mvcc.Event(nil), p.ours...)
}

// waitFor polls cond for up to 10 s.
func waitFor(cond func() bool) bool {
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(time.Millisecond)
	}
	return true
}

// catchUpWatches waits until every open watch, in etcd and in mvcc, has
// delivered everything up to the current revision. A compaction must not
// overtake a watcher that merely lags: whether it does depends on the
// scheduling of the goroutines that drain each side (etcd moves a watcher
// whose channel is full aside and cancels it if a compaction passes it
// meanwhile; mvcc reads it back from storage), not on the stores, so the
// two would differ by chance. (mvcc's TestWatchCompacted covers a
// compaction that overtakes a watcher.)
func (h *harness) catchUpWatches() {
	cur := h.s.Rev()
	for _, p := range h.pairs {
		if p.from > cur {
			continue // not started
		}
		h.barrier(p)
		if !waitFor(func() bool { r, ok := p.w.Progress(); return ok && r >= cur }) {
			h.fail("%s: mvcc's watcher never caught up to %d", p.desc, cur)
		}
	}
}

// barrier waits until etcd's watcher is synced and has sent everything up
// to the current revision (a progress response follows its events).
func (h *harness) barrier(p *watchPair) etcdWatch {
	before := h.e.events.snapshot(p.id).progress
	ok := waitFor(func() bool {
		h.e.ws.RequestProgress(p.id)
		time.Sleep(time.Millisecond)
		w := h.e.events.snapshot(p.id)
		return w.progress > before || w.compactRev != 0
	})
	if !ok {
		h.fail("%s: etcd's watcher never reported progress", p.desc)
	}
	return h.e.events.snapshot(p.id)
}

func (h *harness) watch() {
	if len(h.pairs) >= 6 {
		return
	}
	k := h.key()
	end := h.rangeEnd(k)
	var from int64
	cur, compacted := h.s.Rev(), h.s.CompactRev()
	switch h.r.IntN(8) {
	case 0:
		from = 0
	case 7:
		// etcd cancels it as compacted, reporting its compacted revision
		// (an empty response while that is 0: compare only after one).
		if compacted > 0 {
			from = -1 - h.r.Int64N(2)
		}
	case 1:
		from = compacted
	case 2:
		from = max(compacted-1, 1)
	case 3:
		from = cur + 1 + h.r.Int64N(3)
	default:
		lo := max(compacted, 1)
		from = lo + h.r.Int64N(cur-lo+1)
	}
	h.watchFrom(k, end, from)
}

// watchFrom opens a watch on both stores and, for a past start, waits until
// both have caught up and compares what they sent.
func (h *harness) watchFrom(k, end []byte, from int64) {
	cur, compacted := h.s.Rev(), h.s.CompactRev()
	desc := fmt.Sprintf("watch [%q, %q) from %d (current %d, compacted %d)", k, end, from, cur, compacted)
	h.note("%s", desc)
	h.counts["watch"]++
	eend := end
	if bytes.Equal(end, []byte{0}) {
		eend = []byte{} // what etcd's gRPC layer passes for "\x00"
	}
	id, eerr := h.e.ws.Watch(bg, 0, k, eend, from)
	w, oerr := h.s.Watch(bg, k, end, from)
	if eerr != nil || errors.Is(oerr, mvcc.ErrEmptyWatchRange) {
		h.sameErr(desc, eerr, oerr)
		return
	}
	if oerr != nil {
		// etcd accepts the watch and then cancels it as compacted.
		if !errors.Is(oerr, mvcc.ErrCompacted) {
			h.fail("%s: mvcc %v", desc, oerr)
		}
		h.counts["watch refused as compacted"]++
		if !waitFor(func() bool { return h.e.events.snapshot(id).compactRev != 0 }) {
			h.fail("%s: mvcc refused it as compacted, etcd never canceled it", desc)
		}
		h.same(desc+": compact revision", h.e.events.snapshot(id).compactRev, h.s.CompactRev())
		_ = h.e.ws.Cancel(id)
		return
	}
	p := &watchPair{desc: desc, from: from, id: id, w: w, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		for evs := range w.C {
			p.mu.Lock()
			for _, e := range evs {
				e.PrevKV = nil
				p.ours = append(p.ours, e)
			}
			p.mu.Unlock()
		}
	}()
	h.pairs = append(h.pairs, p)
	if from <= cur {
		// Let etcd's watcher catch up before anything else happens, so a
		// later compaction cannot overtake it (nor ours).
		h.checkWatch(p)
	}
}

// checkWatch compares one watch's events so far.
func (h *harness) checkWatch(p *watchPair) {
	h.t.Helper()
	if h.s.Rev() < p.from {
		// Not started: etcd reports no progress for it; both are empty.
		h.same(p.desc+": events before the start", fmtEvents(h.e.events.snapshot(p.id).events), fmtEvents(p.snapshot()))
		return
	}
	ew := h.barrier(p)
	if ew.compactRev != 0 {
		h.fail("%s: etcd canceled it as compacted at %d; mvcc did not", p.desc, ew.compactRev)
	}
	waitFor(func() bool { return len(p.snapshot()) >= len(ew.events) })
	h.same(p.desc+": events", fmtEvents(ew.events), fmtEvents(p.snapshot()))
}

func fmtEvents(evs []mvcc.Event) []string {
	var out []string
	for _, e := range evs {
		out = append(out, fmt.Sprintf("%v %q=%q c%d m%d v%d l%d", e.Type, e.KV.Key, e.KV.Value, e.KV.CreateRevision, e.KV.ModRevision, e.KV.Version, e.KV.Lease))
	}
	return out
}

// checkWatches compares every open watch, then closes some (all).
func (h *harness) checkWatches(all bool) {
	h.counts["watch check"]++
	var keep []*watchPair
	for _, p := range h.pairs {
		h.checkWatch(p)
		if all || h.r.IntN(3) == 0 {
			h.closeWatch(p)
			continue
		}
		keep = append(keep, p)
	}
	h.pairs = keep
}

func (h *harness) closeWatch(p *watchPair) {
	_ = h.e.ws.Cancel(p.id)
	p.w.Close()
	<-p.done
}

func (h *harness) closeWatches() {
	for _, p := range h.pairs {
		h.closeWatch(p)
	}
	h.pairs = nil
}
