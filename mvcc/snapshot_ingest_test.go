package mvcc

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/stratadb/strata/engine"
)

// fillHistory writes a history of n puts of size-byte incompressible values
// over keys prefix000.. (deterministic for seed), as log entries numbered
// from 1: two leases with keys attached, deletions, aux keys and a
// compaction halfway.
func fillHistory(t testing.TB, s *Store, seed uint64, n, size int, prefix string) {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, 9))
	index := uint64(0)
	entry := func() Entry { index++; return s.Entry(index) }
	leases := []int64{int64(seed)*10 + 1, int64(seed)*10 + 2}
	for i, id := range leases {
		if err := entry().GrantLease(id, int64(100*(i+1))); err != nil {
			t.Fatal(err)
		}
	}
	key := func() []byte { return fmt.Appendf(nil, "%s%03d", prefix, r.IntN(n/4+1)) }
	for i := range n {
		v := make([]byte, size)
		for j := range v {
			v[j] = byte(r.Uint32())
		}
		op := PutOp(key(), v)
		if i%5 == 0 {
			op.Lease = leases[i%2]
		}
		if _, err := entry().Txn(TxnRequest{Success: []Op{op}}); err != nil {
			t.Fatal(err)
		}
		if i%17 == 0 {
			if _, err := entry().Txn(TxnRequest{Success: []Op{DeleteOp(key(), nil)}}); err != nil {
				t.Fatal(err)
			}
		}
		if i == n/2 {
			if err := entry().Compact(s.Rev() / 2); err != nil {
				t.Fatal(err)
			}
			// The deletions run on in the background; what the
			// snapshot copies is compared key by key.
			if err := s.WaitCompaction(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := entry().WriteAux([]AuxWrite{{Key: []byte(prefix + "user"), Value: []byte("role " + prefix)}}); err != nil {
		t.Fatal(err)
	}
}

// storeKeys returns every engine key and value of db as "key=value"
// lines: the store's whole contents, revisions, leases, aux and metadata.
func storeKeys(t testing.TB, db *engine.DB) []string {
	t.Helper()
	it, err := db.NewIter(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	var out []string
	for ok := it.First(); ok; ok = it.Next() {
		out = append(out, fmt.Sprintf("%q=%q", it.Key(), it.Value()))
	}
	if err := it.Error(); err != nil {
		t.Fatal(err)
	}
	return out
}

// sameLines says where a and b first differ, "" if nowhere.
func sameLines(a, b []string) string {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return fmt.Sprintf("line %d: %.80s vs %.80s", i, a[i], b[i])
		}
	}
	if len(a) != len(b) {
		return fmt.Sprintf("%d lines vs %d", len(a), len(b))
	}
	return ""
}

// checkSameStore checks that got holds exactly want's contents, as its
// engine keys and as the store reads them.
func checkSameStore(t testing.TB, got, want *Store, gotDB, wantDB *engine.DB) {
	t.Helper()
	if d := sameLines(storeKeys(t, gotDB), storeKeys(t, wantDB)); d != "" {
		t.Fatalf("restored engine contents differ from the source's: %s", d)
	}
	h1, r1, c1, err1 := got.HashKV(0)
	h2, r2, c2, err2 := want.HashKV(0)
	if err := errors.Join(err1, err2); err != nil || h1 != h2 || r1 != r2 || c1 != c2 {
		t.Fatalf("HashKV: restored %x at %d compacted %d, source %x at %d compacted %d (%v)", h1, r1, c1, h2, r2, c2, err)
	}
	if g, w := fmt.Sprint(got.Leases()), fmt.Sprint(want.Leases()); g != w {
		t.Fatalf("leases: restored %.200s, source %.200s", g, w)
	}
	a1, err1 := got.ReadAux(nil)
	a2, err2 := want.ReadAux(nil)
	if err := errors.Join(err1, err2); err != nil || fmt.Sprint(a1) != fmt.Sprint(a2) {
		t.Fatalf("aux: restored %q, source %q (%v)", a1, a2, err)
	}
	if got.AppliedIndex() != want.AppliedIndex() || got.Rev() != want.Rev() || got.CompactRev() != want.CompactRev() {
		t.Fatalf("restored: applied %d rev %d compacted %d, source %d %d %d",
			got.AppliedIndex(), got.Rev(), got.CompactRev(), want.AppliedIndex(), want.Rev(), want.CompactRev())
	}
}

// TestSnapshotRestoreLargerThanMemtable: a snapshot of 3 MB (three
// memtables) restored over a store with other, older contents leaves
// exactly the source's contents, and is not written through the WAL.
func TestSnapshotRestoreLargerThanMemtable(t *testing.T) {
	src, srcDB := newMemStore(t, Options{})
	fillHistory(t, src, 1, 400, 8<<10, "new/")
	var snap bytes.Buffer
	if _, err := src.WriteSnapshot(&snap); err != nil {
		t.Fatal(err)
	}
	dst, dstDB := newMemStore(t, Options{})
	fillHistory(t, dst, 2, 600, 4<<10, "old/")
	m0, err := dstDB.Metrics()
	if err != nil {
		t.Fatal(err)
	}
	if err := dst.RestoreSnapshot(bytes.NewReader(snap.Bytes())); err != nil {
		t.Fatal(err)
	}
	m1, err := dstDB.Metrics()
	if err != nil {
		t.Fatal(err)
	}
	checkSameStore(t, dst, src, dstDB, srcDB)
	if wal := m1.WAL.BytesIn - m0.WAL.BytesIn; wal > uint64(snap.Len()/10) {
		t.Fatalf("the restore wrote %d bytes through the WAL for a snapshot of %d", wal, snap.Len())
	}
	if res, err := dst.Range([]byte("old/"), []byte("old0"), RangeOptions{CountOnly: true}); err != nil || res.Count != 0 {
		t.Fatalf("old keys after the restore: %d (%v)", res.Count, err)
	}
}

// snapshotEntries decodes a snapshot into its keys and values.
func snapshotEntries(t testing.TB, snap []byte) (keys, values [][]byte) {
	t.Helper()
	br := bufio.NewReader(bytes.NewReader(snap))
	for {
		k, err := readChunk(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(k) == 0 {
			return keys, values
		}
		v, err := readChunk(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		keys, values = append(keys, k), append(values, v)
	}
}

// encodeSnapshot writes keys and values as WriteSnapshot does.
func encodeSnapshot(keys, values [][]byte) []byte {
	var b []byte
	for i := range keys {
		b = binary.AppendUvarint(b, uint64(len(keys[i])))
		b = append(b, keys[i]...)
		b = binary.AppendUvarint(b, uint64(len(values[i])))
		b = append(b, values[i]...)
	}
	return binary.AppendUvarint(b, 0)
}

// TestSnapshotRestoreRefusesBadSnapshots: a truncated snapshot, one out of
// order, with a key twice, with a key outside the store's key space or
// with revisions that do not hold together (checked as the key index is
// built from them, before the ingestion),
// each found after most of the snapshot went into a table, is ErrCorrupt,
// changes nothing, leaves no temporary table, and the store goes on.
func TestSnapshotRestoreRefusesBadSnapshots(t *testing.T) {
	src, _ := newMemStore(t, Options{})
	fillHistory(t, src, 1, 300, 8<<10, "new/")
	var buf bytes.Buffer
	if _, err := src.WriteSnapshot(&buf); err != nil {
		t.Fatal(err)
	}
	good := buf.Bytes()
	keys, values := snapshotEntries(t, good)
	late := len(keys) - 3 // past the first tables
	swapped := func() []byte {
		k, v := slices.Clone(keys), slices.Clone(values)
		k[late], k[late+1] = k[late+1], k[late]
		v[late], v[late+1] = v[late+1], v[late]
		return encodeSnapshot(k, v)
	}
	repeated := func() []byte {
		k := append(slices.Clone(keys[:late+1]), keys[late:]...)
		v := append(slices.Clone(values[:late+1]), values[late:]...)
		return encodeSnapshot(k, v)
	}
	foreign := func() []byte {
		k := append(slices.Clone(keys), []byte("\xfe not a store key"))
		v := append(slices.Clone(values), []byte("v"))
		return encodeSnapshot(k, v)
	}
	// orphan drops the last revision's record, leaving its index record:
	// in key order, but the revisions do not hold together.
	orphan := func() []byte {
		for i := len(keys) - 1; i >= 0; i-- {
			if _, index, err := decodeRevSlot(keys[i]); err == nil && !index && keys[i][0] == revPrefix {
				return encodeSnapshot(slices.Delete(slices.Clone(keys), i, i+1), slices.Delete(slices.Clone(values), i, i+1))
			}
		}
		t.Fatal("the snapshot holds no record")
		return nil
	}
	for _, tc := range []struct {
		name string
		snap []byte
		says string
	}{
		{"truncated-in-a-value", good[:len(good)-200], "truncated"},
		{"no-end-marker", good[:len(good)-1], "truncated"},
		{"out-of-order", swapped(), "keys must be strictly increasing"},
		{"repeated-key", repeated(), "keys must be strictly increasing"},
		{"foreign-key", foreign(), "not a store key"},
		{"index-record-alone", orphan(), "without its record"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := vfs.NewMem()
			db := openEngine(t, mem, false)
			s := openStore(t, db, Options{})
			defer func() { _ = s.Close(); _ = db.Close() }()
			fillHistory(t, s, 2, 200, 4<<10, "old/")
			before := storeKeys(t, db)
			err := s.RestoreSnapshot(bytes.NewReader(tc.snap))
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("RestoreSnapshot: %v, want ErrCorrupt saying %q", err, tc.says)
			}
			if d := sameLines(storeKeys(t, db), before); d != "" {
				t.Fatalf("a refused snapshot changed the store: %s", d)
			}
			names, err := mem.List("/db")
			if err != nil {
				t.Fatal(err)
			}
			for _, n := range names {
				if strings.HasPrefix(n, "strata-rewrite-") {
					t.Fatalf("temporary table %s left", n)
				}
			}
			if _, err := s.Put([]byte("after"), []byte("v")); err != nil {
				t.Fatalf("Put after a refused snapshot: %v", err)
			}
		})
	}
}

// TestSnapshotRestoreWriteSweep crashes and fails a restore at each of its
// file system writes in turn, k = 0, 1, ... until the restore writes fewer
// than k+1 times (the crash sweep of Pebble's TestDBWALRotationCrash and
// the error sweep of its TestErrors): a crash clone taken just before the
// k-th write, and one taken after the restore failed there (synced data
// only), each reopen to the old contents or the snapshot's, never a mix,
// and a failed restore returns the injected error. Errors go to the writes
// of tables only; the MANIFEST's, the WAL's and the directory's are crashed
// at but not failed: Pebble ends the process when a background flush or
// compaction fails to write the MANIFEST, and a failure to close or create a
// WAL makes it panic in its WAL rotation with its mutex released, fatal
// errors no caller can recover (in any write, flush or compaction, not only
// here).
func TestSnapshotRestoreWriteSweep(t *testing.T) {
	src, srcDB := newMemStore(t, Options{})
	fillHistory(t, src, 1, 24, 8<<10, "new/")
	var snap bytes.Buffer
	if _, err := src.WriteSnapshot(&snap); err != nil {
		t.Fatal(err)
	}
	newKeys := storeKeys(t, srcDB)
	var oldKeys []string
	seen := map[string]int{}
	// reopen checks that fs opens to the old or the new contents.
	reopen := func(what string, fs vfs.FS, failed bool) {
		t.Helper()
		db := openEngine(t, fs, true)
		defer db.Close()
		s := openStore(t, db, Options{})
		defer s.Close()
		got := storeKeys(t, db)
		switch {
		case sameLines(got, newKeys) == "":
			checkSameStore(t, s, src, db, srcDB)
			seen["new"]++
		case sameLines(got, oldKeys) == "" && failed:
			seen["old"]++
		default:
			t.Fatalf("%s: reopened neither old (%s) nor new (%s)", what, sameLines(got, oldKeys), sameLines(got, newKeys))
		}
	}
	for k := int64(0); ; k++ {
		mem := vfs.NewCrashableMem()
		var armed atomic.Bool
		var writes atomic.Int64
		var before *vfs.MemFS
		inj := errorfs.InjectorFunc(func(op errorfs.Op) error {
			if !armed.Load() || op.Kind.ReadOrWrite() != errorfs.OpIsWrite || writes.Add(1)-1 != k {
				return nil
			}
			before = mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
			if !strings.HasSuffix(op.Path, ".sst") {
				return nil // a MANIFEST, WAL or directory write (see above)
			}
			return errorfs.ErrInjected
		})
		db := openEngine(t, errorfs.Wrap(mem, inj), true)
		s := openStore(t, db, Options{})
		fillHistory(t, s, 2, 12, 4<<10, "old/")
		if oldKeys == nil {
			oldKeys = storeKeys(t, db)
		}
		armed.Store(true)
		err := s.RestoreSnapshot(bytes.NewReader(snap.Bytes()))
		armed.Store(false)
		after := mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
		_ = s.Close()
		_ = db.Close()
		if err != nil && !errors.Is(err, errorfs.ErrInjected) {
			t.Fatalf("k=%d: RestoreSnapshot: %v, want the injected error", k, err)
		}
		if before == nil { // the restore wrote fewer than k+1 times
			if err != nil || k < 5 {
				t.Fatalf("the uninjected restore: %v after %d writes", err, k)
			}
			reopen("after the restore", after, false)
			t.Logf("crashed at and failed each of the %d writes of a restore: reopened %v", k, seen)
			return
		}
		reopen(fmt.Sprintf("crash at write %d", k), before, true)
		reopen(fmt.Sprintf("write %d failed (restore: %v)", k, err), after, err != nil)
	}
}

// TestSnapshotRestoreWithoutIndexRecords: a snapshot of a store written
// before index records (its records alone under the revision prefix), and
// one where only some records have them, restore to the source's answers
// at every retained revision, with its leases: the key index built as the
// snapshot is read decodes the records that have no index record.
func TestSnapshotRestoreWithoutIndexRecords(t *testing.T) {
	r := rand.New(rand.NewPCG(testSeed(t), 0))
	src, _ := newMemStore(t, Options{})
	m := newModel()
	g := newOpGen(r, 16)
	for range 200 {
		g.step(t, src, m, 0)
	}
	if err := src.Entry(7).GrantLease(42, 100); err != nil {
		t.Fatal(err)
	}
	leased := []Op{{Type: OpPut, Key: []byte("leased"), Value: []byte("v"), Lease: 42}}
	if _, err := src.Txn(TxnRequest{Success: leased}); err != nil {
		t.Fatal(err)
	}
	m.apply(leased)
	var buf bytes.Buffer
	if _, err := src.WriteSnapshot(&buf); err != nil {
		t.Fatal(err)
	}
	keys, values := snapshotEntries(t, buf.Bytes())
	for _, keep := range []struct {
		name string
		keep func(i int) bool // whether the i-th index record stays
	}{
		{"none", func(int) bool { return false }},
		{"every-third", func(i int) bool { return i%3 == 0 }},
	} {
		t.Run(keep.name, func(t *testing.T) {
			var k, v [][]byte
			n := 0
			for i := range keys {
				if _, index, err := decodeRevSlot(keys[i]); err == nil && index && keys[i][0] == revPrefix {
					n++
					if !keep.keep(n) {
						continue
					}
				}
				k, v = append(k, keys[i]), append(v, values[i])
			}
			dst, _ := newMemStore(t, Options{})
			if err := dst.RestoreSnapshot(bytes.NewReader(encodeSnapshot(k, v))); err != nil {
				t.Fatal(err)
			}
			checkAgainstModel(t, dst, m, "restored")
			if l, err := dst.Lease(42); err != nil || len(l.Keys) != 1 || string(l.Keys[0]) != "leased" {
				t.Fatalf("lease 42 after restore: %+v %v, want it holding key \"leased\"", l, err)
			}
		})
	}
}

// TestPrepareRestore: a prepared snapshot changes nothing, beside writes
// and reads, until Commit; Discard drops it with its tables; Commit puts
// the source's contents in place, replacing writes made after the
// prepare, and a Discard after it changes nothing.
func TestPrepareRestore(t *testing.T) {
	src, srcDB := newMemStore(t, Options{})
	fillHistory(t, src, 1, 300, 8<<10, "new/")
	var snap bytes.Buffer
	if _, err := src.WriteSnapshot(&snap); err != nil {
		t.Fatal(err)
	}
	mem := vfs.NewMem()
	db := openEngine(t, mem, false)
	s := openStore(t, db, Options{})
	defer func() { _ = s.Close(); _ = db.Close() }()
	fillHistory(t, s, 2, 200, 4<<10, "old/")
	tempTables := func() int {
		names, err := mem.List("/db")
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, name := range names {
			if strings.HasPrefix(name, "strata-rewrite-") {
				n++
			}
		}
		return n
	}
	for _, commit := range []bool{false, true} {
		before := storeKeys(t, db)
		p, err := s.PrepareRestore(bytes.NewReader(snap.Bytes()))
		if err != nil {
			t.Fatal(err)
		}
		if d := sameLines(storeKeys(t, db), before); d != "" {
			t.Fatalf("PrepareRestore changed the store: %s", d)
		}
		if tempTables() == 0 {
			t.Fatal("PrepareRestore wrote no table")
		}
		if _, err := s.Put([]byte("old/written-after-the-prepare"), []byte("v")); err != nil {
			t.Fatalf("Put beside a prepared restore: %v", err)
		}
		if !commit {
			p.Discard()
			if n := tempTables(); n != 0 {
				t.Fatalf("%d temporary tables left after Discard", n)
			}
			if res, err := s.Range([]byte("old/written-after-the-prepare"), nil, RangeOptions{}); err != nil || len(res.KVs) != 1 {
				t.Fatalf("after Discard: %+v %v", res, err)
			}
			continue
		}
		if err := p.Commit(); err != nil {
			t.Fatal(err)
		}
		p.Discard()
		checkSameStore(t, s, src, db, srcDB)
		if n := tempTables(); n != 0 {
			t.Fatalf("%d temporary tables left after Commit", n)
		}
	}
}
