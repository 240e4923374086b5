package engine

import (
	"fmt"
	"path/filepath"
	"testing"
)

// BenchmarkGetL6Filters measures point reads on a database of about 40 MB
// of values, every table in L6, with block_cache_size_mb = 1 and 4 MB
// memtables (Pebble's cache: 17 MB with the memtable budget, so the data
// is about 2.4 times its cache), with optimize_filters_for_hits
// false (Strata's Get consults the L6 filters through a prefix seek) and
// true (Pebble's Get, no L6 filters), for present and absent keys:
//
//	go test ./engine -run '^$' -bench GetL6Filters -count 6 > l6.txt
//	benchstat -col /optimize_filters_for_hits l6.txt
func BenchmarkGetL6Filters(b *testing.B) {
	const n = 40000 // keys 0, 2, 4, ...; the odd ones are absent
	dir := b.TempDir()
	for i, hits := range []bool{false, true} {
		path := filepath.Join(dir, fmt.Sprint(i))
		db := filterTestDB(b, path, hits, n, benchValueSize)
		if err := db.Close(); err != nil {
			b.Fatal(err)
		}
	}
	order := []bool{false, true}
	runs++
	if runs%2 == 0 {
		order = []bool{true, false}
	}
	for _, keys := range []string{"present", "absent"} {
		for _, hits := range order {
			b.Run(fmt.Sprintf("keys=%s/optimize_filters_for_hits=%v", keys, hits), func(b *testing.B) {
				i := 0
				if hits {
					i = 1
				}
				db, err := Open(filterConfig(filepath.Join(dir, fmt.Sprint(i)), hits))
				if err != nil {
					b.Fatal(err)
				}
				defer db.Close()
				b.SetBytes(benchValueSize)
				b.ReportAllocs()
				j := 0
				for b.Loop() {
					k := 2 * ((j * 7919) % n)
					if keys == "absent" {
						k++
					}
					err := db.View(key(k), func([]byte) error { return nil })
					if (err == nil) != (keys == "present") {
						b.Fatalf("View %s: %v", key(k), err)
					}
					j++
				}
			})
		}
	}
}
