package engine

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stratadb/strata/config"
)

// levelCodecs gives every level a codec whose stored name no other level
// has, so a table's codec tells which level it was written for.
var levelCodecs = []string{"none", "snappy", "lz4", "zstd:1", "zstd:2", "zstd:4", "zstd"}

// storedNames are the table codec names of levelCodecs, level by level.
var storedNames = []string{"NoCompression", "Snappy", "MinLZ", "ZSTD1", "ZSTD2", "ZSTD4", "ZSTD"}

// TestCompressionLevels writes a database that spreads over several levels
// under compression_levels: every table Pebble writes carries the codec of
// the level it was written for (a move keeps it: such a table carries a
// higher level's codec, and Metrics counts it as to rewrite), and
// CompactAll leaves every table in L6 carrying L6's codec.
func TestCompressionLevels(t *testing.T) {
	cfg := testConfig(t)
	cfg.CompressionLevels = levelCodecs
	cfg.MemtableSizeMB, cfg.TargetFileSizeBaseMB, cfg.MaxBytesForLevelBaseMB = 1, 1, 1
	db := mustOpen(t, cfg)
	defer db.Close()

	rng := rand.New(rand.NewPCG(1, 2))
	value := func() []byte {
		v := make([]byte, 1000)
		for i := range v {
			v[i] = byte(rng.Uint32())
		}
		return v
	}
	const n = 12000 // ~12 MB of values that do not compress
	for i := range n {
		mustPut(t, db, key(i), value())
	}
	if err := db.CompactAll(); err != nil {
		t.Fatal(err)
	}
	checkTables(t, db, "after the first CompactAll", inL6)

	// Rewrite keys spread over the whole range, flushing often: L0
	// compacts into the base level above L6, and on down.
	for round := range 8 {
		for i := round % 3; i < n; i += 24 {
			mustPut(t, db, key(i), value())
		}
		if err := db.Flush(); err != nil {
			t.Fatal(err)
		}
		if round == 0 {
			checkTables(t, db, "after a flush", func(level int, codec string) string {
				if level == 0 && codec != storedNames[0] {
					return "want " + storedNames[0]
				}
				return ""
			})
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := db.WaitForCompactions(ctx, 10*time.Millisecond, nil); err != nil {
		t.Fatal(err)
	}
	writtenFor := map[int]bool{} // the levels whose codec some table carries
	checkTables(t, db, "after compactions", func(level int, codec string) string {
		written := slices.Index(storedNames, codec)
		if written < 0 || written > level {
			return "want the codec of this level or of one above (a table moved down keeps it)"
		}
		writtenFor[written] = true
		return ""
	})
	if !slices.ContainsFunc([]int{1, 2, 3, 4, 5}, func(l int) bool { return writtenFor[l] }) {
		t.Errorf("no table carries the codec of L1-L5 (tables written for: %v): the test did not spread the LSM", writtenFor)
	}

	if err := db.CompactAll(); err != nil {
		t.Fatal(err)
	}
	checkTables(t, db, "after the second CompactAll", inL6)
}

// inL6 is the state after CompactAll: every table in L6, carrying L6's
// codec.
func inL6(level int, codec string) string {
	if level != 6 || codec != storedNames[6] {
		return fmt.Sprintf("want L6 %s", storedNames[6])
	}
	return ""
}

// checkTables applies check to every table and fails with what it says;
// Metrics must count as to rewrite exactly the tables that carry another
// level's codec.
func checkTables(t *testing.T, db *DB, when string, check func(level int, codec string) string) {
	t.Helper()
	tables, err := db.Tables()
	if err != nil {
		t.Fatal(err)
	}
	if len(tables) == 0 {
		t.Fatalf("%s: no tables", when)
	}
	var perLevel [config.NumLevels][]string
	var foreign [config.NumLevels]int
	for _, tb := range tables {
		perLevel[tb.Level] = append(perLevel[tb.Level], tb.Codec)
		if why := check(tb.Level, tb.Codec); why != "" {
			t.Errorf("%s: table %d in L%d carries %s: %s", when, tb.FileNum, tb.Level, tb.Codec, why)
		}
		if tb.Codec != storedNames[tb.Level] {
			foreign[tb.Level]++
		}
	}
	m, err := db.Metrics()
	if err != nil {
		t.Fatal(err)
	}
	for l, codecs := range perLevel {
		if len(codecs) > 0 {
			t.Logf("%s: L%d %v", when, l, codecs)
		}
		lm := m.Levels[l]
		if lm.StoredCodec != storedNames[l] || lm.Mismatched != foreign[l] {
			t.Errorf("%s: Metrics L%d: codec %s, %d table(s) to rewrite; want %s, %d", when, l, lm.StoredCodec, lm.Mismatched, storedNames[l], foreign[l])
		}
	}
}
