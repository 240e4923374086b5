package engine

import (
	"errors"

	"github.com/cockroachdb/pebble/v2"
)

// ErrCorruption marks an error caused by a damaged file of the database:
// a block whose checksum does not match, a table or blob file that does
// not decode. A read that meets one fails with an error errors.Is finds
// ErrCorruption in, whose message is Pebble's and names the file
// ("pebble: file 000011: block 31504/3946: crc32c checksum mismatch ...");
// the data of that block is gone from this copy (see Options.OnCorruption
// and docs/operations.md). Pebble marks these errors with
// pebble.ErrCorruption, which only cockroachdb/errors.Is finds, so the
// engine wraps them (corruptionError).
var ErrCorruption = errors.New("engine: data corruption")

// corruptionError is an error of Pebble's marked pebble.ErrCorruption,
// made visible to the standard errors.Is as ErrCorruption. Its message is
// Pebble's, without the "<corruption detail carrier>" line Pebble joins
// to an error it attached a pebble.DataCorruptionInfo to (which
// pebble.ExtractDataCorruptionInfo still finds through Unwrap).
type corruptionError struct {
	err error
	msg string
}

func newCorruptionError(err error) *corruptionError {
	e := &corruptionError{err: err, msg: err.Error()}
	if info := pebble.ExtractDataCorruptionInfo(err); info != nil && info.Details != nil {
		e.msg = info.Details.Error()
	}
	return e
}

func (e *corruptionError) Error() string        { return e.msg }
func (e *corruptionError) Unwrap() error        { return e.err }
func (e *corruptionError) Is(target error) bool { return target == ErrCorruption }

// seen returns err, wrapped as a corruptionError and first passed to
// Options.OnCorruption if it says a file is damaged.
func (db *DB) seen(err error) error {
	if err == nil || errors.Is(err, ErrCorruption) || !pebble.IsCorruptionError(err) {
		return err
	}
	err = newCorruptionError(err)
	if db.onCorruption != nil {
		db.onCorruption(err)
	}
	return err
}
