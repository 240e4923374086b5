package mvcc

import (
	"bytes"
	"fmt"

	"github.com/stratadb/strata/engine"
)

// Aux is the store's auxiliary key space: small values the layer above
// keeps beside the key-value data and replicates with it (the server's
// auth users, roles and auth revision, as etcd keeps them in its authUsers,
// authRoles and auth buckets). Aux writes make no revision and send no
// watch event, but they are part of the store in every other way: an
// Entry's aux writes record its log index atomically with them, they are
// in every snapshot (WriteSnapshot, RestoreSnapshot), and they survive a
// restart.
//
// Keys are the caller's; the store only prefixes them. Each write's Value
// nil deletes its Key.
type AuxWrite struct {
	Key, Value []byte
}

// WriteAux applies writes to the aux key space recording the entry's index,
// in one atomic engine commit (with sync = true, durable when it returns).
// An empty writes records the index only, as Skip.
func (e Entry) WriteAux(writes []AuxWrite) error { return e.s.writeAux(e.index, writes) }

func (s *Store) writeAux(index uint64, writes []AuxWrite) error {
	for _, w := range writes {
		if len(w.Key) == 0 {
			return s.skipOnError(index, fmt.Errorf("%w: aux key", ErrEmptyKey))
		}
	}
	return s.alone(func(b *Batch) error {
		t, err := s.lockWrite(b, index)
		if err != nil {
			return err
		}
		t.aux = writes
		_, err = t.finish(TxnResponse{})
		return err
	})
}

// ReadAux returns every aux key that starts with prefix, in key order,
// with its value, as of the last write (published or being synced).
func (s *Store) ReadAux(prefix []byte) ([]AuxWrite, error) {
	if s.closed.Load() {
		return nil, ErrClosed
	}
	lo := auxKey(prefix)
	it, err := s.db.NewIter(&engine.IterOptions{LowerBound: lo, UpperBound: PrefixEnd(lo)})
	if err != nil {
		return nil, fmt.Errorf("mvcc: read aux: %w", err)
	}
	defer it.Close()
	var out []AuxWrite
	for ok := it.First(); ok; ok = it.Next() {
		v, err := it.ValueAndErr()
		if err != nil {
			return nil, fmt.Errorf("mvcc: read aux: %w", err)
		}
		out = append(out, AuxWrite{Key: bytes.Clone(it.Key()[1:]), Value: bytes.Clone(v)})
	}
	if err := it.Error(); err != nil {
		return nil, fmt.Errorf("mvcc: read aux: %w", err)
	}
	return out, nil
}

// auxKey returns the engine key of aux key k.
func auxKey(k []byte) []byte { return append([]byte{auxPrefix}, k...) }

// putAux adds the txn's aux writes to eb.
func (t *writeTxn) putAux(eb *engine.Batch) error {
	for _, w := range t.aux {
		var err error
		if w.Value == nil {
			err = eb.Delete(auxKey(w.Key))
		} else {
			err = eb.Put(auxKey(w.Key), w.Value)
		}
		if err != nil {
			return err
		}
	}
	return nil
}
