package mvcc

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
)

// A backup is a store snapshot (see WriteSnapshot), zero bytes up to a
// multiple of backupAlign, then the SHA-256 of all that, as etcd's
// Maintenance.Snapshot stream is its database file (whole pages) followed
// by the file's SHA-256: what `etcdctl snapshot save` writes to a file
// from a Strata server (it checks that the size is a multiple of 512 plus
// 32), and what `strata restore` checks before it loads the file into a
// new database. The zeros follow the snapshot's end marker, so a restore
// never reads them.

// backupAlign is the multiple a backup's body is padded to: etcdctl's
// "sector size".
const backupAlign = 512

// ErrBackupChecksum is returned for a backup whose trailing SHA-256 does
// not match its contents (a truncated or damaged file).
var ErrBackupChecksum = errors.New("mvcc: backup checksum mismatch")

// WriteBackup writes a backup of the store, as of one consistent point,
// to w. It runs beside reads and writes, as WriteSnapshot does.
func (s *Store) WriteBackup(w io.Writer) error {
	h := sha256.New()
	body := &countingWriter{w: io.MultiWriter(w, h)}
	if _, err := s.WriteSnapshot(body); err != nil {
		return err
	}
	pad := make([]byte, (backupAlign-body.n%backupAlign)%backupAlign)
	if _, err := body.Write(pad); err != nil {
		return fmt.Errorf("mvcc: backup: %w", err)
	}
	if _, err := w.Write(h.Sum(nil)); err != nil {
		return fmt.Errorf("mvcc: backup: %w", err)
	}
	return nil
}

// countingWriter counts the bytes written through it.
type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// CheckBackup verifies the backup of size bytes in r and returns a reader
// of its snapshot, for RestoreSnapshot. A backup that is too short or
// whose checksum does not match is ErrBackupChecksum.
func CheckBackup(r io.ReaderAt, size int64) (*io.SectionReader, error) {
	if size < sha256.Size+1 {
		return nil, fmt.Errorf("%w: %d bytes is too short for a backup", ErrBackupChecksum, size)
	}
	body := io.NewSectionReader(r, 0, size-sha256.Size)
	h := sha256.New()
	if _, err := io.Copy(h, body); err != nil {
		return nil, fmt.Errorf("mvcc: read backup: %w", err)
	}
	want := make([]byte, sha256.Size)
	if _, err := r.ReadAt(want, size-sha256.Size); err != nil {
		return nil, fmt.Errorf("mvcc: read backup: %w", err)
	}
	if !bytes.Equal(h.Sum(nil), want) {
		return nil, fmt.Errorf("%w: the last %d bytes are not the SHA-256 of the %d before them", ErrBackupChecksum, sha256.Size, size-sha256.Size)
	}
	return io.NewSectionReader(r, 0, size-sha256.Size), nil
}
