package engine_test

import (
	"fmt"
	"log"
	"os"

	"github.com/stratadb/strata/config"
	"github.com/stratadb/strata/engine"
)

func Example() {
	dir, err := os.MkdirTemp("", "strata-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	cfg := config.Default() // lz4 on L0-L5, zstd on L6
	cfg.DBPath = dir
	cfg.BlockCacheSizeMB = 8
	db, err := engine.Open(cfg)
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()

	b := db.NewBatch()
	for i := range 3 {
		_ = b.Put([]byte(fmt.Sprintf("user:%d", i)), []byte(fmt.Sprintf(`{"id":%d}`, i)))
	}
	if err := b.Commit(); err != nil {
		log.Fatal(err)
	}
	_ = b.Close()

	v, _ := db.Get([]byte("user:1"))
	fmt.Printf("user:1 = %s\n", v)
	if _, err := db.Get([]byte("user:9")); err == engine.ErrNotFound {
		fmt.Println("user:9 not found")
	}

	// A full compaction leaves every table in L6 carrying the bottommost codec.
	_ = db.Flush()
	if err := db.CompactAll(); err != nil {
		log.Fatal(err)
	}
	tables, _ := db.Tables()
	for _, t := range tables {
		fmt.Printf("L%d %s %d entries\n", t.Level, t.Codec, t.Entries)
	}
	// Output:
	// user:1 = {"id":1}
	// user:9 not found
	// L6 ZSTD 3 entries
}
