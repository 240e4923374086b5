package mvcc

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/stratadb/strata/engine"
	"github.com/stratadb/strata/mvcc/keyindex"
)

// Range returns the keys of key (end nil), of [key, end), or of every key
// from key on (end "\x00"), as they were at opts.Rev (0: the latest).
// opts.Rev must lie between the compacted revision (ErrCompacted below it)
// and the current one (ErrFutureRev above it). Keys and values in the
// result are the caller's; they share a few allocations, so appending to
// one cannot overwrite another.
func (s *Store) Range(key, end []byte, opts RangeOptions) (RangeResult, error) {
	kr, err := checkRange(key, end)
	if err != nil {
		return RangeResult{}, err
	}
	s.mu.RLock()
	locked := true
	defer func() {
		if locked {
			s.mu.RUnlock()
		}
	}()
	if s.closed.Load() {
		return RangeResult{}, ErrClosed
	}
	return s.rangeAt(kr, opts, s.rev, nil, func() {
		s.mu.RUnlock()
		locked = false
	})
}

// rangeAt reads kr at opts.Rev (0 or below: at cur), with cur as the
// header revision. The caller holds mu, or writeMu with cur its txn's
// revision. fetch reads one record (a writer's, which sees its own); nil
// reads the engine, many records through one iterator, and then calls
// unlock (if not nil) once the iterator pins what it reads, so the caller's
// lock is released early.
func (s *Store) rangeAt(kr keyRange, opts RangeOptions, cur int64, fetch func(keyindex.Revision) (record, error), unlock func()) (RangeResult, error) {
	res := RangeResult{Rev: cur}
	rev := opts.Rev
	if rev <= 0 {
		rev = cur
	}
	if rev > cur {
		return RangeResult{}, fmt.Errorf("%w: %d, current revision is %d", ErrFutureRev, rev, cur)
	}
	if rev < s.compactRev {
		return RangeResult{}, fmt.Errorf("%w: %d, compacted at %d", ErrCompacted, rev, s.compactRev)
	}
	limit := opts.Limit
	if limit <= 0 || opts.CountOnly {
		limit = -1
	}

	// Walk the index: count every key, keep the first limit ones.
	var hits []hit
	var keyBuf []byte
	visit := func(k []byte, r keyindex.KeyRev) {
		res.Count++
		if limit >= 0 && int64(len(hits)) >= limit || opts.CountOnly {
			return
		}
		h := hit{keyRev: r}
		if opts.KeysOnly {
			h.keyOff, keyBuf = len(keyBuf), append(keyBuf, k...)
		}
		hits = append(hits, h)
	}
	switch {
	case kr.single():
		if r, ok := s.ix.Get(kr.key, rev); ok {
			visit(kr.key, r)
		}
	case !kr.empty():
		s.ix.Range(kr.key, kr.upper(), rev, func(k []byte, r keyindex.KeyRev) bool {
			visit(k, r)
			return !opts.SkipCount || limit < 0 || int64(len(hits)) < limit
		})
	}
	if opts.CountOnly || len(hits) == 0 {
		return res, nil
	}
	res.KVs = make([]KeyValue, len(hits))
	if opts.KeysOnly {
		for i, h := range hits {
			end := len(keyBuf)
			if i+1 < len(hits) {
				end = hits[i+1].keyOff
			}
			res.KVs[i] = KeyValue{Key: keyBuf[h.keyOff:end:end], CreateRevision: h.keyRev.Create,
				ModRevision: h.keyRev.Mod.Main, Version: h.keyRev.Version}
		}
		return res, nil
	}

	// Read the records. The revisions read are retained, but a compaction
	// may drop them as soon as mu is released: read them under mu, or from
	// an iterator opened under it (its view predates the deletion).
	if fetch != nil {
		for i, h := range hits {
			rec, err := fetch(h.keyRev.Mod)
			if err != nil {
				return RangeResult{}, err
			}
			kv := rec.kv()
			kv.Key, kv.Value = bytes.Clone(kv.Key), bytes.Clone(kv.Value)
			res.KVs[i] = kv
		}
		return res, nil
	}
	if len(hits) == 1 {
		rec, err := s.fetch(hits[0].keyRev.Mod)
		if err != nil {
			return RangeResult{}, err
		}
		res.KVs[0] = rec.kv()
		return res, nil
	}
	it, err := s.db.NewIter(&engine.IterOptions{LowerBound: []byte{revPrefix}, UpperBound: []byte{revPrefix + 1}})
	if err != nil {
		return RangeResult{}, err
	}
	if unlock != nil {
		unlock()
	}
	defer it.Close()

	var buf, rk []byte
	offs := make([]int, 0, 2*len(hits))
	leases := make([]int64, len(hits))
	for i, h := range hits {
		rk = appendRevKey(rk[:0], h.keyRev.Mod)
		if !it.SeekGE(rk) || string(it.Key()) != string(rk) {
			err := it.Error()
			if err == nil {
				err = engine.ErrNotFound
			}
			return RangeResult{}, s.readError(h.keyRev.Mod, err)
		}
		rec, err := decodeRecord(it.Value())
		if err != nil {
			return RangeResult{}, err
		}
		leases[len(offs)/2] = rec.lease
		if n := len(buf) + len(rec.key) + len(rec.value); n > cap(buf) {
			buf = growFor(buf, n, i+1, len(hits))
		}
		offs = append(offs, len(buf))
		buf = append(buf, rec.key...)
		offs = append(offs, len(buf))
		buf = append(buf, rec.value...)
	}
	for i, h := range hits {
		k0, k1 := offs[2*i], offs[2*i+1]
		v1 := len(buf)
		if 2*i+2 < len(offs) {
			v1 = offs[2*i+2]
		}
		kv := KeyValue{Key: buf[k0:k1:k1], CreateRevision: h.keyRev.Create, ModRevision: h.keyRev.Mod.Main, Version: h.keyRev.Version, Lease: leases[i]}
		if v1 > k1 {
			kv.Value = buf[k1:v1:v1]
		}
		res.KVs[i] = kv
	}
	return res, nil
}

// growFor returns buf with room for n bytes, after done of total records:
// the sizes read so far, extrapolated over the records left plus an
// eighth, so that a page of large values (500 Kubernetes objects of 14 KB)
// grows its buffer once or twice instead of doubling it from empty, which
// copied every value several times over.
func growFor(buf []byte, n, done, total int) []byte {
	est := n / done * total
	nb := make([]byte, len(buf), max(n, est+est/8))
	copy(nb, buf)
	return nb
}

type hit struct {
	keyRev keyindex.KeyRev
	keyOff int
}

func (s *Store) readError(r keyindex.Revision, err error) error {
	if errors.Is(err, engine.ErrNotFound) {
		return fmt.Errorf("mvcc: %w: revision %d.%d is in the index but not in storage", ErrCorrupt, r.Main, r.Sub)
	}
	return fmt.Errorf("mvcc: read revision %d.%d: %w", r.Main, r.Sub, err)
}
