package keyindex

import (
	"bytes"
	"errors"
	"hash/maphash"
	"slices"
)

// Rebuild fills an empty index from storage, as Restore does, for much
// less: Open reads every revision in revision order, and found through the
// tree each one costs a descent of about 21 key comparisons. Kubernetes
// writes its keys in no order, so neighbouring revisions share no path and
// nearly every comparison misses the CPU's caches: on a 30 GB store half
// of a restart was these descents. A Rebuild finds a key by a hash of its
// bytes instead, and puts each key into the tree once, in key order, when
// it ends.
//
// Until Finish the tree is empty: the index may be used only through the
// Rebuild, and Finish must be called before any other method.
type Rebuild struct {
	ix   *Index
	hash func(key []byte) uint64
	// ids maps a key's hash to its slot; clash holds the keys whose hash
	// an earlier key already has. Both stay empty while the keys come in
	// increasing order (inOrder): a store written in key order is rebuilt
	// without hashing, a key met again found by binary search in added.
	ids     map[uint64]uint32
	clash   map[string]uint32
	inOrder bool
	// added are the slots to put into the tree, in the order they came.
	added []uint32
}

// errNotEmpty is StartRebuild's refusal of an index that holds keys.
var errNotEmpty = errors.New("keyindex: rebuild of an index that holds keys")

// StartRebuild begins refilling ix, which must be empty (as New returns it).
func (ix *Index) StartRebuild() (*Rebuild, error) {
	if ix.nslots != 0 || ix.tree.Len() != 0 {
		return nil, errNotEmpty
	}
	seed := maphash.MakeSeed()
	hash := func(key []byte) uint64 { return maphash.Bytes(seed, key) }
	return &Rebuild{ix: ix, hash: hash, ids: map[uint64]uint32{}, clash: map[string]uint32{}, inOrder: true}, nil
}

// Restore is Index.Restore during the rebuild: revisions in increasing
// order, with the stored record's create and version.
func (r *Rebuild) Restore(key []byte, rev Revision, tomb bool, create, version int64) error {
	if err := checkKey(key); err != nil {
		return err
	}
	if r.inOrder {
		return r.restoreInOrder(key, rev, tomb, create, version)
	}
	h := r.hash(key)
	id, taken := r.ids[h]
	if taken && bytes.Equal(r.ix.keyOf(id), key) {
		return r.ix.appendRev(id, rev, tomb)
	}
	if other, ok := r.clash[string(key)]; taken && ok {
		return r.ix.appendRev(other, rev, tomb)
	}
	id, err := r.ix.newKey(key, rev, tomb, create, version, true)
	if err != nil {
		return err
	}
	r.remember(h, key, id)
	r.added = append(r.added, id)
	return nil
}

// restoreInOrder is Restore while every new key has come after the
// previous one: a key above the last is new, any other is looked up in
// added, which is sorted. The first new key out of order ends the mode:
// the keys so far are hashed once and Restore goes on by hash.
func (r *Rebuild) restoreInOrder(key []byte, rev Revision, tomb bool, create, version int64) error {
	n := len(r.added)
	if n > 0 && bytes.Compare(key, r.ix.keyOf(r.added[n-1])) <= 0 {
		i, found := slices.BinarySearchFunc(r.added, key, func(id uint32, k []byte) int { return bytes.Compare(r.ix.keyOf(id), k) })
		if found {
			return r.ix.appendRev(r.added[i], rev, tomb)
		}
		r.inOrder = false
		for _, id := range r.added {
			k := r.ix.keyOf(id)
			r.remember(r.hash(k), k, id)
		}
		return r.Restore(key, rev, tomb, create, version)
	}
	id, err := r.ix.newKey(key, rev, tomb, create, version, true)
	if err != nil {
		return err
	}
	r.added = append(r.added, id)
	return nil
}

// remember maps key, with hash h, to slot id.
func (r *Rebuild) remember(h uint64, key []byte, id uint32) {
	if _, taken := r.ids[h]; taken {
		r.clash[string(key)] = id
	} else {
		r.ids[h] = id
	}
}

// Finish puts every key into the tree, in key order (inserting in order
// keeps each descent on the tree's right edge, which stays in cache), and
// ends the rebuild.
func (r *Rebuild) Finish() {
	byKey := func(a, b uint32) int { return bytes.Compare(r.ix.keyOf(a), r.ix.keyOf(b)) }
	if !slices.IsSortedFunc(r.added, byKey) {
		slices.SortFunc(r.added, byKey)
	}
	for _, id := range r.added {
		r.ix.tree.ReplaceOrInsert(id)
	}
	*r = Rebuild{}
}
