package engine

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"
)

// TestBlockCacheSurvivesMemtables checks that block_cache_size_mb is a real
// block cache: Pebble reserves every memtable's size in its cache, so with a
// 64 MB memtable and a 64 MB cache nothing would be cached once the memtable
// has grown. Strata sizes Pebble's cache so the blocks keep their share.
func TestBlockCacheSurvivesMemtables(t *testing.T) {
	cfg := testConfig(t)
	cfg.MemtableSizeMB, cfg.BlockCacheSizeMB = 64, 64
	db := mustOpen(t, cfg)
	defer db.Close()
	k := func(i int) []byte { return binary.BigEndian.AppendUint64([]byte("r"), uint64(i)) }
	value := make([]byte, 300)
	const n = 100000 // 31 MB: the memtable grows to its full 64 MB
	for i := 0; i < n; i += 1000 {
		b := db.NewBatch()
		for j := i; j < i+1000; j++ {
			_ = b.Put(k(j), value)
		}
		if err := b.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		if _, err := db.Get(k(r.IntN(n))); err != nil {
			t.Fatal(err)
		}
	}
	m, _ := db.Metrics()
	if m.BlockCache.Hits < m.BlockCache.Misses {
		t.Fatalf("block cache hits %d < misses %d (%d bytes used): the memtables crowd out the cache",
			m.BlockCache.Hits, m.BlockCache.Misses, m.BlockCache.UsedBytes)
	}
}
