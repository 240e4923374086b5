package mvcc

import (
	"bytes"
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
// Why: Kubernetes objects of 10-20 KB repeat each other far more than they
// repeat themselves. The engine compressed the server's blocks of 32 KB
// (its block size then), about two objects, at 4.9x; a 64 KB dictionary of
// earlier objects makes one object alone compress at about 8x
// (mvcc/testdata and docs/mvcc.md give the figures). Compressed alone, a
// value is also decompressed alone: a read no longer decompresses the
// other values of its block, so reading a value out of history costs less,
// not more. And the WAL, the memtables and the record cache hold the
// compressed value, so they hold several times more of them.
//
// A dictionary is the last dictSize bytes of the values written just
// before it was made. It is stored under the dictionary prefix (codec.go)
// in the same batch as the first record that uses it, and a record names
// its dictionary by the first 8 bytes of the dictionary's SHA-256: the
// same name means the same bytes, in any store, so a snapshot's
// dictionaries and this store's never clash. Dictionaries are never
// deleted (each is at most 64 KB, and a new one replaces the one in use
// only when it compresses the values written since far better; at most
// one per dictCheckEvery of values), and metaValueDict names the one in
// use, so a restart goes on with it.
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
	// dictCheckEvery is how many bytes of values go by between two
	// checks that the dictionary in use still fits them: the next
	// dictSize bytes of values then make a candidate, the dictTrial bytes
	// after are compressed with both, and the candidate replaces the one
	// in use if it compressed them to under dictSwitch of the bytes. The
	// first values of a cluster (its RBAC roles, say) make a dictionary
	// that fits its pods poorly; a check replaces it once pods come.
	dictCheckEvery = 256 << 20
	dictTrial      = 256 << 10
	dictSwitch     = 0.85
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
// writer's state: the dictionary in use and where the next check stands.
// Readers need no lock; the writer's state is guarded by the store's
// writeMu.
type valueDicts struct {
	// byName maps a name to its dictionary; replaced whole when one is
	// added (copy on write), so readers load it without a lock.
	byName atomic.Pointer[map[uint64]*s2.Dict]
	addMu  sync.Mutex // serializes the copies on write

	off bool // Options.RawValues: store every value as given

	// The writer's state, under writeMu.
	cur       *s2.Dict
	curName   uint64
	persisted bool // cur and metaValueDict are in the engine
	// phase is what the writer does with the values it writes besides
	// compressing them: gathers them for a candidate, tries the
	// candidate on them, or counts them until the next check.
	phase     dictPhase
	sample    []byte   // the values gathered for the candidate
	candidate *s2.Dict // while trying
	// untilCheck counts down the bytes until the next check; trialRaw,
	// trialCur and trialCand sum the bytes of the trial as written and
	// as each dictionary compressed them.
	untilCheck                    int64
	checkEvery                    int64 // dictCheckEvery; tests lower it
	trialRaw, trialCur, trialCand int64
	scratch, trialScratch         []byte
}

type dictPhase int

const (
	dictGathering dictPhase = iota
	dictTrying
	dictCounting
)

func newValueDicts(off bool) *valueDicts {
	d := &valueDicts{off: off, phase: dictGathering, checkEvery: dictCheckEvery}
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
		// The dictionary keeps the bytes it is made of: a copy, not the
		// iterator's.
		v, err := it.ValueAndErr()
		if err != nil {
			return fmt.Errorf("mvcc: Open: read value dictionaries: %w", err)
		}
		k := it.Key()
		v = bytes.Clone(v)
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
	d.use(name, dict, true)
	return nil
}

// adopt takes over fresh's writer state: the store's contents were
// replaced by a snapshot whose dictionaries fresh loaded. Under writeMu.
func (d *valueDicts) adopt(fresh *valueDicts) {
	for name, dict := range *fresh.byName.Load() {
		d.add(name, dict)
	}
	if fresh.cur == nil {
		d.cur, d.curName, d.persisted = nil, 0, false
		d.phase, d.sample, d.candidate = dictGathering, nil, nil
		return
	}
	d.use(fresh.curName, fresh.cur, fresh.persisted)
}

// use makes dict, named name, the one new values are compressed against,
// and starts counting toward the next check.
func (d *valueDicts) use(name uint64, dict *s2.Dict, persisted bool) {
	d.add(name, dict)
	d.cur, d.curName, d.persisted = dict, name, persisted
	d.phase, d.untilCheck, d.sample, d.candidate = dictCounting, d.checkEvery, nil, nil
}

// appendRecord appends r's encoding to b, its value compressed if that
// pays, and adds to eb the dictionary it uses if eb does not hold it yet.
// Under writeMu.
func (d *valueDicts) appendRecord(eb *engine.Batch, b []byte, r *record) ([]byte, error) {
	if d.off || len(r.value) < dictMinValue {
		return appendRecord(b, r), nil
	}
	if d.phase == dictGathering {
		d.gather(r.value)
	}
	if d.cur == nil {
		return appendRecord(b, r), nil
	}
	d.scratch = d.cur.Encode(d.scratch[:0], r.value)
	packed := len(d.scratch)
	if packed > len(r.value)-len(r.value)/8 {
		b = appendRecord(b, r)
	} else {
		if !d.persisted {
			if err := eb.Put(dictKey(d.curName), d.cur.Bytes()); err != nil {
				return b, err
			}
			if err := eb.Put(metaValueDict, binary.BigEndian.AppendUint64(nil, d.curName)); err != nil {
				return b, err
			}
			d.persisted = true
		}
		b = appendPackedRecord(b, r, d.curName, d.scratch)
	}
	// Only now: a trial may change the dictionary in use.
	switch d.phase {
	case dictCounting:
		if d.untilCheck -= int64(len(r.value)); d.untilCheck <= 0 {
			d.phase = dictGathering
		}
	case dictTrying:
		d.try(r.value, packed)
	}
	return b, nil
}

// gather adds v to the sample; once it holds dictSize bytes they make a
// dictionary: the first one, used at once, or a candidate to try.
func (d *valueDicts) gather(v []byte) {
	d.sample = append(d.sample, v...)
	if len(d.sample) < dictSize {
		return
	}
	// The dictionary keeps the bytes it is made of: the next sample
	// starts in a new buffer.
	dict := s2.MakeDict(d.sample[len(d.sample)-dictSize:], nil)
	d.sample = nil
	if dict == nil || dictName(dict.Bytes()) == 0 {
		// No dictionary (0 names none in a record): count to the next
		// check.
		d.phase, d.untilCheck = dictCounting, d.checkEvery
		return
	}
	if d.cur == nil {
		d.use(dictName(dict.Bytes()), dict, false)
		return
	}
	d.phase, d.candidate = dictTrying, dict
	d.trialRaw, d.trialCur, d.trialCand = 0, 0, 0
}

// try compresses v, which the dictionary in use compressed to packed
// bytes, with the candidate too; after dictTrial bytes the candidate
// replaces the one in use if it did far better.
func (d *valueDicts) try(v []byte, packed int) {
	d.trialScratch = d.candidate.Encode(d.trialScratch[:0], v)
	d.trialRaw += int64(len(v))
	d.trialCur += int64(min(packed, len(v)))
	d.trialCand += int64(min(len(d.trialScratch), len(v)))
	if d.trialRaw < dictTrial {
		return
	}
	if float64(d.trialCand) < dictSwitch*float64(d.trialCur) {
		d.use(dictName(d.candidate.Bytes()), d.candidate, false)
		return
	}
	d.phase, d.untilCheck, d.candidate = dictCounting, d.checkEvery, nil
}

// expand decompresses r's value if it is compressed, into dst's space,
// and returns dst's space for reuse. A record whose dictionary the store
// does not hold, or whose value does not decompress, is ErrCorrupt.
func (d *valueDicts) expand(dst []byte, r *record) ([]byte, error) {
	if r.dict == 0 {
		return dst, nil
	}
	n, err := d.expandedLen(r)
	if err != nil {
		return dst, err
	}
	if cap(dst) < n {
		dst = make([]byte, n)
	}
	return dst[:n], d.expandInto(dst[:n], r)
}

// expandedLen is the length of r's value expanded: len(r.value) if it is
// not compressed.
func (d *valueDicts) expandedLen(r *record) (int, error) {
	if r.dict == 0 {
		return len(r.value), nil
	}
	n, err := s2.DecodedLen(r.value)
	if err != nil || n > MaxValueSize || n < dictMinValue {
		return 0, fmt.Errorf("%w: record of revision %d: compressed value of %d bytes (decoded length %d, %v)", ErrCorrupt, r.mod, len(r.value), n, err)
	}
	return n, nil
}

// expandInto expands r's value into dst, of its expandedLen, and points
// r's value at dst: a reader that keeps the value decompresses it where
// it keeps it, instead of into a buffer and then copying it there.
func (d *valueDicts) expandInto(dst []byte, r *record) error {
	if r.dict == 0 {
		copy(dst, r.value)
		r.value = dst
		return nil
	}
	dict, ok := (*d.byName.Load())[r.dict]
	if !ok {
		return fmt.Errorf("%w: record of revision %d compressed with dictionary %016x, which the store does not hold", ErrCorrupt, r.mod, r.dict)
	}
	out, err := dict.Decode(dst, r.value)
	if err != nil {
		return fmt.Errorf("%w: record of revision %d: compressed value: %w", ErrCorrupt, r.mod, err)
	}
	if len(out) != len(dst) || len(out) > 0 && &out[0] != &dst[0] {
		return fmt.Errorf("%w: record of revision %d: compressed value decodes to %d bytes, its header says %d", ErrCorrupt, r.mod, len(out), len(dst))
	}
	r.value, r.dict = dst, 0
	return nil
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
