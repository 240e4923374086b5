package keyindex

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"
)

var seedFlag = flag.Uint64("seed", 0, "seed for the randomized tests (0: random)")

func testSeed(t *testing.T) uint64 {
	seed := *seedFlag
	if seed == 0 {
		seed = rand.Uint64()
	}
	t.Logf("seed %d (replay with -seed %d)", seed, seed)
	return seed
}

type modelEntry struct {
	rev  Revision
	tomb bool
}

// model is the obvious implementation: every key's full history.
type model map[string][]modelEntry

func (m model) get(key string, atRev int64) (KeyRev, bool) {
	h := m[key]
	k := -1
	for i, e := range h {
		if e.rev.Main <= atRev {
			k = i
		}
	}
	if k < 0 || h[k].tomb {
		return KeyRev{}, false
	}
	first := k
	for first > 0 && !h[first-1].tomb {
		first--
	}
	return KeyRev{Mod: h[k].rev, Create: h[first].rev.Main, Version: int64(k - first + 1)}, true
}

func (m model) live(key string) bool {
	h := m[key]
	return len(h) > 0 && !h[len(h)-1].tomb
}

// compactModel drops from kept, every key's retained history, what
// Compact(atRev) must drop (see Index.Compact), and returns it sorted.
func compactModel(kept model, atRev int64) []Revision {
	var dropped []Revision
	for key, h := range kept {
		k := -1
		for i, e := range h {
			if e.rev.Main <= atRev {
				k = i
			}
		}
		if k < 0 {
			continue
		}
		if h[k].tomb && h[k].rev.Main < atRev {
			k++
		}
		for _, e := range h[:k] {
			dropped = append(dropped, e.rev)
		}
		if kept[key] = h[k:]; len(h[k:]) == 0 {
			delete(kept, key)
		}
	}
	slices.SortFunc(dropped, compareRevs)
	return dropped
}

func compareRevs(a, b Revision) int {
	if a.Less(b) {
		return -1
	}
	if b.Less(a) {
		return 1
	}
	return 0
}

// sameRetained fails t unless ix retains, key by key, the history kept.
func sameRetained(t *testing.T, ix *Index, kept model, keys []string) {
	t.Helper()
	for _, k := range keys {
		var got []modelEntry
		ix.History([]byte(k), func(rev Revision, tomb bool) { got = append(got, modelEntry{rev, tomb}) })
		if !slices.Equal(got, kept[k]) {
			t.Fatalf("history of %q = %v, want %v", k, got, kept[k])
		}
	}
}

func TestIndexAgainstModel(t *testing.T) {
	r := rand.New(rand.NewPCG(testSeed(t), 1))
	ix := New()
	m, kept := model{}, model{}
	var keys []string
	for i := range 300 {
		keys = append(keys, fmt.Sprintf("k%04d-%s", i, bytes.Repeat([]byte{'x'}, r.IntN(40))))
	}
	hot := keys[7]
	rev, compacted := int64(0), int64(0)
	check := func(step int) {
		t.Helper()
		for _, atRev := range []int64{compacted, compacted + (rev-compacted)/2, rev, rev + 5} {
			for _, k := range keys {
				got, gok := ix.Get([]byte(k), atRev)
				want, wok := m.get(k, atRev)
				if gok != wok || got != want {
					t.Fatalf("step %d: Get(%q, %d) = %+v %v, want %+v %v", step, k, atRev, got, gok, want, wok)
				}
			}
			var got []string
			ix.Range([]byte("k0100"), []byte("k0200"), atRev, func(key []byte, kr KeyRev) bool {
				got = append(got, string(key))
				return true
			})
			var want []string
			for _, k := range keys {
				if _, ok := m.get(k, atRev); ok && k >= "k0100" && k < "k0200" {
					want = append(want, k)
				}
			}
			sort.Strings(want)
			if !slices.Equal(got, want) {
				t.Fatalf("step %d: Range at %d = %v, want %v", step, atRev, got, want)
			}
		}
	}
	// write puts (p < 55) or deletes a key at the next revision.
	write := func(step, p int) {
		rev++
		if p < 55 {
			k := keys[r.IntN(len(keys))]
			if r.IntN(4) == 0 {
				k = hot
			}
			sub := int64(0)
			if r.IntN(5) == 0 {
				sub = r.Int64N(300)
			}
			rv := Revision{rev, sub}
			if err := ix.Put([]byte(k), rv); err != nil {
				t.Fatal(err)
			}
			m[k] = append(m[k], modelEntry{rev: rv})
			kept[k] = append(kept[k], modelEntry{rev: rv})
			return
		}
		k := keys[r.IntN(len(keys))]
		rv := Revision{rev, 0}
		ok, err := ix.Tombstone([]byte(k), rv)
		if err != nil {
			t.Fatal(err)
		}
		if ok != m.live(k) {
			t.Fatalf("step %d: Tombstone(%q) = %v, want %v", step, k, ok, m.live(k))
		}
		if ok {
			m[k] = append(m[k], modelEntry{rev: rv, tomb: true})
			kept[k] = append(kept[k], modelEntry{rev: rv, tomb: true})
		}
	}
	for step := range 3000 {
		switch p := r.IntN(100); {
		case p < 80:
			write(step, p)
		case p < 83:
			if rev == compacted {
				break
			}
			at := compacted + r.Int64N(rev-compacted)
			var applied []Revision
			// In steps of a few keys, with writes between them half the
			// time, as the store runs it.
			c := ix.StartCompaction(at, func(r Revision) { applied = append(applied, r) })
			interleave := r.IntN(2) == 0
			for !c.Step(1 + r.IntN(8)) {
				if interleave {
					write(step, r.IntN(80))
				}
			}
			// Every key's history, not only what reads at or above at see:
			// a key whose history Compact left behind fails here.
			slices.SortFunc(applied, compareRevs)
			if want := compactModel(kept, at); !slices.Equal(applied, want) {
				t.Fatalf("step %d: Compact(%d) dropped %v, want %v", step, at, applied, want)
			}
			sameRetained(t, ix, kept, keys)
			checkDueLog(t, ix)
			compacted = at
		case p < 84:
			// A loaded index must know the history to drop as well.
			ix = exportLoad(t, ix)
		}
		if step%50 == 0 || step > 2950 {
			check(step)
		}
	}
	// A hot key long enough for a dedicated chunk.
	for range 6000 {
		rev++
		if err := ix.Put([]byte(hot), Revision{Main: rev}); err != nil {
			t.Fatal(err)
		}
		m[hot] = append(m[hot], modelEntry{rev: Revision{Main: rev}})
		kept[hot] = append(kept[hot], modelEntry{rev: Revision{Main: rev}})
	}
	check(-1)
	ix.Compact(rev-1, nil)
	compactModel(kept, rev-1)
	sameRetained(t, ix, kept, keys)
	compacted = rev - 1
	check(-2)
}

// checkDueLog fails t unless the due log holds each key with history to
// drop once, by the revision its list says, and no other key.
func checkDueLog(t *testing.T, ix *Index) {
	t.Helper()
	logged := map[uint32]int64{}
	ix.due.each(func(rev int64, id uint32) bool {
		if _, dup := logged[id]; dup {
			t.Fatalf("due log: slot %d twice", id)
		}
		logged[id] = rev
		return true
	})
	var buf [inlineMax]byte
	for id := range uint32(ix.nslots) {
		if ix.slot(id).key == freeSlot {
			if _, ok := logged[id]; ok {
				t.Fatalf("due log: free slot %d", id)
			}
			continue
		}
		rev, due := listDue(ix.list(id, buf[:0]))
		if got, ok := logged[id]; ok != due || got != rev || ix.due.has(id) != due {
			t.Fatalf("due log: slot %d logged %v at %d (marked %v), its list is due %v at %d", id, ok, got, ix.due.has(id), due, rev)
		}
	}
}

// TestRestore rebuilds an index from its history in revision order, as
// mvcc.Open does, also after a compaction, and compares every answer.
func TestRestore(t *testing.T) {
	r := rand.New(rand.NewPCG(testSeed(t), 2))
	ix := New()
	m := model{}
	var keys []string
	for i := range 50 {
		keys = append(keys, fmt.Sprintf("key%03d", i))
	}
	rev := int64(0)
	for range 2000 {
		rev++
		k := keys[r.IntN(len(keys))]
		if r.IntN(3) == 0 {
			if ok, _ := ix.Tombstone([]byte(k), Revision{Main: rev}); ok {
				m[k] = append(m[k], modelEntry{rev: Revision{Main: rev}, tomb: true})
			}
			continue
		}
		_ = ix.Put([]byte(k), Revision{Main: rev})
		m[k] = append(m[k], modelEntry{rev: Revision{Main: rev}})
	}
	at := rev / 2
	var dropped = map[Revision]bool{}
	ix.Compact(at, func(r Revision) { dropped[r] = true })

	// Storage holds every revision not dropped, with create and version.
	type rec struct {
		key             string
		rev             Revision
		tomb            bool
		create, version int64
	}
	var recs []rec
	for k, h := range m {
		for _, e := range h {
			if dropped[e.rev] {
				continue
			}
			kr, _ := m.get(k, e.rev.Main)
			recs = append(recs, rec{k, e.rev, e.tomb, kr.Create, kr.Version})
		}
	}
	sort.Slice(recs, func(i, j int) bool { return recs[i].rev.Less(recs[j].rev) })
	// The index is rebuilt with Restore, and with a Rebuild, whose hash is
	// also replaced by one where most keys collide.
	restorers := map[string]func(*Index) (restore func([]byte, Revision, bool, int64, int64) error, finish func()){
		"Restore": func(ix *Index) (func([]byte, Revision, bool, int64, int64) error, func()) {
			return ix.Restore, func() {}
		},
		"Rebuild": func(ix *Index) (func([]byte, Revision, bool, int64, int64) error, func()) {
			b, err := ix.StartRebuild()
			if err != nil {
				t.Fatal(err)
			}
			return b.Restore, b.Finish
		},
		"Rebuild with colliding hashes": func(ix *Index) (func([]byte, Revision, bool, int64, int64) error, func()) {
			b, err := ix.StartRebuild()
			if err != nil {
				t.Fatal(err)
			}
			b.hash = func(key []byte) uint64 { return uint64(key[len(key)-1] % 3) }
			return b.Restore, b.Finish
		},
	}
	for name, start := range restorers {
		ix2 := New()
		restore, finish := start(ix2)
		for _, rc := range recs {
			if rc.tomb {
				rc.create, rc.version = 0, 0
			}
			if err := restore([]byte(rc.key), rc.rev, rc.tomb, rc.create, rc.version); err != nil {
				t.Fatal(err)
			}
		}
		finish()
		if ix2.Len() != ix.Len() {
			t.Fatalf("%s: %d keys, want %d", name, ix2.Len(), ix.Len())
		}
		for atRev := at; atRev <= rev; atRev++ {
			for _, k := range keys {
				g1, ok1 := ix.Get([]byte(k), atRev)
				g2, ok2 := ix2.Get([]byte(k), atRev)
				w, okw := m.get(k, atRev)
				if ok1 != okw || ok2 != okw || g1 != w || g2 != w {
					t.Fatalf("%s: Get(%q, %d): compacted %+v %v, restored %+v %v, want %+v %v", name, k, atRev, g1, ok1, g2, ok2, w, okw)
				}
			}
			var got, want []string
			ix2.Range([]byte("key"), []byte("kez"), atRev, func(k []byte, _ KeyRev) bool { got = append(got, string(k)); return true })
			ix.Range([]byte("key"), []byte("kez"), atRev, func(k []byte, _ KeyRev) bool { want = append(want, string(k)); return true })
			if !slices.Equal(got, want) {
				t.Fatalf("%s: Range at %d: %q, want %q", name, atRev, got, want)
			}
		}
	}
}

// TestRebuildNeedsAnEmptyIndex checks that a rebuild refuses an index
// that holds keys, whose tree a rebuild would fill a second time.
func TestRebuildNeedsAnEmptyIndex(t *testing.T) {
	ix := New()
	if err := ix.Put([]byte("a"), Revision{Main: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := ix.StartRebuild(); !errors.Is(err, errNotEmpty) {
		t.Fatalf("StartRebuild = %v, want %v", err, errNotEmpty)
	}
}

func TestBadInput(t *testing.T) {
	ix := New()
	if err := ix.Put(nil, Revision{Main: 1}); !errors.Is(err, ErrKey) {
		t.Fatalf("empty key: %v", err)
	}
	if err := ix.Put(make([]byte, MaxKeySize+1), Revision{Main: 1}); !errors.Is(err, ErrKey) {
		t.Fatalf("long key: %v", err)
	}
	if err := ix.Put([]byte("a"), Revision{Main: 0}); !errors.Is(err, ErrRevision) {
		t.Fatalf("revision 0: %v", err)
	}
	if err := ix.Put([]byte("a"), Revision{Main: 5}); err != nil {
		t.Fatal(err)
	}
	if err := ix.Put([]byte("a"), Revision{Main: 5, Sub: 1}); !errors.Is(err, ErrRevision) {
		t.Fatalf("same main revision: %v", err)
	}
	if _, err := ix.Tombstone([]byte("a"), Revision{Main: 4}); !errors.Is(err, ErrRevision) {
		t.Fatalf("older tombstone: %v", err)
	}
}

func TestListCap(t *testing.T) {
	for n := 0; n < 1<<16; n++ {
		c := listCap(n)
		if c < n || (n > 32 && c > n+n/8) {
			t.Fatalf("listCap(%d) = %d", n, c)
		}
		for m := n; m <= c; m++ {
			if listCap(m) != c {
				t.Fatalf("listCap(%d) = %d but listCap(%d) = %d", n, c, m, listCap(m))
			}
		}
	}
}

func TestArenaGC(t *testing.T) {
	ix := New()
	const n = 20000
	key := func(i int) []byte { return fmt.Appendf(nil, "key-%08d", i) }
	rev := int64(0)
	for range 6 {
		for i := range n {
			rev++
			if err := ix.Put(key(i), Revision{Main: rev}); err != nil {
				t.Fatal(err)
			}
		}
	}
	st := ix.Stats()
	if st.RevGarbage*4 > st.RevArenaBytes+gcMinGarbage*4 {
		t.Fatalf("revision arena garbage %d of %d bytes", st.RevGarbage, st.RevArenaBytes)
	}
	// Delete every other key and compact: keys and memory go.
	for i := 0; i < n; i += 2 {
		rev++
		if _, err := ix.Tombstone(key(i), Revision{Main: rev}); err != nil {
			t.Fatal(err)
		}
	}
	// One past the last tombstone: a tombstone at exactly the compaction
	// revision stays (TestCompactKeepsTombstoneAtRev).
	ix.Compact(rev+1, nil)
	if got := ix.Len(); got != n/2 {
		t.Fatalf("Len = %d after compaction, want %d", got, n/2)
	}
	st2 := ix.Stats()
	if st2.KeyArenaBytes >= st.KeyArenaBytes || st2.RevArenaBytes >= st.RevArenaBytes/2 {
		t.Fatalf("compaction freed too little: before %+v after %+v", st, st2)
	}
	// Freed slots are reused.
	for i := 0; i < n; i += 2 {
		rev++
		_ = ix.Put(key(i), Revision{Main: rev})
	}
	if got := ix.Stats().Slots; got != n {
		t.Fatalf("%d slots for %d keys", got, n)
	}
	for i := range n {
		if _, ok := ix.Get(key(i), rev); !ok {
			t.Fatalf("key %d missing", i)
		}
	}
}

// TestCompactKeepsTombstoneAtRev: as in etcd 3.7, a compaction at the
// revision of a deletion keeps that tombstone (a watch from the compaction
// revision delivers it); the next compaction drops it and the key.
func TestCompactKeepsTombstoneAtRev(t *testing.T) {
	ix := New()
	k := []byte("a")
	if err := ix.Put(k, Revision{Main: 2}); err != nil {
		t.Fatal(err)
	}
	if _, err := ix.Tombstone(k, Revision{Main: 3}); err != nil {
		t.Fatal(err)
	}
	history := func() (out []string) {
		ix.History(k, func(r Revision, tomb bool) { out = append(out, fmt.Sprintf("%d/%v", r.Main, tomb)) })
		return out
	}
	var dropped []Revision
	ix.Compact(3, func(r Revision) { dropped = append(dropped, r) })
	if got := fmt.Sprint(history(), dropped); got != "[3/true] [{2 0}]" {
		t.Fatalf("after Compact(3): history, dropped = %s", got)
	}
	if _, ok := ix.Get(k, 3); ok {
		t.Fatal("deleted key live at 3")
	}
	ix.Compact(3, func(r Revision) { t.Fatalf("second Compact(3) dropped %v", r) })
	if err := ix.Put(k, Revision{Main: 5}); err != nil {
		t.Fatal(err)
	}
	dropped = nil
	ix.Compact(4, func(r Revision) { dropped = append(dropped, r) })
	if got := fmt.Sprint(history(), dropped); got != "[5/false] [{3 0}]" {
		t.Fatalf("after Compact(4): history, dropped = %s", got)
	}
	if kr, ok := ix.Get(k, 5); !ok || kr.Create != 5 || kr.Version != 1 {
		t.Fatalf("Get(a, 5) = %+v %v", kr, ok)
	}
}

// TestRebuildInOrderThenNot drives a Rebuild through its in-order mode
// (new keys ascending, older keys met again found by binary search), its
// switch to hashing at the first new key out of order, and the hashed
// mode after, and compares every read with an index filled by Restore.
func TestRebuildInOrderThenNot(t *testing.T) {
	r := rand.New(rand.NewPCG(testSeed(t), 3))
	type rec struct {
		key  string
		tomb bool
	}
	var recs []rec
	for i := range 100 {
		recs = append(recs, rec{key: fmt.Sprintf("k%03d", i*2)}) // in order
		if i > 0 && r.IntN(3) == 0 {
			recs = append(recs, rec{key: fmt.Sprintf("k%03d", r.IntN(i)*2), tomb: r.IntN(2) == 0}) // met again
		}
	}
	recs = append(recs, rec{key: "k001"}) // new, out of order
	for range 300 {
		recs = append(recs, rec{key: fmt.Sprintf("k%03d", r.IntN(200)), tomb: r.IntN(4) == 0})
	}
	want, got := New(), New()
	b, err := got.StartRebuild()
	if err != nil {
		t.Fatal(err)
	}
	live := map[string]bool{}
	var keys []string
	for i, rc := range recs {
		rev := Revision{Main: int64(i + 1)}
		if rc.tomb && !live[rc.key] {
			continue // a tombstone needs a live key
		}
		if _, seen := live[rc.key]; !seen {
			keys = append(keys, rc.key)
		}
		live[rc.key] = !rc.tomb
		kr, _ := want.Get([]byte(rc.key), int64(i))
		create, version := kr.Create, kr.Version+1
		if version == 1 {
			create = rev.Main
		}
		if rc.tomb {
			create, version = 0, 0
		}
		for _, ix := range []func([]byte, Revision, bool, int64, int64) error{want.Restore, b.Restore} {
			if err := ix([]byte(rc.key), rev, rc.tomb, create, version); err != nil {
				t.Fatalf("record %d %+v: %v", i, rc, err)
			}
		}
	}
	if b.inOrder {
		t.Fatal("the rebuild never left its in-order mode")
	}
	b.Finish()
	if got.Len() != want.Len() {
		t.Fatalf("%d keys, want %d", got.Len(), want.Len())
	}
	for atRev := int64(1); atRev <= int64(len(recs)); atRev++ {
		for _, k := range keys {
			g, gok := got.Get([]byte(k), atRev)
			w, wok := want.Get([]byte(k), atRev)
			if g != w || gok != wok {
				t.Fatalf("Get(%q, %d) = %+v %v, want %+v %v", k, atRev, g, gok, w, wok)
			}
		}
	}
}

// TestArenaReclaimInSteps checks that the revision arena's garbage is
// reclaimed a few slots per list change rather than in one copy of every
// list, that reads see every list unchanged meanwhile, and that the
// memory goes once it ends.
func TestArenaReclaimInSteps(t *testing.T) {
	ix := New()
	const n = 20000
	key := func(i int) []byte { return fmt.Appendf(nil, "key-%08d", i) }
	rev := int64(0)
	last := make([]int64, n)
	put := func(i int) {
		rev++
		if err := ix.Put(key(i), Revision{Main: rev}); err != nil {
			t.Fatal(err)
		}
		last[i] = rev
	}
	for i := range n {
		put(i)
	}
	// Updates until a reclaim begins.
	for i := 0; !ix.revs.reclaiming(); i = (i + 1) % n {
		if rev > 20*n {
			t.Fatal("no reclaim began")
		}
		put(i)
	}
	before := ix.Stats()
	changes := 0
	for i := 0; ix.revs.reclaiming(); i = (i + 7919) % n {
		put(i)
		changes++
		for _, j := range []int{i, (i + n/2) % n, n - 1 - i} {
			got, ok := ix.Get(key(j), rev)
			if !ok || got.Mod.Main != last[j] {
				t.Fatalf("during the reclaim, after %d changes: Get(%s) = %+v %v, want mod %d", changes, key(j), got, ok, last[j])
			}
		}
	}
	if want := n / gcSlotsPerChange; changes < want/2 {
		t.Fatalf("reclaim ended after %d list changes, want about %d: not spread", changes, want)
	}
	after := ix.Stats()
	if after.RevGarbage < 0 || after.RevGarbage*4 > after.RevArenaBytes || after.RevArenaBytes >= before.RevArenaBytes {
		t.Fatalf("reclaim left %d garbage bytes of %d (before it: %d of %d)", after.RevGarbage, after.RevArenaBytes, before.RevGarbage, before.RevArenaBytes)
	}
	for i := range n {
		if got, ok := ix.Get(key(i), rev); !ok || got.Mod.Main != last[i] {
			t.Fatalf("after the reclaim: Get(%s) = %+v %v, want mod %d", key(i), got, ok, last[i])
		}
	}
}

// TestKeyArenaReclaimInSteps checks that the key arena's garbage, left by
// a compaction that removes a third of the keys, is returned over the
// compaction's later steps rather than in one copy of every key, that
// reads, ranges and new keys work meanwhile, and that the memory goes
// once it ends.
func TestKeyArenaReclaimInSteps(t *testing.T) {
	ix := New()
	const n = 30000
	key := func(i int) []byte { return fmt.Appendf(nil, "key-%08d", i) }
	rev := int64(0)
	for i := range n {
		rev++
		if err := ix.Put(key(i), Revision{Main: rev}); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < n; i += 3 {
		rev++
		if _, err := ix.Tombstone(key(i), Revision{Main: rev}); err != nil {
			t.Fatal(err)
		}
	}
	before := ix.Stats()
	c := ix.StartCompaction(rev+1, nil)
	const step = 64
	reclaimSteps := 0
	next := n // keys created during the reclaim
	for !c.Step(step) {
		if !ix.keys.reclaiming() {
			continue
		}
		reclaimSteps++
		rev++
		if err := ix.Put(key(next), Revision{Main: rev}); err != nil {
			t.Fatal(err)
		}
		next++
		for _, i := range []int{1, n / 2, next - 1, (reclaimSteps * 7919) % n} {
			_, ok := ix.Get(key(i), rev)
			if want := i%3 != 0 || i >= n; ok != want {
				t.Fatalf("during the reclaim, step %d: Get(%s) found %v, want %v", reclaimSteps, key(i), ok, want)
			}
		}
	}
	if want := (n - n/3) / (step * gcSlotsPerKey); reclaimSteps < want/2 {
		t.Fatalf("key reclaim took %d steps, want about %d: not spread", reclaimSteps, want)
	}
	after := ix.Stats()
	if after.KeyGarbage < 0 || after.KeyGarbage*4 > after.KeyArenaBytes || after.KeyArenaBytes >= before.KeyArenaBytes {
		t.Fatalf("key reclaim left %d garbage bytes of %d (before it: %d of %d)", after.KeyGarbage, after.KeyArenaBytes, before.KeyGarbage, before.KeyArenaBytes)
	}
	var got []string
	ix.Range(nil, nil, rev, func(k []byte, _ KeyRev) bool {
		got = append(got, string(k))
		return true
	})
	var want []string
	for i := range next {
		if i%3 != 0 || i >= n {
			want = append(want, string(key(i)))
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("after the reclaim: Range has %d keys, want %d (first %q, want %q)", len(got), len(want), got[:min(1, len(got))], want[:1])
	}
}
