// Package raftwal keeps a raft member's durable state in append-only
// segment files, and serves the log back to raft: it implements
// raft.Storage.
//
// What it holds, as records in the segments of one directory:
//
//	entry       a log entry: term, index, type and data, written once
//	hard state  raft's term, vote and commit index
//	snapshot    the newest snapshot's metadata and data (the member list;
//	            the state machine keeps its own data), created here at the
//	            applied index or received from the leader
//	meta        the member's identity, opaque to this package
//	members     the member list with the index it was applied up to, opaque
//
// Why segment files and not a key-value store: the log is written in
// order, read back once (at a restart, or by a leader for a follower that
// is behind) and dropped from the front. In an LSM tree an entry is
// written to its WAL, then flushed into a table, often compacted with
// others, and only then dropped by a range deletion; a 13.7 KB Kubernetes
// object crosses the disk three or four times before it is gone. Here it
// crosses once, and a truncation is the removal of whole files.
//
// Each segment starts with the member's whole state (meta, members,
// snapshot and hard state as they are when the segment is created), so any
// segment before one whose entries are still needed may be removed without
// losing state. A batch (Save) is one write and one fdatasync. Every
// record carries a CRC-32C; at Open a torn record at the end of the last
// segment (a crash mid-write: it was never acknowledged) is cut off, and a
// bad record anywhere else is corruption, reported with the file and
// offset.
//
// Segments are written over zeros: each is a spare file filled with zeros
// and fsynced ahead of time (in the background while the segment before
// fills), so a batch's fdatasync overwrites blocks the file system has
// already allocated and has no metadata to journal. Appending to a
// growing file instead costs each fdatasync an update of the file's size
// and extents: measured on ext4 with 14 KB batches, about twice the CPU
// and the latency per fsync. This is why Pebble recycles its WAL files
// and etcd preallocates its WAL segments. The records of a segment end
// where its zeros begin.
//
// Memory: the index of every entry in the log (its term and place on
// disk, 32 bytes) and the newest entries themselves, up to
// Options.CacheBytes (the entries the apply goroutine and the followers'
// appends read next). Older entries are read from the files when asked
// for, which only a follower that fell behind does.
package raftwal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/prometheus/client_golang/prometheus"
	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// Record kinds.
const (
	recEntry byte = iota + 1
	recHardState
	// recSnapshot is a snapshot created at this member's applied index:
	// the entries after it stay.
	recSnapshot
	// recSnapshotReplace is a snapshot received from the leader: it
	// replaces the whole log, as raft's MemoryStorage.ApplySnapshot does.
	recSnapshotReplace
	recMeta
	recMembers
)

// recordHeader is a record's length (of kind and payload) and the CRC-32C
// of the same bytes.
const recordHeader = 8

// maxRecord bounds a record's length: a length beyond it is a torn or
// damaged header, not a record (raft's entries are at most a message's
// size, 1 MiB here, plus a request's 1.5 MiB limit).
const maxRecord = 64 << 20

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// Options tune a Log. Zero values take the defaults.
type Options struct {
	// SegmentBytes is the size past which a new segment is started, and
	// so the granularity of truncation. The default is 64 MiB, etcd's WAL
	// segment size.
	SegmentBytes int64
	// CacheBytes bounds the newest entries kept in memory (their data).
	// The default is 8 MiB.
	CacheBytes int64
	// ReadOnly opens the log to read it (a tool's look at a stopped
	// member's log): nothing is written, a torn end is left as it is, and
	// every write returns ErrReadOnly.
	ReadOnly bool

	// spareInline prepares the spare segment in the goroutine that needs
	// it next rather than in the background, so that the file system's
	// changes come in one order (the crash tests count them).
	spareInline bool
}

func (o Options) withDefaults() Options {
	if o.SegmentBytes <= 0 {
		o.SegmentBytes = 64 << 20
	}
	if o.CacheBytes <= 0 {
		o.CacheBytes = 8 << 20
	}
	return o
}

var (
	// ErrCorrupt is returned by Open for a segment damaged before its end.
	ErrCorrupt = errors.New("raftwal: corrupt segment")
	// ErrReadOnly is returned by the writes of a log opened ReadOnly.
	ErrReadOnly = errors.New("raftwal: the log is open read-only")
)

// Log is a member's durable raft state. Its methods are safe for
// concurrent use: raft reads it (as raft.Storage) from its own goroutine
// while the append and apply goroutines write it.
type Log struct {
	fs   vfs.FS
	dir  string
	opts Options

	fsyncLatency prometheus.Histogram
	// syncStart is when the fsync in flight began (UnixNano), 0 if none:
	// a stalled disk shows as an fsync that does not return.
	syncStart atomic.Int64

	mu sync.Mutex

	meta    []byte
	members []byte
	hs      *pb.HardState
	// hsDirty: hs is newer than the one written (a commit-only change is
	// written with the next batch that must be synced, as raft allows).
	hsDirty bool
	snap    *pb.Snapshot

	// The log: entries first..last; locs[i-first] is entry i's place.
	// prevTerm is the term of entry first-1 (the snapshot's, or that of
	// the last entry compacted away).
	first, last uint64
	prevTerm    uint64
	locs        []entryLoc
	appended    int64 // entries' bytes appended since Open (entryLoc.end)
	// cache holds the newest entries, cache[i] being entry
	// last-len(cache)+1+i; cacheSize is their data's size.
	cache     []*pb.Entry
	cacheSize int64

	segs []*segment // oldest first; the last is written
	w    vfs.File
	buf  []byte

	// spareReady: spareName holds a zeroed segment, fsynced, for the next
	// segment to take. spareDone is open while one is being prepared.
	spareReady bool
	spareDone  chan struct{}
}

// spareName is the zeroed file the next segment is made of. Open removes
// one left by a crash (as every *.wal.tmp): it may not be whole.
const spareName = "spare.wal.tmp"

// entryLoc is where an entry's record is.
type entryLoc struct {
	term uint64
	seg  *segment
	off  int64 // of the record's payload (after kind)
	n    uint32
	// end is the bytes of entries appended up to and including this one
	// since Open: the bytes between two entries are the difference.
	end int64
}

type segment struct {
	seq      uint64
	size     int64
	maxIndex uint64 // the highest entry index written in it
	r        vfs.File
}

func segmentName(seq uint64) string { return fmt.Sprintf("%016x.wal", seq) }

func parseSegmentName(name string) (uint64, bool) {
	hex, ok := strings.CutSuffix(name, ".wal")
	if !ok || len(hex) != 16 {
		return 0, false
	}
	seq, err := strconv.ParseUint(hex, 16, 64)
	return seq, err == nil
}

// Open opens the log in dir on fs, creating dir if needed, and replays
// its segments. The caller learns what it found from Meta, Members,
// HardState and Snapshot.
func Open(fs vfs.FS, dir string, opts Options) (*Log, error) {
	// A new directory's entry in its parent must be durable too, or a
	// crash loses the whole log.
	if !opts.ReadOnly {
		if err := MkdirAllSynced(fs, dir); err != nil {
			return nil, fmt.Errorf("raftwal: %s: %w", dir, err)
		}
	}
	l := &Log{
		fs: fs, dir: dir, opts: opts.withDefaults(),
		hs:           &pb.HardState{},
		snap:         pb.EnsureSnapshot(nil),
		first:        1,
		fsyncLatency: prometheus.NewHistogram(prometheus.HistogramOpts{Buckets: pebble.FsyncLatencyBuckets}),
	}
	names, err := fs.List(dir)
	if err != nil {
		return nil, fmt.Errorf("raftwal: %s: %w", dir, err)
	}
	var seqs []uint64
	for _, name := range names {
		if seq, ok := parseSegmentName(name); ok {
			seqs = append(seqs, seq)
		}
	}
	slices.Sort(seqs)
	for _, name := range names {
		if strings.HasSuffix(name, ".wal.tmp") { // a cut that a crash interrupted
			if err := fs.Remove(fs.PathJoin(dir, name)); err != nil {
				return nil, fmt.Errorf("raftwal: %w", err)
			}
		}
	}
	for i, seq := range seqs {
		if err := l.replay(seq, i == len(seqs)-1); err != nil {
			l.closeFiles()
			return nil, err
		}
	}
	if err := l.settle(); err != nil {
		l.closeFiles()
		return nil, err
	}
	if opts.ReadOnly {
		return l, nil
	}
	next := uint64(1)
	if len(seqs) > 0 {
		next = seqs[len(seqs)-1] + 1
	}
	l.spareReady = l.prepareSpare() == nil
	if err := l.startSegment(next); err != nil {
		l.closeFiles()
		return nil, err
	}
	return l, nil
}

// replay reads one segment's records into the log's state. In the last
// segment a torn record ends the segment, which is cut there.
func (l *Log) replay(seq uint64, last bool) error {
	name := l.fs.PathJoin(l.dir, segmentName(seq))
	f, err := l.fs.Open(name)
	if err != nil {
		return fmt.Errorf("raftwal: %w", err)
	}
	data, err := io.ReadAll(f)
	_ = f.Close()
	if err != nil {
		return fmt.Errorf("raftwal: %s: %w", name, err)
	}
	seg := &segment{seq: seq}
	l.segs = append(l.segs, seg)
	off := 0
	for off < len(data) {
		kind, payload, n, ok := decodeRecord(data[off:])
		if !ok && allZero(data[off:]) {
			break // the segment's unwritten zeros
		}
		if !ok {
			if !last {
				return fmt.Errorf("%w: %s: a damaged record at offset %d of %d bytes", ErrCorrupt, name, off, len(data))
			}
			// A write a crash tore: never acknowledged, since the sync that
			// would have made it durable did not return.
			if l.opts.ReadOnly {
				break
			}
			if err := l.cutSegment(name, data[:off]); err != nil {
				return err
			}
			break
		}
		if err := l.replayRecord(seg, int64(off+recordHeader+1), kind, payload); err != nil {
			return fmt.Errorf("raftwal: %s at offset %d: %w", name, off, err)
		}
		off += n
	}
	seg.size = int64(off)
	return nil
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// cutSegment replaces segment name with its first bytes: vfs files have
// no truncate, so the intact prefix is written to a new file renamed over
// the old one.
func (l *Log) cutSegment(name string, prefix []byte) error {
	tmp := name + ".tmp"
	f, err := l.fs.Create(tmp, vfs.WriteCategoryUnspecified)
	if err != nil {
		return fmt.Errorf("raftwal: cutting the torn end of %s: %w", name, err)
	}
	_, err = f.Write(prefix)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = l.fs.Rename(tmp, name)
	}
	if err != nil {
		return fmt.Errorf("raftwal: cutting the torn end of %s: %w", name, err)
	}
	return syncDir(l.fs, l.dir)
}

// decodeRecord returns the record at the start of b and its length, or
// ok = false if b does not start with a whole, intact record.
func decodeRecord(b []byte) (kind byte, payload []byte, n int, ok bool) {
	if len(b) < recordHeader+1 {
		return 0, nil, 0, false
	}
	size := binary.LittleEndian.Uint32(b)
	if size == 0 || size > maxRecord || int(size) > len(b)-recordHeader {
		return 0, nil, 0, false
	}
	body := b[recordHeader : recordHeader+int(size)]
	if crc32.Checksum(body, crcTable) != binary.LittleEndian.Uint32(b[4:]) {
		return 0, nil, 0, false
	}
	return body[0], body[1:], recordHeader + int(size), true
}

func (l *Log) replayRecord(seg *segment, off int64, kind byte, payload []byte) error {
	switch kind {
	case recEntry:
		term, index, _, _, err := decodeEntry(payload)
		if err != nil {
			return err
		}
		seg.maxIndex = max(seg.maxIndex, index)
		l.appendLoc(index, entryLoc{term: term, seg: seg, off: off, n: uint32(len(payload))})
	case recHardState:
		hs := &pb.HardState{}
		if err := proto.Unmarshal(payload, hs); err != nil {
			return fmt.Errorf("hard state: %w", err)
		}
		l.hs = hs
	case recSnapshot, recSnapshotReplace:
		snap := &pb.Snapshot{}
		if err := proto.Unmarshal(payload, snap); err != nil {
			return fmt.Errorf("snapshot: %w", err)
		}
		l.snap = pb.EnsureSnapshot(snap)
		if kind == recSnapshotReplace {
			l.resetTo(snap.GetMetadata().GetIndex(), snap.GetMetadata().GetTerm())
		}
	case recMeta:
		l.meta = slices.Clone(payload)
	case recMembers:
		l.members = slices.Clone(payload)
	default:
		return fmt.Errorf("unknown record kind %d", kind)
	}
	return nil
}

// appendLoc adds entry index at loc, replacing the entries from index on
// (a new leader overwrote them). An index past last+1 starts the log over
// there: the entries before it were in segments already removed.
func (l *Log) appendLoc(index uint64, loc entryLoc) {
	switch {
	case index == l.last+1:
	case index < l.first:
		return // before a snapshot that replaced the log
	case index <= l.last:
		l.locs = l.locs[:index-l.first]
		l.last = index - 1
	default:
		l.locs = l.locs[:0]
		l.first, l.last, l.prevTerm = index, index-1, 0
	}
	l.appended += int64(loc.n)
	loc.end = l.appended
	l.locs = append(l.locs, loc)
	l.last = index
}

// resetTo empties the log after a snapshot at index, term.
func (l *Log) resetTo(index, term uint64) {
	l.locs = nil
	l.first, l.last, l.prevTerm = index+1, index, term
	l.cache, l.cacheSize = nil, 0
}

// settle makes the replayed log start after the snapshot, as raft's
// storage does after a restart.
func (l *Log) settle() error {
	si, st := l.snap.GetMetadata().GetIndex(), l.snap.GetMetadata().GetTerm()
	switch {
	case si == 0 && len(l.locs) > 0 && l.first != 1:
		return fmt.Errorf("%w: %s: the log starts at entry %d without a snapshot before it", ErrCorrupt, l.dir, l.first)
	case si == 0:
	case si > l.last:
		l.resetTo(si, st)
	case si+1 < l.first:
		return fmt.Errorf("%w: %s: the log starts at entry %d, after a gap behind the snapshot at %d", ErrCorrupt, l.dir, l.first, si)
	default:
		l.locs = slices.Clone(l.locs[si+1-l.first:])
		l.first, l.prevTerm = si+1, st
	}
	return nil
}

// startSegment creates segment seq, writes the member's state at its
// head, and makes it the one written.
func (l *Log) startSegment(seq uint64) error {
	name := l.fs.PathJoin(l.dir, segmentName(seq))
	f, err := l.createSegment(name)
	if err != nil {
		return fmt.Errorf("raftwal: %w", err)
	}
	seg := &segment{seq: seq}
	buf := l.buf[:0]
	if l.meta != nil {
		buf = appendRecord(buf, recMeta, l.meta)
	}
	if l.members != nil {
		buf = appendRecord(buf, recMembers, l.members)
	}
	if l.snap.GetMetadata().GetIndex() > 0 || len(l.snap.GetData()) > 0 {
		sb, err := proto.Marshal(l.snap)
		if err != nil {
			_ = f.Close()
			return err
		}
		buf = appendRecord(buf, recSnapshot, sb)
	}
	buf, err = l.appendHardState(buf)
	if err != nil {
		_ = f.Close()
		return err
	}
	l.buf = buf
	if _, err := f.Write(buf); err != nil {
		_ = f.Close()
		return fmt.Errorf("raftwal: %s: %w", name, err)
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return fmt.Errorf("raftwal: %s: %w", name, err)
	}
	if err := syncDir(l.fs, l.dir); err != nil {
		_ = f.Close()
		return err
	}
	seg.size = int64(len(buf))
	if l.w != nil {
		if err := l.w.Close(); err != nil {
			_ = f.Close()
			return fmt.Errorf("raftwal: closing segment: %w", err)
		}
	}
	l.w = f
	l.segs = append(l.segs, seg)
	l.startSpare()
	return nil
}

// createSegment makes the file of a new segment: the spare, renamed, if
// one is ready; else a new, empty file (appended to, as it grows).
func (l *Log) createSegment(name string) (vfs.File, error) {
	if l.spareReady {
		l.spareReady = false
		f, err := l.fs.ReuseForWrite(l.fs.PathJoin(l.dir, spareName), name, vfs.WriteCategoryUnspecified)
		if err == nil {
			return f, nil
		}
	}
	return l.fs.Create(name, vfs.WriteCategoryUnspecified)
}

// startSpare prepares the next segment's spare, in the background unless
// Options.spareInline. Called with mu held.
func (l *Log) startSpare() {
	if l.spareReady || l.spareDone != nil || l.opts.ReadOnly {
		return
	}
	if l.opts.spareInline {
		l.spareReady = l.prepareSpare() == nil
		return
	}
	done := make(chan struct{})
	l.spareDone = done
	go func() {
		defer close(done)
		err := l.prepareSpare()
		l.mu.Lock()
		l.spareReady, l.spareDone = err == nil, nil
		l.mu.Unlock()
	}()
}

// prepareSpare writes spareName: SegmentBytes of zeros, fsynced. Its
// directory entry is made durable when a segment takes it. A spare that
// fails is removed (a segment is then created without one).
func (l *Log) prepareSpare() error {
	name := l.fs.PathJoin(l.dir, spareName)
	f, err := l.fs.Create(name, vfs.WriteCategoryUnspecified)
	if err != nil {
		return err
	}
	zeros := make([]byte, min(l.opts.SegmentBytes, 1<<20))
	for left := l.opts.SegmentBytes; left > 0 && err == nil; left -= int64(len(zeros)) {
		_, err = f.Write(zeros[:min(left, int64(len(zeros)))])
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = l.fs.Remove(name)
	}
	return err
}

// MkdirAllSynced creates dir and its missing parents, fsyncing each new
// directory's parent: a member that bootstraps and then loses power must
// still find its raft log.
func MkdirAllSynced(fs vfs.FS, dir string) error {
	var created []string
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		if _, err := fs.Stat(d); err == nil {
			break
		}
		created = append(created, d)
		if filepath.Dir(d) == d {
			break
		}
	}
	if err := fs.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, d := range created {
		pd, err := fs.OpenDir(filepath.Dir(d))
		if err != nil {
			return err
		}
		err = pd.Sync()
		if cerr := pd.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// appendHardState adds the newest hard state to buf and marks it written.
// Called with mu held.
func (l *Log) appendHardState(buf []byte) ([]byte, error) {
	hb, err := proto.Marshal(l.hs)
	if err != nil {
		return buf, err
	}
	l.hsDirty = false
	return appendRecord(buf, recHardState, hb), nil
}

func syncDir(fs vfs.FS, dir string) error {
	d, err := fs.OpenDir(dir)
	if err != nil {
		return fmt.Errorf("raftwal: %s: %w", dir, err)
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("raftwal: sync %s: %w", dir, err)
	}
	return nil
}

func appendRecord(buf []byte, kind byte, payload []byte) []byte {
	start := len(buf)
	buf = binary.LittleEndian.AppendUint32(buf, uint32(len(payload)+1))
	buf = binary.LittleEndian.AppendUint32(buf, 0)
	buf = append(buf, kind)
	buf = append(buf, payload...)
	binary.LittleEndian.PutUint32(buf[start+4:], crc32.Checksum(buf[start+recordHeader:], crcTable))
	return buf
}

// An entry record's payload: uvarint term, uvarint index, uvarint type,
// then the data.
func appendEntry(buf []byte, e *pb.Entry) []byte {
	start := len(buf)
	buf = binary.LittleEndian.AppendUint32(buf, 0)
	buf = binary.LittleEndian.AppendUint32(buf, 0)
	buf = append(buf, recEntry)
	buf = binary.AppendUvarint(buf, e.GetTerm())
	buf = binary.AppendUvarint(buf, e.GetIndex())
	buf = binary.AppendUvarint(buf, uint64(e.GetType()))
	buf = append(buf, e.GetData()...)
	binary.LittleEndian.PutUint32(buf[start:], uint32(len(buf)-start-recordHeader))
	binary.LittleEndian.PutUint32(buf[start+4:], crc32.Checksum(buf[start+recordHeader:], crcTable))
	return buf
}

func decodeEntry(p []byte) (term, index uint64, typ pb.EntryType, data []byte, err error) {
	var vals [3]uint64
	for i := range vals {
		v, n := binary.Uvarint(p)
		if n <= 0 {
			return 0, 0, 0, nil, errors.New("entry: bad header")
		}
		vals[i], p = v, p[n:]
	}
	return vals[0], vals[1], pb.EntryType(vals[2]), p, nil
}

// Meta returns the identity recorded by Bootstrap, or nil in a new log.
func (l *Log) Meta() []byte {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.meta
}

// Members returns the member list last saved, or nil.
func (l *Log) Members() []byte {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.members
}

// HardState returns the newest hard state.
func (l *Log) HardState() *pb.HardState {
	l.mu.Lock()
	defer l.mu.Unlock()
	return proto.Clone(l.hs).(*pb.HardState)
}

// FsyncLatency is the histogram of the segments' fsyncs, in nanoseconds
// with pebble.FsyncLatencyBuckets, as the engine keeps its WAL's.
func (l *Log) FsyncLatency() prometheus.Histogram { return l.fsyncLatency }

// SyncInFlight returns how long the fsync in flight has run, and ok =
// false when none is: what a readiness check reads to see a stalled disk
// (a finished fsync, however slow, is in FsyncLatency).
func (l *Log) SyncInFlight() (time.Duration, bool) {
	start := l.syncStart.Load()
	if start == 0 {
		return 0, false
	}
	return time.Since(time.Unix(0, start)), true
}

// Bootstrap records a new member's identity and first member list,
// durably.
func (l *Log) Bootstrap(meta, members []byte) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.meta, l.members = slices.Clone(meta), slices.Clone(members)
	buf := appendRecord(l.buf[:0], recMeta, meta)
	buf = appendRecord(buf, recMembers, members)
	return l.writeSynced(buf)
}

// SaveMembers records the member list, durably.
func (l *Log) SaveMembers(members []byte) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.members = slices.Clone(members)
	return l.writeSynced(appendRecord(l.buf[:0], recMembers, members))
}

// writeSynced appends buf to the current segment and fsyncs it. Called
// with mu held.
func (l *Log) writeSynced(buf []byte) error {
	l.buf = buf[:0]
	if l.w == nil {
		return ErrReadOnly
	}
	seg := l.segs[len(l.segs)-1]
	if _, err := l.w.Write(buf); err != nil {
		return fmt.Errorf("raftwal: write %s: %w", segmentName(seg.seq), err)
	}
	start := time.Now()
	l.syncStart.Store(start.UnixNano())
	err := l.w.SyncData()
	l.syncStart.Store(0)
	if err != nil {
		return fmt.Errorf("raftwal: sync %s: %w", segmentName(seg.seq), err)
	}
	l.fsyncLatency.Observe(float64(time.Since(start)))
	seg.size += int64(len(buf))
	return nil
}

// Save makes raft's MsgStorageAppend messages durable, in order, in one
// write and one fsync: their entries (a later message's entries replace
// the tail they overwrite), a snapshot received from the leader, and the
// newest hard state. A batch that only moves the commit index is not
// written (raft allows the commit index to lag on disk; the next batch
// carries it). Once Save returns, raft reads the entries from the Log. It
// returns the newest hard state of msgs, or nil.
func (l *Log) Save(msgs []*pb.Message) (*pb.HardState, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.w == nil {
		return nil, ErrReadOnly
	}
	if seg := l.segs[len(l.segs)-1]; seg.size >= l.opts.SegmentBytes {
		if err := l.startSegment(seg.seq + 1); err != nil {
			return nil, err
		}
	}
	var newest *pb.HardState
	mustSync := false
	seg := l.segs[len(l.segs)-1]
	base := seg.size
	buf := l.buf[:0]
	var ents []placedEntry
	var replace *pb.Snapshot
	for _, m := range msgs {
		if hs := (&pb.HardState{Term: new(m.GetTerm()), Vote: new(m.GetVote()), Commit: new(m.GetCommit())}); !raft.IsEmptyHardState(hs) {
			if hs.GetTerm() != l.hs.GetTerm() || hs.GetVote() != l.hs.GetVote() {
				mustSync = true
			}
			l.hs, l.hsDirty, newest = hs, true, hs
		}
		if snap := m.GetSnapshot(); !raft.IsEmptySnap(snap) {
			mustSync = true
			sb, err := proto.Marshal(snap)
			if err != nil {
				return nil, err
			}
			buf = appendRecord(buf, recSnapshotReplace, sb)
			replace = snap
			ents = ents[:0] // replaced with the log
		}
		for _, e := range m.GetEntries() {
			mustSync = true
			var p placedEntry
			buf, p = appendEntryAt(buf, seg, base, e)
			ents = append(ents, p)
		}
	}
	if !mustSync {
		l.buf = buf
		return newest, nil
	}
	if l.hsDirty {
		var err error
		if buf, err = l.appendHardState(buf); err != nil {
			return nil, err
		}
	}
	if err := l.writeSynced(buf); err != nil {
		return nil, err
	}
	// Durable: raft may read all of it from now on.
	if replace != nil {
		l.snap = proto.Clone(replace).(*pb.Snapshot)
		l.resetTo(replace.GetMetadata().GetIndex(), replace.GetMetadata().GetTerm())
	}
	l.appendPlaced(ents)
	return newest, nil
}

// placedEntry is an entry encoded into a batch, and where it will be.
type placedEntry struct {
	e   *pb.Entry
	loc entryLoc
}

// appendEntryAt encodes e into buf, which is to be written at offset base
// of seg.
func appendEntryAt(buf []byte, seg *segment, base int64, e *pb.Entry) ([]byte, placedEntry) {
	start := len(buf)
	buf = appendEntry(buf, e)
	return buf, placedEntry{e, entryLoc{term: e.GetTerm(), seg: seg, off: base + int64(start+recordHeader+1), n: uint32(len(buf) - start - recordHeader - 1)}}
}

// appendPlaced adds the entries of a batch just made durable. Called with
// mu held.
func (l *Log) appendPlaced(ents []placedEntry) {
	for _, p := range ents {
		p.loc.seg.maxIndex = max(p.loc.seg.maxIndex, p.e.GetIndex())
		l.appendEntryMem(p.e, p.loc)
	}
}

// appendEntryMem adds a durable entry to the index and the cache. Called
// with mu held.
func (l *Log) appendEntryMem(e *pb.Entry, loc entryLoc) {
	index := e.GetIndex()
	if index < l.first {
		return
	}
	if index <= l.last { // overwritten: drop the cached tail from index on
		drop := int(l.last - index + 1)
		if drop > len(l.cache) {
			drop = len(l.cache)
		}
		for _, c := range l.cache[len(l.cache)-drop:] {
			l.cacheSize -= int64(len(c.GetData()))
		}
		l.cache = l.cache[:len(l.cache)-drop]
	}
	l.appendLoc(index, loc)
	if int(l.last-l.first+1) < len(l.cache)+1 { // the log started over
		l.cache, l.cacheSize = nil, 0
	}
	l.cache = append(l.cache, e)
	l.cacheSize += int64(len(e.GetData()))
	for len(l.cache) > 1 && l.cacheSize > l.opts.CacheBytes {
		l.cacheSize -= int64(len(l.cache[0].GetData()))
		l.cache[0] = nil
		l.cache = l.cache[1:]
	}
}

// Restore fills a new, empty log with a member's state moved from
// another store: hs, the snapshot snap (the log starts after it) and the
// entries after it, durably.
func (l *Log) Restore(hs *pb.HardState, snap *pb.Snapshot, ents []*pb.Entry) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.w == nil {
		return ErrReadOnly
	}
	if l.last != 0 || len(l.locs) != 0 {
		return errors.New("raftwal: Restore into a log that has entries")
	}
	sb, err := proto.Marshal(pb.EnsureSnapshot(snap))
	if err != nil {
		return err
	}
	seg := l.segs[len(l.segs)-1]
	buf := appendRecord(l.buf[:0], recSnapshotReplace, sb)
	base := seg.size
	placed := make([]placedEntry, len(ents))
	for i, e := range ents {
		buf, placed[i] = appendEntryAt(buf, seg, base, e)
	}
	l.hs = proto.Clone(hs).(*pb.HardState)
	if buf, err = l.appendHardState(buf); err != nil {
		return err
	}
	if err := l.writeSynced(buf); err != nil {
		return err
	}
	l.snap = proto.Clone(pb.EnsureSnapshot(snap)).(*pb.Snapshot)
	l.resetTo(l.snap.GetMetadata().GetIndex(), l.snap.GetMetadata().GetTerm())
	l.appendPlaced(placed)
	return nil
}

// CreateSnapshot records a snapshot at index (applied here) with raft's
// configuration cs and data, durably with the newest hard state (whose
// commit index is at least the snapshot's). The entries stay until
// Compact. It returns raft.ErrSnapOutOfDate for an index at or below the
// newest snapshot's.
func (l *Log) CreateSnapshot(index uint64, cs *pb.ConfState, data []byte) (*pb.Snapshot, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if index <= l.snap.GetMetadata().GetIndex() {
		return nil, raft.ErrSnapOutOfDate
	}
	term, err := l.term(index)
	if err != nil {
		return nil, fmt.Errorf("raftwal: snapshot at %d: %w", index, err)
	}
	snap := &pb.Snapshot{Data: data, Metadata: &pb.SnapshotMetadata{Index: new(index), Term: new(term), ConfState: proto.Clone(pb.EnsureConfState(cs)).(*pb.ConfState)}}
	sb, err := proto.Marshal(snap)
	if err != nil {
		return nil, err
	}
	buf, err := l.appendHardState(appendRecord(l.buf[:0], recSnapshot, sb))
	if err != nil {
		return nil, err
	}
	if err := l.writeSynced(buf); err != nil {
		return nil, err
	}
	l.snap = snap
	return proto.Clone(snap).(*pb.Snapshot), nil
}

// Compact drops the entries up to and including index from the log, and
// removes the segments that hold nothing after it. It returns
// raft.ErrCompacted if they are gone already.
func (l *Log) Compact(index uint64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.w == nil {
		return ErrReadOnly
	}
	if index < l.first {
		return raft.ErrCompacted
	}
	if index > l.last {
		return fmt.Errorf("raftwal: compact %d is past the last entry %d", index, l.last)
	}
	l.prevTerm = l.locs[index-l.first].term
	l.locs = slices.Clone(l.locs[index+1-l.first:])
	l.first = index + 1
	if cacheFirst := l.last + 1 - uint64(len(l.cache)); cacheFirst <= index {
		drop := index + 1 - cacheFirst
		for _, c := range l.cache[:drop] {
			l.cacheSize -= int64(len(c.GetData()))
		}
		l.cache = slices.Clone(l.cache[drop:])
	}
	// Every segment starts with the state as it was then, so segments may
	// go from the oldest on, up to the first one still holding an entry
	// after index. The one written stays.
	keep := 0
	for keep < len(l.segs)-1 && l.segs[keep].maxIndex <= index {
		keep++
	}
	for _, seg := range l.segs[:keep] {
		if seg.r != nil {
			_ = seg.r.Close()
			seg.r = nil
		}
		if err := l.fs.Remove(l.fs.PathJoin(l.dir, segmentName(seg.seq))); err != nil {
			return fmt.Errorf("raftwal: removing a truncated segment: %w", err)
		}
	}
	l.segs = slices.Clone(l.segs[keep:])
	return nil
}

// Close closes the files. The Log is not used after.
func (l *Log) Close() error {
	l.mu.Lock()
	done := l.spareDone
	l.mu.Unlock()
	if done != nil {
		<-done
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	var err error
	if l.w != nil {
		err = l.w.Close()
		l.w = nil
	}
	l.closeFiles()
	return err
}

func (l *Log) closeFiles() {
	for _, seg := range l.segs {
		if seg.r != nil {
			_ = seg.r.Close()
			seg.r = nil
		}
	}
}

// DiskBytes returns the size of the segments.
func (l *Log) DiskBytes() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	var n int64
	for _, s := range l.segs {
		n += s.size
	}
	return n
}

// Segments returns the file names of the segments, oldest first.
func (l *Log) Segments() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]string, len(l.segs))
	for i, s := range l.segs {
		out[i] = filepath.Join(l.dir, segmentName(s.seq))
	}
	return out
}

// BytesAfter returns the bytes of the entries after index up to the last
// (all of them if index is before the first).
func (l *Log) BytesAfter(index uint64) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.locs) == 0 || index >= l.last {
		return 0
	}
	total := l.locs[len(l.locs)-1].end
	if index < l.first {
		return total - l.locs[0].end + int64(l.locs[0].n)
	}
	return total - l.locs[index-l.first].end
}

// CatchUpStart returns the index up to which the log may be compacted to
// keep, behind index, at most maxEntries entries and at most maxBytes of
// them (at least one entry), for followers a little behind. It is at most
// index-1, and 0 if nothing should go.
func (l *Log) CatchUpStart(index, maxEntries uint64, maxBytes int64) uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	if index > l.last {
		index = l.last
	}
	if index < l.first+1 {
		return 0
	}
	c := l.first - 1 // compact nothing
	if index > maxEntries && index-maxEntries > c {
		c = index - maxEntries
	}
	end := l.locs[index-l.first].end
	// Move c up while the entries after it up to index exceed maxBytes.
	lo, hi := c, index-1
	for lo < hi { // the smallest c' in [c, index-1] with bytes(c', index] <= maxBytes
		mid := lo + (hi-lo)/2
		if end-l.locs[mid+1-l.first].end+int64(l.locs[mid+1-l.first].n) > maxBytes {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	if lo < l.first {
		return 0
	}
	return lo
}

// InitialState implements raft.Storage.
func (l *Log) InitialState() (*pb.HardState, *pb.ConfState, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return proto.Clone(l.hs).(*pb.HardState), proto.Clone(pb.EnsureConfState(l.snap.GetMetadata().GetConfState())).(*pb.ConfState), nil
}

// Entries implements raft.Storage: entries [lo, hi), at most maxSize
// bytes of them but at least one.
func (l *Log) Entries(lo, hi, maxSize uint64) ([]*pb.Entry, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if lo < l.first {
		return nil, raft.ErrCompacted
	}
	if hi > l.last+1 {
		return nil, raft.ErrUnavailable
	}
	cacheFirst := l.last + 1 - uint64(len(l.cache))
	var out []*pb.Entry
	var size uint64
	for i := lo; i < hi; i++ {
		var e *pb.Entry
		if i >= cacheFirst {
			e = l.cache[i-cacheFirst]
		} else {
			var err error
			if e, err = l.readEntry(i); err != nil {
				return nil, err
			}
		}
		size += uint64(len(e.GetData())) + 16
		if len(out) > 0 && size > maxSize {
			break
		}
		out = append(out, e)
	}
	return out, nil
}

// readEntry reads entry i from its segment. Called with mu held.
func (l *Log) readEntry(i uint64) (*pb.Entry, error) {
	loc := l.locs[i-l.first]
	if loc.seg.r == nil {
		r, err := l.fs.Open(l.fs.PathJoin(l.dir, segmentName(loc.seg.seq)))
		if err != nil {
			return nil, fmt.Errorf("raftwal: entry %d: %w", i, err)
		}
		loc.seg.r = r
	}
	p := make([]byte, loc.n)
	if _, err := loc.seg.r.ReadAt(p, loc.off); err != nil {
		return nil, fmt.Errorf("raftwal: entry %d: %w", i, err)
	}
	term, index, typ, data, err := decodeEntry(p)
	if err != nil || index != i || term != loc.term {
		return nil, fmt.Errorf("%w: entry %d in %s at offset %d reads as entry %d of term %d (%v)", ErrCorrupt, i, segmentName(loc.seg.seq), loc.off, index, term, err)
	}
	return &pb.Entry{Term: new(term), Index: new(index), Type: new(typ), Data: data}, nil
}

// Term implements raft.Storage.
func (l *Log) Term(i uint64) (uint64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.term(i)
}

func (l *Log) term(i uint64) (uint64, error) {
	switch {
	case i+1 < l.first:
		return 0, raft.ErrCompacted
	case i+1 == l.first:
		return l.prevTerm, nil
	case i > l.last:
		return 0, raft.ErrUnavailable
	}
	return l.locs[i-l.first].term, nil
}

// LastIndex implements raft.Storage.
func (l *Log) LastIndex() (uint64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.last, nil
}

// FirstIndex implements raft.Storage.
func (l *Log) FirstIndex() (uint64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.first, nil
}

// Snapshot implements raft.Storage.
func (l *Log) Snapshot() (*pb.Snapshot, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return proto.Clone(l.snap).(*pb.Snapshot), nil
}

var _ raft.Storage = (*Log)(nil)
