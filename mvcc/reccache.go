package mvcc

import (
	"sync/atomic"

	"github.com/stratadb/strata/mvcc/keyindex"
)

// recordCache keeps the encoded records of recently written and read
// revisions in memory, so that reading the latest version of a hot key (a
// Range of one key, the previous version a put with prev_kv returns, a
// value compare) does not open a Pebble iterator. etcd reads the same
// records from bbolt's memory map; Strata's engine Get was 6% (v2 write)
// to 16% (v3 read of one key) of the server's CPU in those paths.
//
// A revision's record never changes once written, so the cache needs no
// invalidation: an entry is either the record of its revision or absent.
// The one exception is RestoreSnapshot, which replaces the whole store
// (another store's revision may hold another record) and empties it.
// Entries of compacted revisions may linger until overwritten, but nothing
// asks for them: reads below the compacted revision fail before they
// fetch, and the index no longer points at what compaction dropped. A
// write whose commit failed fails the store (it must be reopened, with a
// new cache), so no record of a revision that never became durable is
// served.
//
// It is direct-mapped: each revision hashes to one slot, an atomic
// pointer, so readers (under Store.mu shared) and the writer (under
// writeMu) never lock. A new record replaces the slot's old one. Records
// larger than maxCachedRecord are not kept, which bounds the memory to
// recordCacheSlots * maxCachedRecord (2 MiB) and is usually a fraction of
// it.
type recordCache struct {
	slots [recordCacheSlots]atomic.Pointer[cachedRecord]
}

const (
	recordCacheBits  = 10
	recordCacheSlots = 1 << recordCacheBits
	// maxCachedRecord is the largest encoded record the cache keeps: a
	// 1 KiB value with its key and header fits.
	maxCachedRecord = 2 << 10
)

// cachedRecord is one revision's encoded record (see appendRecord).
type cachedRecord struct {
	rev keyindex.Revision
	enc []byte
}

func recordSlot(r keyindex.Revision) uint64 {
	h := (uint64(r.Main)<<8 ^ uint64(r.Sub)) * 0x9e3779b97f4a7c15
	return h >> (64 - recordCacheBits)
}

// get returns the encoded record of revision r if the cache holds it. The
// bytes are shared: the caller must not modify them.
func (c *recordCache) get(r keyindex.Revision) ([]byte, bool) {
	e := c.slots[recordSlot(r)].Load()
	if e == nil || e.rev != r {
		return nil, false
	}
	return e.enc, true
}

// add keeps a copy of enc, the encoded record of revision r.
func (c *recordCache) add(r keyindex.Revision, enc []byte) {
	if len(enc) > maxCachedRecord {
		return
	}
	c.slots[recordSlot(r)].Store(&cachedRecord{rev: r, enc: append([]byte(nil), enc...)})
}

// reset empties the cache, for a store whose contents were replaced. The
// caller holds writeMu and Store.mu: no reader or writer is between a get
// and its use.
func (c *recordCache) reset() {
	for i := range c.slots {
		c.slots[i].Store(nil)
	}
}
