package mvcc

import (
	"bytes"
	"cmp"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stratadb/strata/config"
	"github.com/stratadb/strata/engine"
)

var seedFlag = flag.Uint64("seed", 0, "seed of the randomized tests (0: random; also $MVCC_SEED)")

// testSeed returns the seed of a randomized test and logs how to replay it.
func testSeed(t testing.TB) uint64 {
	seed := *seedFlag
	if s := os.Getenv("MVCC_SEED"); seed == 0 && s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	if seed == 0 {
		seed = rand.Uint64()
	}
	t.Logf("seed %d (replay: go test ./mvcc -run '^%s$' -seed %d)", seed, t.Name(), seed)
	return seed
}

// memConfig is an engine configuration for an in-memory file system.
func memConfig(sync bool) *config.Config {
	cfg := config.Default()
	cfg.DBPath = "/db"
	cfg.Sync = sync
	cfg.MemtableSizeMB = 1
	cfg.BlockCacheSizeMB = 8
	return cfg
}

func openEngine(t testing.TB, fs vfs.FS, sync bool) *engine.DB {
	t.Helper()
	db, err := engine.Open(memConfig(sync), engine.Options{FS: fs})
	if err != nil {
		t.Fatalf("engine.Open: %v", err)
	}
	return db
}

func openStore(t testing.TB, db *engine.DB, opts Options) *Store {
	t.Helper()
	s, err := Open(db, opts)
	if err != nil {
		t.Fatalf("mvcc.Open: %v", err)
	}
	return s
}

// newMemStore returns a store on a fresh in-memory engine, closed with
// the test.
func newMemStore(t testing.TB, opts Options) (*Store, *engine.DB) {
	t.Helper()
	db := openEngine(t, vfs.NewMem(), false)
	s := openStore(t, db, opts)
	t.Cleanup(func() {
		_ = s.Close()
		_ = db.Close()
	})
	return s, db
}

// mversion is one version of a key in the model.
type mversion struct {
	rev   int64
	sub   int
	value string
	tomb  bool
}

// model is the obvious store: every key's full history, never compacted
// (compaction only changes which revisions may be read).
type model struct {
	hist      map[string][]mversion
	rev       int64
	compacted int64
}

// newModel returns an empty model at revision 1, etcd's first revision.
func newModel() *model { return &model{hist: map[string][]mversion{}, rev: 1} }

// get returns key's version at rev.
func (m *model) get(key string, rev int64) (KeyValue, bool) {
	h := m.hist[key]
	k := -1
	for i, v := range h {
		if v.rev <= rev {
			k = i
		}
	}
	if k < 0 || h[k].tomb {
		return KeyValue{}, false
	}
	first := k
	for first > 0 && !h[first-1].tomb {
		first--
	}
	var val []byte
	if h[k].value != "" {
		val = []byte(h[k].value)
	}
	return KeyValue{Key: []byte(key), Value: val, CreateRevision: h[first].rev, ModRevision: h[k].rev, Version: int64(k - first + 1)}, true
}

// rangeAt returns the live keys of r at rev in key order.
func (m *model) rangeAt(r keyRange, rev int64) []KeyValue {
	var out []KeyValue
	for k := range m.hist {
		if !r.contains([]byte(k)) {
			continue
		}
		if kv, ok := m.get(k, rev); ok {
			out = append(out, kv)
		}
	}
	sort.Slice(out, func(i, j int) bool { return bytes.Compare(out[i].Key, out[j].Key) < 0 })
	return out
}

// events returns the events of r from revision from on, in revision order.
func (m *model) events(r keyRange, from int64) []Event {
	var out []Event
	var subs []int
	for k, h := range m.hist {
		if !r.contains([]byte(k)) {
			continue
		}
		for _, v := range h {
			if v.rev < from {
				continue
			}
			if v.tomb {
				out = append(out, Event{Type: EventDelete, KV: KeyValue{Key: []byte(k), ModRevision: v.rev}})
			} else {
				kv, _ := m.get(k, v.rev)
				out = append(out, Event{Type: EventPut, KV: kv})
			}
			subs = append(subs, v.sub)
		}
	}
	idx := make([]int, len(out))
	for i := range idx {
		idx[i] = i
	}
	sort.Slice(idx, func(a, b int) bool {
		i, j := idx[a], idx[b]
		if out[i].KV.ModRevision != out[j].KV.ModRevision {
			return out[i].KV.ModRevision < out[j].KV.ModRevision
		}
		return subs[i] < subs[j]
	})
	sorted := make([]Event, len(out))
	for a, i := range idx {
		sorted[a] = out[i]
	}
	return sorted
}

// apply runs a checked branch on the model, as Store.Txn does: each op
// sees the writes of the ops before it, and the branch makes a revision if
// it wrote.
func (m *model) apply(ops []Op) []OpResponse {
	newRev := m.rev + 1
	sub := 0
	resps := make([]OpResponse, len(ops))
	cur := func() int64 {
		if sub > 0 {
			return newRev
		}
		return m.rev
	}
	for i, op := range ops {
		resps[i].Type = op.Type
		switch op.Type {
		case OpPut:
			m.hist[string(op.Key)] = append(m.hist[string(op.Key)], mversion{rev: newRev, sub: sub, value: string(op.Value)})
			sub++
		case OpDelete:
			r, _ := checkRange(op.Key, op.End)
			for _, kv := range m.rangeAt(r, cur()) {
				m.hist[string(kv.Key)] = append(m.hist[string(kv.Key)], mversion{rev: newRev, sub: sub, tomb: true})
				sub++
				resps[i].Deleted++
			}
		case OpRange:
			r, _ := checkRange(op.Key, op.End)
			kvs := m.rangeAt(r, cur())
			resps[i].Range = RangeResult{Count: int64(len(kvs)), Rev: cur(), KVs: kvs}
		}
		resps[i].Rev = cur()
	}
	if sub > 0 {
		m.rev = newRev
	}
	return resps
}

// compare evaluates a compare on the model's latest revision.
func (m *model) compare(c Compare) bool {
	kv, live := m.get(string(c.Key), m.rev)
	var order int
	switch c.Target {
	case CompareValue:
		if !live {
			return false
		}
		order = bytes.Compare(kv.Value, c.Value)
	case CompareVersion:
		order = cmp.Compare(kv.Version, c.Rev)
	case CompareCreateRevision:
		order = cmp.Compare(kv.CreateRevision, c.Rev)
	case CompareModRevision:
		order = cmp.Compare(kv.ModRevision, c.Rev)
	}
	switch c.Result {
	case Equal:
		return order == 0
	case NotEqual:
		return order != 0
	case Less:
		return order < 0
	}
	return order > 0
}

func fmtKVs(kvs []KeyValue) string {
	var b strings.Builder
	for _, kv := range kvs {
		fmt.Fprintf(&b, "%s=%q(c%d m%d v%d) ", kv.Key, kv.Value, kv.CreateRevision, kv.ModRevision, kv.Version)
	}
	return b.String()
}

func sameKVs(a, b []KeyValue) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !bytes.Equal(a[i].Key, b[i].Key) || !bytes.Equal(a[i].Value, b[i].Value) ||
			a[i].CreateRevision != b[i].CreateRevision || a[i].ModRevision != b[i].ModRevision || a[i].Version != b[i].Version {
			return false
		}
	}
	return true
}

// checkAgainstModel reads every retained revision of s and compares it with
// the model: all keys, single keys, limits, counts and keys only.
func checkAgainstModel(t testing.TB, s *Store, m *model, what string) {
	t.Helper()
	if got := s.Rev(); got != m.rev {
		t.Fatalf("%s: Rev = %d, model %d", what, got, m.rev)
	}
	if got := s.CompactRev(); got != m.compacted {
		t.Fatalf("%s: CompactRev = %d, model %d", what, got, m.compacted)
	}
	all := keyRange{key: []byte{0}, unbounded: true}
	for rev := m.compacted; rev <= m.rev; rev++ {
		if rev == 0 {
			continue
		}
		want := m.rangeAt(all, rev)
		res, err := s.Range([]byte{0}, []byte{0}, RangeOptions{Rev: rev})
		if err != nil {
			t.Fatalf("%s: Range at %d: %v", what, rev, err)
		}
		if !sameKVs(res.KVs, want) || res.Count != int64(len(want)) || res.Rev != m.rev {
			t.Fatalf("%s: Range at %d:\n got %s (count %d, rev %d)\nwant %s (count %d, rev %d)", what, rev, fmtKVs(res.KVs), res.Count, res.Rev, fmtKVs(want), len(want), m.rev)
		}
		// A sub-range with a limit, keys only and count only.
		r := keyRange{key: []byte("k03"), end: []byte("k12")}
		want = m.rangeAt(r, rev)
		res, err = s.Range(r.key, r.end, RangeOptions{Rev: rev, Limit: 3})
		if err != nil {
			t.Fatal(err)
		}
		if lim := want[:min(3, len(want))]; !sameKVs(res.KVs, lim) || res.Count != int64(len(want)) {
			t.Fatalf("%s: Range [k03, k12) limit 3 at %d: got %s count %d, want %s count %d", what, rev, fmtKVs(res.KVs), res.Count, fmtKVs(lim), len(want))
		}
		res, err = s.Range(r.key, r.end, RangeOptions{Rev: rev, KeysOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		for i := range want {
			want[i].Value = nil
		}
		if !sameKVs(res.KVs, want) {
			t.Fatalf("%s: KeysOnly at %d: got %s, want %s", what, rev, fmtKVs(res.KVs), fmtKVs(want))
		}
		res, err = s.Range(r.key, r.end, RangeOptions{Rev: rev, CountOnly: true})
		if err != nil || res.KVs != nil || res.Count != int64(len(want)) {
			t.Fatalf("%s: CountOnly at %d: %v %d kvs count %d, want %d", what, rev, err, len(res.KVs), res.Count, len(want))
		}
	}
	// Every key alone at the latest revision.
	for k := range m.hist {
		res, err := s.Range([]byte(k), nil, RangeOptions{})
		if err != nil {
			t.Fatal(err)
		}
		kv, ok := m.get(k, m.rev)
		if ok != (len(res.KVs) == 1) || ok && !sameKVs(res.KVs, []KeyValue{kv}) {
			t.Fatalf("%s: Range(%q) = %s, want %v %s", what, k, fmtKVs(res.KVs), ok, fmtKVs([]KeyValue{kv}))
		}
	}
	if m.compacted > 1 {
		if _, err := s.Range([]byte("k00"), nil, RangeOptions{Rev: m.compacted - 1}); !errors.Is(err, ErrCompacted) {
			t.Fatalf("%s: Range below the compacted revision: %v", what, err)
		}
	}
	if _, err := s.Range([]byte("k00"), nil, RangeOptions{Rev: m.rev + 1}); !errors.Is(err, ErrFutureRev) {
		t.Fatalf("%s: Range at a future revision: %v", what, err)
	}
}

// randomOp is one random operation: it runs it on the store and the model
// and fails the test on any disagreement.
type opGen struct {
	r    *rand.Rand
	keys []string
}

func newOpGen(r *rand.Rand, nkeys int) *opGen {
	g := &opGen{r: r}
	for i := range nkeys {
		g.keys = append(g.keys, fmt.Sprintf("k%02d", i))
	}
	return g
}

func (g *opGen) key() []byte { return []byte(g.keys[g.r.IntN(len(g.keys))]) }

func (g *opGen) value() []byte {
	if g.r.IntN(10) == 0 {
		return nil
	}
	return fmt.Appendf(nil, "v%d", g.r.IntN(1000))
}

func (g *opGen) rangeEnd(key []byte) []byte {
	switch g.r.IntN(4) {
	case 0:
		return nil
	case 1:
		return []byte{0}
	}
	end := g.key()
	if bytes.Compare(end, key) < 0 {
		return key
	}
	return end
}

// branch returns a random branch; with dupOK it may contain a duplicate.
func (g *opGen) branch(dupOK bool) []Op {
	var ops []Op
	used := map[string]bool{}
	for range g.r.IntN(4) {
		switch g.r.IntN(5) {
		case 0, 1, 2:
			k := g.key()
			if used[string(k)] && !dupOK {
				continue
			}
			used[string(k)] = true
			ops = append(ops, PutOp(k, g.value()))
		case 3:
			k := g.key()
			var end []byte
			if g.r.IntN(2) == 0 {
				end = g.rangeEnd(k)
			}
			ops = append(ops, DeleteOp(k, end))
		case 4:
			k := g.key()
			ops = append(ops, RangeOp(k, g.rangeEnd(k), RangeOptions{}))
		}
	}
	return ops
}

func (g *opGen) compare(m *model) Compare {
	k := g.key()
	kv, _ := m.get(string(k), m.rev)
	c := Compare{Key: k, Target: CompareTarget(g.r.IntN(4)), Result: CompareResult(g.r.IntN(4))}
	d := int64(g.r.IntN(3) - 1)
	switch c.Target {
	case CompareValue:
		c.Value = kv.Value
		if g.r.IntN(2) == 0 {
			c.Value = g.value()
		}
	case CompareVersion:
		c.Rev = kv.Version + d
	case CompareCreateRevision:
		c.Rev = kv.CreateRevision + d
	case CompareModRevision:
		c.Rev = kv.ModRevision + d
	}
	return c
}

// dupInBranch reports whether the model rejects a branch as duplicate.
func dupInBranch(ops []Op) bool {
	puts := map[string]bool{}
	var dels []keyRange
	for _, op := range ops {
		switch op.Type {
		case OpPut:
			if puts[string(op.Key)] {
				return true
			}
			puts[string(op.Key)] = true
		case OpDelete:
			r, _ := checkRange(op.Key, op.End)
			dels = append(dels, r)
		}
	}
	for p := range puts {
		for _, d := range dels {
			if d.contains([]byte(p)) {
				return true
			}
		}
	}
	return false
}

// step runs one random operation on s and m. It returns a description.
func (g *opGen) step(t testing.TB, s *Store, m *model, compactWeight int) string {
	t.Helper()
	switch p := g.r.IntN(100); {
	case p < 35:
		k, v := g.key(), g.value()
		rev, err := s.Put(k, v)
		if err != nil {
			t.Fatalf("Put: %v", err)
		}
		m.apply([]Op{PutOp(k, v)})
		if rev != m.rev {
			t.Fatalf("Put(%s) = rev %d, model %d", k, rev, m.rev)
		}
		return fmt.Sprintf("put %s=%q", k, v)
	case p < 50:
		k := g.key()
		var end []byte
		if g.r.IntN(3) == 0 {
			end = g.rangeEnd(k)
		}
		rev, n, err := s.DeleteRange(k, end)
		if err != nil {
			t.Fatalf("DeleteRange: %v", err)
		}
		resp := m.apply([]Op{DeleteOp(k, end)})
		if rev != m.rev || n != resp[0].Deleted {
			t.Fatalf("DeleteRange(%s, %q) = %d, %d; model %d, %d", k, end, rev, n, m.rev, resp[0].Deleted)
		}
		return fmt.Sprintf("delete %s %q", k, end)
	case p < 100-compactWeight:
		var req TxnRequest
		for range g.r.IntN(3) {
			req.Compare = append(req.Compare, g.compare(m))
		}
		dupOK := g.r.IntN(8) == 0
		req.Success, req.Failure = g.branch(dupOK), g.branch(dupOK)
		before := m.rev
		resp, err := s.Txn(req)
		if dupInBranch(req.Success) || dupInBranch(req.Failure) {
			if !errors.Is(err, ErrDuplicateKeyInTxn) || s.Rev() != before {
				t.Fatalf("Txn with a duplicate: %v, rev %d -> %d", err, before, s.Rev())
			}
			return "txn with duplicate"
		}
		if err != nil {
			t.Fatalf("Txn: %v", err)
		}
		ok := true
		for _, c := range req.Compare {
			ok = ok && m.compare(c)
		}
		ops := req.Failure
		if ok {
			ops = req.Success
		}
		want := m.apply(ops)
		if resp.Succeeded != ok || resp.Rev != m.rev || len(resp.Responses) != len(want) {
			t.Fatalf("Txn = %v rev %d (%d responses), model %v rev %d (%d)", resp.Succeeded, resp.Rev, len(resp.Responses), ok, m.rev, len(want))
		}
		for i := range want {
			g, w := resp.Responses[i], want[i]
			if g.Type != w.Type || g.Rev != w.Rev || g.Deleted != w.Deleted || g.Range.Count != w.Range.Count || g.Range.Rev != w.Range.Rev || !sameKVs(g.Range.KVs, w.Range.KVs) {
				t.Fatalf("Txn response %d = %+v, model %+v", i, g, w)
			}
		}
		return fmt.Sprintf("txn %v", ok)
	default:
		if m.rev <= m.compacted {
			return "no compaction"
		}
		rev := m.compacted + 1 + g.r.Int64N(m.rev-m.compacted)
		if err := s.Compact(rev); err != nil {
			t.Fatalf("Compact(%d): %v", rev, err)
		}
		m.compacted = rev
		return fmt.Sprintf("compact %d", rev)
	}
}
