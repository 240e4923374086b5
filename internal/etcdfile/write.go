package etcdfile

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	bolt "go.etcd.io/bbolt"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/server/v3/lease/leasepb"
	"google.golang.org/protobuf/proto"

	"github.com/stratadb/strata/auth"
	"github.com/stratadb/strata/mvcc"
)

// writeTxnKeys is the number of versions one bbolt transaction writes.
const writeTxnKeys = 10000

// WriteSnapshot writes the store, as of one consistent point, to path as
// etcd's `etcdctl snapshot save` would: a bbolt file with etcd's buckets
// (every version since the last compaction, the leases, the compaction
// revisions, the auth state: users, roles, enabled flag, auth revision) followed by its SHA-256. It writes path's sibling
// path+".part" and renames it at the end, so a failed or killed run leaves
// no file at path; path must not exist. It returns the Export it wrote.
// progress, if not nil, is told the bytes of each key and value written.
func WriteSnapshot(s *mvcc.Store, path string, progress func(int64)) (mvcc.Exported, error) {
	if _, err := os.Lstat(path); err == nil {
		return mvcc.Exported{}, fmt.Errorf("etcdfile: %s exists: give a new file name", path)
	}
	part := path + ".part"
	_ = os.Remove(part) // a former run's leftover
	exp, err := writeBolt(s, part, progress)
	if err == nil {
		err = appendSHA256(part)
	}
	if err == nil {
		err = os.Rename(part, path)
	}
	if err == nil {
		err = syncDir(filepath.Dir(path))
	}
	if err != nil {
		_ = os.Remove(part)
		return mvcc.Exported{}, err
	}
	return exp, nil
}

// writeBolt writes the bbolt file: buckets and meta first, then the
// versions in transactions of writeTxnKeys, then the leases and the
// compaction revisions.
func writeBolt(s *mvcc.Store, path string, progress func(int64)) (exp mvcc.Exported, err error) {
	db, err := bolt.Open(path, 0o600, &bolt.Options{NoSync: true, NoFreelistSync: false})
	if err != nil {
		return exp, fmt.Errorf("etcdfile: create %s: %w", path, err)
	}
	defer func() {
		if cerr := db.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("etcdfile: %w", cerr)
		}
	}()
	if err := db.Update(func(tx *bolt.Tx) error {
		for _, name := range allBuckets {
			if _, err := tx.CreateBucket(name); err != nil {
				return err
			}
		}
		meta := tx.Bucket(bucketMeta)
		// etcdctl/etcdutl snapshot restore sets the consistent index and
		// term of the new cluster's log; these are a fresh member's.
		for k, v := range map[string][]byte{
			string(metaConsistentIndex): binary.BigEndian.AppendUint64(nil, 0),
			string(metaTerm):            binary.BigEndian.AppendUint64(nil, 0),
			string(metaStorageVersion):  []byte(storageVersion),
		} {
			if err := meta.Put([]byte(k), v); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		return exp, fmt.Errorf("etcdfile: %w", err)
	}

	var tx *bolt.Tx
	var keys *bolt.Bucket
	n := 0
	var k []byte
	exp, err = s.Export(func(v mvcc.Version) error {
		if tx == nil {
			if tx, err = db.Begin(true); err != nil {
				return err
			}
			keys = tx.Bucket(bucketKey)
			keys.FillPercent = 1 // keys come in order: full pages
		}
		k = appendRev(k[:0], v.KV.ModRevision, v.Sub, v.Tombstone)
		kv := &mvccpb.KeyValue{Key: v.KV.Key}
		if !v.Tombstone {
			kv = &mvccpb.KeyValue{Key: v.KV.Key, Value: v.KV.Value, CreateRevision: v.KV.CreateRevision, ModRevision: v.KV.ModRevision, Version: v.KV.Version, Lease: v.KV.Lease}
		}
		b, err := proto.Marshal(kv)
		if err != nil {
			return err
		}
		if err := keys.Put(k, b); err != nil {
			return err
		}
		if progress != nil {
			progress(int64(len(k) + len(b)))
		}
		if n++; n%writeTxnKeys == 0 {
			err, tx = tx.Commit(), nil
			return err
		}
		return nil
	})
	if tx != nil {
		if err == nil {
			err = tx.Commit()
		} else {
			_ = tx.Rollback()
		}
	}
	if err != nil {
		return exp, fmt.Errorf("etcdfile: write %s: %w", path, err)
	}

	err = db.Update(func(tx *bolt.Tx) error {
		lb := tx.Bucket(bucketLease)
		for _, l := range exp.Leases {
			b, err := proto.Marshal(&leasepb.Lease{ID: l.ID, TTL: l.TTL})
			if err != nil {
				return err
			}
			if err := lb.Put(binary.BigEndian.AppendUint64(nil, uint64(l.ID)), b); err != nil {
				return err
			}
		}
		if err := writeAuth(tx, exp.Aux); err != nil {
			return err
		}
		meta := tx.Bucket(bucketMeta)
		if exp.CompactScheduled >= 0 {
			if err := meta.Put(metaScheduledCompact, appendRev(nil, exp.CompactScheduled, 0, false)); err != nil {
				return err
			}
		}
		if exp.CompactFinished >= 0 {
			return meta.Put(metaFinishedCompact, appendRev(nil, exp.CompactFinished, 0, false))
		}
		return nil
	})
	if err == nil {
		err = db.Sync()
	}
	if err != nil {
		return exp, fmt.Errorf("etcdfile: write %s: %w", path, err)
	}
	return exp, nil
}

// writeAuth writes the store's auth state (the aux writes the auth
// package maps to etcd's buckets): the enabled flag, the auth revision,
// each user and each role.
func writeAuth(tx *bolt.Tx, aux []mvcc.AuxWrite) error {
	st, err := auth.ToEtcd(aux)
	if err != nil {
		return err
	}
	b := tx.Bucket(bucketAuth)
	if err := errors.Join(b.Put(authEnabled, st.Enabled), b.Put(authRevision, st.Revision)); err != nil {
		return err
	}
	for _, c := range []struct {
		bucket []byte
		from   map[string][]byte
	}{{bucketAuthUsers, st.Users}, {bucketAuthRoles, st.Roles}} {
		b := tx.Bucket(c.bucket)
		for name, v := range c.from {
			if err := b.Put([]byte(name), v); err != nil {
				return err
			}
		}
	}
	return nil
}

// appendSHA256 appends the SHA-256 of the file's contents to it and
// syncs it.
func appendSHA256(path string) (err error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return fmt.Errorf("etcdfile: %w", err)
	}
	if _, err := f.Write(h.Sum(nil)); err != nil {
		return fmt.Errorf("etcdfile: %w", err)
	}
	return f.Sync()
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	return errors.Join(d.Sync(), d.Close())
}
