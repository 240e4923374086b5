package mvcc

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/klauspost/compress/s2"

	"github.com/stratadb/strata/engine"
)

// Values are compressed one by one against a dictionary of recent values
// (S2 with a dictionary), before they reach the engine.
//
// Why: Kubernetes objects of 10-20 KB repeat each other far more than
// they repeat themselves. The engine compresses blocks of 32 KB, about two
// objects, at 4.9x; a 64 KB dictionary of earlier objects makes one object
// alone compress at about 8x (mvcc/testdata and docs/mvcc.md give the
// figures). Compressed alone, a value is also decompressed alone: a read
// no longer decompresses the other values of its block, so reading a
// value out of history costs less, not more. And the WAL, the memtables
// and the record cache hold the compressed value, so they hold several
// times more of them.
//
// A dictionary is the last dictSize bytes of the values written just
// before it was made. It is stored under the dictionary prefix (codec.go)
// in the same batch as the first record that uses it, and a record names
// its dictionary by the first 8 bytes of the dictionary's SHA-256: the
// same name means the same bytes, in any store, so a snapshot's
// dictionaries and this store's never clash. Dictionaries are never
// deleted (each is at most 64 KB; a new one is made only when the values
// written stop compressing against the current one), and metaValueDict
// names the one in use, so a restart goes on with it.
const (
	// dictPrefix is the key space of the dictionaries: 'v' and the 8-byte
	// name -> the dictionary (s2.Dict.Bytes).
	dictPrefix  = 'v'
	dictKeyLen  = 9
	dictNameLen = 8
	// dictMinValue is the shortest value compressed: shorter ones gain a
	// few bytes at most and are stored as given.
	dictMinValue = 512
	// dictSize is the bytes of recent values a dictionary holds: S2's
	// largest.
	dictSize = s2.MaxDictSize
	// dictWindow is the bytes of values over which the compression ratio
	// is measured, to tell when the values changed: a new dictionary is
	// made once the ratio over a window falls below dictRetrain of the
	// ratio over the first window after the current one was made.
	dictWindow  = 32 << 20
	dictRetrain = 0.8
)

// metaValueDict names the dictionary new values are compressed against.
var metaValueDict = []byte("z/value_dict")

// dictKey returns the engine key of the dictionary named name.
func dictKey(name uint64) []byte {
	return binary.BigEndian.AppendUint64([]byte{dictPrefix}, name)
}

// dictName returns the name of a dictionary: its content's address.
func dictName(b []byte) uint64 {
	sum := sha256.Sum256(b)
	return binary.BigEndian.Uint64(sum[:dictNameLen])
}

// valueDicts holds the store's dictionaries, for readers, and the
// writer's state: the dictionary in use, the values sampled for the next
// one, the ratio measured. Readers need no lock; the writer's state is
// guarded by the store's writeMu.
type valueDicts struct {
	// byName maps a name to its dictionary; replaced whole when one is
	// added (copy on write), so readers load it without a lock.
	byName atomic.Pointer[map[uint64]*s2.Dict]
	addMu  sync.Mutex // serializes the copies on write

	off bool // Options.RawValues: store every value as given

	// The writer's state, under writeMu.
	cur       *s2.Dict
	curName   uint64
	persisted bool   // cur and metaValueDict are in the engine
	sampling  bool   // gathering values for a new dictionary
	sample    []byte // the last values written, while sampling
	// firstRatio is the compression ratio over the first window after
	// cur was made, 0 until it is measured; raw and packed count the
	// bytes of the window under way.
	firstRatio  float64
	raw, packed int64
	scratch     []byte
}

func newValueDicts(off bool) *valueDicts {
	d := &valueDicts{off: off, sampling: true}
	d.byName.Store(&map[uint64]*s2.Dict{})
	return d
}

// add makes dict known to readers under name.
func (d *valueDicts) add(name uint64, dict *s2.Dict) {
	d.addMu.Lock()
	defer d.addMu.Unlock()
	old := *d.byName.Load()
	if _, ok := old[name]; ok {
		return
	}
	m := make(map[uint64]*s2.Dict, len(old)+1)
	for k, v := range old {
		m[k] = v
	}
	m[name] = dict
	d.byName.Store(&m)
}

// load reads db's dictionaries, and the name of the one in use, which the
// writer goes on with.
func (d *valueDicts) load(db *engine.DB) error {
	it, err := db.NewIter(&engine.IterOptions{LowerBound: []byte{dictPrefix}, UpperBound: []byte{dictPrefix + 1}})
	if err != nil {
		return fmt.Errorf("mvcc: Open: read value dictionaries: %w", err)
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		k, v := it.Key(), it.Value()
		dict := s2.NewDict(v)
		if len(k) != dictKeyLen || dict == nil || dictName(v) != binary.BigEndian.Uint64(k[1:]) {
			return fmt.Errorf("mvcc: Open: %w: value dictionary %q of %d bytes", ErrCorrupt, k, len(v))
		}
		d.add(binary.BigEndian.Uint64(k[1:]), dict)
	}
	if err := it.Error(); err != nil {
		return fmt.Errorf("mvcc: Open: read value dictionaries: %w", err)
	}
	v, err := db.Get(metaValueDict)
	if errors.Is(err, engine.ErrNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("mvcc: Open: read %s: %w", metaValueDict, err)
	}
	if len(v) != dictNameLen {
		return fmt.Errorf("mvcc: Open: %w: %s of %d bytes", ErrCorrupt, metaValueDict, len(v))
	}
	name := binary.BigEndian.Uint64(v)
	dict, ok := (*d.byName.Load())[name]
	if !ok {
		return fmt.Errorf("mvcc: Open: %w: %s names dictionary %016x, which the store does not hold", ErrCorrupt, metaValueDict, name)
	}
	d.cur, d.curName, d.persisted, d.sampling = dict, name, true, false
	return nil
}

// adopt takes over fresh's writer state: the store's contents were
// replaced by a snapshot whose dictionaries fresh loaded. Under writeMu.
func (d *valueDicts) adopt(fresh *valueDicts) {
	for name, dict := range *fresh.byName.Load() {
		d.add(name, dict)
	}
	d.cur, d.curName, d.persisted, d.sampling = fresh.cur, fresh.curName, fresh.persisted, fresh.sampling
	d.sample, d.firstRatio, d.raw, d.packed = nil, 0, 0, 0
}

// appendRecord appends r's encoding to b, its value compressed if that
// pays, and adds to eb the dictionary it uses if eb does not hold it yet.
// Under writeMu.
func (d *valueDicts) appendRecord(eb *engine.Batch, b []byte, r *record) ([]byte, error) {
	if d.off || len(r.value) < dictMinValue {
		return appendRecord(b, r), nil
	}
	if d.sampling {
		d.gather(r.value)
	}
	if d.cur == nil {
		return appendRecord(b, r), nil
	}
	d.scratch = d.cur.Encode(d.scratch[:0], r.value)
	d.measure(len(r.value), len(d.scratch))
	if len(d.scratch) > len(r.value)-len(r.value)/8 {
		return appendRecord(b, r), nil
	}
	if !d.persisted {
		if err := eb.Put(dictKey(d.curName), d.cur.Bytes()); err != nil {
			return b, err
		}
		if err := eb.Put(metaValueDict, binary.BigEndian.AppendUint64(nil, d.curName)); err != nil {
			return b, err
		}
		d.persisted = true
	}
	return appendPackedRecord(b, r, d.curName, d.scratch), nil
}

// gather adds v to the sample and makes the next dictionary once the
// sample holds dictSize bytes.
func (d *valueDicts) gather(v []byte) {
	d.sample = append(d.sample, v...)
	if len(d.sample) < dictSize {
		return
	}
	dict := s2.MakeDict(d.sample[len(d.sample)-dictSize:], nil)
	d.sample = d.sample[:0]
	if dict == nil || dictName(dict.Bytes()) == 0 {
		return // 0 names no dictionary in a record
	}
	d.cur, d.curName, d.persisted, d.sampling = dict, dictName(dict.Bytes()), false, false
	d.firstRatio, d.raw, d.packed = 0, 0, 0
	d.add(d.curName, dict)
}

// measure counts a value compressed, and starts sampling for a new
// dictionary when the values stopped compressing as well as they did.
func (d *valueDicts) measure(raw, packed int) {
	d.raw += int64(raw)
	d.packed += int64(min(packed, raw))
	if d.raw < dictWindow {
		return
	}
	ratio := float64(d.raw) / float64(d.packed)
	d.raw, d.packed = 0, 0
	switch {
	case d.firstRatio == 0:
		d.firstRatio = ratio
	case ratio < dictRetrain*d.firstRatio:
		d.sampling = true
	}
}

// expand decompresses r's value if it is compressed, into dst's space,
// and returns dst's space for reuse. A record whose dictionary the store
// does not hold, or whose value does not decompress, is ErrCorrupt.
func (d *valueDicts) expand(dst []byte, r *record) ([]byte, error) {
	if r.dict == 0 {
		return dst, nil
	}
	dict, ok := (*d.byName.Load())[r.dict]
	if !ok {
		return dst, fmt.Errorf("%w: record of revision %d compressed with dictionary %016x, which the store does not hold", ErrCorrupt, r.mod, r.dict)
	}
	n, err := s2.DecodedLen(r.value)
	if err != nil || n > MaxValueSize || n < dictMinValue {
		return dst, fmt.Errorf("%w: record of revision %d: compressed value of %d bytes (decoded length %d, %v)", ErrCorrupt, r.mod, len(r.value), n, err)
	}
	out, err := dict.Decode(dst[:cap(dst)], r.value) // in dst if it fits
	if err != nil {
		return dst, fmt.Errorf("%w: record of revision %d: compressed value: %w", ErrCorrupt, r.mod, err)
	}
	r.value, r.dict = out, 0
	return out, nil
}

// plain returns the record encoded in b with its value decompressed:
// what HashKV hashes, so that members whose dictionaries differ (each
// makes its own) hash alike. b itself if its value is not compressed.
func (d *valueDicts) plain(b []byte) ([]byte, error) {
	if len(b) < 2 || b[1]&flagDict == 0 {
		return b, nil
	}
	r, err := decodeRecord(b)
	if err != nil {
		return nil, err
	}
	if _, err := d.expand(nil, &r); err != nil {
		return nil, err
	}
	return appendRecord(nil, &r), nil
}

// decodeOwned decodes the record encoded in b, which the caller owns (a
// copy), its value decompressed: the record's key and value are the
// caller's.
func (s *Store) decodeOwned(b []byte) (record, error) {
	r, err := decodeRecord(b)
	if err != nil {
		return r, err
	}
	_, err = s.dicts.expand(nil, &r)
	return r, err
}
