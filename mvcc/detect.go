package mvcc

import (
	"errors"

	"github.com/stratadb/strata/engine"
)

// StoreRevision reports whether db holds a Store (the current revision
// every write transaction records) and that revision, without opening the
// Store. A database of Strata's key-value tools has no such key; its raw
// pairs are a Store's binary records otherwise, which tools that print
// pairs must not show as if a user had written them.
func StoreRevision(db *engine.DB) (rev int64, ok bool, err error) {
	b, err := db.Get(metaRev)
	if errors.Is(err, engine.ErrNotFound) {
		// A store in the layout before (Open upgrades it).
		b, err = db.Get(append([]byte{oldMetaPrefix}, metaRev[1:]...))
	}
	if errors.Is(err, engine.ErrNotFound) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	rev, err = decodeInt64(metaRev, b)
	if err != nil {
		return 0, false, nil // a user's key that happens to have the name
	}
	return rev, true, nil
}
