package engine

import (
	"bytes"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stratadb/strata/internal/pebbleconf"
)

// TestCompactAllAppliesLevelCodecs is the case the issue names: data first
// flushed as a single lz4 (MinLZ) table must end in L6 as zstd, although
// Pebble would merely move that lone table down.
func TestCompactAllAppliesLevelCodecs(t *testing.T) {
	for _, tc := range []struct {
		levels, bottom string
		wantL0, wantL6 string
	}{
		{"lz4", "zstd", "MinLZ", "ZSTD"},
		{"snappy", "zstd", "Snappy", "ZSTD"},
		{"zstd", "none", "ZSTD", "NoCompression"},
		{"none", "zstd:7", "NoCompression", "ZSTD7"},
	} {
		t.Run(tc.levels+"/"+tc.bottom, func(t *testing.T) {
			cfg := testConfig(t)
			cfg.CompressionDefault, cfg.CompressionBottommost = tc.levels, tc.bottom
			db := mustOpen(t, cfg)
			defer db.Close()
			const n = 3000
			for i := range n {
				if err := db.Put(key(i), doc(i, 1000)); err != nil {
					t.Fatal(err)
				}
			}
			if err := db.Flush(); err != nil {
				t.Fatal(err)
			}
			tables, _ := db.Tables()
			if len(tables) != 1 || tables[0].Level != 0 || tables[0].Codec != tc.wantL0 {
				t.Fatalf("after flush: %+v, want one L0 table carrying %s", tables, tc.wantL0)
			}
			if err := db.CompactAll(); err != nil {
				t.Fatal(err)
			}
			tables, _ = db.Tables()
			if len(tables) == 0 {
				t.Fatal("no tables after CompactAll")
			}
			for _, tb := range tables {
				if tb.Level != 6 || tb.Codec != tc.wantL6 {
					t.Errorf("table %d: L%d %s, want L6 %s", tb.FileNum, tb.Level, tb.Codec, tc.wantL6)
				}
			}
			for i := range n {
				v, err := db.Get(key(i))
				if err != nil || !bytes.Equal(v, doc(i, 1000)) {
					t.Fatalf("key %d after CompactAll: %v", i, err)
				}
			}
			m, _ := db.Metrics()
			if m.Levels[6].TableCodecs[tc.wantL6] != len(tables) {
				t.Errorf("Metrics L6 codecs %v", m.Levels[6].TableCodecs)
			}
			if tc.wantL0 != tc.wantL6 && m.Rewrites.Tables == 0 {
				t.Error("no rewrite counted")
			}
		})
	}
}

// TestCompactAllDuringWrites checks that writes racing a codec rewrite are
// neither lost nor resurrected: the rewrite holds writes back while it
// replaces a span.
func TestCompactAllDuringWrites(t *testing.T) {
	cfg := testConfig(t)
	db := mustOpen(t, cfg)
	defer db.Close()
	const n = 4000
	for i := range n {
		_ = db.Put(key(i), doc(i, 500))
	}
	_ = db.Flush()

	var written atomic.Int64
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			k := key(i % n)
			if err := db.Put(k, append([]byte("v2:"), k...)); err != nil {
				t.Error(err)
				return
			}
			if i%n == 0 && i > 0 {
				_ = db.Delete(key(1)) // keep a tombstone in the mix
			}
			written.Store(int64(i + 1))
		}
	}()
	for range 3 {
		if err := db.CompactAll(); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
	w := int(written.Load())
	if w == 0 {
		t.Skip("writer made no progress")
	}
	for i := range n {
		k := key(i)
		v, err := db.Get(k)
		rewritten := i < w || w >= n
		switch {
		case i == 1 && w > n:
			// Deleted at some point, maybe rewritten after: either is fine.
		case rewritten && (err != nil || !bytes.Equal(v, append([]byte("v2:"), k...))):
			t.Fatalf("key %d: %q, %v; want the racing write", i, v, err)
		case !rewritten && (err != nil || !bytes.Equal(v, doc(i, 500))):
			t.Fatalf("key %d: %v; want the original", i, err)
		}
	}
}

// TestCompactAllBesideSnapshot checks that a snapshot neither blocks nor is
// blocked by a rewrite, and reads the same before and after it.
func TestCompactAllBesideSnapshot(t *testing.T) {
	db := mustOpen(t, testConfig(t))
	defer db.Close()
	for i := range 1000 {
		mustPut(t, db, key(i), doc(i, 300))
	}
	if err := db.Flush(); err != nil { // one lz4 L0 table, which a compaction merely moves
		t.Fatal(err)
	}
	snap, err := db.NewSnapshot()
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Close()
	if err := db.CompactAll(); err != nil {
		t.Fatalf("CompactAll with a snapshot open: %v", err)
	}
	mustPut(t, db, key(5), []byte("new"))
	if v, err := snap.Get(key(5)); err != nil || !bytes.Equal(v, doc(5, 300)) {
		t.Fatalf("snapshot Get(5) after the rewrite = %q, %v", v, err)
	}
	it, err := snap.NewIter(nil)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for ok := it.First(); ok; ok = it.Next() {
		if !bytes.Equal(it.Value(), doc(n, 300)) {
			t.Fatalf("snapshot iterator at %q: wrong value", it.Key())
		}
		n++
	}
	if err := it.Close(); err != nil || n != 1000 {
		t.Fatalf("snapshot iterator saw %d keys, %v", n, err)
	}
	m, _ := db.Metrics()
	if m.Rewrites.Tables == 0 {
		t.Fatalf("no rewrite happened beside the snapshot: %+v", m.Rewrites)
	}
	tables, _ := db.Tables()
	for _, tb := range tables {
		if tb.Level == 6 && tb.Codec != "ZSTD" {
			t.Errorf("table %d L%d %s after CompactAll", tb.FileNum, tb.Level, tb.Codec)
		}
	}
	if v, _ := db.Get(key(5)); string(v) != "new" {
		t.Errorf("Get(5) = %q", v)
	}
}

func mustPut(t testing.TB, db *DB, k, v []byte) {
	t.Helper()
	if err := db.Put(k, v); err != nil {
		t.Fatal(err)
	}
}

func TestCompactRange(t *testing.T) {
	db := mustOpen(t, testConfig(t))
	defer db.Close()
	for i := range 500 {
		_ = db.Put(key(i), doc(i, 300))
	}
	if err := db.Compact(key(0), key(500)); err != nil {
		t.Fatal(err)
	}
	if err := db.Compact(key(5), key(5)); !errors.Is(err, ErrInvalidRange) {
		t.Errorf("empty range: %v", err)
	}
	if err := db.CompactAll(); err != nil { // nothing left to do
		t.Fatal(err)
	}
	empty := mustOpen(t, testConfig(t))
	defer empty.Close()
	if err := empty.CompactAll(); err != nil {
		t.Errorf("CompactAll on an empty database: %v", err)
	}
}

// TestCompactAllLeavesOnlyTheBottom writes a store deep enough for the
// engine's own compactions to be running when CompactAll starts: when it
// returns, every table is in the bottommost level, as after RocksDB's
// CompactRange with bottommost_level_compaction = kForce, and so carries the
// bottommost codec. Pebble's manual compaction walks the levels once, from
// the top, and leaves in a middle level what its background compactions
// put there after the walk passed it (2 GB of 2 KB documents kept a fifth
// of their bytes in L5, in lz4).
func TestCompactAllLeavesOnlyTheBottom(t *testing.T) {
	cfg := testConfig(t)
	cfg.MemtableSizeMB = 1
	cfg.TargetFileSizeBaseMB = 1
	cfg.MaxBytesForLevelBaseMB = 2
	db := mustOpen(t, cfg)
	defer db.Close()
	const n, size = 20000, 2000
	for i := range n {
		if err := db.Put(key(i), doc(i, size)); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.CompactAll(); err != nil {
		t.Fatal(err)
	}
	tables, err := db.Tables()
	if err != nil {
		t.Fatal(err)
	}
	for _, tb := range tables {
		if tb.Level != 6 || tb.Codec != "ZSTD" {
			t.Errorf("table %d: L%d %s after CompactAll, want L6 ZSTD", tb.FileNum, tb.Level, tb.Codec)
		}
	}
	for i := 0; i < n; i += 97 {
		if v, err := db.Get(key(i)); err != nil || !bytes.Equal(v, doc(i, size)) {
			t.Fatalf("key %d after CompactAll: %v", i, err)
		}
	}
}

// TestCompactPacing: a compaction its caller waits for (CompactAll,
// Compact) runs unpaced; CompactBackground's rests, as the engine's own
// compactions do while it keeps up.
func TestCompactPacing(t *testing.T) {
	db := mustOpen(t, testConfig(t))
	defer db.Close()
	// Each round overwrites what the one before compacted, in one L0
	// table: the compaction merges the two.
	round := 0
	overwrite := func() {
		round++
		for i := range 20_000 {
			if err := db.Put(key(i), doc(i+round, 100)); err != nil {
				t.Fatal(err)
			}
		}
		if err := db.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	overwrite()
	if err := db.CompactAll(); err != nil { // the first round to the bottom
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		compact func() error
		paced   bool
	}{
		{"CompactAll", db.CompactAll, false},
		{"Compact", func() error { return db.Compact(key(0), key(20_000)) }, false},
		{"CompactBackground", func() error { return db.CompactBackground(t.Context(), key(0), key(20_000)) }, true},
	} {
		overwrite()
		// The flushes' own compactions end first, so that every rest
		// counted below is the call's.
		for quiet := 0; quiet < 2; {
			if db.pdb.Metrics().Compact.NumInProgress == 0 {
				quiet++
			} else {
				quiet = 0
			}
			time.Sleep(20 * time.Millisecond)
		}
		before := pebbleconf.Rests(db.popts)
		if err := tc.compact(); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if rested := pebbleconf.Rests(db.popts) > before; rested != tc.paced {
			t.Errorf("%s: its compactions rested %v, want %v", tc.name, rested, tc.paced)
		}
	}
}
