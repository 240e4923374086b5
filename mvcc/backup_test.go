package mvcc

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"slices"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// historyStore returns a store with history, a lease with a key, a
// deletion and a compaction.
func historyStore(t *testing.T) *Store {
	t.Helper()
	src, _ := newMemStore(t, Options{})
	if err := src.GrantLease(7, 60); err != nil {
		t.Fatal(err)
	}
	for i := range 50 {
		if _, err := src.Put(fmt.Appendf(nil, "k%02d", i%20), fmt.Appendf(nil, "v%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	leased := PutOp([]byte("leased"), []byte("x"))
	leased.Lease = 7
	for _, op := range []Op{leased, DeleteOp([]byte("k03"), nil), DeleteOp([]byte("k1"), []byte("k2"))} {
		if _, err := src.Txn(TxnRequest{Success: []Op{op}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := src.Compact(10); err != nil {
		t.Fatal(err)
	}
	if _, err := src.Put([]byte("k1"), []byte("again")); err != nil {
		t.Fatal(err)
	}
	return src
}

// requireSameStore checks that got answers as want: the revision, the
// compaction, the leases with their keys, and every key with lease at
// every revision from the compaction on.
func requireSameStore(t *testing.T, want, got *Store) {
	t.Helper()
	if got.Rev() != want.Rev() || got.CompactRev() != want.CompactRev() {
		t.Fatalf("revision %d compacted at %d, want %d compacted at %d", got.Rev(), got.CompactRev(), want.Rev(), want.CompactRev())
	}
	if g, w := fmt.Sprint(got.Leases()), fmt.Sprint(want.Leases()); g != w {
		t.Errorf("leases %s, want %s", g, w)
	}
	for rev := want.CompactRev(); rev <= want.Rev(); rev++ {
		w, err := want.Range([]byte{0}, []byte{0}, RangeOptions{Rev: rev})
		if err != nil {
			t.Fatal(err)
		}
		g, err := got.Range([]byte{0}, []byte{0}, RangeOptions{Rev: rev})
		if err != nil {
			t.Fatalf("at revision %d: %v", rev, err)
		}
		if fmt.Sprint(g.KVs) != fmt.Sprint(w.KVs) {
			t.Fatalf("at revision %d: %s, want %s", rev, fmtKVs(g.KVs), fmtKVs(w.KVs))
		}
	}
	if want.CompactRev() > 1 {
		if _, err := got.Range([]byte("k"), []byte("l"), RangeOptions{Rev: want.CompactRev() - 1}); !errors.Is(err, ErrCompacted) {
			t.Errorf("below the compaction: %v, want ErrCompacted", err)
		}
	}
}

// TestBackupRestore writes a backup of a store with history, leases and a
// compaction, checks it, and restores it both ways (LoadBackup into an
// empty database, RestoreSnapshot over a store): the same answers at every
// revision. A flipped byte or a cut-off end is refused before anything is
// restored.
func TestBackupRestore(t *testing.T) {
	src := historyStore(t)
	var b bytes.Buffer
	if err := src.WriteBackup(&b); err != nil {
		t.Fatal(err)
	}
	backup := b.Bytes()
	if len(backup)%512 != 32 {
		t.Errorf("a backup of %d bytes: etcdctl wants a multiple of 512 plus the 32-byte SHA-256", len(backup))
	}
	if !HasBackupHeader(backup) {
		t.Errorf("a backup starts %q, not with its header", backup[:16])
	}

	flipped := bytes.Clone(backup)
	flipped[len(flipped)/2] ^= 1
	for name, bad := range map[string][]byte{"a flipped byte": flipped, "a cut-off end": backup[:len(backup)-1]} {
		if _, err := CheckBackup(bytes.NewReader(bad), int64(len(bad)), nil); !errors.Is(err, ErrBackupChecksum) {
			t.Errorf("%s: CheckBackup = %v, want ErrBackupChecksum", name, err)
		}
	}
	if _, err := CheckBackup(bytes.NewReader(nil), 0, nil); !errors.Is(err, ErrNotBackup) {
		t.Errorf("an empty file: CheckBackup = %v, want ErrNotBackup", err)
	}

	snap, err := CheckBackup(bytes.NewReader(backup), int64(len(backup)), nil)
	if err != nil {
		t.Fatal(err)
	}
	db := openEngine(t, vfs.NewMem(), false)
	loaded, err := LoadBackup(db, snap, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer loaded.Close()
	requireSameStore(t, src, loaded)

	snap, _ = CheckBackup(bytes.NewReader(backup), int64(len(backup)), nil)
	dst, _ := newMemStore(t, Options{})
	if err := dst.RestoreSnapshot(snap); err != nil {
		t.Fatal(err)
	}
	requireSameStore(t, src, dst)
}

// TestBackupUnversioned restores a backup written before backups had a
// header (testdata/backup-unversioned.snap, written by that version: 30
// puts over 10 keys, lease 7 holding "leased", k03 deleted, compacted at
// 12, revision 33), and an empty store's.
func TestBackupUnversioned(t *testing.T) {
	old, err := os.ReadFile("testdata/backup-unversioned.snap")
	if err != nil {
		t.Fatal(err)
	}
	snap, err := CheckBackup(bytes.NewReader(old), int64(len(old)), nil)
	if err != nil {
		t.Fatal(err)
	}
	s, err := LoadBackup(openEngine(t, vfs.NewMem(), false), snap, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got, err := s.Range([]byte("k"), []byte("l"), RangeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	l, err := s.Lease(7)
	if s.Rev() != 33 || s.CompactRev() != 12 || got.Count != 9 || err != nil || len(l.Keys) != 1 || string(l.Keys[0]) != "leased" {
		t.Errorf("revision %d compacted at %d, %d keys, lease 7 %+v %v; want 33, 12, 9 keys, lease 7 holding leased", s.Rev(), s.CompactRev(), got.Count, l, err)
	}
	if old, err := s.Range([]byte("k03"), nil, RangeOptions{Rev: 20}); err != nil || len(old.KVs) != 1 || string(old.KVs[0].Value) != "v13" {
		t.Errorf("k03 at revision 20: %+v %v, want v13", old, err)
	}

	// An empty store's unversioned backup: its end marker, padding, SHA-256.
	unversioned := withChecksum(make([]byte, 512))
	if _, err := CheckBackup(bytes.NewReader(unversioned), int64(len(unversioned)), nil); err != nil {
		t.Errorf("an empty store's unversioned backup: %v", err)
	}
}

// withChecksum appends the SHA-256 of body, as a backup (or an etcd
// snapshot) ends.
func withChecksum(body []byte) []byte {
	h := sha256Sum(body)
	return append(slices.Clip(body), h[:]...)
}

// TestBackupRefusesOtherFiles: files with a valid trailing SHA-256 that
// are not Strata backups (a bbolt file, as etcd's snapshot is, text, a
// later format version) are ErrNotBackup, naming what they start with.
func TestBackupRefusesOtherFiles(t *testing.T) {
	bolt := make([]byte, 16384)
	copy(bolt[16:], []byte{0xed, 0xda, 0x0c, 0xed}) // bbolt's magic, little-endian
	later := append([]byte(backupMagic), 0, 9)
	later = append(later, make([]byte, 512-len(later))...)
	for name, body := range map[string][]byte{
		"a bbolt file":       bolt,
		"text":               append([]byte("hello, world\n"), make([]byte, 499)...),
		"a later version":    later,
		"zeros past a block": make([]byte, 1024),
	} {
		file := withChecksum(body)
		_, err := CheckBackup(bytes.NewReader(file), int64(len(file)), nil)
		if !errors.Is(err, ErrNotBackup) {
			t.Errorf("%s: %v, want ErrNotBackup", name, err)
		}
		t.Logf("%s: %v", name, err)
	}
}

// TestLoadIncomplete: a load that stops before Finish (a restore killed
// halfway) leaves a database Open refuses (seen to fail with the marker
// check removed from Open: the partial store opened at revision 9).
func TestLoadIncomplete(t *testing.T) {
	fs := vfs.NewMem()
	db := openEngine(t, fs, true)
	l, err := NewLoader(db)
	if err != nil {
		t.Fatal(err)
	}
	for i := range int64(8) {
		if err := l.Put(Version{KV: KeyValue{Key: fmt.Appendf(nil, "k%d", i), Value: []byte("v"), CreateRevision: i + 2, ModRevision: i + 2, Version: 1}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.commit(); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(db, Options{}); !errors.Is(err, ErrIncompleteLoad) {
		t.Errorf("Open of an unfinished load: %v, want ErrIncompleteLoad", err)
	}
	if _, err := NewLoader(db); err == nil {
		t.Error("a second load into a database that holds data: no error")
	}
	s, err := l.Finish(History{Rev: 9, CompactScheduled: -1, CompactFinished: -1}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	_ = s.Close()
	s, err = Open(db, Options{})
	if err != nil || s.Rev() != 9 {
		t.Fatalf("after Finish: %v", err)
	}
	_ = s.Close()
}

// TestLoadRefusesBadHistory: versions out of order, inconsistent fields
// and a key on a lease that was not loaded are refused.
func TestLoadRefusesBadHistory(t *testing.T) {
	put := func(key string, create, mod, version, lease int64) Version {
		return Version{KV: KeyValue{Key: []byte(key), Value: []byte("v"), CreateRevision: create, ModRevision: mod, Version: version, Lease: lease}}
	}
	for name, tc := range map[string]struct {
		versions []Version
		finish   bool
	}{
		"out of order":       {versions: []Version{put("a", 3, 3, 1, 0), put("b", 2, 2, 1, 0)}},
		"same revision":      {versions: []Version{put("a", 2, 2, 1, 0), put("b", 2, 2, 1, 0)}},
		"create after mod":   {versions: []Version{put("a", 4, 3, 1, 0)}},
		"version 0":          {versions: []Version{put("a", 2, 2, 0, 0)}},
		"tombstone value":    {versions: []Version{{KV: KeyValue{Key: []byte("a"), Value: []byte("v"), ModRevision: 2}, Tombstone: true}}},
		"empty key":          {versions: []Version{put("", 2, 2, 1, 0)}},
		"lease never loaded": {versions: []Version{put("a", 2, 2, 1, 5)}, finish: true},
	} {
		l, err := NewLoader(openEngine(t, vfs.NewMem(), false))
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range tc.versions {
			if err = l.Put(v); err != nil {
				break
			}
		}
		if err == nil && tc.finish {
			var s *Store
			if s, err = l.Finish(History{Rev: 10, CompactScheduled: -1, CompactFinished: -1}, Options{}); err == nil {
				_ = s.Close()
			}
		}
		if err == nil {
			t.Errorf("%s: no error", name)
		}
		t.Logf("%s: %v", name, err)
	}
}

// TestExportLoad: what Export reads, loaded through a Loader, answers as
// the original at every revision, leases and compaction included, and
// opens from index records.
func TestExportLoad(t *testing.T) {
	src := historyStore(t)
	l, err := NewLoader(openEngine(t, vfs.NewMem(), false))
	if err != nil {
		t.Fatal(err)
	}
	var versions []Version
	exp, err := src.Export(func(v Version) error {
		versions = append(versions, Version{KV: KeyValue{Key: bytes.Clone(v.KV.Key), Value: bytes.Clone(v.KV.Value), CreateRevision: v.KV.CreateRevision, ModRevision: v.KV.ModRevision, Version: v.KV.Version, Lease: v.KV.Lease}, Sub: v.Sub, Tombstone: v.Tombstone})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if exp.Rev != src.Rev() || exp.CompactScheduled != src.CompactRev() || len(exp.Leases) != 1 {
		t.Fatalf("exported %+v", exp)
	}
	for _, ls := range exp.Leases {
		if err := l.Lease(ls.ID, ls.TTL); err != nil {
			t.Fatal(err)
		}
	}
	for _, v := range versions {
		if err := l.Put(v); err != nil {
			t.Fatal(err)
		}
	}
	dst, err := l.Finish(exp.History, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Close()
	requireSameStore(t, src, dst)
	checkRevisionKeys(t, dst.db, 0) // every version loaded has its index record
}

func sha256Sum(b []byte) [32]byte { return sha256.Sum256(b) }

// TestLoadBackupDropsAppliedIndex: a backup of a cluster member's store
// records the member's applied log index; the database a restore makes
// starts a log of its own, so the index is not loaded (a cluster member
// with an applied index and an empty raft log refuses to start).
func TestLoadBackupDropsAppliedIndex(t *testing.T) {
	src, _ := newMemStore(t, Options{})
	if _, err := src.Entry(41).Txn(TxnRequest{Success: []Op{PutOp([]byte("k"), []byte("v"))}}); err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := src.WriteBackup(&b); err != nil {
		t.Fatal(err)
	}
	snap, err := CheckBackup(bytes.NewReader(b.Bytes()), int64(b.Len()), nil)
	if err != nil {
		t.Fatal(err)
	}
	s, err := LoadBackup(openEngine(t, vfs.NewMem(), false), snap, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if src.AppliedIndex() != 41 || s.AppliedIndex() != 0 || s.Rev() != src.Rev() {
		t.Errorf("applied index %d restored as %d (revision %d, want %d); want 41 and 0", src.AppliedIndex(), s.AppliedIndex(), s.Rev(), src.Rev())
	}
}
