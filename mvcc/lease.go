package mvcc

import (
	"bytes"
	"cmp"
	"fmt"
	"slices"

	"github.com/stratadb/strata/engine"
)

// Lease is a granted lease and the keys attached to it, etcd's lease
// without its clock: mvcc keeps which keys a lease holds and revokes them
// together, while deciding when a lease expires (and revoking it through
// the replicated log) is the server's job, so the store stays
// deterministic.
type Lease struct {
	// ID is the lease's ID, never 0.
	ID int64
	// TTL is the time to live in seconds it was granted with.
	TTL int64
	// Keys are the keys attached to it, in key order.
	Keys [][]byte
}

// leaseSet is the in-memory state of the leases: each lease's keys, and
// each leased key's lease. Keys without a lease take no memory here.
type leaseSet struct {
	byID map[int64]*leaseState
	keys leasedKeys
}

type leaseState struct {
	ttl int64
	// first is the first of the lease's keys in leaseSet.keys, 0 if none.
	first uint32
	// n is the number of its keys.
	n int
}

func newLeaseSet() leaseSet {
	return leaseSet{byID: map[int64]*leaseState{}, keys: newLeasedKeys()}
}

// leaseOf returns key's lease, 0 if it has none.
func (ls *leaseSet) leaseOf(key string) int64 { return ls.keys.leaseOf(key) }

// attach records key under lease id, moving it off its lease if it has
// another; the lease must exist.
func (ls *leaseSet) attach(key string, id int64) error {
	l := ls.byID[id]
	if l == nil {
		return fmt.Errorf("%w: %d", ErrLeaseNotFound, id)
	}
	ls.detach(key)
	ls.keys.add(key, id, &l.first)
	l.n++
	return nil
}

// detach removes key from its lease, if any.
func (ls *leaseSet) detach(key string) {
	i := ls.keys.find(key)
	if i == 0 {
		return
	}
	var first *uint32
	if l := ls.byID[ls.keys.ents[i].lease]; l != nil {
		first = &l.first
		l.n--
	}
	ls.keys.remove(i, first)
}

// keysOf returns lease l's keys, in key order.
func (ls *leaseSet) keysOf(l *leaseState) [][]byte {
	out := make([][]byte, 0, l.n)
	ls.keys.chain(l.first, func(k string) { out = append(out, []byte(k)) })
	slices.SortFunc(out, bytes.Compare)
	return out
}

// setKeyLease moves key onto lease id (0: none), as a put does. The
// caller holds writeMu.
func (s *Store) setKeyLease(key []byte, id int64) {
	// The set copies what it keeps.
	k := view(key)
	if s.leases.leaseOf(k) == id {
		return
	}
	s.leaseMu.Lock()
	defer s.leaseMu.Unlock()
	s.leases.detach(k)
	if id != 0 {
		// Checked by the caller: the lease exists.
		_ = s.leases.attach(k, id)
	}
}

// restoreLeases loads the granted leases (Open).
func (s *Store) restoreLeases() error {
	it, err := s.db.NewIter(&engine.IterOptions{LowerBound: []byte{leasePrefix}, UpperBound: []byte{leasePrefix + 1}})
	if err != nil {
		return err
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		v, err := it.ValueAndErr()
		if err != nil {
			return fmt.Errorf("mvcc: Open: scan leases: %w", err)
		}
		id, ttl, err := decodeLease(it.Key(), v)
		if err != nil {
			return fmt.Errorf("mvcc: Open: %w", err)
		}
		s.leases.byID[id] = &leaseState{ttl: ttl}
	}
	if err := it.Error(); err != nil {
		return fmt.Errorf("mvcc: Open: scan leases: %w", err)
	}
	return nil
}

// checkLeaseGrant validates a grant's arguments.
func checkLeaseGrant(id, ttl int64) error {
	switch {
	case id == 0:
		return fmt.Errorf("%w: lease ID 0 means no lease; use any other int64", ErrInvalidLease)
	case ttl < 0:
		return fmt.Errorf("%w: TTL = %d: must be >= 0", ErrInvalidLease, ttl)
	case ttl > MaxLeaseTTL:
		return fmt.Errorf("%w: TTL = %d: limit %d", ErrLeaseTTLTooLarge, ttl, MaxLeaseTTL)
	}
	return nil
}

// GrantLease creates lease id with ttl seconds, persisted with the store
// (etcd's LeaseGrant after the server picked the ID and applied its
// minimum TTL). It makes no revision. Errors: ErrInvalidLease for ID 0 or
// a negative TTL, ErrLeaseTTLTooLarge, ErrLeaseExists.
func (s *Store) GrantLease(id, ttl int64) error { return s.grantLease(0, id, ttl) }

func (s *Store) grantLease(index uint64, id, ttl int64) error {
	if err := checkLeaseGrant(id, ttl); err != nil {
		return s.skipOnError(index, err)
	}
	s.writeMu.Lock()
	t, err := s.beginWrite(index)
	if err != nil {
		s.writeMu.Unlock()
		return err
	}
	if s.leases.byID[id] != nil {
		_, ferr := t.finish(TxnResponse{})
		if ferr != nil {
			return ferr
		}
		return fmt.Errorf("%w: %d", ErrLeaseExists, id)
	}
	s.leaseMu.Lock()
	s.leases.byID[id] = &leaseState{ttl: ttl}
	s.leaseMu.Unlock()
	t.leasePuts = append(t.leasePuts, [2]int64{id, ttl})
	if _, err = t.finish(TxnResponse{}); err != nil {
		return err
	}
	s.leaseChanged(LeaseChange{ID: id, TTL: ttl})
	return nil
}

// RevokeLease deletes lease id and every key attached to it, all in one
// new revision (each key a sub revision, in key order, as etcd does), and
// returns that revision; with no key attached it makes none and returns
// the current one. ErrLeaseNotFound if the lease does not exist.
func (s *Store) RevokeLease(id int64) (rev int64, err error) { return s.revokeLease(0, id) }

func (s *Store) revokeLease(index uint64, id int64) (int64, error) {
	s.writeMu.Lock()
	t, err := s.beginWrite(index)
	if err != nil {
		s.writeMu.Unlock()
		return 0, err
	}
	l := s.leases.byID[id]
	if l == nil {
		if _, err := t.finish(TxnResponse{}); err != nil {
			return 0, err
		}
		return 0, fmt.Errorf("%w: %d", ErrLeaseNotFound, id)
	}
	for _, k := range s.leases.keysOf(l) {
		if _, err := t.deleteRange(keyRange{key: k}, false); err != nil {
			return 0, t.abort(err)
		}
	}
	s.leaseMu.Lock()
	delete(s.leases.byID, id)
	s.leaseMu.Unlock()
	t.leaseDels = append(t.leaseDels, id)
	resp, err := t.finish(TxnResponse{})
	if err == nil {
		s.leaseChanged(LeaseChange{ID: id, Revoked: true})
	}
	return resp.Rev, err
}

// LeaseChange is a change to the set of leases, told to the function
// set with OnLeaseChange: a lease granted (ID, TTL), a lease revoked (ID,
// Revoked), or, with ID 0, the whole set replaced by a snapshot (list it
// again with LeaseTTLs).
type LeaseChange struct {
	ID, TTL int64
	Revoked bool
}

// OnLeaseChange sets fn to be told of each lease granted or revoked, once
// the write is durable, and of the leases replaced by a snapshot, so a
// server can keep its clock of expiries without listing the leases (etcd's
// lessor learns them the same way, as it applies them). fn runs on the
// writer's goroutine (for a snapshot, while writes still wait); it must
// not block nor call the store's write methods. nil removes it.
func (s *Store) OnLeaseChange(fn func(LeaseChange)) {
	s.leaseMu.Lock()
	defer s.leaseMu.Unlock()
	s.leaseHook = fn
}

func (s *Store) leaseChanged(c LeaseChange) {
	s.leaseMu.Lock()
	fn := s.leaseHook
	s.leaseMu.Unlock()
	if fn != nil {
		fn(c)
	}
}

// LeaseTTL returns the TTL lease id was granted with, false if it does
// not exist. Unlike Lease it does not copy the lease's keys.
func (s *Store) LeaseTTL(id int64) (ttl int64, ok bool) {
	s.leaseMu.Lock()
	defer s.leaseMu.Unlock()
	l := s.leases.byID[id]
	if l == nil {
		return 0, false
	}
	return l.ttl, true
}

// LeaseTTLs returns every lease's TTL by ID, without their keys.
func (s *Store) LeaseTTLs() map[int64]int64 {
	s.leaseMu.Lock()
	defer s.leaseMu.Unlock()
	out := make(map[int64]int64, len(s.leases.byID))
	for id, l := range s.leases.byID {
		out[id] = l.ttl
	}
	return out
}

// Leases returns every lease with its keys, in ID order. It reflects the
// writes applied so far, including those still waiting for their WAL
// sync (at most the group being synced).
func (s *Store) Leases() []Lease {
	s.leaseMu.Lock()
	defer s.leaseMu.Unlock()
	out := make([]Lease, 0, len(s.leases.byID))
	for id := range s.leases.byID {
		out = append(out, s.leaseLocked(id))
	}
	slices.SortFunc(out, func(a, b Lease) int { return cmp.Compare(a.ID, b.ID) })
	return out
}

// Lease returns lease id with its keys, or ErrLeaseNotFound.
func (s *Store) Lease(id int64) (Lease, error) {
	s.leaseMu.Lock()
	defer s.leaseMu.Unlock()
	if s.leases.byID[id] == nil {
		return Lease{}, fmt.Errorf("%w: %d", ErrLeaseNotFound, id)
	}
	return s.leaseLocked(id), nil
}

func (s *Store) leaseLocked(id int64) Lease {
	l := s.leases.byID[id]
	return Lease{ID: id, TTL: l.ttl, Keys: s.leases.keysOf(l)}
}
