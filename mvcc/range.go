package mvcc

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"slices"

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

	// Walk the index: count every key, keep the first limit ones. A page
	// of a paginated list may know its count already (rangeCounts) and
	// then walks only its limit; a writer's read (fetch), which sees its
	// own txn's writes, neither uses nor records counts.
	paged := fetch == nil && limit > 0 && !opts.SkipCount && !opts.CountOnly && !kr.single() && !kr.empty()
	var known int64
	var countKnown bool
	if paged {
		known, countKnown = s.counts.get(kr.key, kr.upper(), rev)
	}
	var hits []hit
	var keyBuf []byte
	// nextStarts are where the next page may start: just after the last
	// hit, or after the one before it (the server asks for one more key
	// than the client's limit, to tell whether there are more).
	var nextStarts [2][]byte
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
		if paged && int64(len(hits)) >= limit-1 {
			nextStarts[limit-int64(len(hits))] = append(bytes.Clone(k), 0)
		}
	}
	switch {
	case kr.single():
		if r, ok := s.ix.Get(kr.key, rev); ok {
			visit(kr.key, r)
		}
	case !kr.empty():
		s.ix.Range(kr.key, kr.upper(), rev, func(k []byte, r keyindex.KeyRev) bool {
			visit(k, r)
			return !(opts.SkipCount || countKnown) || limit < 0 || int64(len(hits)) < limit
		})
	}
	if countKnown {
		res.Count = known
	}
	if paged && int64(len(hits)) == limit && res.Count > limit {
		end := bytes.Clone(kr.upper())
		for i, start := range nextStarts {
			if start != nil {
				s.counts.put(start, end, rev, res.Count-limit+int64(i))
			}
		}
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

	// Read the records in revision order, not key order: they are stored
	// by revision, so the iterator only moves forward (Pebble turns an
	// increasing seek into a step when it can) and records that share a
	// block are read while it is at hand, instead of a block fetched and
	// decompressed again for each of them.
	order := make([]int32, len(hits))
	for i := range order {
		order[i] = int32(i)
	}
	slices.SortFunc(order, func(a, b int32) int {
		ra, rb := hits[a].keyRev.Mod, hits[b].keyRev.Mod
		return cmp.Or(cmp.Compare(ra.Main, rb.Main), cmp.Compare(ra.Sub, rb.Sub))
	})
	var rk []byte
	var ar recordArena
	for n, i := range order {
		h := hits[i]
		rk = appendRevKey(rk[:0], h.keyRev.Mod)
		if !it.SeekGE(rk) || string(it.Key()) != string(rk) {
			err := it.Error()
			if err == nil {
				err = engine.ErrNotFound
			}
			return RangeResult{}, s.readError(h.keyRev.Mod, err)
		}
		v, err := it.ValueAndErr()
		if err != nil {
			return RangeResult{}, s.readError(h.keyRev.Mod, err)
		}
		rec, err := decodeRecord(v)
		var vlen int
		if err == nil {
			vlen, err = s.dicts.expandedLen(&rec)
		}
		if err != nil {
			return RangeResult{}, err
		}
		if opts.Charge != nil {
			if err := opts.Charge(len(rec.key) + vlen); err != nil {
				return RangeResult{}, err
			}
		}
		kv := KeyValue{CreateRevision: h.keyRev.Create, ModRevision: h.keyRev.Mod.Main, Version: h.keyRev.Version, Lease: rec.lease}
		kv.Key, kv.Value = ar.alloc(len(rec.key), vlen, len(hits)-n)
		copy(kv.Key, rec.key)
		// The value is expanded (or copied) straight into the arena.
		if err := s.dicts.expandInto(kv.Value, &rec); err != nil {
			return RangeResult{}, err
		}
		res.KVs[i] = kv
	}
	return res, nil
}

// recordArena holds the keys and values of a Range's records in a few
// shared chunks, so that a page of small records costs a few allocations
// rather than two per record, without the one buffer grown by doubling
// that a page of large values (500 Kubernetes objects of 14 KB) copied
// several times over and allocated twice its size. A chunk is sized for
// the records left, by the size of the one at hand plus an eighth, up to
// arenaChunk; a record over a quarter of that gets an allocation of its
// own.
type recordArena struct{ buf []byte }

const arenaChunk = 256 << 10

// alloc returns room for a key of keyLen bytes and a value of valueLen
// (nil for an empty value), each capped so that appending to one cannot
// overwrite another; left counts the records still to place, this one
// included.
func (a *recordArena) alloc(keyLen, valueLen, left int) (k, v []byte) {
	n := keyLen + valueLen
	var b []byte
	if n > arenaChunk/4 {
		b = make([]byte, n)
	} else {
		if n > cap(a.buf)-len(a.buf) {
			est := n * left
			a.buf = make([]byte, 0, min(arenaChunk, max(n, est+est/8)))
		}
		b = a.buf[len(a.buf) : len(a.buf)+n]
		a.buf = a.buf[:len(a.buf)+n]
	}
	k = b[:keyLen:keyLen]
	if valueLen > 0 {
		v = b[keyLen:n:n]
	}
	return k, v
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
