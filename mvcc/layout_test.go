package mvcc

import (
	"bytes"
	"fmt"
	"sync"
	"testing"

	"github.com/cockroachdb/pebble/v2"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stratadb/strata/engine"
	"github.com/stratadb/strata/mvcc/keyindex"
)

// TestFlushedTableSpansNewRevisionsOnly checks the point of the key
// layout: a memtable flushed after more writes holds the new revisions and
// the metadata after them, so its table starts at the first new revision
// and overlaps nothing older in the level below (with the metadata before
// the revisions, it spanned the whole history).
func TestFlushedTableSpansNewRevisionsOnly(t *testing.T) {
	// Flushed tables, as Pebble reports them: a compaction may merge them
	// away before the test could list L0.
	var (
		mu      sync.Mutex
		flushed [][]byte // smallest key of each flushed table
	)
	listener := &pebble.EventListener{FlushEnd: func(info pebble.FlushInfo) {
		mu.Lock()
		defer mu.Unlock()
		for _, o := range info.Output {
			flushed = append(flushed, bytes.Clone(o.Smallest.UserKey))
		}
	}}
	db, err := engine.Open(memConfig(false), engine.Options{FS: vfs.NewMem(), EventListener: listener})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	s := openStore(t, db, Options{})
	defer s.Close()
	if err := s.GrantLease(7, 60); err != nil {
		t.Fatal(err)
	}
	put := func(n int) {
		for i := range n {
			if _, err := s.Put(fmt.Appendf(nil, "k%04d", i), bytes.Repeat([]byte("v"), 100)); err != nil {
				t.Fatal(err)
			}
		}
	}
	put(200)
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	firstNew := s.Rev() + 1
	mu.Lock()
	before := len(flushed)
	mu.Unlock()
	put(50)
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(flushed) == before {
		t.Fatal("the second flush reported no table")
	}
	want := revKey(keyindex.Revision{Main: firstNew})
	for _, smallest := range flushed[before:] {
		if bytes.Compare(smallest, want) < 0 {
			t.Fatalf("a table flushed after revision %d starts at %q, before the first revision it holds (%q): it overlaps the whole history", firstNew-1, smallest, want)
		}
	}
}

// TestOpenUpgradesLayout opens a store whose leases and metadata sit under
// the prefixes of the layout before ('l', 'm'): its revision, compaction,
// applied index and leases carry over, and the old keys are gone.
func TestOpenUpgradesLayout(t *testing.T) {
	fs := vfs.NewMem()
	db := openEngine(t, fs, false)
	s := openStore(t, db, Options{})
	if err := s.GrantLease(9, 120); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if _, err := s.Put([]byte("k"), fmt.Appendf(nil, "v%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Entry(42).Compact(4); err != nil {
		t.Fatal(err)
	}
	rev, compactRev, applied := s.Rev(), s.CompactRev(), s.AppliedIndex()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// Put the store back in the old layout.
	b := db.NewBatch()
	for _, p := range []struct{ now, old byte }{{leasePrefix, oldLeasePrefix}, {metaPrefix, oldMetaPrefix}} {
		it, err := db.NewIter(&engine.IterOptions{LowerBound: []byte{p.now}, UpperBound: []byte{p.now + 1}})
		if err != nil {
			t.Fatal(err)
		}
		for ok := it.First(); ok; ok = it.Next() {
			if err := b.Put(append([]byte{p.old}, it.Key()[1:]...), it.Value()); err != nil {
				t.Fatal(err)
			}
			if err := b.Delete(bytes.Clone(it.Key())); err != nil {
				t.Fatal(err)
			}
		}
		it.Close()
	}
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	b.Close()

	s = openStore(t, db, Options{})
	defer s.Close()
	if s.Rev() != rev || s.CompactRev() != compactRev || s.AppliedIndex() != applied {
		t.Fatalf("after the upgrade: rev %d, compact %d, applied %d; want %d, %d, %d", s.Rev(), s.CompactRev(), s.AppliedIndex(), rev, compactRev, applied)
	}
	if l, err := s.Lease(9); err != nil || l.TTL != 120 {
		t.Fatalf("lease 9 after the upgrade: %+v, %v", l, err)
	}
	for _, old := range []byte{oldLeasePrefix, oldMetaPrefix} {
		it, err := db.NewIter(&engine.IterOptions{LowerBound: []byte{old}, UpperBound: []byte{old + 1}})
		if err != nil {
			t.Fatal(err)
		}
		if it.First() {
			t.Errorf("key %q left in the old layout", it.Key())
		}
		it.Close()
	}
	_ = db.Close()
}
