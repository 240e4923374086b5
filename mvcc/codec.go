package mvcc

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/stratadb/strata/mvcc/keyindex"
)

// The engine's key space, all owned by the Store:
//
//	'r' main(8 bytes, big-endian) sub(8 bytes, big-endian)      ->  record
//	'r' main(8 bytes, big-endian) sub(8 bytes, big-endian) 'i'  ->  index record
//	'v' name (8 bytes, big-endian)                          ->  value dictionary (valuedict.go)
//	'x' aux key (the caller's, see AuxWrite)                    ->  the caller's value
//	'y' lease ID (8 bytes, big-endian, as uint64)           ->  TTL, 8-byte big-endian int64
//	'z' name                                                ->  8-byte big-endian int64
//
// Revision keys sort by revision, so writes append at the end of the key
// space and the LSM writes them sequentially; a scan of 'r' replays history.
// Leases and metadata sort after every revision: every write's batch also
// sets metadata (the current revision, the applied index), so a memtable
// flushed to L0 spans the newest revisions and the metadata after them, and
// overlaps only the last table of the level below. Were the metadata before
// the revisions, every flushed table would span the whole history, and
// every L0 compaction would rewrite all of it: with Kubernetes-sized values
// that stalled writes for seconds at a time once the store held a few
// hundred MB. Aux keys (written only with the rare changes of auth state)
// sort after the revisions too.
//
// Every revision has two keys, set in one batch and deleted in one batch:
// its record, and right after it (the 17-byte key followed by one byte)
// its index record, the record without its value: what Open needs to
// rebuild the index (key, create_revision, version, lease, tombstone).
// Open reads only the index records, so a restart does not read, fetch
// from a blob file or decompress the values, which are nearly all of the
// bytes stored (Kubernetes objects of 10-20 KB). The index record sits
// beside its record rather than under a prefix of its own, so the key
// space stays ordered by revision, for the reason above. A record with no
// index record after it was written before index records existed: Open
// decodes it whole, so such stores open without a migration. Everything
// else that reads the revisions (ranges, watches, HashKV, export) reads
// the records and skips the index records: HashKV hashes the records
// only, so members that wrote index records and members that did not
// hash alike.
const (
	revPrefix   = 'r'
	auxPrefix   = 'x'
	leasePrefix = 'y'
	metaPrefix  = 'z'
	revKeyLen   = 17
	// revIndexKeyLen is the length of an index record's key: the
	// revision key and revIndexSuffix.
	revIndexKeyLen = revKeyLen + 1
	revIndexSuffix = 'i'
	leaseKeyLen    = 9

	// oldLeasePrefix and oldMetaPrefix are where stores written before
	// the layout above kept leases and metadata; Open moves them.
	oldLeasePrefix = 'l'
	oldMetaPrefix  = 'm'
)

// Metadata keys, written in the same batch as the data they describe.
var (
	// metaRev holds the current revision, written by every write txn, so a
	// revision is never reused even when compaction deleted its keys.
	metaRev = []byte("z/current_rev")
	// metaCompactScheduled holds the revision of the last compaction
	// begun, written in the batch of its first deletions.
	metaCompactScheduled = []byte("z/compact_scheduled_rev")
	// metaCompactFinished holds the revision of the last compaction
	// finished, written in the batch of its last deletions. Open resumes
	// a compaction scheduled but not finished.
	metaCompactFinished = []byte("z/compact_finished_rev")
	// metaApplied holds the log index of the last Entry applied, written
	// in the batch of that entry's writes.
	metaApplied = []byte("z/applied_index")
)

// leaseKey returns the engine key of lease id.
func leaseKey(id int64) []byte {
	return binary.BigEndian.AppendUint64([]byte{leasePrefix}, uint64(id))
}

// decodeLease parses a lease key and its value.
func decodeLease(k, v []byte) (id, ttl int64, err error) {
	if len(k) != leaseKeyLen || k[0] != leasePrefix || len(v) != 8 {
		return 0, 0, fmt.Errorf("%w: lease key %x value %x", ErrCorrupt, k, v)
	}
	id, ttl = int64(binary.BigEndian.Uint64(k[1:])), int64(binary.BigEndian.Uint64(v))
	if id == 0 || ttl < 0 || ttl > MaxLeaseTTL {
		return 0, 0, fmt.Errorf("%w: lease %d with TTL %d", ErrCorrupt, id, ttl)
	}
	return id, ttl, nil
}

// revKey returns the engine key of revision r.
func revKey(r keyindex.Revision) []byte {
	return appendRevKey(make([]byte, 0, revKeyLen), r)
}

func appendRevKey(b []byte, r keyindex.Revision) []byte {
	b = append(b, revPrefix)
	b = binary.BigEndian.AppendUint64(b, uint64(r.Main))
	return binary.BigEndian.AppendUint64(b, uint64(r.Sub))
}

// appendRevIndexKey appends the key of revision r's index record.
func appendRevIndexKey(b []byte, r keyindex.Revision) []byte {
	return append(appendRevKey(b, r), revIndexSuffix)
}

// decodeRevKey parses the key of a record.
func decodeRevKey(k []byte) (keyindex.Revision, error) {
	if len(k) != revKeyLen {
		return keyindex.Revision{}, fmt.Errorf("%w: revision key %x", ErrCorrupt, k)
	}
	r, _, err := decodeRevSlot(k)
	return r, err
}

// isRevIndexKey reports whether k, a key under the revision prefix, is an
// index record's.
func isRevIndexKey(k []byte) bool { return len(k) == revIndexKeyLen && k[revKeyLen] == revIndexSuffix }

// decodeRevSlot parses a key under the revision prefix: a record's key,
// or an index record's (index is true).
func decodeRevSlot(k []byte) (r keyindex.Revision, index bool, err error) {
	switch {
	case isRevIndexKey(k):
		index = true
	case len(k) != revKeyLen:
		return keyindex.Revision{}, false, fmt.Errorf("%w: revision key %x", ErrCorrupt, k)
	}
	if k[0] != revPrefix {
		return keyindex.Revision{}, false, fmt.Errorf("%w: revision key %x", ErrCorrupt, k)
	}
	r = keyindex.Revision{
		Main: int64(binary.BigEndian.Uint64(k[1:9])),
		Sub:  int64(binary.BigEndian.Uint64(k[9:17])),
	}
	if r.Main < 1 || r.Main > keyindex.MaxMain || r.Sub < 0 {
		return keyindex.Revision{}, false, fmt.Errorf("%w: revision key %x: revision out of range", ErrCorrupt, k)
	}
	return r, index, nil
}

func encodeInt64(v int64) []byte { return binary.BigEndian.AppendUint64(nil, uint64(v)) }

func decodeInt64(name []byte, b []byte) (int64, error) {
	if len(b) != 8 {
		return 0, fmt.Errorf("%w: %s: %d bytes, want 8", ErrCorrupt, name, len(b))
	}
	v := int64(binary.BigEndian.Uint64(b))
	if v < 0 || v > keyindex.MaxMain {
		return 0, fmt.Errorf("%w: %s = %d out of range", ErrCorrupt, name, v)
	}
	return v, nil
}

// record is the value stored under a revision key: etcd's mvccpb.KeyValue
// with a tombstone flag, in a compact binary form:
//
//	format   1 byte, recordFormat
//	flags    1 byte, bit 0: tombstone, bit 1: has a lease; the others zero
//	keyLen   uvarint, then the key
//	create   uvarint create_revision (0 for a tombstone)
//	mod      uvarint mod_revision (the revision key's main revision)
//	version  uvarint version (0 for a tombstone)
//	lease    uvarint lease ID as uint64, only if flags bit 1 is set
//	dict     8 bytes, big-endian, the name of the dictionary the value is
//	         compressed against (valuedict.go), only if flags bit 2 is set
//	value    the rest (empty for a tombstone), compressed if bit 2 is set
//
// Every uvarint is minimally encoded, so a record has exactly one encoding
// and decode(encode(r)) == r, encode(decode(b)) == b.
//
// A revision's index record (see the key space above) is its record's
// encoding without the value (appendIndexRecord): it decodes as the same
// record with a nil value, with one decoder for both.
type record struct {
	key, value  []byte
	create, mod int64
	version     int64
	lease       int64
	tomb        bool
	// dict names the dictionary value is compressed against; 0 if value
	// is as written (valueDicts.expand decompresses it).
	dict uint64
}

// Records written before leases existed have no lease flag and decode with
// lease 0, so no migration is needed.
const (
	recordFormat = 1
	flagTomb     = 1
	flagLease    = 2
	flagDict     = 4
)

// appendRecord appends r's encoding, its value as it is.
func appendRecord(b []byte, r *record) []byte { return appendPackedRecord(b, r, 0, r.value) }

// appendPackedRecord appends r's encoding with value as its value: r's
// compressed against dictionary dict, or r's own if dict is 0.
func appendPackedRecord(b []byte, r *record, dict uint64, value []byte) []byte {
	var flags byte
	if r.tomb {
		flags |= flagTomb
	}
	if r.lease != 0 {
		flags |= flagLease
	}
	if dict != 0 {
		flags |= flagDict
	}
	b = append(b, recordFormat, flags)
	b = binary.AppendUvarint(b, uint64(len(r.key)))
	b = append(b, r.key...)
	b = binary.AppendUvarint(b, uint64(r.create))
	b = binary.AppendUvarint(b, uint64(r.mod))
	b = binary.AppendUvarint(b, uint64(r.version))
	if r.lease != 0 {
		b = binary.AppendUvarint(b, uint64(r.lease))
	}
	if dict != 0 {
		b = binary.BigEndian.AppendUint64(b, dict)
	}
	return append(b, value...)
}

// appendIndexRecord appends the index record of r: its encoding without
// the value.
func appendIndexRecord(b []byte, r *record) []byte { return appendPackedRecord(b, r, 0, nil) }

// decodeRecord parses a record; key and value alias b. It accepts exactly
// the records appendRecord produces for valid input and reports anything
// else as ErrCorrupt.
func decodeRecord(b []byte) (record, error) {
	var r record
	if len(b) < 2 {
		return r, fmt.Errorf("%w: record of %d bytes", ErrCorrupt, len(b))
	}
	if b[0] != recordFormat {
		return r, fmt.Errorf("%w: record format %d, want %d", ErrCorrupt, b[0], recordFormat)
	}
	if b[1]&^(flagTomb|flagLease|flagDict) != 0 {
		return r, fmt.Errorf("%w: record flags %#x", ErrCorrupt, b[1])
	}
	r.tomb = b[1]&flagTomb != 0
	hasLease, hasDict := b[1]&flagLease != 0, b[1]&flagDict != 0
	b = b[2:]
	keyLen, b, err := uvarint(b, "key length", keyindex.MaxKeySize)
	if err != nil {
		return r, err
	}
	if keyLen == 0 || uint64(len(b)) < keyLen {
		return r, fmt.Errorf("%w: record key length %d with %d bytes left", ErrCorrupt, keyLen, len(b))
	}
	r.key, b = b[:keyLen:keyLen], b[keyLen:]
	var create, mod, version uint64
	if create, b, err = uvarint(b, "create_revision", keyindex.MaxMain); err != nil {
		return r, err
	}
	if mod, b, err = uvarint(b, "mod_revision", keyindex.MaxMain); err != nil {
		return r, err
	}
	if version, b, err = uvarint(b, "version", keyindex.MaxMain); err != nil {
		return r, err
	}
	r.create, r.mod, r.version = int64(create), int64(mod), int64(version)
	if hasLease {
		v, n := binary.Uvarint(b)
		if n <= 0 || n != uvarintLen(v) || v == 0 {
			return r, fmt.Errorf("%w: record lease: bad varint", ErrCorrupt)
		}
		r.lease, b = int64(v), b[n:]
		if r.tomb {
			return r, fmt.Errorf("%w: tombstone with lease %d", ErrCorrupt, r.lease)
		}
	}
	if hasDict {
		if len(b) < dictNameLen {
			return r, fmt.Errorf("%w: record dictionary name of %d bytes", ErrCorrupt, len(b))
		}
		r.dict, b = binary.BigEndian.Uint64(b), b[dictNameLen:]
		if r.dict == 0 || r.tomb || len(b) == 0 {
			return r, fmt.Errorf("%w: record compressed against dictionary %016x with %d value bytes (tombstone %t)", ErrCorrupt, r.dict, len(b), r.tomb)
		}
	}
	r.value = b[:len(b):len(b)]
	if len(r.value) > MaxValueSize {
		return r, fmt.Errorf("%w: record value of %d bytes", ErrCorrupt, len(r.value))
	}
	if r.mod < 1 {
		return r, fmt.Errorf("%w: record mod_revision %d", ErrCorrupt, r.mod)
	}
	if r.tomb {
		if r.create != 0 || r.version != 0 || len(r.value) != 0 {
			return r, fmt.Errorf("%w: tombstone with create_revision %d, version %d, %d value bytes", ErrCorrupt, r.create, r.version, len(r.value))
		}
	} else if r.create < 1 || r.create > r.mod || r.version < 1 || r.version > r.mod-r.create+1 {
		return r, fmt.Errorf("%w: record create_revision %d, mod_revision %d, version %d", ErrCorrupt, r.create, r.mod, r.version)
	}
	if len(r.value) == 0 {
		r.value = nil
	}
	return r, nil
}

// uvarint reads a minimally encoded uvarint of at most limit.
func uvarint(b []byte, what string, limit uint64) (uint64, []byte, error) {
	v, n := binary.Uvarint(b)
	if n <= 0 {
		return 0, nil, fmt.Errorf("%w: record %s: bad varint", ErrCorrupt, what)
	}
	if n != uvarintLen(v) {
		return 0, nil, fmt.Errorf("%w: record %s: varint not minimal", ErrCorrupt, what)
	}
	if v > limit || v > math.MaxInt64 {
		return 0, nil, fmt.Errorf("%w: record %s %d exceeds %d", ErrCorrupt, what, v, limit)
	}
	return v, b[n:], nil
}

func uvarintLen(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}

// kv converts a record into the KeyValue it describes.
func (r *record) kv() KeyValue {
	return KeyValue{Key: r.key, Value: r.value, CreateRevision: r.create, ModRevision: r.mod, Version: r.version, Lease: r.lease}
}
