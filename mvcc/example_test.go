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
	db, err := engine.Open(cfg, engine.Options{FS: vfs.NewMem()})
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

// Keys attached to a lease go together when it is revoked (the server
// decides when a lease has expired).
func ExampleStore_RevokeLease() {
	cfg := config.Default()
	cfg.DBPath = "/db"
	cfg.MemtableSizeMB, cfg.BlockCacheSizeMB = 4, 8
	db, err := engine.Open(cfg, engine.Options{FS: vfs.NewMem()})
	if err != nil {
		panic(err)
	}
	defer db.Close()
	s, err := mvcc.Open(db, mvcc.Options{})
	if err != nil {
		panic(err)
	}
	defer s.Close()

	if err := s.GrantLease(42, 10); err != nil {
		panic(err)
	}
	for _, k := range []string{"session/a", "session/b"} {
		op := mvcc.PutOp([]byte(k), []byte("alive"))
		op.Lease = 42
		if _, err := s.Txn(mvcc.TxnRequest{Success: []mvcc.Op{op}}); err != nil {
			panic(err)
		}
	}
	l, _ := s.Lease(42)
	fmt.Printf("lease %d, ttl %d, %d keys\n", l.ID, l.TTL, len(l.Keys))
	rev, _ := s.RevokeLease(42)
	res, _ := s.Range([]byte("session/"), mvcc.PrefixEnd([]byte("session/")), mvcc.RangeOptions{})
	fmt.Println("revoked at", rev, "keys left:", res.Count)
	// Output:
	// lease 42, ttl 10, 2 keys
	// revoked at 4 keys left: 0
}

// A replicated member applies its log through Entry, and resumes after
// AppliedIndex when it restarts.
func ExampleStore_Entry() {
	cfg := config.Default()
	cfg.DBPath = "/db"
	cfg.MemtableSizeMB, cfg.BlockCacheSizeMB = 4, 8
	db, err := engine.Open(cfg, engine.Options{FS: vfs.NewMem()})
	if err != nil {
		panic(err)
	}
	defer db.Close()
	s, err := mvcc.Open(db, mvcc.Options{})
	if err != nil {
		panic(err)
	}
	put := mvcc.TxnRequest{Success: []mvcc.Op{mvcc.PutOp([]byte("k"), []byte("v"))}}
	_, _ = s.Entry(1).Txn(put)
	_ = s.Entry(2).Skip() // a conf change: nothing for the store
	_, err = s.Entry(2).Txn(put)
	fmt.Println(err)
	_ = s.Close()

	s, _ = mvcc.Open(db, mvcc.Options{})
	defer s.Close()
	fmt.Println("resume after", s.AppliedIndex(), "at revision", s.Rev())
	// Output:
	// mvcc: log entry already applied: index 2, last applied 2
	// resume after 2 at revision 2
}
