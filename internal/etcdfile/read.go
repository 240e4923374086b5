package etcdfile

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	bolt "go.etcd.io/bbolt"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/server/v3/lease/leasepb"
	"google.golang.org/protobuf/proto"

	"github.com/stratadb/strata/auth"
	"github.com/stratadb/strata/mvcc"
)

// Kind is which of etcd's two files Open found.
type Kind int

const (
	// Snapshot is what `etcdctl snapshot save` writes: the bbolt file,
	// then its SHA-256.
	Snapshot Kind = iota + 1
	// MemberDB is a member's member/snap/db: the bbolt file alone.
	MemberDB
)

func (k Kind) String() string {
	switch k {
	case Snapshot:
		return "etcd snapshot"
	case MemberDB:
		return "etcd member db file"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// ErrChecksum is returned for a snapshot whose trailing SHA-256 does not
// match its contents, or a file whose size is neither form's (both mean a
// damaged or truncated file).
var ErrChecksum = errors.New("etcdfile: checksum mismatch")

// boltMagic is bbolt's magic number, at byte 16 of its first page (after
// the page header), in the machine's byte order (little-endian on every
// platform etcd supports); boltVersion follows it.
const (
	boltMagic    = 0xED0CDAED
	boltVersion  = 2
	boltMagicOff = 16
)

// IsBolt reports whether head, the first bytes of a file, is the start of
// a bbolt database.
func IsBolt(head []byte) bool {
	return len(head) >= boltMagicOff+12 &&
		binary.LittleEndian.Uint32(head[boltMagicOff:]) == boltMagic &&
		binary.LittleEndian.Uint32(head[boltMagicOff+4:]) == boltVersion
}

// File is an etcd data file open for reading.
type File struct {
	kind Kind
	size int64 // bytes of the bbolt file, without a trailer
	db   *bolt.DB
}

// Open checks the etcd file at path and opens it read-only. hashed, if
// not nil, is told of every byte read while checking a snapshot's
// SHA-256 (a progress bar). A file whose size is neither a snapshot's (a
// multiple of 512 plus 32) nor a whole number of bbolt pages, or a
// snapshot whose SHA-256 does not match, is ErrChecksum; a member's db
// file has no checksum and gets bbolt's page check instead.
func Open(path string, hashed io.Writer) (*File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	head := make([]byte, 64)
	if _, err := io.ReadFull(f, head); err != nil || !IsBolt(head) {
		return nil, fmt.Errorf("etcdfile: %s is not a bbolt file (no bbolt magic at byte %d)", path, boltMagicOff)
	}
	pageSize := int64(binary.LittleEndian.Uint32(head[boltMagicOff+8:]))
	ef := &File{kind: MemberDB, size: st.Size()}
	switch {
	case pageSize < 512 || pageSize > 1<<20 || pageSize&(pageSize-1) != 0:
		return nil, fmt.Errorf("%w: %s: bbolt page size %d", ErrChecksum, path, pageSize)
	case st.Size()%512 == sha256.Size:
		ef.kind, ef.size = Snapshot, st.Size()-sha256.Size
		if err := checkSHA256(f, ef.size, hashed); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
	case st.Size()%pageSize != 0:
		return nil, fmt.Errorf("%w: %s: %d bytes is neither a snapshot (a multiple of 512 plus a 32-byte SHA-256) nor a db file (a multiple of its %d-byte pages): truncated or damaged", ErrChecksum, path, st.Size(), pageSize)
	}
	if ef.size < 4*pageSize {
		return nil, fmt.Errorf("%w: %s: %d bytes, less than bbolt's 4 pages of %d: truncated", ErrChecksum, path, ef.size, pageSize)
	}
	ef.db, err = bolt.Open(path, 0o400, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		return nil, fmt.Errorf("etcdfile: open %s: %w", path, err)
	}
	if err := ef.check(); err != nil {
		_ = ef.db.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return ef, nil
}

// checkSHA256 compares the SHA-256 of the first size bytes of f with the
// 32 after them.
func checkSHA256(f *os.File, size int64, hashed io.Writer) error {
	h := sha256.New()
	var dst io.Writer = h
	if hashed != nil {
		dst = io.MultiWriter(h, hashed)
	}
	if _, err := io.Copy(dst, io.NewSectionReader(f, 0, size)); err != nil {
		return fmt.Errorf("etcdfile: read: %w", err)
	}
	want := make([]byte, sha256.Size)
	if _, err := f.ReadAt(want, size); err != nil {
		return fmt.Errorf("etcdfile: read: %w", err)
	}
	if !bytes.Equal(h.Sum(nil), want) {
		return fmt.Errorf("%w: the last %d bytes are not the SHA-256 of the %d before them: truncated or damaged", ErrChecksum, sha256.Size, size)
	}
	return nil
}

// check makes sure every page the file's meta names lies inside it (a
// truncated db file would fault when read), and for a db file without a
// checksum runs bbolt's consistency check.
func (f *File) check() (err error) {
	tx, err := f.db.Begin(false)
	if err != nil {
		return fmt.Errorf("etcdfile: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	if tx.Size() > f.size {
		return fmt.Errorf("%w: its meta page names %d bytes of pages, the file holds %d: truncated", ErrChecksum, tx.Size(), f.size)
	}
	if f.kind == MemberDB {
		var errs []error
		for e := range tx.Check() {
			errs = append(errs, e)
		}
		if len(errs) > 0 {
			return fmt.Errorf("%w: bbolt's page check: %w", ErrChecksum, errors.Join(errs...))
		}
	}
	if tx.Bucket(bucketKey) == nil || tx.Bucket(bucketMeta) == nil {
		return fmt.Errorf("etcdfile: a bbolt file without etcd's %q and %q buckets: not etcd's", bucketKey, bucketMeta)
	}
	return nil
}

// Kind returns which file Open found.
func (f *File) Kind() Kind { return f.kind }

// Size returns the size of the bbolt file, without a snapshot's trailer.
func (f *File) Size() int64 { return f.size }

// Close closes the file.
func (f *File) Close() error { return f.db.Close() }

// Report is what Load found besides what it loaded.
type Report struct {
	Versions, Leases int64
	// AuthEnabled, AuthUsers and AuthRoles describe the auth state
	// loaded from the file's auth, authUsers and authRoles buckets.
	AuthEnabled          bool
	AuthUsers, AuthRoles int
}

// Load feeds l every lease and every version of the file, in revision
// order, and finishes it with the file's current and compaction
// revisions; the caller closes the returned Store. progress, if not nil,
// is told the bytes of each key and value read.
func (f *File) Load(l *mvcc.Loader, opts mvcc.Options, progress func(int64)) (s *mvcc.Store, rep Report, err error) {
	tx, err := f.db.Begin(false)
	if err != nil {
		return nil, rep, fmt.Errorf("etcdfile: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	defer func() {
		// bbolt reads pages it trusts; a damaged page can panic it.
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: reading the bbolt file: %v", ErrChecksum, r)
		}
	}()
	note := func(k, v []byte) {
		if progress != nil {
			progress(int64(len(k) + len(v)))
		}
	}
	if b := tx.Bucket(bucketLease); b != nil {
		if err := b.ForEach(func(k, v []byte) error {
			note(k, v)
			var lpb leasepb.Lease
			if err := proto.Unmarshal(v, &lpb); err != nil {
				return fmt.Errorf("etcdfile: lease %x: %w", k, err)
			}
			if len(k) != 8 || int64(binary.BigEndian.Uint64(k)) != lpb.ID {
				return fmt.Errorf("etcdfile: lease key %x holds lease %d", k, lpb.ID)
			}
			rep.Leases++
			return l.Lease(lpb.ID, lpb.TTL)
		}); err != nil {
			return nil, rep, err
		}
	}
	if rep.AuthEnabled, rep.AuthUsers, rep.AuthRoles, err = loadAuth(tx, l, note); err != nil {
		return nil, rep, err
	}
	last := int64(1)
	if err := tx.Bucket(bucketKey).ForEach(func(k, v []byte) error {
		note(k, v)
		main, sub, tomb, err := parseRev(k)
		if err != nil {
			return fmt.Errorf("etcdfile: %w", err)
		}
		var kv mvccpb.KeyValue
		if err := proto.Unmarshal(v, &kv); err != nil {
			return fmt.Errorf("etcdfile: revision %d.%d: %w", main, sub, err)
		}
		if !tomb && kv.ModRevision != main {
			return fmt.Errorf("etcdfile: revision %d.%d holds mod_revision %d", main, sub, kv.ModRevision)
		}
		ver := mvcc.Version{Sub: sub, Tombstone: tomb, KV: mvcc.KeyValue{Key: kv.Key, ModRevision: main}}
		if !tomb {
			ver.KV.Value, ver.KV.CreateRevision, ver.KV.Version, ver.KV.Lease = kv.Value, kv.CreateRevision, kv.Version, kv.Lease
		}
		rep.Versions++
		last = main
		return l.Put(ver)
	}); err != nil {
		return nil, rep, err
	}
	h := mvcc.History{CompactScheduled: -1, CompactFinished: -1}
	meta := tx.Bucket(bucketMeta)
	for _, c := range []struct {
		name []byte
		to   *int64
	}{{metaScheduledCompact, &h.CompactScheduled}, {metaFinishedCompact, &h.CompactFinished}} {
		if v := meta.Get(c.name); v != nil {
			main, _, _, err := parseRev(v)
			if err != nil {
				return nil, rep, fmt.Errorf("etcdfile: meta %s: %w", c.name, err)
			}
			*c.to = main
		}
	}
	// etcd's current revision after a restart: its last version's, or the
	// compaction's if that is later.
	h.Rev = max(last, h.CompactScheduled)
	s, err = l.Finish(h, opts)
	return s, rep, err
}

// loadAuth feeds l the auth state of the file (its users and roles with
// their bcrypt password hashes and permissions, the enabled flag and the
// auth revision) as the aux writes the auth package maps it to.
func loadAuth(tx *bolt.Tx, l *mvcc.Loader, note func(k, v []byte)) (enabled bool, users, roles int, err error) {
	st := auth.EtcdState{Users: map[string][]byte{}, Roles: map[string][]byte{}}
	if b := tx.Bucket(bucketAuth); b != nil {
		st.Enabled, st.Revision = bytes.Clone(b.Get(authEnabled)), bytes.Clone(b.Get(authRevision))
	}
	for _, c := range []struct {
		bucket []byte
		to     map[string][]byte
	}{{bucketAuthUsers, st.Users}, {bucketAuthRoles, st.Roles}} {
		if b := tx.Bucket(c.bucket); b != nil {
			if err := b.ForEach(func(k, v []byte) error {
				note(k, v)
				c.to[string(k)] = bytes.Clone(v)
				return nil
			}); err != nil {
				return false, 0, 0, err
			}
		}
	}
	writes, err := auth.FromEtcd(st)
	if err != nil {
		return false, 0, 0, fmt.Errorf("etcdfile: %w", err)
	}
	for _, w := range writes {
		if err := l.Aux(w.Key, w.Value); err != nil {
			return false, 0, 0, err
		}
	}
	return bytes.Equal(st.Enabled, []byte{1}), len(st.Users), len(st.Roles), nil
}
