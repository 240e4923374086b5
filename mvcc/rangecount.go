package mvcc

import (
	"bytes"
	"sync"
)

// A paginated list (Kubernetes' lists of 500, clientv3 with WithLimit and
// WithRev) asks for the same range at the same revision again and again,
// each page starting just after the last key of the one before, and each
// page's Count is the keys from its start to the end of the range. Walking
// the rest of the range to count them makes a list of n keys cost n²/limit
// key visits: at a million keys, over a second a page. But the keys
// visible at a revision never change (later writes have later revisions; a
// compaction past the revision refuses the read), so the count of the next
// page is this page's count less the keys this page returned. rangeCounts
// remembers it, keyed by where the next page starts, and a page that finds
// its count there walks only its limit.
type rangeCounts struct {
	mu      sync.Mutex
	entries [rangeCountEntries]rangeCount
	next    int
}

// rangeCountEntries bounds the lists followed at once; a list whose entry
// was replaced counts its next page by walking, as without the cache.
const rangeCountEntries = 64

// rangeCount is the count of the keys in [start, end) visible at rev.
type rangeCount struct {
	start, end []byte // end nil: no upper bound
	rev, count int64
}

// get returns the count of [start, end) at rev, if known.
func (c *rangeCounts) get(start, end []byte, rev int64) (int64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := range c.entries {
		e := &c.entries[i]
		if e.rev == rev && e.start != nil && bytes.Equal(e.start, start) && bytes.Equal(e.end, end) && (e.end == nil) == (end == nil) {
			return e.count, true
		}
	}
	return 0, false
}

// put records the count of [start, end) at rev; start and end are kept.
func (c *rangeCounts) put(start, end []byte, rev, count int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.entries[c.next] = rangeCount{start: start, end: end, rev: rev, count: count}
	c.next = (c.next + 1) % rangeCountEntries
}

// reset forgets every count, for a store whose contents were replaced
// (RestoreSnapshot), where a revision may now hold other keys.
func (c *rangeCounts) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.entries = [rangeCountEntries]rangeCount{}
}
