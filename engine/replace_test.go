package engine

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stratadb/strata/config"
)

// dumpDB returns every key and value of the database (or of snap, if not
// nil) as "key=value" lines.
func dumpDB(t testing.TB, db *DB, snap *Snapshot) []string {
	t.Helper()
	var it *Iterator
	var err error
	if snap != nil {
		it, err = snap.NewIter(nil)
	} else {
		it, err = db.NewIter(nil)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	var out []string
	for ok := it.First(); ok; ok = it.Next() {
		out = append(out, string(it.Key())+"="+string(it.Value()))
	}
	if err := it.Error(); err != nil {
		t.Fatal(err)
	}
	return out
}

// tempTablesLeft lists the temporary tables left in db_path.
func tempTablesLeft(t testing.TB, db *DB) []string {
	t.Helper()
	entries, err := os.ReadDir(db.cfg.DBPath)
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), rewritePrefix) {
			left = append(left, e.Name())
		}
	}
	return left
}

// replaceTestDB opens a database of small tables holding key(0..5999) =
// "old i": the first half flushed, the second in the memtable, so a
// replacement of the middle overlaps both.
func replaceTestDB(t *testing.T) *DB {
	t.Helper()
	cfg := testConfig(t)
	cfg.TargetFileSizeBaseMB = 1
	db := mustOpen(t, cfg)
	t.Cleanup(func() { _ = db.Close() })
	for i := range 6000 {
		if i == 3000 {
			if err := db.Flush(); err != nil {
				t.Fatal(err)
			}
		}
		mustPut(t, db, key(i), []byte(fmt.Sprintf("old %d", i)))
	}
	return db
}

// TestReplaceSpan: the span holds exactly the new pairs afterwards, keys
// outside it are untouched, a snapshot taken before still reads the old
// contents, the new pairs were not written through the WAL, and no
// temporary table is left.
func TestReplaceSpan(t *testing.T) {
	db := replaceTestDB(t)
	before := dumpDB(t, db, nil)
	snap, err := db.NewSnapshot()
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Close()
	m0, err := db.Metrics()
	if err != nil {
		t.Fatal(err)
	}
	ingested0 := tablesIngested(db)
	// 3 MB of new pairs (incompressible) in [key(1000), key(5000)): several tables.
	var data uint64
	err = db.ReplaceSpan(key(1000), key(5000), func(put func(k, v []byte) error) error {
		for i := 1000; i < 5000; i += 2 {
			v := noise(i, 1500)
			data += uint64(len(v))
			if err := put(key(i), v); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	m1, err := db.Metrics()
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for i := range 6000 {
		switch {
		case i < 1000 || i >= 5000:
			want = append(want, fmt.Sprintf("%s=old %d", key(i), i))
		case i%2 == 0:
			want = append(want, string(key(i))+"="+string(noise(i, 1500)))
		}
	}
	if got := dumpDB(t, db, nil); !equalLines(got, want) {
		t.Fatalf("after ReplaceSpan: %d pairs, want %d (first difference %s)", len(got), len(want), firstDifference(got, want))
	}
	if got := dumpDB(t, db, snap); !equalLines(got, before) {
		t.Fatalf("a snapshot taken before reads %s", firstDifference(got, before))
	}
	if wal := m1.WAL.BytesIn - m0.WAL.BytesIn; wal > data/10 {
		t.Fatalf("ReplaceSpan wrote %d bytes through the WAL for %d bytes of values", wal, data)
	}
	if left := tempTablesLeft(t, db); len(left) > 0 {
		t.Fatalf("temporary tables left: %v", left)
	}
	// Counted as ingested, not as found in the span afterwards: a
	// background compaction may already have merged them with the tables
	// around the span.
	if n := tablesIngested(db) - ingested0; n < 2 {
		t.Fatalf("ReplaceSpan ingested %d tables, want several", n)
	}
	// Nothing to put empties the span.
	if err := db.ReplaceSpan(key(0), key(3000), func(func(k, v []byte) error) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if got := dumpDB(t, db, nil); len(got) != len(want)-1000-1000 || !strings.HasPrefix(got[0], string(key(3000))+"=") {
		t.Fatalf("after an empty ReplaceSpan of [0, 3000): %d pairs starting %q", len(got), got[0])
	}
}

// TestReplaceSpanRefusal: an out-of-order, duplicate or out-of-span key,
// or an error of the caller's, met after several tables were written,
// changes nothing, names the key, and leaves no temporary table.
func TestReplaceSpanRefusal(t *testing.T) {
	errStop := errors.New("the caller stops")
	for _, tc := range []struct {
		name string
		bad  func(put func(k, v []byte) error) error // after key(1000..4998) were put
		want error
		says string
	}{
		{"out-of-order", func(put func(k, v []byte) error) error { return put(key(1500), nil) }, ErrKeyOrder, `"entity:00001500" after "entity:00004998"`},
		{"duplicate", func(put func(k, v []byte) error) error { return put(key(4998), nil) }, ErrKeyOrder, `"entity:00004998" after "entity:00004998"`},
		{"past-the-span", func(put func(k, v []byte) error) error { return put(key(5000), nil) }, ErrKeyOrder, `"entity:00005000" outside the span`},
		{"caller-error", func(put func(k, v []byte) error) error { return errStop }, errStop, "the caller stops"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := replaceTestDB(t)
			before := dumpDB(t, db, nil)
			err := db.ReplaceSpan(key(1000), key(5000), func(put func(k, v []byte) error) error {
				for i := 1000; i < 5000; i += 2 {
					if err := put(key(i), noise(i, 1500)); err != nil {
						return err
					}
				}
				return tc.bad(put)
			})
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("ReplaceSpan: %v, want %v saying %s", err, tc.want, tc.says)
			}
			if got := dumpDB(t, db, nil); !equalLines(got, before) {
				t.Fatalf("a refused ReplaceSpan changed the contents: %s", firstDifference(got, before))
			}
			if left := tempTablesLeft(t, db); len(left) > 0 {
				t.Fatalf("temporary tables left: %v", left)
			}
		})
	}
	db := replaceTestDB(t)
	if err := db.ReplaceSpan(nil, key(0), nil); !errors.Is(err, ErrInvalidRange) {
		t.Fatalf("ReplaceSpan from the empty key: %v, want ErrInvalidRange", err)
	}
	err := db.ReplaceSpan([]byte("a"), key(0), func(put func(k, v []byte) error) error { return put(nil, []byte("v")) })
	if !errors.Is(err, ErrKeyOrder) {
		t.Fatalf("ReplaceSpan putting the empty key: %v, want ErrKeyOrder", err)
	}
	if err := db.ReplaceSpan(key(2), key(1), nil); !errors.Is(err, ErrInvalidRange) {
		t.Fatalf("ReplaceSpan of an inverted span: %v, want ErrInvalidRange", err)
	}
}

// tablesWithin counts the tables whose keys all lie in [start, end).
// tablesIngested is the number of tables ingested into any level since
// the database opened.
func tablesIngested(db *DB) uint64 {
	var n uint64
	for _, l := range db.pdb.Metrics().Levels {
		n += l.TablesIngested
	}
	return n
}

// noise returns n incompressible bytes for key i.
func noise(i, n int) []byte {
	b := make([]byte, n)
	r := rand.New(rand.NewPCG(uint64(i), 11))
	for j := range b {
		b[j] = byte(r.Uint32())
	}
	return b
}

func equalLines(a, b []string) bool { return firstDifference(a, b) == "" }

// firstDifference describes where a and b first differ, "" if nowhere.
func firstDifference(a, b []string) string {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return fmt.Sprintf("at %d: %.60q vs %.60q", i, a[i], b[i])
		}
	}
	if len(a) != len(b) {
		return fmt.Sprintf("%d lines vs %d", len(a), len(b))
	}
	return ""
}

// TestReplacedSpanLandsInItsPath: with db_paths, ReplaceSpan writes its
// tables into the bottom level's path, so the ingestion links them where
// they belong and the mover has nothing to move; no temporary table is
// left in any path.
func TestReplacedSpanLandsInItsPath(t *testing.T) {
	root := t.TempDir()
	cfg := issueRunConfig(root)
	cfg.DBPaths = []config.DBPath{
		{Path: cfg.DBPath, TargetSizeBytes: 512 << 10},
		{Path: filepath.Join(root, "cold"), TargetSizeBytes: 1 << 30},
	}
	db := mustOpen(t, cfg)
	defer db.Close()
	for i := range 1000 {
		mustPut(t, db, key(i), []byte("old"))
	}
	const n = 6000 // 6 MB: several 1 MB tables
	err := db.ReplaceSpan(key(0), key(n), func(put func(k, v []byte) error) error {
		for i := range n {
			if err := put(key(i), doc(i, 1000)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.layout.Settle(context.Background()); err != nil {
		t.Fatal(err)
	}
	ts, _ := db.Tiering()
	if ts.MovedFiles != 0 {
		t.Errorf("the mover moved %d tables: the replacement's tables did not land in their path\n%s", ts.MovedFiles, ts)
	}
	if files, _ := sstFiles(t, cfg.DBPaths[1].Path); files < 2 {
		t.Errorf("%s holds %d tables, want the replacement's several\n%s", cfg.DBPaths[1].Path, files, ts)
	}
	for _, p := range cfg.DBPaths {
		entries, err := os.ReadDir(p.Path)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), rewritePrefix) {
				t.Errorf("temporary table %s left in %s", e.Name(), p.Path)
			}
		}
	}
	checkAllKeys(t, db, n)
}

// TestWriteSpan: the tables WriteSpan wrote change nothing until Ingest,
// which replaces the span with them (writes made to it in between too);
// Discard drops them, changing nothing; either leaves no temporary table,
// and a second Ingest is refused rather than emptying the span.
func TestWriteSpan(t *testing.T) {
	db := replaceTestDB(t)
	before := dumpDB(t, db, nil)
	write := func() *SpanTables {
		t.Helper()
		st, err := db.WriteSpan(key(1000), key(5000), func(put func(k, v []byte) error) error {
			for i := 1000; i < 5000; i += 2 {
				if err := put(key(i), noise(i, 1500)); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if got := dumpDB(t, db, nil); !equalLines(got, before) {
			t.Fatalf("WriteSpan changed the database: %s", firstDifference(got, before))
		}
		if len(tempTablesLeft(t, db)) < 2 {
			t.Fatalf("WriteSpan wrote %d tables, want several", len(tempTablesLeft(t, db)))
		}
		return st
	}
	st := write()
	st.Discard()
	st.Discard()
	if got := dumpDB(t, db, nil); !equalLines(got, before) {
		t.Fatalf("after Discard: %s", firstDifference(got, before))
	}
	if left := tempTablesLeft(t, db); len(left) > 0 {
		t.Fatalf("temporary tables left after Discard: %v", left)
	}

	st = write()
	mustPut(t, db, key(1001), []byte("written in between")) // in the span: replaced
	mustPut(t, db, key(5001), []byte("written in between")) // outside: kept
	if err := st.Ingest(); err != nil {
		t.Fatal(err)
	}
	var want []string
	for i := range 6000 {
		switch {
		case i == 5001:
			want = append(want, string(key(i))+"=written in between")
		case i < 1000 || i >= 5000:
			want = append(want, fmt.Sprintf("%s=old %d", key(i), i))
		case i%2 == 0:
			want = append(want, string(key(i))+"="+string(noise(i, 1500)))
		}
	}
	if got := dumpDB(t, db, nil); !equalLines(got, want) {
		t.Fatalf("after Ingest: %d pairs, want %d (first difference %s)", len(got), len(want), firstDifference(got, want))
	}
	if left := tempTablesLeft(t, db); len(left) > 0 {
		t.Fatalf("temporary tables left after Ingest: %v", left)
	}
	if err := st.Ingest(); err == nil || !strings.Contains(err.Error(), "already") {
		t.Fatalf("a second Ingest: %v, want a refusal", err)
	}
	st.Discard()
	if got := dumpDB(t, db, nil); !equalLines(got, want) {
		t.Fatalf("after a second Ingest and a Discard: %s", firstDifference(got, want))
	}
}
