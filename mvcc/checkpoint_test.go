package mvcc

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/stratadb/strata/engine"
	"github.com/stratadb/strata/mvcc/keyindex"
)

// forgetCheckpoint deletes the checkpoint token from db, so that the next
// Open reads the revisions: for tests that change the engine behind the
// store's back after a clean Close.
func forgetCheckpoint(t *testing.T, db *engine.DB) {
	t.Helper()
	if err := db.Delete(metaCheckpointToken); err != nil {
		t.Fatal(err)
	}
}

// closeWithCheckpoint closes s and fails unless it wrote a checkpoint.
func closeWithCheckpoint(t *testing.T, s *Store) CheckpointReport {
	t.Helper()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	r := s.CheckpointAtClose()
	if !r.Written || r.Keys != s.ix.Len() || r.Bytes <= int64(checkpointHeaderLen) {
		t.Fatalf("Close: %s (%+v), want a checkpoint of %d keys", r, r, s.ix.Len())
	}
	return r
}

// requireSource fails unless s built its index from want.
func requireSource(t *testing.T, s *Store, want IndexSource) {
	t.Helper()
	if got := s.IndexOrigin(); got.Source != want {
		t.Fatalf("index %s (%+v), want source %d", got, got, want)
	}
}

// requireSameIndex checks that got's key index and lease attachments are
// want's: the same keys, each with the same history (revisions and
// tombstones), the same answer of Get at every revision from the
// compaction to the current one and past it, the same Range over all
// keys at those revisions, the same leases with the same keys, and the
// same revisions and applied index; and that both serve the same
// contents (requireSameStore).
func requireSameIndex(t *testing.T, want, got *Store) {
	t.Helper()
	if got.Rev() != want.Rev() || got.CompactRev() != want.CompactRev() || got.AppliedIndex() != want.AppliedIndex() {
		t.Fatalf("revision %d, compacted %d, applied %d; want %d, %d, %d", got.Rev(), got.CompactRev(), got.AppliedIndex(), want.Rev(), want.CompactRev(), want.AppliedIndex())
	}
	var keys [][]byte
	if err := want.ix.Export(func(k, _ []byte) error { keys = append(keys, bytes.Clone(k)); return nil }); err != nil {
		t.Fatal(err)
	}
	if got.ix.Len() != len(keys) {
		t.Fatalf("%d keys, want %d", got.ix.Len(), len(keys))
	}
	type hentry struct {
		rev  keyindex.Revision
		tomb bool
	}
	history := func(ix *keyindex.Index, k []byte) (h []hentry) {
		ix.History(k, func(r keyindex.Revision, tomb bool) { h = append(h, hentry{r, tomb}) })
		return h
	}
	for _, k := range keys {
		if g, w := history(got.ix, k), history(want.ix, k); !slices.Equal(g, w) {
			t.Fatalf("History(%q) = %v, want %v", k, g, w)
		}
	}
	for rev := want.CompactRev(); rev <= want.Rev()+1; rev++ {
		for _, k := range keys {
			g, gok := got.ix.Get(k, rev)
			w, wok := want.ix.Get(k, rev)
			if g != w || gok != wok {
				t.Fatalf("Get(%q, %d) = %+v %v, want %+v %v", k, rev, g, gok, w, wok)
			}
		}
		rangeAll := func(ix *keyindex.Index) (out []string) {
			ix.Range([]byte{0}, nil, rev, func(k []byte, kr keyindex.KeyRev) bool {
				out = append(out, fmt.Sprintf("%s%+v", k, kr))
				return true
			})
			return out
		}
		if g, w := rangeAll(got.ix), rangeAll(want.ix); !slices.Equal(g, w) {
			t.Fatalf("Range at %d = %v, want %v", rev, g, w)
		}
	}
	requireSameStore(t, want, got) // leases with their keys, every revision's contents
}

// TestCheckpointAgreesWithRebuild: over random histories (puts, deletes,
// txns of several keys, leases granted, attached and revoked,
// compactions, also right before Close), the store opened from the
// checkpoint a clean Close wrote has the key index, lease attachments
// and revisions of the same store rebuilt from its revisions (a copy of
// the engine without the token), and goes on taking writes that agree
// with the model, through several rounds of Close and Open.
func TestCheckpointAgreesWithRebuild(t *testing.T) {
	seed := testSeed(t)
	for round := range 4 {
		r := rand.New(rand.NewPCG(seed, uint64(round)))
		db := openEngine(t, vfs.NewMem(), false)
		s := openStore(t, db, Options{})
		m := newModel()
		g := newOpGen(r, 16)
		for cycle := range 4 {
			what := fmt.Sprintf("round %d cycle %d", round, cycle)
			randomLeasedHistory(t, s, m, g, 150)
			// A compaction right before Close, above the history's last.
			if at := max(m.rev-int64(r.IntN(3)), m.compacted+1); (round+cycle)%2 == 0 && at <= m.rev {
				if err := s.Compact(at); err != nil {
					t.Fatal(err)
				}
				m.compacted = at
			}
			closeWithCheckpoint(t, s)
			rebuilt := copyEngine(t, db, func(k []byte) bool { return !isCheckpointToken(k) })
			want := openStore(t, rebuilt, Options{})
			requireSource(t, want, IndexRebuilt)
			s = openStore(t, db, Options{})
			requireSource(t, s, IndexFromCheckpoint)
			requireSameIndex(t, want, s)
			checkAgainstModel(t, s, m, what)
			if err := want.Close(); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestCheckpointTakenOnce: a checkpoint is loaded by one Open only. The
// store opened from it is abandoned without Close (a crash: nothing
// written since), and the next Open reads the revisions. (Seen to fail
// with Open's deletion of the token removed: the checkpoint was loaded
// again.)
func TestCheckpointTakenOnce(t *testing.T) { loadThenCrash(t, 0) }

// TestCheckpointStaleAfterCrash: Close writes a checkpoint, Open loads
// it, more writes follow (puts, deletes, txns, leases granted, attached
// and revoked, compactions), then a crash (no Close): the next Open
// rebuilds from the revisions and has every write. Two protections keep
// the stale checkpoint out, each enough here: Open deletes the token, and
// the checkpoint's metadata no longer match the engine's. (Seen to fail
// with both removed: the stale checkpoint was loaded.)
func TestCheckpointStaleAfterCrash(t *testing.T) { loadThenCrash(t, 60) }

// loadThenCrash closes a store with a history (writing a checkpoint),
// opens it from the checkpoint, makes n more random writes, takes a crash
// clone (only synced data) and checks that the clone opens by a rebuild
// with every write.
func loadThenCrash(t *testing.T, n int) {
	mem := vfs.NewCrashableMem()
	db := openEngine(t, mem, true)
	s := openStore(t, db, Options{})
	m := newModel()
	g := newOpGen(rand.New(rand.NewPCG(testSeed(t), 1)), 10)
	randomLeasedHistory(t, s, m, g, 120)
	closeWithCheckpoint(t, s)
	s = openStore(t, db, Options{})
	requireSource(t, s, IndexFromCheckpoint)
	if n > 0 {
		randomLeasedHistory(t, s, m, g, n)
	}
	crashed := mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
	_ = s.Close()
	_ = db.Close()
	db = openEngine(t, crashed, true)
	defer db.Close()
	s = openStore(t, db, Options{})
	defer s.Close()
	requireSource(t, s, IndexRebuilt)
	checkAgainstModel(t, s, m, "reopened after the crash")
}

// checkpointFile reads the checkpoint file of db.
func checkpointFile(t *testing.T, db *engine.DB) []byte {
	t.Helper()
	fs, path := checkpointPath(db)
	f, err := fs.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// setCheckpointFile replaces the checkpoint file of db with b (nil:
// removes it).
func setCheckpointFile(t *testing.T, db *engine.DB, b []byte) {
	t.Helper()
	fs, path := checkpointPath(db)
	if err := fs.Remove(path); err != nil {
		t.Fatal(err)
	}
	if b == nil {
		return
	}
	f, err := fs.Create(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// resum recomputes the trailing checksum of a checkpoint file.
func resum(b []byte) []byte {
	n := len(b) - 4
	return binary.BigEndian.AppendUint32(b[:n:n], crc32.Checksum(b[:n], crc32c))
}

// TestCheckpointDamageFallsBack: a checkpoint file that is missing,
// truncated, extended, with a byte flipped anywhere (header, keys,
// lists, leases, checksum), of another format version, another token or
// other metadata, or with a valid checksum over bad contents (keys out
// of order, a lease on a deleted key, an unknown lease, an invalid list)
// is not loaded: Open rebuilds from the revisions and serves the right
// contents, and says why. (Seen to fail, loading damage, with the
// checksum comparison removed.)
func TestCheckpointDamageFallsBack(t *testing.T) {
	// A store whose file has keys with leases and deleted keys.
	build := func(t *testing.T) (*engine.DB, *model, []byte) {
		db := openEngine(t, vfs.NewMem(), false)
		t.Cleanup(func() { _ = db.Close() })
		s := openStore(t, db, Options{})
		m := newModel()
		randomLeasedHistory(t, s, m, newOpGen(rand.New(rand.NewPCG(7, 7)), 12), 200)
		closeWithCheckpoint(t, s)
		return db, m, checkpointFile(t, db)
	}
	_, _, sample := build(t)
	body := checkpointHeaderLen
	damages := map[string]func(b []byte) []byte{
		"missing":           func([]byte) []byte { return nil },
		"empty":             func([]byte) []byte { return []byte{} },
		"header only":       func(b []byte) []byte { return b[:body] },
		"truncated by one":  func(b []byte) []byte { return b[:len(b)-1] },
		"truncated halfway": func(b []byte) []byte { return b[:len(b)/2] },
		"a byte appended":   func(b []byte) []byte { return append(b, 0) },
		"format version 2":  func(b []byte) []byte { b[11] = 2; return resum(b) },
		"another token":     func(b []byte) []byte { b[12] ^= 1; return resum(b) },
		"another revision":  func(b []byte) []byte { b[28+7]++; return resum(b) },
		"other metadata":    func(b []byte) []byte { b[36+7]++; return resum(b) },
		"one key less":      func(b []byte) []byte { b[body-1]--; return resum(b) },
		"keys out of order": func(b []byte) []byte {
			i := bytes.Index(b[body:], []byte("k0")) + body
			b[i+1] = 'z' // the first key now sorts after the second
			return resum(b)
		},
	}
	for i := 0; i < len(sample); i += max(1, len(sample)/40) {
		damages[fmt.Sprintf("byte %d flipped", i)] = func(b []byte) []byte { b[i] ^= 0x40; return b }
	}
	damages["last byte flipped"] = func(b []byte) []byte { b[len(b)-1] ^= 1; return b }
	for name, damage := range damages {
		t.Run(name, func(t *testing.T) {
			db, m, b := build(t)
			setCheckpointFile(t, db, damage(b))
			s := openStore(t, db, Options{})
			defer s.Close()
			requireSource(t, s, IndexRebuilt)
			if s.IndexOrigin().NotUsed == "" {
				t.Errorf("no reason given for not using the checkpoint")
			}
			checkAgainstModel(t, s, m, name)
		})
	}
}

// TestCheckpointLeaseChecks: a checkpoint with a valid checksum that
// attaches a key to a lease the engine does not hold, or a lease to a
// deleted key, is not loaded.
func TestCheckpointLeaseChecks(t *testing.T) {
	db := openEngine(t, vfs.NewMem(), false)
	defer db.Close()
	s := openStore(t, db, Options{})
	if err := s.GrantLease(5, 60); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Txn(TxnRequest{Success: []Op{{Type: OpPut, Key: []byte("a"), Value: []byte("1"), Lease: 5}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put([]byte("b"), []byte("2")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Delete([]byte("b")); err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct {
		key  string
		want string
	}{
		"unknown lease":   {"a", "not granted"},
		"deleted key":     {"b", "deleted key"},
		"right as it was": {"", ""},
	} {
		closeWithCheckpoint(t, s)
		b := checkpointFile(t, db)
		if c.key != "" {
			// "a" is first: its length, itself, its list's length
			// and list, its lease (5); "b" last: its lease (0) just
			// before the checksum.
			a := checkpointHeaderLen
			end := map[string]int{"a": a + 3 + int(b[a+2]), "b": len(b) - 5}[c.key]
			b[end] = 9
			setCheckpointFile(t, db, resum(b))
		}
		s = openStore(t, db, Options{})
		if c.key == "" {
			requireSource(t, s, IndexFromCheckpoint)
		} else if o := s.IndexOrigin(); o.Source != IndexRebuilt || !strings.Contains(o.NotUsed, c.want) {
			t.Errorf("%s: %s, want a rebuild because of %q", name, o, c.want)
		}
		if l, err := s.Lease(5); err != nil || len(l.Keys) != 1 || string(l.Keys[0]) != "a" {
			t.Errorf("%s: lease 5 = %v, %v", name, l, err)
		}
	}
	_ = s.Close()
}

// TestCheckpointNotWrittenMidCompaction: a compaction that could not
// finish (its later batches failed) leaves no checkpoint; the next Open
// rebuilds and finishes the compaction.
func TestCheckpointNotWrittenMidCompaction(t *testing.T) {
	db := openEngine(t, vfs.NewMem(), false)
	defer db.Close()
	fail := false
	s := openStore(t, db, Options{hooks: hooks{beforeCompactCommit: func(i int) error {
		if fail && i > 0 {
			return errInjected
		}
		return nil
	}}})
	m := newModel()
	randomLeasedHistory(t, s, m, newOpGen(rand.New(rand.NewPCG(testSeed(t), 1)), 8), 100)
	fail = true
	if err := s.Compact(m.rev - 1); !errors.Is(err, errInjected) {
		t.Fatalf("Compact: %v, want the injected error", err)
	}
	m.compacted = m.rev - 1
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if r := s.CheckpointAtClose(); r.Written || !strings.Contains(r.Skipped, "compaction") {
		t.Fatalf("Close: %s", r)
	}
	s = openStore(t, db, Options{})
	defer s.Close()
	requireSource(t, s, IndexRebuilt)
	checkAgainstModel(t, s, m, "reopened")
	checkCompactionFinished(t, s, db)
}

// TestCheckpointWriteErrorSweep fails the k-th file operation on the
// checkpoint file during Close, for k = 0, 1, ... until Close writes
// one: Close still closes, reports the error, leaves no token, and the
// next Open rebuilds the right index.
func TestCheckpointWriteErrorSweep(t *testing.T) {
	for k := int64(0); ; k++ {
		var armed atomic.Bool
		var n atomic.Int64
		inj := errorfs.InjectorFunc(func(op errorfs.Op) error {
			if armed.Load() && strings.Contains(op.Path, checkpointFileName) {
				if n.Add(1)-1 == k {
					return errorfs.ErrInjected
				}
			}
			return nil
		})
		db := openEngine(t, errorfs.Wrap(vfs.NewMem(), inj), true)
		s := openStore(t, db, Options{})
		m := newModel()
		randomLeasedHistory(t, s, m, newOpGen(rand.New(rand.NewPCG(3, uint64(k))), 8), 80)
		armed.Store(true)
		if err := s.Close(); err != nil {
			t.Fatalf("k=%d: Close: %v", k, err)
		}
		armed.Store(false)
		r := s.CheckpointAtClose()
		s = openStore(t, db, Options{})
		if r.Written {
			requireSource(t, s, IndexFromCheckpoint)
			checkAgainstModel(t, s, m, "written")
			_ = s.Close()
			_ = db.Close()
			if k < 4 {
				t.Fatalf("the checkpoint took only %d file operations", k)
			}
			t.Logf("failed each of the %d file operations of a checkpoint", k)
			return
		}
		if !strings.Contains(r.Skipped, errorfs.ErrInjected.Error()) {
			t.Fatalf("k=%d: Close: %s, want the injected error", k, r)
		}
		requireSource(t, s, IndexRebuilt)
		checkAgainstModel(t, s, m, fmt.Sprintf("k=%d", k))
		_ = s.Close()
		_ = db.Close()
	}
}

// TestCheckpointNeverTravels: a read-only engine loads the checkpoint and
// keeps it (nothing may change on it, so it stays true) and its Close
// writes none; a snapshot and a backup taken from it carry no token, so
// neither a store restored from the snapshot nor one loaded from the
// backup names a checkpoint, and their next Opens rebuild.
func TestCheckpointNeverTravels(t *testing.T) {
	mem := vfs.NewMem()
	db := openEngine(t, mem, false)
	s := openStore(t, db, Options{})
	m := newModel()
	randomLeasedHistory(t, s, m, newOpGen(rand.New(rand.NewPCG(testSeed(t), 1)), 8), 100)
	closeWithCheckpoint(t, s)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	ro, err := engine.Open(memConfig(false), engine.Options{FS: mem, ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	for range 2 {
		s = openStore(t, ro, Options{})
		requireSource(t, s, IndexFromCheckpoint)
		checkAgainstModel(t, s, m, "read-only")
		var snap, backup bytes.Buffer
		if _, err := s.WriteSnapshot(&snap); err != nil {
			t.Fatal(err)
		}
		if err := s.WriteBackup(&backup); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if r := s.CheckpointAtClose(); r.Written {
			t.Fatalf("read-only Close: %s", r)
		}
		if bytes.Contains(snap.Bytes(), metaCheckpointToken) || bytes.Contains(backup.Bytes(), metaCheckpointToken) {
			t.Fatal("the snapshot or backup holds the checkpoint token")
		}

		other, odb := newMemStore(t, Options{})
		if err := other.RestoreSnapshot(bytes.NewReader(snap.Bytes())); err != nil {
			t.Fatal(err)
		}
		requireSource(t, other, IndexFromSnapshot)
		if _, err := odb.Get(metaCheckpointToken); !errors.Is(err, engine.ErrNotFound) {
			t.Fatalf("restored snapshot: token %v", err)
		}
		ldb := openEngine(t, vfs.NewMem(), false)
		sec, err := CheckBackup(bytes.NewReader(backup.Bytes()), int64(backup.Len()), nil)
		if err != nil {
			t.Fatal(err)
		}
		loaded, err := LoadBackup(ldb, sec, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ldb.Get(metaCheckpointToken); !errors.Is(err, engine.ErrNotFound) {
			t.Fatalf("loaded backup: token %v", err)
		}
		requireSource(t, loaded, IndexRebuilt)
		if err := loaded.Close(); err != nil {
			t.Fatal(err)
		}
		_ = ldb.Close()
	}
}

// FuzzCheckpointFile loads arbitrary checkpoint files (their checksum
// made right, so the decoder behind it is reached) for a store's token
// and metadata: each is refused or loaded into an index whose every key
// answers History and Get; none panics.
func FuzzCheckpointFile(f *testing.F) {
	db := openEngine(f, vfs.NewMem(), false)
	defer db.Close()
	s := openStore(f, db, Options{})
	if err := s.GrantLease(3, 60); err != nil {
		f.Fatal(err)
	}
	if _, err := s.Txn(TxnRequest{Success: []Op{{Type: OpPut, Key: []byte("a"), Value: []byte("1"), Lease: 3}}}); err != nil {
		f.Fatal(err)
	}
	for _, k := range []string{"b", "c", "b"} {
		if _, err := s.Put([]byte(k), []byte("v")); err != nil {
			f.Fatal(err)
		}
	}
	if _, _, err := s.Delete([]byte("c")); err != nil {
		f.Fatal(err)
	}
	if err := s.Close(); err != nil {
		f.Fatal(err)
	}
	token, err := db.Get(metaCheckpointToken)
	if err != nil {
		f.Fatal(err)
	}
	m, err := s.readStoreMeta()
	if err != nil {
		f.Fatal(err)
	}
	fs, path := checkpointPath(db)
	file, err := fs.Open(path)
	if err != nil {
		f.Fatal(err)
	}
	seed, err := io.ReadAll(file)
	_ = file.Close()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seed)
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) >= 4 {
			b = resum(b)
		}
		w, err := fs.Create(path, vfs.WriteCategoryUnspecified)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write(bytes.Clone(b)); err != nil { // (a MemFS may scribble on it)
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		ck, err := loadCheckpoint(db, token, m)
		if err != nil {
			return
		}
		if err := ck.ix.Export(func(key, _ []byte) error {
			ck.ix.History(key, func(keyindex.Revision, bool) {})
			ck.ix.Get(key, ck.rev)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	})
}
