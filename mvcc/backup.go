package mvcc

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// A backup is, in this order:
//
//	header    backupMagic (14 bytes) and the format version, 2 bytes big-endian
//	snapshot  a store snapshot (see WriteSnapshot)
//	padding   zero bytes up to a multiple of backupAlign
//	checksum  the SHA-256 of everything before it
//
// as etcd's Maintenance.Snapshot stream is its database file (whole pages)
// followed by the file's SHA-256: what `etcdctl snapshot save` writes to a
// file from a Strata server (it checks that the size is a multiple of 512
// plus 32), and what `strata restore` checks before it loads the file into
// a new database. The zeros follow the snapshot's end marker, so a restore
// never reads them.
//
// The header names the file, so that no other file (an etcd snapshot ends
// in the same kind of checksum, and a bbolt file starts with zero bytes,
// which read as an empty snapshot) is taken for a backup. Backups written
// before the header existed start directly with the snapshot; CheckBackup
// still reads them (see isUnversionedBackup).

// backupMagic opens every backup written with a header.
const backupMagic = "STRATA-BACKUP\x00"

// BackupVersion is the format version WriteBackup writes after the magic;
// CheckBackup reads this version and the unversioned format before it.
const BackupVersion = 1

// backupHeaderLen is the length of the magic and the version.
const backupHeaderLen = len(backupMagic) + 2

// backupAlign is the multiple a backup's body is padded to: etcdctl's
// "sector size".
const backupAlign = 512

var (
	// ErrBackupChecksum is returned for a backup whose trailing SHA-256
	// does not match its contents (a truncated or damaged file).
	ErrBackupChecksum = errors.New("mvcc: backup checksum mismatch")
	// ErrNotBackup is returned for a file that is not a Strata backup of
	// any version this package reads.
	ErrNotBackup = errors.New("mvcc: not a Strata backup")
)

// WriteBackup writes a backup of the store, as of one consistent point,
// to w. It runs beside reads and writes, as WriteSnapshot does.
func (s *Store) WriteBackup(w io.Writer) error {
	h := sha256.New()
	body := &countingWriter{w: io.MultiWriter(w, h)}
	if _, err := body.Write(binary.BigEndian.AppendUint16([]byte(backupMagic), BackupVersion)); err != nil {
		return fmt.Errorf("mvcc: backup: %w", err)
	}
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

// HasBackupHeader reports whether head, the first bytes of a file, opens
// with a backup's magic: the file claims to be a Strata backup, whatever
// its version or state.
func HasBackupHeader(head []byte) bool {
	return bytes.HasPrefix(head, []byte(backupMagic))
}

// CheckBackup verifies the backup of size bytes in r and returns a reader
// of its snapshot, for LoadBackup or RestoreSnapshot; hashed, if not nil,
// is told of every byte read while checking (a progress bar). A backup
// that is too short or whose checksum does not match is ErrBackupChecksum;
// one of a version this package does not know, or a file that is neither
// a headed nor an unversioned backup, is ErrNotBackup.
func CheckBackup(r io.ReaderAt, size int64, hashed io.Writer) (*io.SectionReader, error) {
	head := make([]byte, backupHeaderLen)
	n, err := r.ReadAt(head, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("mvcc: read backup: %w", err)
	}
	head = head[:n]
	headed := HasBackupHeader(head)
	if headed && len(head) == backupHeaderLen {
		if v := binary.BigEndian.Uint16(head[len(backupMagic):]); v != BackupVersion {
			return nil, fmt.Errorf("%w: format version %d, this build reads version %d and unversioned backups", ErrNotBackup, v, BackupVersion)
		}
	}
	if !headed {
		// What the file is comes first: a file of another kind is named
		// as such, not reported as a damaged backup.
		if err := isUnversionedBackup(r, size); err != nil {
			return nil, err
		}
	}
	if size < sha256.Size+1 {
		return nil, fmt.Errorf("%w: %d bytes is too short for a backup", ErrBackupChecksum, size)
	}
	body := io.NewSectionReader(r, 0, size-sha256.Size)
	h := sha256.New()
	var dst io.Writer = h
	if hashed != nil {
		dst = io.MultiWriter(h, hashed)
	}
	if _, err := io.Copy(dst, body); err != nil {
		return nil, fmt.Errorf("mvcc: read backup: %w", err)
	}
	want := make([]byte, sha256.Size)
	if _, err := r.ReadAt(want, size-sha256.Size); err != nil {
		return nil, fmt.Errorf("mvcc: read backup: %w", err)
	}
	if !bytes.Equal(h.Sum(nil), want) {
		return nil, fmt.Errorf("%w: the last %d bytes are not the SHA-256 of the %d before them", ErrBackupChecksum, sha256.Size, size-sha256.Size)
	}
	if headed {
		return io.NewSectionReader(r, int64(backupHeaderLen), size-sha256.Size-int64(backupHeaderLen)), nil
	}
	return io.NewSectionReader(r, 0, size-sha256.Size), nil
}

// isUnversionedBackup checks that a file of size bytes without a header
// starts as a backup written before the header existed: its first chunk
// is a store key (a lease, metadata or revision key), or it is the end
// marker of an empty store followed by nothing but its padding and
// checksum. A bbolt file (an etcd snapshot) starts with zero bytes too,
// but runs past one block.
func isUnversionedBackup(r io.ReaderAt, size int64) error {
	first := make([]byte, min(size, backupAlign))
	n, err := r.ReadAt(first, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("mvcc: read backup: %w", err)
	}
	first = first[:n]
	keyLen, w := binary.Uvarint(first)
	switch {
	case w > 0 && keyLen > 0 && w < len(first) && isStoreKeyPrefix(first[w]):
		return nil
	case w == 1 && keyLen == 0 && size == backupAlign+sha256.Size && bytes.Count(first, []byte{0}) == len(first):
		return nil
	}
	return fmt.Errorf("%w: no %q header, and it does not start as a backup written before the header (%s)", ErrNotBackup, backupMagic, describeHead(first))
}

// isStoreKeyPrefix reports whether c starts a key of the store's key
// space, in today's layout or the one before (see codec.go).
func isStoreKeyPrefix(c byte) bool {
	return c == revPrefix || c == dictPrefix || c == metaPrefix || c == leasePrefix || c == auxPrefix || c == oldMetaPrefix || c == oldLeasePrefix
}

// describeHead shows the first bytes of a file for an error message: up
// to 16 in hex and, where printable, as text.
func describeHead(head []byte) string {
	head = head[:min(len(head), 16)]
	if len(head) == 0 {
		return "the file is empty"
	}
	text := make([]byte, len(head))
	for i, c := range head {
		text[i] = '.'
		if c >= 0x20 && c < 0x7f {
			text[i] = c
		}
	}
	return fmt.Sprintf("it starts with % x %q", head, text)
}
