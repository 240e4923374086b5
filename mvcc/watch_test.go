package mvcc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"github.com/cockroachdb/pebble/v2/vfs"
	"math/rand/v2"
	"testing"
	"time"
)

// collect reads events from w until it has n or the deadline passes.
func collect(t *testing.T, w *Watcher, n int) []Event {
	t.Helper()
	var out []Event
	deadline := time.After(10 * time.Second)
	for len(out) < n {
		select {
		case evs, ok := <-w.C:
			if !ok {
				t.Fatalf("watcher stopped after %d of %d events: %v", len(out), n, w.Err())
			}
			out = append(out, evs...)
		case <-deadline:
			t.Fatalf("got %d of %d events", len(out), n)
		}
	}
	return out
}

func sameEvents(t *testing.T, got, want []Event) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d events, want %d:\n got %s\nwant %s", len(got), len(want), fmtEvents(got), fmtEvents(want))
	}
	for i := range got {
		if got[i].Type != want[i].Type || !sameKVs([]KeyValue{got[i].KV}, []KeyValue{want[i].KV}) {
			t.Fatalf("event %d:\n got %s\nwant %s", i, fmtEvents(got), fmtEvents(want))
		}
	}
}

func fmtEvents(evs []Event) string {
	var b bytes.Buffer
	for _, e := range evs {
		fmt.Fprintf(&b, "%v %s ", e.Type, fmtKVs([]KeyValue{e.KV}))
	}
	return b.String()
}

// TestWatchHistoryThenLive watches a prefix from a past revision while
// writers go on: the events before the call come from storage, the rest
// live, all in revision order, none missing, none twice.
func TestWatchHistoryThenLive(t *testing.T) {
	r := rand.New(rand.NewPCG(testSeed(t), 4))
	s, _ := newMemStore(t, Options{WatchBufferSize: 8})
	m := newModel()
	g := newOpGen(r, 12)
	for range 200 {
		g.step(t, s, m, 0)
	}
	wr := keyRange{key: []byte("k03"), end: []byte("k09")}
	from := int64(50)
	w, err := s.Watch(context.Background(), wr.key, wr.end, from)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	// Writes go on while the watcher catches up, and its buffer (8
	// events) overflows: it must fall back to storage and lose nothing.
	for range 300 {
		g.step(t, s, m, 0)
	}
	want := m.events(wr, from)
	got := collect(t, w, len(want))
	sameEvents(t, got, want)
	for i := 1; i < len(got); i++ {
		if got[i].KV.ModRevision < got[i-1].KV.ModRevision {
			t.Fatalf("event %d at revision %d after %d", i, got[i].KV.ModRevision, got[i-1].KV.ModRevision)
		}
	}
	// Nothing more arrives.
	select {
	case evs := <-w.C:
		t.Fatalf("extra events: %s", fmtEvents(evs))
	case <-time.After(20 * time.Millisecond):
	}
}

// TestWatchSingleKeyAndPrevKV watches one key from now with WithPrevKV.
func TestWatchSingleKeyAndPrevKV(t *testing.T) {
	s, _ := newMemStore(t, Options{})
	rev1, _ := s.Put([]byte("a"), []byte("1"))
	ctx, cancel := context.WithCancel(context.Background())
	w, err := s.Watch(ctx, []byte("a"), nil, 0, WithPrevKV())
	if err != nil {
		t.Fatal(err)
	}
	_, _ = s.Put([]byte("b"), []byte("x"))
	rev2, _ := s.Put([]byte("a"), []byte("2"))
	rev3, _, _ := s.Delete([]byte("a"))
	rev4, _ := s.Put([]byte("a"), []byte("3"))
	got := collect(t, w, 3)
	want := []Event{
		{Type: EventPut, KV: KeyValue{Key: []byte("a"), Value: []byte("2"), CreateRevision: rev1, ModRevision: rev2, Version: 2}},
		{Type: EventDelete, KV: KeyValue{Key: []byte("a"), ModRevision: rev3}},
		{Type: EventPut, KV: KeyValue{Key: []byte("a"), Value: []byte("3"), CreateRevision: rev4, ModRevision: rev4, Version: 1}},
	}
	sameEvents(t, got, want)
	if p := got[0].PrevKV; p == nil || string(p.Value) != "1" || p.ModRevision != rev1 {
		t.Fatalf("PrevKV of the put = %+v", p)
	}
	if p := got[1].PrevKV; p == nil || string(p.Value) != "2" {
		t.Fatalf("PrevKV of the delete = %+v", p)
	}
	if got[2].PrevKV != nil {
		t.Fatalf("PrevKV of a created key = %+v", got[2].PrevKV)
	}
	cancel()
	for range w.C {
	}
	if !errors.Is(w.Err(), context.Canceled) {
		t.Fatalf("Err after cancel = %v", w.Err())
	}
}

// TestWatchHistoryPrevKV checks PrevKV on events read from storage.
func TestWatchHistoryPrevKV(t *testing.T) {
	s, _ := newMemStore(t, Options{})
	rev1, _ := s.Put([]byte("a"), []byte("1"))
	_, _ = s.Put([]byte("a"), []byte("2"))
	w, err := s.Watch(context.Background(), []byte("a"), nil, rev1, WithPrevKV())
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	got := collect(t, w, 2)
	if got[0].PrevKV != nil || got[1].PrevKV == nil || string(got[1].PrevKV.Value) != "1" {
		t.Fatalf("history PrevKV: %+v %+v", got[0].PrevKV, got[1].PrevKV)
	}
}

// TestWatchCompacted: a watch from a compacted revision fails, and a
// watcher still reading history that compaction overtakes stops with
// ErrCompacted.
func TestWatchCompacted(t *testing.T) {
	s, _ := newMemStore(t, Options{})
	for i := range 20 {
		_, _ = s.Put([]byte("k"), fmt.Appendf(nil, "%d", i))
	}
	if err := s.Compact(10); err != nil {
		t.Fatal(err)
	}
	for _, from := range []int64{1, 9} {
		if _, err := s.Watch(context.Background(), []byte("k"), nil, from); !errors.Is(err, ErrCompacted) {
			t.Fatalf("Watch from %d after Compact(10): %v, want ErrCompacted", from, err)
		}
	}
	// From the compacted revision itself: accepted, as in etcd.
	w, err := s.Watch(context.Background(), []byte("k"), nil, 10)
	if err != nil {
		t.Fatal(err)
	}
	got := collect(t, w, 12)
	if got[0].KV.ModRevision != 10 || got[11].KV.ModRevision != 21 {
		t.Fatalf("events from 10: %s", fmtEvents(got))
	}
	w.Close()

	// A watcher that does not read falls behind, then compaction passes it.
	w, err = s.Watch(context.Background(), []byte("k"), nil, 12)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3000 {
		_, _ = s.Put([]byte("k"), fmt.Appendf(nil, "%d", i))
	}
	if err := s.Compact(s.Rev()); err != nil {
		t.Fatal(err)
	}
	deadline := time.After(10 * time.Second)
	for {
		select {
		case _, ok := <-w.C:
			if ok {
				continue
			}
			if !errors.Is(w.Err(), ErrCompacted) {
				t.Fatalf("Err = %v, want ErrCompacted", w.Err())
			}
			return
		case <-deadline:
			t.Fatal("watcher did not stop")
		}
	}
}

// TestWatchSlowReaderDoesNotBlockWriters: writers finish while nobody
// reads the watcher, and the reader later gets every event.
func TestWatchSlowReaderDoesNotBlockWriters(t *testing.T) {
	s, _ := newMemStore(t, Options{WatchBufferSize: 4})
	w, err := s.Watch(context.Background(), []byte("a"), []byte{0}, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	done := make(chan struct{})
	go func() {
		for i := range 2000 {
			_, _ = s.Put(fmt.Appendf(nil, "k%d", i%7), []byte("v"))
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("writers blocked by an unread watcher")
	}
	s.watchMu.Lock()
	overflows := w.overflows
	s.watchMu.Unlock()
	if overflows == 0 {
		t.Fatal("the buffer of 4 events never overflowed")
	}
	got := collect(t, w, 2000)
	for i, e := range got {
		if e.KV.ModRevision != int64(i+2) {
			t.Fatalf("event %d has revision %d", i, e.KV.ModRevision)
		}
	}
}

// TestWatchStoreClose: closing the store stops its watchers.
func TestWatchStoreClose(t *testing.T) {
	db := openEngine(t, vfs.NewMem(), false)
	defer db.Close()
	s := openStore(t, db, Options{})
	w, err := s.Watch(context.Background(), []byte("a"), nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for range w.C {
	}
	if !errors.Is(w.Err(), ErrClosed) {
		t.Fatalf("Err = %v, want ErrClosed", w.Err())
	}
	if _, err := s.Watch(context.Background(), []byte("a"), nil, 0); !errors.Is(err, ErrClosed) {
		t.Fatalf("Watch on a closed store: %v", err)
	}
}

// TestWatchFromCompactedRevision: as in etcd, a watch from exactly the
// compacted revision delivers that revision's events, a deletion
// included (its tombstone outlives the compaction at its revision, also
// across a reopen); the next compaction drops it.
func TestWatchFromCompactedRevision(t *testing.T) {
	db := openEngine(t, vfs.NewMem(), false)
	defer db.Close()
	s := openStore(t, db, Options{})
	_, _ = s.Put([]byte("a"), []byte("1"))
	_, _ = s.Put([]byte("b"), []byte("1"))
	del, _, err := s.DeleteRange([]byte("a"), []byte("c"))
	if err != nil {
		t.Fatal(err)
	}
	put, _ := s.Put([]byte("c"), []byte("2"))
	if err := s.Compact(del); err != nil {
		t.Fatal(err)
	}
	want := []Event{
		{Type: EventDelete, KV: KeyValue{Key: []byte("a"), ModRevision: del}},
		{Type: EventDelete, KV: KeyValue{Key: []byte("b"), ModRevision: del}},
		{Type: EventPut, KV: KeyValue{Key: []byte("c"), Value: []byte("2"), CreateRevision: put, ModRevision: put, Version: 1}},
	}
	for _, reopen := range []bool{false, true} {
		if reopen {
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			s = openStore(t, db, Options{})
		}
		w, err := s.Watch(context.Background(), []byte{0}, []byte{0}, del)
		if err != nil {
			t.Fatalf("reopen %v: Watch from the compacted revision: %v", reopen, err)
		}
		sameEvents(t, collect(t, w, 3), want)
		w.Close()
		if _, err := s.Watch(context.Background(), []byte{0}, []byte{0}, del-1); !errors.Is(err, ErrCompacted) {
			t.Fatalf("Watch below the compacted revision: %v", err)
		}
	}
	if err := s.Compact(put); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got := storedRevisions(t, db); fmt.Sprint(got) != fmt.Sprintf("[%d:c]", put) {
		t.Fatalf("after the next compaction storage holds %v", got)
	}
}

// TestWatchProgress checks the revision a watcher reports for etcd's
// progress notifications: writes outside its range advance it, and while
// an event of its range is not yet taken from C it reports nothing, so a
// client can never be told it has seen a revision whose event it has not
// received; a watcher reading history reports nothing until caught up.
func TestWatchProgress(t *testing.T) {
	s, _ := newMemStore(t, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w, err := s.Watch(ctx, []byte("a"), nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	revB, _ := s.Put([]byte("b"), []byte("x"))
	if rev, ok := w.Progress(); !ok || rev != revB {
		t.Fatalf("after a write outside the range: Progress = %d, %v; want %d, true", rev, ok, revB)
	}
	revA, _ := s.Put([]byte("a"), []byte("1"))
	// Whether the event still waits in the watcher's buffer or is on its
	// way into C, the watcher has not handed it over.
	for range 3 {
		if rev, ok := w.Progress(); ok {
			t.Fatalf("with the event of %d not yet read from C: Progress = %d, true", revA, rev)
		}
		time.Sleep(20 * time.Millisecond)
	}
	collect(t, w, 1)
	deadline := time.Now().Add(10 * time.Second)
	for {
		rev, ok := w.Progress()
		if ok {
			if rev != revA {
				t.Fatalf("after the event was read: Progress = %d, want %d", rev, revA)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("Progress never reported the revision of the event read")
		}
		time.Sleep(time.Millisecond)
	}
	past, err := s.Watch(ctx, []byte("a"), nil, revA)
	if err != nil {
		t.Fatal(err)
	}
	if rev, ok := past.Progress(); ok {
		t.Fatalf("a watcher with history to deliver: Progress = %d, true", rev)
	}
	collect(t, past, 1)
}

// TestWatchProgressFutureStart: a watcher from a revision the store has
// not reached reports no progress until the store reaches it (etcd's
// progressIfSync: rev < startRev sends nothing).
func TestWatchProgressFutureStart(t *testing.T) {
	s, _ := newMemStore(t, Options{})
	start := s.Rev() + 3
	w, err := s.Watch(context.Background(), []byte("a"), nil, start)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	for s.Rev() < start {
		if rev, ok := w.Progress(); ok {
			t.Fatalf("store at %d, watch from %d: Progress = %d, true", s.Rev(), start, rev)
		}
		if _, err := s.Put([]byte("b"), []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	if rev, ok := w.Progress(); !ok || rev != start {
		t.Fatalf("store at the watch's start %d: Progress = %d, %v; want %d, true", start, rev, ok, start)
	}
}
