//go:build !linux

package directio

import (
	"errors"

	"github.com/cockroachdb/pebble/v2/vfs"
)

var errLinuxOnly = errors.New("direct I/O is supported on Linux only")

// Probe fails: direct I/O is implemented on Linux only. The error is a
// *ProbeError naming dir, so an FS with Options.Fallback passes everything
// through.
func Probe(dir string, alignment int) error {
	a := int64(alignment)
	if a == 0 {
		a = DefaultAlignment
	}
	if err := validAlignment(a); err != nil {
		return err
	}
	return &ProbeError{Path: dir, Err: errLinuxOnly}
}

func (d *FS) newWriter(name string, f vfs.File) (vfs.File, error) {
	return nil, &ProbeError{Path: name, Err: errLinuxOnly}
}

func (d *FS) newReader(name string, f vfs.File, sequential bool) (vfs.File, error) {
	return nil, &ProbeError{Path: name, Err: errLinuxOnly}
}

func (d *FS) stagedWriter(name string, f vfs.File) vfs.File { return f }
