package engine

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// deleteEvens deletes the even keys of [lo, hi) with DeleteSorted.
func deleteEvens(db *DB, lo, hi int) error {
	return db.DeleteSorted(func(del func(key []byte) error) error {
		for i := lo; i < hi; i += 2 {
			if err := del(key(i)); err != nil {
				return err
			}
		}
		return nil
	})
}

// TestDeleteSorted: the keys are gone and nothing else is, and the
// tombstones were ingested in a table spanning only them, although newer
// writes sat in the memtable beside the flushed old keys. A batch of the
// same deletions would have flushed with those writes into a table
// spanning both.
func TestDeleteSorted(t *testing.T) {
	var mu sync.Mutex
	var ingested []pebble.TableInfo
	db, err := Open(testConfig(t), Options{EventListener: &pebble.EventListener{
		TableIngested: func(info pebble.TableIngestInfo) {
			mu.Lock()
			defer mu.Unlock()
			for _, tb := range info.Tables {
				ingested = append(ingested, tb.TableInfo)
			}
		},
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for i := range 6000 {
		mustPut(t, db, key(i), []byte(fmt.Sprintf("old %d", i)))
	}
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	for i := 6000; i < 7000; i++ {
		mustPut(t, db, key(i), []byte(fmt.Sprintf("new %d", i)))
	}
	if err := deleteEvens(db, 1000, 3000); err != nil {
		t.Fatal(err)
	}
	var want []string
	for i := range 7000 {
		if i >= 1000 && i < 3000 && i%2 == 0 {
			continue
		}
		age := "old"
		if i >= 6000 {
			age = "new"
		}
		want = append(want, fmt.Sprintf("%s=%s %d", key(i), age, i))
	}
	if got := dumpDB(t, db, nil); !equalLines(got, want) {
		t.Fatalf("after DeleteSorted: %d pairs, want %d (first difference %s)", len(got), len(want), firstDifference(got, want))
	}
	mu.Lock()
	defer mu.Unlock()
	if len(ingested) != 1 || !bytes.Equal(ingested[0].Smallest.UserKey, key(1000)) || !bytes.Equal(ingested[0].Largest.UserKey, key(2998)) {
		t.Fatalf("ingested %+v, want one table spanning %s to %s", ingested, key(1000), key(2998))
	}
	if left := tempTablesLeft(t, db); len(left) > 0 {
		t.Fatalf("temporary tables left: %v", left)
	}
}

// TestDeleteSortedCutsTables: tombstones beyond deleteTableKeys go into
// further tables of one ingestion, so that the compaction carrying each
// down rewrites only the tables under its own span.
func TestDeleteSortedCutsTables(t *testing.T) {
	var mu sync.Mutex
	var ingestions int
	var ingested []pebble.TableInfo
	db, err := Open(testConfig(t), Options{EventListener: &pebble.EventListener{
		TableIngested: func(info pebble.TableIngestInfo) {
			mu.Lock()
			defer mu.Unlock()
			ingestions++
			for _, tb := range info.Tables {
				ingested = append(ingested, tb.TableInfo)
			}
		},
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	const n = 2*deleteTableKeys + 10
	// The even keys of [0, 2n): n tombstones.
	if err := deleteEvens(db, 0, 2*n); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if ingestions != 1 || len(ingested) != 3 {
		t.Fatalf("%d ingestions of %d tables, want 1 of 3 (%d tombstones, at most %d a table)", ingestions, len(ingested), n, deleteTableKeys)
	}
	slices.SortFunc(ingested, func(a, b pebble.TableInfo) int { return bytes.Compare(a.Smallest.UserKey, b.Smallest.UserKey) })
	for i, want := range []int{0, 2 * deleteTableKeys, 4 * deleteTableKeys} {
		if got := ingested[i].Smallest.UserKey; !bytes.Equal(got, key(want)) {
			t.Errorf("table %d starts at %s, want %s", i, got, key(want))
		}
	}
}

// TestDeleteSortedRefusal: a key out of order, or the caller's error,
// deletes nothing, names the key, and leaves no temporary table.
func TestDeleteSortedRefusal(t *testing.T) {
	db := mustOpen(t, testConfig(t))
	defer db.Close()
	for i := range 100 {
		mustPut(t, db, key(i), []byte("v"))
	}
	before := dumpDB(t, db, nil)
	for name, fill := range map[string]func(del func([]byte) error) error{
		"duplicate": func(del func([]byte) error) error {
			if err := del(key(5)); err != nil {
				return err
			}
			return del(key(5))
		},
		"decreasing": func(del func([]byte) error) error {
			if err := del(key(7)); err != nil {
				return err
			}
			return del(key(6))
		},
	} {
		err := db.DeleteSorted(fill)
		if !errors.Is(err, ErrKeyOrder) || !strings.Contains(err.Error(), string(key(7))) && !strings.Contains(err.Error(), string(key(5))) {
			t.Fatalf("%s: DeleteSorted: %v, want ErrKeyOrder naming the key", name, err)
		}
	}
	mine := errors.New("the caller's error")
	err := db.DeleteSorted(func(del func([]byte) error) error {
		if err := del(key(1)); err != nil {
			return err
		}
		return mine
	})
	if !errors.Is(err, mine) {
		t.Fatalf("DeleteSorted: %v, want the caller's error", err)
	}
	if got := dumpDB(t, db, nil); !equalLines(got, before) {
		t.Fatalf("a refused DeleteSorted changed %s", firstDifference(got, before))
	}
	if left := tempTablesLeft(t, db); len(left) > 0 {
		t.Fatalf("temporary tables left: %v", left)
	}
}

// TestDeleteSortedDurable: with sync = false, the deletions survive a crash
// that loses every unsynced byte, once DeleteSorted has returned.
func TestDeleteSortedDurable(t *testing.T) {
	mem, cfg, db := openNoSyncCrashable(t)
	for i := range 200 {
		mustPut(t, db, key(i), []byte("v"))
	}
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := deleteEvens(db, 0, 200); err != nil {
		t.Fatal(err)
	}
	crashed := mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
	_ = db.Close()
	db, err := Open(cfg, Options{FS: crashed})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if got := dumpDB(t, db, nil); len(got) != 100 || !strings.HasPrefix(got[0], string(key(1))+"=") {
		t.Fatalf("after the crash: %d pairs starting %q, want the 100 odd keys", len(got), got[0])
	}
}
