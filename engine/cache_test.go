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

// TestCacheMetricsTellTheTruth checks the memory figures: with a 1 MB block
// share beside 16 MB memtables, blocks borrow the memtables' unused share
// and hold more than block_cache_size_mb, yet never more than the reported
// capacity, and blocks plus memtable reservations stay within it.
func TestCacheMetricsTellTheTruth(t *testing.T) {
	cfg := testConfig(t)
	cfg.BlockCacheSizeMB, cfg.MemtableSizeMB = 1, 16
	db := mustOpen(t, cfg)
	defer db.Close()
	n := 12000
	if testing.Short() {
		n = 5000
	}
	for i := range n {
		mustPut(t, db, key(i), doc(i, 1000))
	}
	if err := db.CompactAll(); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if _, err := db.Get(key(i)); err != nil {
			t.Fatal(err)
		}
	}
	m, err := db.Metrics()
	if err != nil {
		t.Fatal(err)
	}
	c := m.BlockCache
	t.Logf("%+v", c)
	if c.BlockShareBytes != 1<<20 || c.MemTableBudgetBytes != 4*16<<20 || c.CapacityBytes != c.BlockShareBytes+c.MemTableBudgetBytes {
		t.Errorf("capacity %d = share %d + memtable budget %d: want 1 MB + 4 x 16 MB", c.CapacityBytes, c.BlockShareBytes, c.MemTableBudgetBytes)
	}
	if c.UsedBytes <= c.BlockShareBytes {
		t.Errorf("blocks used %d <= block share %d: the test did not make blocks borrow the memtable share", c.UsedBytes, c.BlockShareBytes)
	}
	const slop = 1 << 20 // per-shard rounding of reservations
	if c.UsedBytes > c.CapacityBytes || c.UsedBytes+c.MemTableReservedBytes > c.CapacityBytes+slop {
		t.Errorf("blocks %d + memtables %d exceed the reported capacity %d", c.UsedBytes, c.MemTableReservedBytes, c.CapacityBytes)
	}
}
