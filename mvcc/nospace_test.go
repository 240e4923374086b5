package mvcc

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"

	"github.com/stratadb/strata/engine"
)

// tableSpaceFault fails every write to a table file (*.sst) with ENOSPC
// while armed: the next flush meets it and the engine's disk guard trips.
type tableSpaceFault struct{ armed atomic.Bool }

func (f *tableSpaceFault) MaybeError(op errorfs.Op) error {
	if f.armed.Load() && op.Kind.ReadOrWrite() == errorfs.OpIsWrite && strings.HasSuffix(op.Path, ".sst") {
		return syscall.ENOSPC
	}
	return nil
}

func (f *tableSpaceFault) String() string { return "ENOSPC on table writes" }

// noSpaceEnv is a store on an in-memory engine whose disk guard a test
// trips (trip) and clears (clear) through tableSpaceFault.
type noSpaceEnv struct {
	t     *testing.T
	mem   *vfs.MemFS
	fault *tableSpaceFault
	db    *engine.DB
	s     *Store
}

func newNoSpaceEnv(t *testing.T, opts Options) *noSpaceEnv {
	e := &noSpaceEnv{t: t, mem: vfs.NewMem(), fault: &tableSpaceFault{}}
	db, err := engine.Open(memConfig(true), engine.Options{FS: errorfs.Wrap(e.mem, e.fault),
		DiskGuard: engine.DiskGuardOptions{PollInterval: 5 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	e.db, e.s = db, openStore(t, db, opts)
	t.Cleanup(func() {
		e.fault.armed.Store(false)
		if e.s != nil {
			_ = e.s.Close()
		}
		if e.db != nil {
			_ = e.db.Close()
		}
	})
	return e
}

// trip arms the fault and flushes until the guard refuses writes.
func (e *noSpaceEnv) trip() {
	e.fault.armed.Store(true)
	go func() { _ = e.db.Flush() }()
	e.waitFull(true)
}

// clear lifts the fault; the guard accepts writes again by itself.
func (e *noSpaceEnv) clear() { e.fault.armed.Store(false) }

func (e *noSpaceEnv) waitFull(full bool) {
	deadline := time.Now().Add(20 * time.Second)
	for e.db.DiskStatus().Full != full {
		if time.Now().After(deadline) {
			e.t.Fatalf("the disk guard did not become full=%v", full)
		}
		time.Sleep(time.Millisecond)
	}
}

// reopen closes the store and the engine and opens them again on the
// same files, without the fault.
func (e *noSpaceEnv) reopen() {
	e.fault.armed.Store(false)
	if err := e.s.Close(); err != nil {
		e.t.Fatal(err)
	}
	if err := e.db.Close(); err != nil {
		e.t.Fatal(err)
	}
	e.s, e.db = nil, nil
	db, err := engine.Open(memConfig(true), engine.Options{FS: e.mem})
	if err != nil {
		e.t.Fatal(err)
	}
	e.db, e.s = db, openStore(e.t, db, Options{})
}

// checkKeys checks that want (key: value) is exactly what the store holds.
func checkKeys(t *testing.T, s *Store, want map[string]string) {
	t.Helper()
	res, err := s.Range([]byte{0}, []byte{0xff}, RangeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, kv := range res.KVs {
		got[string(kv.Key)] = string(kv.Value)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("store holds %v, want %v", got, want)
	}
}

// TestNoSpaceRefusedWrite: while the engine's disk guard refuses writes,
// a put, a txn and a lease grant are refused at once with
// engine.ErrNoSpace, changing nothing (no revision used, no key, no
// lease, no event, the store not failed); once space returns, writes go
// on from the same revision without a reopen, and after one every
// acknowledged write is there and no refused one.
func TestNoSpaceRefusedWrite(t *testing.T) {
	e := newNoSpaceEnv(t, Options{})
	s := e.s
	w, err := s.Watch(t.Context(), []byte{0}, []byte{0xff}, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	want := map[string]string{}
	put := func(k string) (int64, error) {
		rev, err := s.Put([]byte(k), []byte("v-"+k))
		if err == nil {
			want[k] = "v-" + k
		}
		return rev, err
	}
	for i := range 10 {
		if _, err := put(fmt.Sprintf("k%02d", i)); err != nil {
			t.Fatal(err)
		}
	}
	before := s.Rev()

	e.trip()
	refusedAtOnce(t, "Put", func() error { _, err := put("refused"); return err })
	refusedAtOnce(t, "Txn", func() error {
		_, err := s.Txn(TxnRequest{Success: []Op{PutOp([]byte("refused-txn"), []byte("v"))}})
		return err
	})
	refusedAtOnce(t, "GrantLease", func() error { return s.GrantLease(7, 60) })
	if err := s.failure(); err != nil {
		t.Fatalf("the store failed on a refused write: %v", err)
	}
	if got := s.Rev(); got != before {
		t.Fatalf("revision %d after refused writes, want %d", got, before)
	}
	checkKeys(t, s, want) // reads go on

	e.clear()
	e.waitFull(false)
	rev, err := put("after")
	if err != nil {
		t.Fatalf("Put once space returned: %v (the store should not need a reopen)", err)
	}
	if rev != before+1 {
		t.Fatalf("the first write after space returned made revision %d, want %d: a refused write used one", rev, before+1)
	}
	if err := s.GrantLease(7, 60); err != nil {
		t.Fatalf("GrantLease once space returned: %v", err)
	}
	// The watcher saw every revision once, in order, and no refused write.
	var revs []int64
	for len(revs) < 11 {
		select {
		case evs := <-w.C:
			for _, ev := range evs {
				if strings.HasPrefix(string(ev.KV.Key), "refused") {
					t.Fatalf("event of a refused write: %s", ev.KV.Key)
				}
				revs = append(revs, ev.KV.ModRevision)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("watcher got revisions %v, want 11", revs)
		}
	}
	for i, r := range revs {
		if r != before-9+int64(i) {
			t.Fatalf("watched revisions %v: not contiguous from %d", revs, before-9)
		}
	}
	checkKeys(t, s, want)
	e.reopen()
	checkKeys(t, e.s, want)
	if ttls := e.s.LeaseTTLs(); ttls[7] != 60 {
		t.Fatalf("leases after a reopen = %v, want lease 7", ttls)
	}
}

// TestNoSpaceCommitWaits covers the writes that change memory before the
// guard refuses their commit: one that raced the guard tripping, and a
// log entry (a Batch staged with a log index), which must be applied, not
// skipped. The commit waits until space returns and then lands: the
// write is acknowledged with the revision it was given, the store is not
// failed, and writes go on; after a reopen it is there. Without the wait
// the store fails ("reopen it") and every later write fails too.
func TestNoSpaceCommitWaits(t *testing.T) {
	var e *noSpaceEnv
	var raced, waited atomic.Bool
	var once sync.Once
	opts := Options{}
	opts.hooks.beforeCommit = func() {
		if raced.Load() {
			once.Do(e.trip) // the guard trips between refused and the commit
		}
	}
	opts.hooks.noSpaceWait = func() {
		if waited.CompareAndSwap(false, true) {
			e.clear()
		}
	}
	e = newNoSpaceEnv(t, opts)
	s := e.s
	want := map[string]string{}
	for i := range 5 {
		k := fmt.Sprintf("k%d", i)
		if _, err := s.Put([]byte(k), []byte("v")); err != nil {
			t.Fatal(err)
		}
		want[k] = "v"
	}

	// A write that raced the guard tripping.
	before := s.Rev()
	raced.Store(true)
	rev, err := s.Put([]byte("raced"), []byte("v"))
	raced.Store(false)
	if err != nil {
		t.Fatalf("a put that raced the guard = %v, want it to wait for space and succeed", err)
	}
	if !waited.Load() {
		t.Fatal("the put did not meet the full disk: the test tested nothing")
	}
	if rev != before+1 {
		t.Fatalf("the raced put made revision %d, want %d", rev, before+1)
	}
	want["raced"] = "v"

	// A log entry staged while the disk is full.
	e.trip()
	waited.Store(false)
	b := s.BeginBatch()
	if _, err := b.Txn(5, TxnRequest{Success: []Op{PutOp([]byte("entry"), []byte("v"))}}); err != nil {
		t.Fatalf("staging log entry 5 on a full disk: %v", err)
	}
	if err := b.Commit(); err != nil {
		t.Fatalf("committing log entry 5 on a full disk = %v, want it to wait for space and succeed", err)
	}
	if !waited.Load() {
		t.Fatal("the entry did not meet the full disk: the test tested nothing")
	}
	if got := s.AppliedIndex(); got != 5 {
		t.Fatalf("applied index %d, want 5", got)
	}
	want["entry"] = "v"
	if _, err := s.Put([]byte("later"), []byte("v")); err != nil {
		t.Fatalf("a put after the waits: %v", err)
	}
	want["later"] = "v"
	checkKeys(t, s, want)
	e.reopen()
	checkKeys(t, e.s, want)
	if got := e.s.AppliedIndex(); got != 5 {
		t.Fatalf("applied index %d after a reopen, want 5", got)
	}
}

// refusedAtOnce runs a write on a full disk and checks that it returns
// engine.ErrNoSpace rather than waiting for space (bounded at 10s, so a
// write that waits fails the test instead of hanging it).
func refusedAtOnce(t *testing.T, what string, write func() error) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- write() }()
	select {
	case err := <-done:
		if !errors.Is(err, engine.ErrNoSpace) {
			t.Fatalf("%s on a full disk = %v, want engine.ErrNoSpace", what, err)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("%s on a full disk still waiting after 10s, want engine.ErrNoSpace at once", what)
	}
}

// TestNoSpaceAbandonWait: a log entry whose commit waits for space gives
// up when AbandonSpaceWaits is called (a shutdown on a full disk): Commit
// returns the failure, and after a reopen the entry is not applied, to
// be applied again from the log.
func TestNoSpaceAbandonWait(t *testing.T) {
	var e *noSpaceEnv
	waiting := make(chan struct{})
	var once sync.Once
	opts := Options{}
	opts.hooks.noSpaceWait = func() { once.Do(func() { close(waiting) }) }
	e = newNoSpaceEnv(t, opts)
	s := e.s
	b := s.BeginBatch()
	if _, err := b.Txn(3, TxnRequest{Success: []Op{PutOp([]byte("committed"), []byte("v"))}}); err != nil {
		t.Fatal(err)
	}
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	e.trip()
	done := make(chan error, 1)
	go func() {
		b := s.BeginBatch()
		if _, err := b.Txn(4, TxnRequest{Success: []Op{PutOp([]byte("entry"), []byte("v"))}}); err != nil {
			done <- err
			return
		}
		done <- b.Commit()
	}()
	select {
	case <-waiting:
	case err := <-done:
		t.Fatalf("entry 4 on a full disk returned %v before waiting for space", err)
	case <-time.After(10 * time.Second):
		t.Fatal("entry 4 on a full disk neither waited nor returned")
	}
	s.AbandonSpaceWaits()
	select {
	case err := <-done:
		if !errors.Is(err, engine.ErrNoSpace) {
			t.Fatalf("entry 4 abandoned = %v, want the store's failure wrapping engine.ErrNoSpace", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("entry 4 still waiting 10s after AbandonSpaceWaits")
	}
	e.clear()
	e.waitFull(false)
	e.reopen()
	if got := e.s.AppliedIndex(); got != 3 {
		t.Fatalf("applied index %d after a reopen, want 3 (entry 4 abandoned)", got)
	}
	checkKeys(t, e.s, map[string]string{"committed": "v"})
}
