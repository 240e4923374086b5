// Command embedded shows Strata used as a library: open a database from a
// config, write, read, scan, compact and print the stats.
//
//	go run ./examples/embedded            # in a temporary directory
//	go run ./examples/embedded -dir /tmp/demo
package main

import (
	"flag"
	"fmt"
	"log"
	"os"

	"github.com/stratadb/strata/config"
	"github.com/stratadb/strata/engine"
)

func main() {
	dir := flag.String("dir", "", "database directory (default: a temporary one, removed after)")
	flag.Parse()
	if err := run(*dir); err != nil {
		log.Fatal(err)
	}
}

func run(dir string) error {
	if dir == "" {
		tmp, err := os.MkdirTemp("", "strata-example-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		dir = tmp
	}
	cfg := config.Default() // lz4 on L0-L5, zstd on L6, 10 bloom bits per key
	cfg.DBPath = dir
	cfg.BlockCacheSizeMB = 32
	cfg.Sync = true // each acknowledged write is durable

	db, err := engine.Open(cfg)
	if err != nil {
		return err
	}
	defer db.Close()

	// One atomic batch of 1000 documents.
	b := db.NewBatch()
	for i := range 1000 {
		doc := fmt.Sprintf(`{"id":%d,"name":"user %d","bio":"writes about storage engines and compaction"}`, i, i)
		if err := b.Put([]byte(fmt.Sprintf("user:%04d", i)), []byte(doc)); err != nil {
			return err
		}
	}
	if err := b.Commit(); err != nil {
		return err
	}
	_ = b.Close()

	v, err := db.Get([]byte("user:0042"))
	if err != nil {
		return err
	}
	fmt.Printf("user:0042 = %s\n", v)

	// A bounded scan.
	it, err := db.NewIter(&engine.IterOptions{LowerBound: []byte("user:0100"), UpperBound: []byte("user:0103")})
	if err != nil {
		return err
	}
	for it.First(); it.Valid(); it.Next() {
		fmt.Printf("scan %s\n", it.Key())
	}
	if err := it.Close(); err != nil {
		return err
	}

	// A full compaction: L6 then carries zstd, whatever the flush wrote.
	if err := db.CompactAll(); err != nil {
		return err
	}
	stats, err := db.Stats()
	if err != nil {
		return err
	}
	fmt.Print(stats)
	return nil
}
