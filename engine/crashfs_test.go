package engine

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stratadb/strata/config"
)

// TestSyncSurvivesPowerLoss writes with sync = true on a crashable in-memory
// file system, takes a crash clone (only what was synced survives, as after
// a power cut) at several points, and checks every acknowledged write is in
// the clone. It proves sync = true really reaches stable storage.
func TestSyncSurvivesPowerLoss(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 2))
	for round := range 4 {
		mem := vfs.NewCrashableMem()
		cfg := testConfig(t)
		cfg.DBPath = "/db"
		cfg.WALDir = "/wal"
		cfg.Sync = true
		cfg.MemtableSizeMB = 1
		db, err := Open(cfg, Options{FS: mem})
		if err != nil {
			t.Fatal(err)
		}
		n := 50 + r.IntN(400)
		for i := range n {
			if err := db.Put(key(i), doc(i, 300)); err != nil {
				t.Fatal(err)
			}
		}
		crashed := mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 50, RNG: rand.New(rand.NewPCG(seed, uint64(round)))})
		_ = db.Close()

		db2, err := Open(cfg, Options{FS: crashed})
		if err != nil {
			t.Fatalf("round %d: reopen crash clone: %v", round, err)
		}
		for i := range n {
			v, err := db2.Get(key(i))
			if err != nil || !bytes.Equal(v, doc(i, 300)) {
				t.Fatalf("round %d: acknowledged synced write %d of %d lost: %v", round, i, n, err)
			}
		}
		_ = db2.Close()
	}
}

// TestNoSyncCanLoseOnPowerLoss shows the other side: with sync = false a
// crash clone that drops unsynced data loses recent writes, so the test
// above cannot pass by accident.
func TestNoSyncCanLoseOnPowerLoss(t *testing.T) {
	mem, cfg, db := openNoSyncCrashable(t)
	for i := range 200 {
		_ = db.Put(key(i), doc(i, 300))
	}
	crashed := mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
	_ = db.Close()
	db2, err := Open(cfg, Options{FS: crashed})
	if err != nil {
		t.Fatal(err)
	}
	defer db2.Close()
	lost := 0
	for i := range 200 {
		if _, err := db2.Get(key(i)); err != nil {
			lost++
		}
	}
	if lost == 0 {
		t.Fatal("sync = false lost nothing after dropping unsynced data; the crash FS does not model loss")
	}
}

// openNoSyncCrashable opens a database with sync = false on a crashable
// in-memory file system, for a test that clones it as a crash would.
func openNoSyncCrashable(t *testing.T) (*vfs.MemFS, *config.Config, *DB) {
	t.Helper()
	mem := vfs.NewCrashableMem()
	cfg := testConfig(t)
	cfg.DBPath = "/db"
	cfg.Sync = false
	db, err := Open(cfg, Options{FS: mem})
	if err != nil {
		t.Fatal(err)
	}
	return mem, cfg, db
}

// TestCommitSyncNoWaitIsDurable: with sync = false, a batch committed
// with CommitSyncNoWait survives a crash that drops every unsynced byte
// once SyncWait returns, and so do the writes committed before it.
func TestCommitSyncNoWaitIsDurable(t *testing.T) {
	mem, cfg, db := openNoSyncCrashable(t)
	for i := range 200 {
		mustPut(t, db, key(i), doc(i, 300))
	}
	b := db.NewBatch()
	if err := b.Put(key(200), doc(200, 300)); err != nil {
		t.Fatal(err)
	}
	if err := b.CommitSyncNoWait(); err != nil {
		t.Fatal(err)
	}
	if err := b.SyncWait(); err != nil {
		t.Fatal(err)
	}
	b.Close()
	crashed := mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
	_ = db.Close()
	db2, err := Open(cfg, Options{FS: crashed})
	if err != nil {
		t.Fatal(err)
	}
	defer db2.Close()
	for i := range 201 {
		if v, err := db2.Get(key(i)); err != nil || !bytes.Equal(v, doc(i, 300)) {
			t.Fatalf("write %d of 201 lost after CommitSyncNoWait and SyncWait: %v", i, err)
		}
	}
}

// TestCommitSyncWithoutWAL: with the WAL disabled (a cluster member's
// store, whose record is the raft log), CommitSync and CommitSyncNoWait
// still commit, and the batch and the writes before it survive a crash
// that drops every unsynced byte: they are flushed to tables. Pebble
// refuses a synced commit without a WAL, so without the flush both fail.
func TestCommitSyncWithoutWAL(t *testing.T) {
	for _, name := range []string{"CommitSync", "CommitSyncNoWait"} {
		t.Run(name, func(t *testing.T) {
			mem := vfs.NewCrashableMem()
			cfg := testConfig(t)
			cfg.DBPath = "/db"
			cfg.Sync, cfg.EnableWAL = false, false
			db, err := Open(cfg, Options{FS: mem})
			if err != nil {
				t.Fatal(err)
			}
			for i := range 200 {
				mustPut(t, db, key(i), doc(i, 300))
			}
			b := db.NewBatch()
			if err := b.Put(key(200), doc(200, 300)); err != nil {
				t.Fatal(err)
			}
			if name == "CommitSync" {
				err = b.CommitSync()
			} else if err = b.CommitSyncNoWait(); err == nil {
				err = b.SyncWait()
			}
			if err != nil {
				t.Fatalf("%s without a WAL: %v", name, err)
			}
			b.Close()
			crashed := mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
			_ = db.Close()
			db2, err := Open(cfg, Options{FS: crashed})
			if err != nil {
				t.Fatal(err)
			}
			defer db2.Close()
			for i := range 201 {
				if v, err := db2.Get(key(i)); err != nil || !bytes.Equal(v, doc(i, 300)) {
					t.Fatalf("write %d of 201 lost after %s without a WAL: %v", i, name, err)
				}
			}
		})
	}
}
