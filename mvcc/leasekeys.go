package mvcc

import (
	"hash/maphash"
	"unsafe"
)

// leasedKeys holds every leased key with its lease, and chains the keys of
// each lease, in memory the garbage collector has nothing to scan: the
// keys' bytes in one slab, one pointer-free entry per key, and an index
// from the key's hash to its entry. A server with Kubernetes' events holds
// hundreds of thousands of leased keys; kept as maps of strings (twice:
// key to lease, and each lease's set of keys) they were the largest part
// of the live heap the collector marks on every cycle, and at 30 GB of
// data they made a full list spend a third of its CPU in the collector.
//
// Entry 0 is never used, so that 0 means "none" in every link.
type leasedKeys struct {
	// hash is maphash with a seed of the set's own; tests replace it to
	// make keys collide.
	hash   func(key string) uint64
	slab   []byte
	ents   []leasedKey
	byHash map[uint64]uint32
	// free is the first entry of the chain of free entries (through next).
	free uint32
	// dead is the slab's bytes that belong to removed keys.
	dead int
	// n is the number of keys.
	n int
}

// leasedKey is one leased key. A free entry has lease 0.
type leasedKey struct {
	off   int
	lease int64
	len   uint32
	// same is the next entry whose key has the same hash.
	same uint32
	// prev and next link the keys of one lease.
	prev, next uint32
}

// slabCompactMin is the dead bytes below which the slab is never
// compacted: small sets do not pay for copies that gain little.
const slabCompactMin = 1 << 20

func newLeasedKeys() leasedKeys {
	seed := maphash.MakeSeed()
	return leasedKeys{
		hash:   func(key string) uint64 { return maphash.String(seed, key) },
		ents:   make([]leasedKey, 1),
		byHash: map[uint64]uint32{},
	}
}

// len is the number of leased keys.
func (lk *leasedKeys) len() int { return lk.n }

// key returns entry i's key, pointing into the slab: valid until the next
// change.
func (lk *leasedKeys) key(i uint32) string {
	e := &lk.ents[i]
	return unsafe.String(unsafe.SliceData(lk.slab[e.off:]), int(e.len))
}

// find returns key's entry, 0 if key has no lease.
func (lk *leasedKeys) find(key string) uint32 {
	if lk.n == 0 {
		// Every put asks; most stores lease no key, and hashing is then
		// work for nothing.
		return 0
	}
	for i := lk.byHash[lk.hash(key)]; i != 0; i = lk.ents[i].same {
		if lk.key(i) == key {
			return i
		}
	}
	return 0
}

// leaseOf returns key's lease, 0 if it has none.
func (lk *leasedKeys) leaseOf(key string) int64 {
	if i := lk.find(key); i != 0 {
		return lk.ents[i].lease
	}
	return 0
}

// add records key, which must have no entry, under lease id, whose chain
// starts at *first; it makes the new entry the chain's first.
func (lk *leasedKeys) add(key string, id int64, first *uint32) {
	i := lk.free
	if i != 0 {
		lk.free = lk.ents[i].next
	} else {
		i = uint32(len(lk.ents))
		lk.ents = append(lk.ents, leasedKey{})
	}
	h := lk.hash(key)
	lk.ents[i] = leasedKey{off: len(lk.slab), len: uint32(len(key)), lease: id, same: lk.byHash[h], next: *first}
	lk.slab = append(lk.slab, key...)
	lk.byHash[h] = i
	lk.n++
	if *first != 0 {
		lk.ents[*first].prev = i
	}
	*first = i
}

// remove drops entry i, whose lease's chain starts at *first (nil when
// the lease is gone already: its chain goes with it).
func (lk *leasedKeys) remove(i uint32, first *uint32) {
	e := lk.ents[i]
	h := lk.hash(lk.key(i))
	if head := lk.byHash[h]; head == i {
		if e.same == 0 {
			delete(lk.byHash, h)
		} else {
			lk.byHash[h] = e.same
		}
	} else {
		j := head
		for lk.ents[j].same != i {
			j = lk.ents[j].same
		}
		lk.ents[j].same = e.same
	}
	if e.prev != 0 {
		lk.ents[e.prev].next = e.next
	} else if first != nil && *first == i {
		*first = e.next
	}
	if e.next != 0 {
		lk.ents[e.next].prev = e.prev
	}
	lk.ents[i] = leasedKey{next: lk.free}
	lk.free = i
	lk.n--
	lk.dead += int(e.len)
	if lk.dead >= slabCompactMin && lk.dead > len(lk.slab)/2 {
		lk.compactSlab()
	}
}

// compactSlab copies the live keys into a new slab, so that removed keys
// give their bytes back.
func (lk *leasedKeys) compactSlab() {
	slab := make([]byte, 0, len(lk.slab)-lk.dead)
	for i := range lk.ents {
		e := &lk.ents[i]
		if e.lease == 0 {
			continue
		}
		off := len(slab)
		slab = append(slab, lk.slab[e.off:e.off+int(e.len)]...)
		e.off = off
	}
	lk.slab, lk.dead = slab, 0
}

// chain calls fn with each key of the chain that starts at first.
func (lk *leasedKeys) chain(first uint32, fn func(key string)) {
	for i := first; i != 0; i = lk.ents[i].next {
		fn(lk.key(i))
	}
}

// view returns b as a string without a copy, for lookups that keep
// nothing of it: b must not change while the string is in use.
func view(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }
