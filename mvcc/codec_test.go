package mvcc

import (
	"bytes"
	"errors"
	"testing"

	"github.com/stratadb/strata/mvcc/keyindex"
)

func TestRecordRoundTrip(t *testing.T) {
	for _, r := range []record{
		{key: []byte("k"), value: []byte("v"), create: 1, mod: 1, version: 1},
		{key: []byte("key"), create: 5, mod: 900, version: 3},
		{key: bytes.Repeat([]byte{0xff}, MaxKeySize), value: bytes.Repeat([]byte{1}, 300), create: 1 << 40, mod: keyindex.MaxMain, version: 1 << 20},
		{key: []byte("gone"), mod: 7, tomb: true},
		{key: []byte("leased"), value: []byte("v"), create: 2, mod: 3, version: 2, lease: 7},
		{key: []byte("negative lease"), create: 2, mod: 3, version: 1, lease: -5},
	} {
		b := appendRecord(nil, &r)
		got, err := decodeRecord(b)
		if err != nil {
			t.Fatalf("decode(%+v): %v", r, err)
		}
		if !bytes.Equal(got.key, r.key) || !bytes.Equal(got.value, r.value) || got.create != r.create || got.mod != r.mod || got.version != r.version || got.tomb != r.tomb || got.lease != r.lease {
			t.Fatalf("round trip: %+v -> %+v", r, got)
		}
	}
}

func TestRecordCorrupt(t *testing.T) {
	good := appendRecord(nil, &record{key: []byte("k"), value: []byte("v"), create: 3, mod: 4, version: 2})
	namedZero := appendRecord(nil, &record{key: []byte("k"), value: append(make([]byte, dictNameLen), 'x'), create: 3, mod: 4, version: 2})
	namedZero[1] |= flagDict
	for name, b := range map[string][]byte{
		"empty":              nil,
		"format":             append([]byte{2}, good[1:]...),
		"flags":              append([]byte{1, 8}, good[2:]...),
		"dict, no name":      append([]byte{1, flagDict}, good[2:]...),
		"dict named 0":       namedZero,
		"tombstone, dict":    appendPackedRecord(nil, &record{key: []byte("k"), mod: 4, tomb: true}, 7, []byte("x")),
		"truncated key":      good[:3],
		"no revisions":       good[:4],
		"overlong varint":    {1, 0, 0x81, 0x00, 'k', 1, 1, 1},
		"zero key":           {1, 0, 0, 1, 1, 1},
		"create after mod":   appendRecord(nil, &record{key: []byte("k"), create: 5, mod: 4, version: 1}),
		"version too high":   appendRecord(nil, &record{key: []byte("k"), create: 3, mod: 4, version: 3}),
		"tombstone with val": appendRecord(nil, &record{key: []byte("k"), value: []byte("v"), mod: 4, tomb: true}),
		"tombstone w/ lease": appendRecord(nil, &record{key: []byte("k"), mod: 4, tomb: true, lease: 3}),
		"zero lease":         {1, flagLease, 1, 'k', 1, 1, 1, 0},
	} {
		if _, err := decodeRecord(b); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: %v, want ErrCorrupt", name, err)
		}
	}
}

// FuzzDecodeRecord: the decoder never panics, and what it accepts
// re-encodes to the same bytes (one encoding per record).
func FuzzDecodeRecord(f *testing.F) {
	f.Add(appendRecord(nil, &record{key: []byte("k"), value: []byte("v"), create: 1, mod: 1, version: 1}))
	f.Add(appendRecord(nil, &record{key: []byte("abc"), value: []byte("xyz"), create: 300, mod: 70000, version: 2}))
	f.Add(appendRecord(nil, &record{key: []byte("gone"), mod: 9, tomb: true}))
	f.Add(appendRecord(nil, &record{key: []byte("leased"), value: []byte("v"), create: 2, mod: 3, version: 2, lease: 7}))
	f.Add(appendPackedRecord(nil, &record{key: []byte("packed"), create: 2, mod: 3, version: 2}, 0xfeed, []byte("compressed")))
	f.Add([]byte{1, 0, 0x81, 0x00, 'k', 1, 1, 1})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := decodeRecord(b)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error without ErrCorrupt: %v", err)
			}
			return
		}
		if again := appendPackedRecord(nil, &r, r.dict, r.value); !bytes.Equal(again, b) {
			t.Fatalf("decode(%x) = %+v re-encodes to %x", b, r, again)
		}
	})
}

// FuzzDecodeRevKey: the decoders of the keys under the revision prefix
// never panic and round-trip; a record's key is never taken for an index
// record's, nor the reverse.
func FuzzDecodeRevKey(f *testing.F) {
	f.Add(revKey(keyindex.Revision{Main: 1}))
	f.Add(revKey(keyindex.Revision{Main: 1 << 40, Sub: 7}))
	f.Add(appendRevIndexKey(nil, keyindex.Revision{Main: 3, Sub: 1}))
	f.Add([]byte("m/current_rev"))
	f.Fuzz(func(t *testing.T, b []byte) {
		if r, err := decodeRevKey(b); err == nil {
			if again := revKey(r); !bytes.Equal(again, b) {
				t.Fatalf("decodeRevKey(%x) = %+v re-encodes to %x", b, r, again)
			}
		}
		r, index, err := decodeRevSlot(b)
		if err != nil {
			return
		}
		again := revKey(r)
		if index {
			again = appendRevIndexKey(nil, r)
		}
		if !bytes.Equal(again, b) || index != isRevIndexKey(b) {
			t.Fatalf("decodeRevSlot(%x) = %+v, index %v: re-encodes to %x", b, r, index, again)
		}
	})
}

func TestPrefixEnd(t *testing.T) {
	for in, want := range map[string]string{"a": "b", "a\xff": "b", "\xff\xff": "\x00", "ab": "ac"} {
		if got := string(PrefixEnd([]byte(in))); got != want {
			t.Errorf("PrefixEnd(%q) = %q, want %q", in, got, want)
		}
	}
}
