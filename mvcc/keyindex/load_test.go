package keyindex

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// historyOf lists key's retained revisions and tombstone flags.
func historyOf(ix *Index, key []byte) []modelEntry {
	var h []modelEntry
	ix.History(key, func(rev Revision, tomb bool) { h = append(h, modelEntry{rev, tomb}) })
	return h
}

// sameIndex fails unless a and b hold the same keys with the same
// histories and answer Get and Range alike at every revision up to rev+1.
func sameIndex(t *testing.T, a, b *Index, rev int64) {
	t.Helper()
	var keys [][]byte
	if err := a.Export(func(key, _ []byte) error { keys = append(keys, bytes.Clone(key)); return nil }); err != nil {
		t.Fatal(err)
	}
	if a.Len() != b.Len() || len(keys) != a.Len() {
		t.Fatalf("Len %d and %d, %d exported", a.Len(), b.Len(), len(keys))
	}
	for _, k := range keys {
		if ha, hb := historyOf(a, k), historyOf(b, k); !slices.Equal(ha, hb) {
			t.Fatalf("History(%q) = %v and %v", k, ha, hb)
		}
	}
	for at := int64(0); at <= rev+1; at++ {
		for _, k := range keys {
			ga, oka := a.Get(k, at)
			gb, okb := b.Get(k, at)
			if ga != gb || oka != okb {
				t.Fatalf("Get(%q, %d) = %+v %v and %+v %v", k, at, ga, oka, gb, okb)
			}
		}
		var ra, rb []string
		a.Range([]byte("k0050"), nil, at, func(k []byte, kr KeyRev) bool { ra = append(ra, fmt.Sprint(string(k), kr)); return true })
		b.Range([]byte("k0050"), nil, at, func(k []byte, kr KeyRev) bool { rb = append(rb, fmt.Sprint(string(k), kr)); return true })
		if !slices.Equal(ra, rb) {
			t.Fatalf("Range at %d = %v and %v", at, ra, rb)
		}
	}
}

// exportLoad returns a new index loaded from ix's export.
func exportLoad(t *testing.T, ix *Index) *Index {
	t.Helper()
	out := New()
	l, err := out.StartLoad()
	if err != nil {
		t.Fatal(err)
	}
	err = ix.Export(func(key, list []byte) error {
		live, err := l.Add(key, list)
		if err == nil {
			if _, ok := ix.Get(key, MaxMain); ok != live {
				t.Fatalf("Add(%q) live = %v, Get says %v", key, live, ok)
			}
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	l.Finish()
	return out
}

// TestExportLoad loads an index from the export of a random one (puts,
// sub revisions, tombstones, compactions, a key long enough for a
// dedicated chunk) and compares every answer, then keeps writing to both
// and compares again: the loaded index is a working one.
func TestExportLoad(t *testing.T) {
	r := rand.New(rand.NewPCG(testSeed(t), 3))
	ix := New()
	var keys []string
	for i := range 120 {
		keys = append(keys, fmt.Sprintf("k%04d-%s", i, bytes.Repeat([]byte{'y'}, r.IntN(30))))
	}
	rev := int64(0)
	write := func(ixs []*Index, n int) {
		for range n {
			rev++
			k := []byte(keys[r.IntN(len(keys))])
			if r.IntN(3) == 0 {
				k = []byte(keys[3])
			}
			sub := int64(0)
			if r.IntN(4) == 0 {
				sub = r.Int64N(1000)
			}
			for _, x := range ixs {
				var err error
				switch p := r.IntN(100); {
				case p < 70:
					err = x.Put(k, Revision{rev, sub})
				case p < 95:
					_, err = x.Tombstone(k, Revision{rev, 0})
				default:
					x.Compact(rev-r.Int64N(rev), nil)
				}
				if err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	write([]*Index{ix}, 1500)
	ix.Compact(rev/3, nil)
	for range 300 { // a long history: a tail entry and a dedicated chunk
		rev++
		if err := ix.Put([]byte(keys[5]), Revision{Main: rev}); err != nil {
			t.Fatal(err)
		}
	}
	loaded := exportLoad(t, ix)
	sameIndex(t, ix, loaded, rev)
	// The same random choices drive both from here on.
	seed := r.Uint64()
	r = rand.New(rand.NewPCG(seed, 0))
	rev0 := rev
	write([]*Index{ix}, 500)
	r, rev = rand.New(rand.NewPCG(seed, 0)), rev0
	write([]*Index{loaded}, 500)
	sameIndex(t, ix, loaded, rev)
}

// TestLoadRefusesBadInput checks that keys out of order and lists Export
// never produces are refused with ErrList, and a non-empty index with
// errNotEmpty.
func TestLoadRefusesBadInput(t *testing.T) {
	entry := func(prev int64, r Revision, tomb bool) []byte { return appendEntry(nil, prev, r, tomb) }
	cat := func(bs ...[]byte) []byte { return bytes.Join(bs, nil) }
	for name, list := range map[string][]byte{
		"empty":                 nil,
		"header only":           appendHeader(nil, 3, 1),
		"zero step":             {0 << 2},
		"truncated varint":      {0x80},
		"truncated sub":         {5<<2 | tagSub},
		"sub zero":              {5<<2 | tagSub, 0},
		"tombstone twice":       cat(entry(0, Revision{Main: 5}, true), entry(5, Revision{Main: 6}, true)),
		"header then tombstone": cat(appendHeader(nil, 3, 1), entry(0, Revision{Main: 5}, true)),
		"header after its put":  cat(appendHeader(nil, 5, 1), entry(0, Revision{Main: 5}, false)),
		"header version 0":      cat(appendHeader(nil, 3, 0), entry(0, Revision{Main: 5}, false)),
		"main past MaxMain":     cat(entry(0, Revision{Main: MaxMain}, false), []byte{4, 0}),
	} {
		l, err := New().StartLoad()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.Add([]byte("k"), list); !errors.Is(err, ErrList) {
			t.Errorf("%s (%x): Add = %v, want ErrList", name, list, err)
		}
	}
	l, _ := New().StartLoad()
	ok := entry(0, Revision{Main: 2}, false)
	if _, err := l.Add([]byte("b"), ok); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"b", "a"} {
		if _, err := l.Add([]byte(k), ok); !errors.Is(err, ErrList) {
			t.Errorf("Add(%q) after \"b\" = %v, want ErrList", k, err)
		}
	}
	if _, err := l.Add(nil, ok); !errors.Is(err, ErrKey) {
		t.Errorf("Add(empty key) = %v, want ErrKey", err)
	}
	ix := New()
	if err := ix.Put([]byte("a"), Revision{Main: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := ix.StartLoad(); !errors.Is(err, errNotEmpty) {
		t.Errorf("StartLoad of a filled index = %v", err)
	}
}

// FuzzLoadList: any bytes are refused or loaded into a key whose history,
// answers and tail agree; none panics.
func FuzzLoadList(f *testing.F) {
	f.Add(appendEntry(nil, 0, Revision{Main: 5, Sub: 2}, false))
	f.Add(append(appendHeader(nil, 3, 2), appendEntry(nil, 0, Revision{Main: 9}, false)...))
	f.Add(append(appendEntry(nil, 0, Revision{Main: 4}, true), appendEntry(nil, 4, Revision{Main: 7}, false)...))
	f.Fuzz(func(t *testing.T, list []byte) {
		ix := New()
		l, err := ix.StartLoad()
		if err != nil {
			t.Fatal(err)
		}
		live, err := l.Add([]byte("k"), list)
		if err != nil {
			return
		}
		l.Finish()
		h := historyOf(ix, []byte("k"))
		if len(h) == 0 {
			t.Fatalf("loaded %x: no history", list)
		}
		last := h[len(h)-1]
		if live == last.tomb {
			t.Fatalf("loaded %x: live %v, last entry %+v", list, live, last)
		}
		for i := 1; i < len(h); i++ {
			if h[i].rev.Main <= h[i-1].rev.Main {
				t.Fatalf("loaded %x: history %v out of order", list, h)
			}
		}
		if err := ix.Put([]byte("k"), Revision{Main: last.rev.Main + 1}); err != nil {
			t.Fatalf("loaded %x: Put after the last revision: %v", list, err)
		}
	})
}
