package mvcc

import (
	"bufio"
	"fmt"
	"io"

	"github.com/stratadb/strata/engine"
	"github.com/stratadb/strata/mvcc/keyindex"
)

// ReplaceWithSnapshot replaces every key of the store in db with a
// snapshot written by WriteSnapshot, read from r, for a store that does
// not open (Open met a damaged table): a cluster member then takes its
// leader's state before it starts. It checks the snapshot as
// PrepareRestore does and writes it in one ingestion with an excise of the
// store's keys (engine.ReplaceSpan), so the damaged tables leave with the
// old contents and a crash leaves the old store or the new one. Open reads
// the new contents afterwards. A snapshot that does not decode changes
// nothing (ErrCorrupt).
func ReplaceWithSnapshot(db *engine.DB, r io.Reader) error {
	built, err := newRestorer(keyindex.New(), nil)
	if err != nil {
		return err
	}
	if err := db.ReplaceSpan([]byte{0}, []byte{0xff}, snapshotFill(bufio.NewReaderSize(r, 256<<10), built)); err != nil {
		return fmt.Errorf("mvcc: replace the store with a snapshot: %w", err)
	}
	return nil
}
