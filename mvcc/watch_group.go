package mvcc

import "go.etcd.io/etcd/pkg/v3/adt"

// watchGroup finds the watchers of a key without looking at the others,
// as etcd's watcherGroup does: watchers of one key sit in a map by key,
// watchers of a range in an interval tree (etcd's adt), one node per
// distinct range holding every watcher of that range. A write to a key
// costs a map lookup and a stab of the tree, O(log r + m) for r distinct
// ranges and m matching watchers, whatever the number of watchers. It is
// not safe for concurrent use: Store.watchMu guards it.
type watchGroup struct {
	keys   map[string]watcherSet
	ranges adt.IntervalTree
}

type watcherSet map[*Watcher]struct{}

func newWatchGroup() watchGroup {
	return watchGroup{keys: map[string]watcherSet{}, ranges: adt.NewIntervalTree()}
}

// interval is w's range in the tree: an empty end is the affine
// comparator's infinity, etcd's "\x00" (every key from key on). Keys are
// never empty, so a begin is never infinite.
func (w *Watcher) interval() adt.Interval {
	if w.r.unbounded {
		return adt.NewStringAffineInterval(string(w.r.key), "")
	}
	return adt.NewStringAffineInterval(string(w.r.key), string(w.r.end))
}

func (g *watchGroup) add(w *Watcher) {
	if w.r.single() {
		set := g.keys[string(w.r.key)]
		if set == nil {
			set = watcherSet{}
			g.keys[string(w.r.key)] = set
		}
		set[w] = struct{}{}
		return
	}
	ivl := w.interval()
	if iv := g.ranges.Find(ivl); iv != nil {
		iv.Val.(watcherSet)[w] = struct{}{}
		return
	}
	g.ranges.Insert(ivl, watcherSet{w: {}})
}

func (g *watchGroup) remove(w *Watcher) {
	if w.r.single() {
		set := g.keys[string(w.r.key)]
		delete(set, w)
		if len(set) == 0 {
			delete(g.keys, string(w.r.key))
		}
		return
	}
	ivl := w.interval()
	iv := g.ranges.Find(ivl)
	if iv == nil {
		return
	}
	set := iv.Val.(watcherSet)
	delete(set, w)
	if len(set) == 0 {
		g.ranges.Delete(ivl)
	}
}

// each calls fn for every watcher whose range holds key.
func (g *watchGroup) each(key []byte, fn func(*Watcher)) {
	for w := range g.keys[string(key)] {
		fn(w)
	}
	if g.ranges.Len() == 0 {
		return
	}
	for _, iv := range g.ranges.Stab(adt.NewStringAffinePoint(string(key))) {
		for w := range iv.Val.(watcherSet) {
			fn(w)
		}
	}
}
