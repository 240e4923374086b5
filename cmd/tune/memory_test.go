package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/stratadb/strata/internal/indexmem"
)

// TestMain lets tune memory re-execute this test binary for a row, as
// main does for the tune binary.
func TestMain(m *testing.M) {
	if child, err := indexmem.ChildMain(os.Stdout); child {
		if err != nil {
			fmt.Fprintln(os.Stderr, errorLine(err))
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestMemoryCommand runs one small row of each table, each in a child
// process, and reads the JSON.
func TestMemoryCommand(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns child processes")
	}
	out, stderr, err := run(t, "memory", "--keys", "2000", "--versions", "2", "--key-size", "32",
		"--memtable-size-mb", "4", "--block-cache-size-mb", "8", "--format", "json")
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	var doc struct {
		Index *struct {
			Kind string           `json:"kind"`
			Rows []map[string]any `json:"rows"`
			Fit  any              `json:"fit"`
			Etcd struct {
				LiveHeap struct{ C1, C2 float64 } `json:"live_heap"`
			} `json:"etcd"`
		} `json:"index"`
		Store *struct {
			Rows             []map[string]any `json:"rows"`
			MemtableSizeMB   int              `json:"memtable_size_mb"`
			BlockCacheSizeMB int              `json:"block_cache_size_mb"`
		} `json:"store"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if doc.Index == nil || len(doc.Index.Rows) != 1 || doc.Store == nil || len(doc.Store.Rows) != 1 {
		t.Fatalf("want one index and one store row:\n%s", out)
	}
	ix := doc.Index.Rows[0]
	for k, want := range map[string]float64{"keys": 2000, "versions": 2, "key_size": 32} {
		if ix[k] != want {
			t.Errorf("index row %s = %v; want %v", k, ix[k], want)
		}
	}
	for _, k := range []string{"total_alloc_bytes", "live_heap_bytes"} {
		if v, ok := ix[k].(float64); !ok || v < 2000*32 {
			t.Errorf("index row %s = %v; want at least the key bytes", k, ix[k])
		}
	}
	if doc.Index.Kind != "keyindex" || doc.Index.Fit != nil || doc.Index.Etcd.LiveHeap.C1 != 113 || doc.Index.Etcd.LiveHeap.C2 != 28 {
		t.Errorf("index table %+v", doc.Index)
	}
	st := doc.Store.Rows[0]
	if v, ok := st["rss_bytes"].(float64); !ok || v <= 0 || st["value_size"] != 256.0 || doc.Store.MemtableSizeMB != 4 || doc.Store.BlockCacheSizeMB != 8 {
		t.Errorf("store table %+v", doc.Store)
	}
	if !strings.Contains(stderr, "row 1/2: index 2K keys x 2 versions x 32 B keys ... ") || !strings.Contains(stderr, "tune memory: 2 rows") {
		t.Errorf("stderr:\n%s", stderr)
	}

	out, _, err = run(t, "memory", "--keys", "1000", "--versions", "1", "--key-size", "16", "--index-only", "--index", "plain", "--progress", "never")
	if err != nil || !strings.Contains(out, "plain google/btree") || strings.Contains(out, "Store memory") {
		t.Errorf("--index-only --index plain: %v\n%s", err, out)
	}
}

func TestMemoryCommandErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"memory", "--keys", "0"}, "--keys 0: must be >= 1"},
		{[]string{"memory", "--keys", "-5"}, "--keys -5: must be >= 1"},
		{[]string{"memory", "--versions", "0"}, "--versions 0: must be >= 1"},
		{[]string{"memory", "--key-size", "4"}, "--key-size 4: must be from 8"},
		{[]string{"memory", "--key-size", "100000000"}, "--key-size 100000000: must be from 8"},
		{[]string{"memory", "--keys", "1000000000000", "--key-size", "64"}, "--keys 1000000000000"},
		{[]string{"memory", "--value-size", "0"}, "--value-size 0: must be from 1"},
		{[]string{"memory", "--store", "--index-only"}, "--store and --index-only are exclusive"},
		{[]string{"memory", "--index-only", "--value-size", "512"}, "--value-size applies to the store table"},
		{[]string{"memory", "--store", "--index", "plain"}, "--index applies to the index table"},
		{[]string{"memory", "--index", "art"}, `--index "art": must be keyindex or plain`},
		{[]string{"memory", "--memtable-size-mb", "-1"}, "--memtable-size-mb -1"},
		{[]string{"memory", "--keys", "many"}, `invalid argument "many" for "--keys"`},
		{[]string{"memory", "--format", "yaml"}, `unknown format "yaml"`},
		{[]string{"memory", "extra"}, `unexpected argument "extra"`},
	} {
		out, _, err := run(t, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: err %v, want one containing %q", tc.args, err, tc.want)
		}
		if out != "" {
			t.Errorf("%q: printed %q on failure", tc.args, out)
		}
	}
}
