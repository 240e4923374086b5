package mvcc_test

import (
	"context"
	"fmt"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stratadb/strata/config"
	"github.com/stratadb/strata/engine"
	"github.com/stratadb/strata/mvcc"
)

func Example() {
	cfg := config.Default()
	cfg.DBPath = "/db"
	cfg.MemtableSizeMB, cfg.BlockCacheSizeMB = 4, 8
	db, err := engine.OpenWithOptions(cfg, engine.Options{FS: vfs.NewMem()})
	if err != nil {
		panic(err)
	}
	defer db.Close()
	s, err := mvcc.Open(db, mvcc.Options{})
	if err != nil {
		panic(err)
	}
	defer s.Close()

	rev1, _ := s.Put([]byte("config/a"), []byte("1"))
	_, _ = s.Put([]byte("config/a"), []byte("2"))
	_, _ = s.Put([]byte("config/b"), []byte("x"))

	// The latest revision, and an older one.
	now, _ := s.Range([]byte("config/"), mvcc.PrefixEnd([]byte("config/")), mvcc.RangeOptions{})
	for _, kv := range now.KVs {
		fmt.Printf("%s=%s version %d\n", kv.Key, kv.Value, kv.Version)
	}
	old, _ := s.Range([]byte("config/a"), nil, mvcc.RangeOptions{Rev: rev1})
	fmt.Printf("at %d: %s\n", rev1, old.KVs[0].Value)

	// Compare-and-swap.
	resp, _ := s.Txn(mvcc.TxnRequest{
		Compare: []mvcc.Compare{{Key: []byte("config/a"), Target: mvcc.CompareValue, Result: mvcc.Equal, Value: []byte("2")}},
		Success: []mvcc.Op{mvcc.PutOp([]byte("config/a"), []byte("3"))},
	})
	fmt.Println("swapped:", resp.Succeeded, "at", resp.Rev)

	// Every change since rev1, then compaction.
	w, _ := s.Watch(context.Background(), []byte("config/a"), nil, rev1)
	for n := 0; n < 3; {
		for _, ev := range <-w.C {
			fmt.Println(ev.Type, string(ev.KV.Value), ev.KV.ModRevision)
			n++
		}
	}
	w.Close()
	_ = s.Compact(resp.Rev)
	_, err = s.Range([]byte("config/a"), nil, mvcc.RangeOptions{Rev: rev1})
	fmt.Println(err)
	// Output:
	// config/a=2 version 2
	// config/b=x version 1
	// at 2: 1
	// swapped: true at 5
	// PUT 1 2
	// PUT 2 3
	// PUT 3 5
	// mvcc: required revision has been compacted: 2, compacted at 5
}
