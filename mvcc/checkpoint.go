package mvcc

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"slices"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stratadb/strata/engine"
	"github.com/stratadb/strata/internal/fsutil"
	"github.com/stratadb/strata/mvcc/keyindex"
)

// The key index checkpoint lets Open skip reading every revision after a
// clean Close. Close, once the writers are drained, writes the key index
// (every key with its revision list, in keyindex's encoding) and the lease
// of each live key whose latest version has one into a file beside the
// engine's, together with the store revision it reflects and the
// metadata it was written against (current revision, compaction
// revisions, applied index). Once the file is durable, Close writes a
// random token under metaCheckpointToken in a synced batch; the file
// carries the same token.
//
// Open loads the file instead of scanning the revisions only if the
// engine holds a token, the file carries that token, its metadata equal
// the engine's, and it decodes whole (format version, counts, every list
// valid, keys in order, crc32c over everything). Anything else, missing
// file, mismatch, damage, falls back to the full rebuild: never an error,
// never a wrong index. Either way, Open deletes the token in a synced
// batch before the store accepts a write, so the file can be taken at
// most once: after later writes and a crash (no Close) there is no token,
// and the revisions are read. A read-only engine keeps its token: nothing
// is written to it, so the file stays true.
//
// Where it lives: a file in db_path, written sequentially through the
// engine's file system (a temporary name, fsync, rename, directory
// fsync), not keys in the engine. At a million keys the index is tens of
// MB; written through Pebble it would go through the WAL and the
// memtables at shutdown, be flushed and compacted later, and be read back
// through iterators at open, several times the work of one sequential
// write and read. The file is removed once Open consumed the token.
//
// The file, all integers big-endian:
//
//	magic     8 bytes, checkpointMagic
//	format    4 bytes, checkpointFormat
//	token     16 bytes, as stored under metaCheckpointToken
//	rev       8 bytes, the store's current revision at Close
//	metadata  4 x 8 bytes: current revision, compaction scheduled,
//	          compaction finished, applied index, as the engine held
//	          them (-1 for absent)
//	keys      8 bytes, the number of keys
//	keys times, in increasing key order:
//	          uvarint key length, key, uvarint list length, list
//	          (keyindex.Export's encoding), uvarint lease ID as uint64
//	          (0: none; only on a live key)
//	crc       4 bytes, crc32c (Castagnoli) of every byte before it
const (
	checkpointFileName  = "STRATA-KEYINDEX"
	checkpointMagic     = "STRKIDX\n"
	checkpointFormat    = 1
	checkpointTokenLen  = 16
	checkpointHeaderLen = len(checkpointMagic) + 4 + checkpointTokenLen + 8 + 4*8 + 8
)

// metaCheckpointToken holds the token of the checkpoint written at the
// last Close, until the next Open deletes it. It is never part of a
// snapshot or a backup (isCheckpointToken): a token belongs to the file
// beside one engine.
var metaCheckpointToken = []byte("z/keyindex_checkpoint")

// isCheckpointToken reports whether k is metaCheckpointToken, which
// snapshots and backups leave out.
func isCheckpointToken(k []byte) bool { return bytes.Equal(k, metaCheckpointToken) }

var crc32c = crc32.MakeTable(crc32.Castagnoli)

// storeMeta is the metadata Open reads, each -1 when absent.
type storeMeta struct {
	rev, compactScheduled, compactFinished, applied int64
}

// readStoreMeta reads the store's metadata from the engine.
func (s *Store) readStoreMeta() (storeMeta, error) {
	var m storeMeta
	for _, f := range []struct {
		key []byte
		to  *int64
	}{{metaRev, &m.rev}, {metaCompactScheduled, &m.compactScheduled}, {metaCompactFinished, &m.compactFinished}, {metaApplied, &m.applied}} {
		v, found, err := s.readMeta(f.key)
		if err != nil {
			return m, err
		}
		*f.to = -1
		if found {
			*f.to = v
		}
	}
	return m, nil
}

// currentRev is the current revision the metadata record (Open's, for a
// store whose revisions are all at or below its metaRev, as every write
// keeps them).
func (m storeMeta) currentRev() int64 { return currentRev(m.rev, 0, m.compactScheduled) }

// unfinishedCompaction reports whether a compaction was scheduled and not
// finished.
func (m storeMeta) unfinishedCompaction() bool {
	return m.compactScheduled >= 0 && m.compactScheduled > m.compactFinished
}

// IndexSource is where Open took the key index from.
type IndexSource int

const (
	// IndexRebuilt: read from every revision's index record.
	IndexRebuilt IndexSource = iota
	// IndexFromCheckpoint: loaded from the checkpoint the last Close wrote.
	IndexFromCheckpoint
	// IndexFromSnapshot: built while a snapshot was restored.
	IndexFromSnapshot
)

// IndexOrigin tells how Open built the key index and, when a checkpoint
// was there and not used, why.
type IndexOrigin struct {
	Source IndexSource
	// NotUsed says why a checkpoint the engine named was not loaded;
	// empty when none was named or it was loaded.
	NotUsed string
}

// String describes o for a log line.
func (o IndexOrigin) String() string {
	switch {
	case o.Source == IndexFromCheckpoint:
		return "loaded from the checkpoint"
	case o.Source == IndexFromSnapshot:
		return "built from the snapshot"
	case o.NotUsed != "":
		return "rebuilt from the revisions (checkpoint not used: " + o.NotUsed + ")"
	default:
		return "rebuilt from the revisions"
	}
}

// CheckpointReport is what Close did about the key index checkpoint.
type CheckpointReport struct {
	// Written is true when Close wrote a checkpoint.
	Written bool
	// Skipped says why none was written (empty if one was).
	Skipped string
	// Keys and Bytes are the checkpoint's key count and file size.
	Keys  int
	Bytes int64
	// Took is the time Close spent writing it, token included.
	Took time.Duration
}

// String describes r for a log line.
func (r CheckpointReport) String() string {
	if !r.Written {
		return "key index checkpoint not written: " + r.Skipped
	}
	return fmt.Sprintf("key index checkpoint written: %d keys, %.1f MB in %.2f s", r.Keys, float64(r.Bytes)/1e6, r.Took.Seconds())
}

// IndexOrigin returns how Open built the key index.
func (s *Store) IndexOrigin() IndexOrigin { return s.origin }

// CheckpointAtClose returns what Close did about the key index
// checkpoint; the zero report before Close.
func (s *Store) CheckpointAtClose() CheckpointReport { return s.closeReport }

// checkpointPath returns the file system and path of the checkpoint file.
func checkpointPath(db *engine.DB) (vfs.FS, string) {
	fs, dir := db.Dir()
	return fs, fs.PathJoin(dir, checkpointFileName)
}

// writeCheckpoint writes the checkpoint at Close, under compactMu and
// writeMu with the writers drained, and makes it loadable by writing its
// token. A store that failed, a read-only engine and an unfinished
// compaction get none (skip says why); an error leaves no token, so the
// next Open rebuilds.
func (s *Store) writeCheckpoint() CheckpointReport {
	start := time.Now()
	skip := func(why string) CheckpointReport { return CheckpointReport{Skipped: why} }
	if err := s.failure(); err != nil {
		return skip("the store failed")
	}
	if s.db.ReadOnly() {
		return skip("read-only")
	}
	m, err := s.readStoreMeta()
	if err != nil {
		return skip(err.Error())
	}
	if m.unfinishedCompaction() || s.leftover != nil {
		return skip("a compaction is unfinished")
	}
	if s.rev != m.currentRev() {
		// A store written before every write recorded its revision: the
		// checkpoint could never be shown to match it.
		return skip(fmt.Sprintf("the metadata record revision %d, the store is at %d", m.currentRev(), s.rev))
	}
	var token [checkpointTokenLen]byte
	if _, err := rand.Read(token[:]); err != nil {
		return skip(err.Error())
	}
	s.mu.RLock()
	s.leaseMu.Lock()
	keys, size, err := s.writeCheckpointFile(token, m)
	s.leaseMu.Unlock()
	s.mu.RUnlock()
	if err == nil {
		b := s.db.NewBatch()
		err = b.Put(metaCheckpointToken, token[:])
		if err == nil {
			err = b.CommitSync()
		}
		_ = b.Close()
	}
	if err != nil {
		return skip(err.Error())
	}
	return CheckpointReport{Written: true, Keys: keys, Bytes: size, Took: time.Since(start)}
}

// writeCheckpointFile writes the file under a temporary name, syncs it
// and renames it into place; the caller holds mu and leaseMu.
func (s *Store) writeCheckpointFile(token [checkpointTokenLen]byte, m storeMeta) (keys int, size int64, err error) {
	fs, path := checkpointPath(s.db)
	tmp := path + ".tmp"
	f, err := fs.Create(tmp, vfs.WriteCategoryUnspecified)
	if err != nil {
		return 0, 0, err
	}
	defer func() {
		if f != nil {
			_ = f.Close()
		}
		if err != nil {
			_ = fs.Remove(tmp)
		}
	}()
	crc := crc32.New(crc32c)
	// The checksum first: a file may scribble over what it was given once
	// written (Pebble's MemFS does in invariant builds, -race included).
	cw := &countingWriter{w: io.MultiWriter(crc, f)}
	w := bufio.NewWriterSize(cw, 1<<20)
	h := make([]byte, 0, checkpointHeaderLen)
	h = append(h, checkpointMagic...)
	h = binary.BigEndian.AppendUint32(h, checkpointFormat)
	h = append(h, token[:]...)
	for _, v := range []int64{s.rev, m.rev, m.compactScheduled, m.compactFinished, m.applied} {
		h = binary.BigEndian.AppendUint64(h, uint64(v))
	}
	h = binary.BigEndian.AppendUint64(h, uint64(s.ix.Len()))
	w.Write(h)
	var buf [binary.MaxVarintLen64]byte
	putUvarint := func(v uint64) { w.Write(buf[:binary.PutUvarint(buf[:], v)]) }
	err = s.ix.Export(func(key, list []byte) error {
		putUvarint(uint64(len(key)))
		w.Write(key)
		putUvarint(uint64(len(list)))
		w.Write(list)
		putUvarint(uint64(s.leases.leaseOf(view(key))))
		keys++
		return nil
	})
	if err == nil {
		err = w.Flush()
	}
	if err == nil {
		_, err = f.Write(binary.BigEndian.AppendUint32(nil, crc.Sum32()))
	}
	if err == nil {
		err = f.Sync()
	}
	if err == nil {
		err = f.Close()
		f = nil
	}
	if err == nil {
		err = fs.Rename(tmp, path)
	}
	if err == nil {
		err = fsutil.SyncDir(fs, fs.PathDir(path))
	}
	if err != nil {
		return 0, 0, fmt.Errorf("mvcc: Close: write the key index checkpoint %s: %w", path, err)
	}
	return keys, cw.n + 4, nil
}

// checkpointState is what a checkpoint holds beside the leases' TTLs.
type checkpointState struct {
	ix     *keyindex.Index
	rev    int64
	leased []keyLease
}

type keyLease struct {
	key string
	id  int64
}

// loadCheckpoint reads the checkpoint whose token the engine holds and
// returns what it holds if it describes the store as m says it is;
// otherwise an error saying why not.
func loadCheckpoint(db *engine.DB, token []byte, m storeMeta) (*checkpointState, error) {
	fs, path := checkpointPath(db)
	f, err := fs.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	size := st.Size()
	if size < int64(checkpointHeaderLen)+4 {
		return nil, fmt.Errorf("truncated: %d bytes", size)
	}
	cr := &checksumReader{r: io.LimitReader(f, size-4), crc: crc32.New(crc32c)}
	br := bufio.NewReaderSize(cr, 1<<20)
	h := make([]byte, checkpointHeaderLen)
	if _, err := io.ReadFull(br, h); err != nil {
		return nil, err
	}
	if string(h[:8]) != checkpointMagic {
		return nil, fmt.Errorf("not a key index checkpoint (magic %q)", h[:8])
	}
	if v := binary.BigEndian.Uint32(h[8:]); v != checkpointFormat {
		return nil, fmt.Errorf("format version %d, this build reads %d", v, checkpointFormat)
	}
	if !bytes.Equal(h[12:28], token) {
		return nil, errors.New("written for another token")
	}
	var vals [6]int64
	for i := range vals {
		vals[i] = int64(binary.BigEndian.Uint64(h[28+8*i:]))
	}
	rev, nkeys := vals[0], uint64(vals[5])
	if got := (storeMeta{vals[1], vals[2], vals[3], vals[4]}); got != m {
		return nil, fmt.Errorf("written at metadata %+v, the store holds %+v", got, m)
	}
	if rev != m.currentRev() {
		return nil, fmt.Errorf("written at revision %d, the store's metadata say %d", rev, m.currentRev())
	}
	bodyLen := size - 4 - int64(checkpointHeaderLen)
	left := func() int64 { return bodyLen - (cr.n - int64(checkpointHeaderLen) - int64(br.Buffered())) }
	if nkeys > uint64(bodyLen)/3 {
		return nil, fmt.Errorf("%d keys in %d bytes", nkeys, bodyLen)
	}
	ix := keyindex.New()
	load, err := ix.StartLoad()
	if err != nil {
		return nil, err
	}
	var leased []keyLease
	var key, list []byte
	readChunk := func(buf []byte, limit int64, what string) ([]byte, error) {
		n, err := binary.ReadUvarint(br)
		if err != nil {
			return nil, err
		}
		if n > uint64(min(limit, left())) {
			return nil, fmt.Errorf("%s of %d bytes", what, n)
		}
		b := slices.Grow(buf[:0], int(n))[:n]
		_, err = io.ReadFull(br, b)
		return b, err
	}
	for i := uint64(0); i < nkeys; i++ {
		if key, err = readChunk(key, keyindex.MaxKeySize, "key"); err != nil {
			return nil, err
		}
		if list, err = readChunk(list, bodyLen, "revision list"); err != nil {
			return nil, err
		}
		lease, err := binary.ReadUvarint(br)
		if err != nil {
			return nil, err
		}
		live, err := load.Add(key, list)
		if err != nil {
			return nil, err
		}
		if lease != 0 {
			if !live {
				return nil, fmt.Errorf("lease %d on deleted key %q", int64(lease), key)
			}
			leased = append(leased, keyLease{string(key), int64(lease)})
		}
	}
	load.Finish()
	if _, err := br.ReadByte(); err != io.EOF {
		return nil, fmt.Errorf("bytes after the %d keys", nkeys)
	}
	var sum [4]byte
	if _, err := f.ReadAt(sum[:], size-4); err != nil {
		return nil, err
	}
	if got, want := cr.crc.Sum32(), binary.BigEndian.Uint32(sum[:]); got != want {
		return nil, fmt.Errorf("checksum %08x, want %08x", got, want)
	}
	return &checkpointState{ix: ix, rev: rev, leased: leased}, nil
}

// checksumReader checksums and counts what is read through it.
type checksumReader struct {
	r   io.Reader
	crc hash.Hash32
	n   int64
}

func (c *checksumReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.crc.Write(p[:n])
	c.n += int64(n)
	return n, err
}

// takeCheckpoint is Open's use of the checkpoint: with the engine's token
// (nil: none) and metadata m, it consumes the token (deleted in a synced
// batch, so the file is never taken again, whatever is written next) and,
// if load, returns the checkpoint's contents if they describe the store;
// else nil and s.origin says why. It removes the file afterwards (and a
// temporary one a failed Close left). A read-only engine keeps both.
func (s *Store) takeCheckpoint(token []byte, m storeMeta, load bool) (*checkpointState, error) {
	writable := !s.db.ReadOnly()
	if token != nil && writable {
		b := s.db.NewBatch()
		err := b.Delete(metaCheckpointToken)
		if err == nil {
			err = b.CommitSync()
		}
		_ = b.Close()
		if err != nil {
			return nil, fmt.Errorf("mvcc: Open: consume the key index checkpoint: %w", err)
		}
	}
	var ck *checkpointState
	if token != nil && load {
		var err error
		if ck, err = loadCheckpoint(s.db, token, m); err == nil {
			err = s.checkLeases(ck.leased)
		}
		if err != nil {
			ck, s.origin.NotUsed = nil, err.Error()
		}
	}
	if writable {
		fs, path := checkpointPath(s.db)
		// Leftovers whose token is gone (or never written) are never
		// loaded; removing them only saves the space.
		_ = fs.Remove(path)
		_ = fs.Remove(path + ".tmp")
	}
	return ck, nil
}

// checkLeases checks that every lease a checkpoint attaches keys to is
// granted (restored from the engine already).
func (s *Store) checkLeases(leased []keyLease) error {
	for _, kl := range leased {
		if s.leases.byID[kl.id] == nil {
			return fmt.Errorf("key %q on lease %d, which is not granted", kl.key, kl.id)
		}
	}
	return nil
}
