package engine

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// TestCompactAllKeepsRacingWrites is the proof that a codec rewrite loses no
// write: writers put a value never written before (writer, sequence) into
// random keys over the whole key space while CompactAll rewrites every table
// chunk by chunk, and afterwards every key holds exactly the last value
// acknowledged for it. Each key belongs to one writer, so "last
// acknowledged" is well defined. The test also checks that rewrites really
// ran and that some raced a write (retries or gates), so it exercises the
// write guard rather than passing beside it.
func TestCompactAllKeepsRacingWrites(t *testing.T) {
	for _, chunksOnly := range []bool{false, true} {
		t.Run(fmt.Sprintf("chunks-only=%v", chunksOnly), func(t *testing.T) { testCompactAllKeepsRacingWrites(t, chunksOnly) })
	}
}

// testCompactAllKeepsRacingWrites races writers against CompactAll; with
// chunksOnly every table is rewritten chunk by chunk under the write guard
// (the path that excises, whose protection this proves), else first by
// Pebble's own compaction (touchAndCompact).
func testCompactAllKeepsRacingWrites(t *testing.T, chunksOnly bool) {
	const writers = 2
	n, rounds := 8000, 3
	if testing.Short() {
		n, rounds = 3000, 1
	}
	var retries, gated int64
	for round := range rounds {
		// A fresh database each round: one lz4 L0 table of 5.6 MB (several
		// chunks), which Pebble's compaction moves to L6 unchanged.
		db := mustOpen(t, testConfig(t))
		defer db.Close()
		db.testChunksOnly = chunksOnly
		for i := range n {
			mustPut(t, db, key(i), doc(i, 700))
		}
		if err := db.Flush(); err != nil {
			t.Fatal(err)
		}
		last := make([][]byte, n) // last acknowledged value per key
		var stop atomic.Bool
		var wg sync.WaitGroup
		var acked atomic.Int64
		writer := func(w int) {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(round), uint64(w)))
			for seq := 0; !stop.Load(); seq++ {
				i := r.IntN(n/writers)*writers + w // keys of writer w
				v := []byte(fmt.Sprintf("round %d writer %d seq %d", round, w, seq))
				if err := db.Put(key(i), v); err != nil {
					t.Error(err)
					return
				}
				last[i] = v
				acked.Add(1)
			}
		}
		// The writers start once Pebble's compaction has moved the table
		// down (had they written before, Pebble would have merged their
		// flushed writes with the table and rewritten it itself).
		db.testBeforeRewrite = func() {
			for w := range writers {
				wg.Add(1)
				go writer(w)
			}
			for acked.Load() < 100 {
				time.Sleep(time.Millisecond)
			}
		}
		before, _ := db.Metrics()
		err := db.CompactAll()
		stop.Store(true)
		wg.Wait()
		if err != nil {
			t.Fatalf("round %d: CompactAll: %v", round, err)
		}
		after, _ := db.Metrics()
		if after.Rewrites.Tables == before.Rewrites.Tables {
			t.Fatalf("round %d: CompactAll rewrote nothing (%+v)", round, after.Rewrites)
		}
		tables, _ := db.Tables()
		for _, tb := range tables {
			if tb.Level == 6 && tb.Codec != "ZSTD" && tb.FileNum <= uint64(n) {
				t.Logf("round %d: L6 table %d still %s", round, tb.FileNum, tb.Codec)
			}
		}
		t.Logf("round %d: %d writes raced CompactAll; rewrites so far %+v", round, acked.Load(), after.Rewrites)
		for i := range n {
			want := last[i]
			if want == nil {
				want = doc(i, 700)
			}
			v, err := db.Get(key(i))
			if err != nil || !bytes.Equal(v, want) {
				t.Fatalf("round %d: key %d = %.40q, %v; want the last acknowledged %.40q", round, i, v, err, want)
			}
		}
		retries, gated = retries+after.Rewrites.Retries, gated+after.Rewrites.Gated
	}
	if chunksOnly && retries+gated == 0 {
		t.Errorf("no chunk ever raced a write: the test did not exercise the guard")
	}
}

// TestCompactAllReclaimsDeletedData checks that CompactAll takes its range
// from the tables, not from the live keys: a database whose keys are all
// deleted shrinks to (almost) nothing, and dead data before the first and
// after the last live key is reclaimed too.
func TestCompactAllReclaimsDeletedData(t *testing.T) {
	// Pebble's background compactions reclaim deleted data by themselves
	// in time; with them off only CompactAll's range decides.
	testPebbleOptions = func(o *pebble.Options) { o.DisableAutomaticCompactions = true }
	defer func() { testPebbleOptions = nil }()
	tableBytes := func(db *DB) int64 {
		m, err := db.Metrics()
		if err != nil {
			t.Fatal(err)
		}
		var sum int64
		for _, l := range m.Levels {
			sum += l.Bytes
		}
		return sum
	}
	fill := func(db *DB, n int) {
		for i := range n {
			mustPut(t, db, key(i), doc(i, 1000))
		}
		if err := db.CompactAll(); err != nil {
			t.Fatal(err)
		}
	}
	t.Run("all deleted", func(t *testing.T) {
		db := mustOpen(t, testConfig(t))
		defer db.Close()
		fill(db, 4000)
		full := tableBytes(db)
		for i := range 4000 {
			if err := db.Delete(key(i)); err != nil {
				t.Fatal(err)
			}
		}
		if err := db.CompactAll(); err != nil {
			t.Fatal(err)
		}
		if got := tableBytes(db); got > full/100 {
			t.Fatalf("fully deleted database holds %d table bytes after CompactAll, %d before the deletes", got, full)
		}
	})
	t.Run("dead data outside the live keys", func(t *testing.T) {
		db := mustOpen(t, testConfig(t))
		defer db.Close()
		fill(db, 4000)
		full := tableBytes(db)
		if err := db.DeleteRange(key(0), key(1800)); err != nil {
			t.Fatal(err)
		}
		if err := db.DeleteRange(key(2200), key(4000)); err != nil {
			t.Fatal(err)
		}
		if err := db.CompactAll(); err != nil {
			t.Fatal(err)
		}
		if got := tableBytes(db); got > full/5 {
			t.Fatalf("%d table bytes after deleting 90%% and CompactAll, %d before", got, full)
		}
		for i := 1800; i < 2200; i++ {
			if v, err := db.Get(key(i)); err != nil || !bytes.Equal(v, doc(i, 1000)) {
				t.Fatalf("live key %d: %v", i, err)
			}
		}
	})
}

// TestNewSnapshotDuringCompactAll checks that taking a snapshot never waits
// for a running CompactAll.
func TestNewSnapshotDuringCompactAll(t *testing.T) {
	db := mustOpen(t, testConfig(t))
	defer db.Close()
	for i := range 6000 {
		mustPut(t, db, key(i), doc(i, 700))
	}
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- db.CompactAll() }()
	var worst time.Duration
	for running := true; running; {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
			running = false
		default:
			began := time.Now()
			s, err := db.NewSnapshot()
			if err != nil {
				t.Fatal(err)
			}
			worst = max(worst, time.Since(began))
			if v, err := s.Get(key(10)); err != nil || !bytes.Equal(v, doc(10, 700)) {
				t.Fatalf("snapshot during CompactAll: %v", err)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Logf("slowest NewSnapshot during CompactAll: %s", worst)
}

// TestCompactAllReportsCodecsLeft checks that CompactAll never returns a
// silent nil while tables keep another level's codec: with the rewrite
// passes disabled, the lz4 table that Pebble moved into L6 (zstd) is left,
// and CompactAll says so with ErrCodecsRemain and the table's level.
func TestCompactAllReportsCodecsLeft(t *testing.T) {
	db := mustOpen(t, testConfig(t))
	defer db.Close()
	db.testNoRewrites = true
	for i := range 2000 {
		mustPut(t, db, key(i), doc(i, 700))
	}
	err := db.CompactAll()
	if !errors.Is(err, ErrCodecsRemain) {
		t.Fatalf("CompactAll with the rewrites disabled = %v, want ErrCodecsRemain", err)
	}
	if !strings.Contains(err.Error(), "1 table(s)") || !strings.Contains(err.Error(), "L6") {
		t.Errorf("error %q does not say how many tables and which level", err)
	}
	db.testNoRewrites = false
	if err := db.CompactAll(); err != nil {
		t.Fatalf("CompactAll with the rewrites back: %v", err)
	}
}
