package mvcc

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/stratadb/strata/engine"
)

// Exported is what Export found besides the versions: the history's end
// state and the leases (without keys: a lease's keys are the live keys
// whose latest version names it).
type Exported struct {
	History
	Leases []Lease
	// Aux is the aux key space (see AuxWrite), in key order, as of the
	// same point as the versions.
	Aux []AuxWrite
}

// Export reads the whole store as of one consistent point, as a
// migration writes it elsewhere: leases in ID order and the aux key
// space (in Exported), then every version
// in revision order through version, whose argument is valid only during
// the call. It runs beside reads and writes (it reads an engine snapshot).
func (s *Store) Export(version func(Version) error) (Exported, error) {
	if s.closed.Load() {
		return Exported{}, ErrClosed
	}
	snap, err := s.db.NewSnapshot()
	if err != nil {
		return Exported{}, fmt.Errorf("mvcc: export: %w", err)
	}
	defer snap.Close()
	out := Exported{History: History{CompactScheduled: -1, CompactFinished: -1}}
	var rev int64
	for _, m := range []struct {
		key []byte
		to  *int64
	}{{metaRev, &rev}, {metaCompactScheduled, &out.CompactScheduled}, {metaCompactFinished, &out.CompactFinished}} {
		b, err := snap.Get(m.key)
		if errors.Is(err, engine.ErrNotFound) {
			continue
		}
		if err != nil {
			return Exported{}, fmt.Errorf("mvcc: export: %w", err)
		}
		if *m.to, err = decodeInt64(m.key, b); err != nil {
			return Exported{}, err
		}
	}

	it, err := snap.NewIter(&engine.IterOptions{LowerBound: []byte{leasePrefix}, UpperBound: []byte{leasePrefix + 1}})
	if err != nil {
		return Exported{}, fmt.Errorf("mvcc: export: %w", err)
	}
	for ok := it.First(); ok; ok = it.Next() {
		v, err := it.ValueAndErr()
		if err != nil {
			_ = it.Close()
			return Exported{}, fmt.Errorf("mvcc: export: %w", err)
		}
		id, ttl, err := decodeLease(it.Key(), v)
		if err != nil {
			_ = it.Close()
			return Exported{}, err
		}
		out.Leases = append(out.Leases, Lease{ID: id, TTL: ttl})
	}
	if err := errors.Join(it.Error(), it.Close()); err != nil {
		return Exported{}, fmt.Errorf("mvcc: export: %w", err)
	}

	it, err = snap.NewIter(&engine.IterOptions{LowerBound: []byte{auxPrefix}, UpperBound: []byte{auxPrefix + 1}})
	if err != nil {
		return Exported{}, fmt.Errorf("mvcc: export: %w", err)
	}
	for ok := it.First(); ok; ok = it.Next() {
		v, err := it.ValueAndErr()
		if err != nil {
			_ = it.Close()
			return Exported{}, fmt.Errorf("mvcc: export: %w", err)
		}
		out.Aux = append(out.Aux, AuxWrite{Key: bytes.Clone(it.Key()[1:]), Value: bytes.Clone(v)})
	}
	if err := errors.Join(it.Error(), it.Close()); err != nil {
		return Exported{}, fmt.Errorf("mvcc: export: %w", err)
	}

	it, err = snap.NewIter(&engine.IterOptions{LowerBound: []byte{revPrefix}, UpperBound: []byte{revPrefix + 1}})
	if err != nil {
		return Exported{}, fmt.Errorf("mvcc: export: %w", err)
	}
	defer it.Close()
	var last int64
	for ok := it.First(); ok; ok = it.Next() {
		r, index, err := decodeRevSlot(it.Key())
		if err != nil {
			return Exported{}, err
		}
		if index {
			continue // the record says it all
		}
		v, err := it.ValueAndErr()
		var rec record
		if err == nil {
			rec, err = decodeRecord(v)
		}
		if err == nil {
			_, err = s.dicts.expand(nil, &rec)
		}
		if err != nil {
			return Exported{}, fmt.Errorf("mvcc: export: revision %d.%d: %w", r.Main, r.Sub, err)
		}
		if err := version(Version{KV: rec.kv(), Sub: r.Sub, Tombstone: rec.tomb}); err != nil {
			return Exported{}, err
		}
		last = r.Main
	}
	if err := it.Error(); err != nil {
		return Exported{}, fmt.Errorf("mvcc: export: %w", err)
	}
	out.Rev = currentRev(rev, last, out.CompactScheduled)
	return out, nil
}
