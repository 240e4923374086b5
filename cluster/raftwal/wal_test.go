package raftwal

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

func entry(term, index uint64, data string) *pb.Entry {
	return &pb.Entry{Term: new(term), Index: new(index), Type: new(pb.EntryNormal), Data: []byte(data)}
}

func appendMsg(term uint64, ents ...*pb.Entry) *pb.Message {
	return &pb.Message{Type: new(pb.MsgStorageAppend), Term: new(term), Vote: new(uint64(1)), Commit: new(uint64(0)), Entries: ents}
}

// small options make every test cross segments, evict the cache and read
// entries back from the files.
var small = Options{SegmentBytes: 2 << 10, CacheBytes: 512}

// model is raft's MemoryStorage, which the Log must answer as, and the
// hard state: the newest, and the commit index surely written (a
// commit-only change is written with the next batch that must be synced,
// or at a segment's start).
type model struct {
	ms            *raft.MemoryStorage
	hs            *pb.HardState
	durableCommit uint64
}

func (m *model) reopen() {
	// A restart starts from the snapshot, with the entries after it.
	snap, _ := m.ms.Snapshot()
	first, _ := m.ms.FirstIndex()
	last, _ := m.ms.LastIndex()
	si := snap.GetMetadata().GetIndex()
	var ents []*pb.Entry
	if last > si {
		ents, _ = m.ms.Entries(max(si+1, first), last+1, 1<<62)
	}
	m.ms = raft.NewMemoryStorage()
	if err := m.ms.ApplySnapshot(snap); err != nil && si != 0 {
		panic(err)
	}
	if err := m.ms.Append(ents); err != nil {
		panic(err)
	}
}

func same(t *testing.T, step string, l *Log, m *model) {
	t.Helper()
	lf, _ := l.FirstIndex()
	ll, _ := l.LastIndex()
	mf, _ := m.ms.FirstIndex()
	ml, _ := m.ms.LastIndex()
	if lf != mf || ll != ml {
		t.Fatalf("%s: log holds %d..%d, model %d..%d", step, lf, ll, mf, ml)
	}
	for i := lf - 1; i <= ll; i++ {
		lt, lerr := l.Term(i)
		mt, merr := m.ms.Term(i)
		if lt != mt || (lerr == nil) != (merr == nil) {
			t.Fatalf("%s: term of %d: log %d (%v), model %d (%v)", step, i, lt, lerr, mt, merr)
		}
	}
	if ll >= lf {
		le, err := l.Entries(lf, ll+1, 1<<62)
		if err != nil {
			t.Fatalf("%s: entries %d..%d: %v", step, lf, ll, err)
		}
		me, _ := m.ms.Entries(lf, ll+1, 1<<62)
		if len(le) != len(me) {
			t.Fatalf("%s: %d entries, model %d", step, len(le), len(me))
		}
		for i := range le {
			if !proto.Equal(le[i], me[i]) {
				t.Fatalf("%s: entry %d is %v, model %v", step, lf+uint64(i), le[i], me[i])
			}
		}
		// A size limit still gives at least one entry.
		if one, err := l.Entries(lf, ll+1, 0); err != nil || len(one) != 1 {
			t.Fatalf("%s: Entries with maxSize 0: %d entries, %v", step, len(one), err)
		}
	}
	if _, err := l.Entries(lf-1, ll+1, 1<<62); lf > 1 && !errors.Is(err, raft.ErrCompacted) {
		t.Fatalf("%s: Entries below the first: %v, want ErrCompacted", step, err)
	}
	ls, _ := l.Snapshot()
	mss, _ := m.ms.Snapshot()
	if ls.GetMetadata().GetIndex() != mss.GetMetadata().GetIndex() || ls.GetMetadata().GetTerm() != mss.GetMetadata().GetTerm() || !bytes.Equal(ls.GetData(), mss.GetData()) {
		t.Fatalf("%s: snapshot %v, model %v", step, ls.GetMetadata(), mss.GetMetadata())
	}
	if hs := l.HardState(); m.hs != nil && (hs.GetTerm() != m.hs.GetTerm() || hs.GetVote() != m.hs.GetVote() ||
		hs.GetCommit() > m.hs.GetCommit() || hs.GetCommit() < m.durableCommit) {
		t.Fatalf("%s: hard state %v, model %v (commit at least %d)", step, hs, m.hs, m.durableCommit)
	}
}

// TestLogAgainstMemoryStorage runs random appends, overwrites, received
// snapshots, snapshots taken, compactions, restarts and crashes against
// the Log and raft's MemoryStorage side by side: the Log answers raft as
// MemoryStorage does, before and after each restart.
func TestLogAgainstMemoryStorage(t *testing.T) {
	for seed := range uint64(20) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 7))
			fs := vfs.NewCrashableMem()
			l, err := Open(fs, "/r/wal", small)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = l.Close() }()
			m := &model{ms: raft.NewMemoryStorage()}
			term := uint64(1)
			for step := range 300 {
				first, _ := m.ms.FirstIndex()
				last, _ := m.ms.LastIndex()
				snap, _ := m.ms.Snapshot()
				si := snap.GetMetadata().GetIndex()
				var name string
				switch op := rng.IntN(20); {
				case op < 10: // append, at the end or over a tail
					at := last + 1
					if op < 2 && last >= first && last > si {
						at = si + 1 + rng.Uint64N(last-si)
						term++
					}
					var ents []*pb.Entry
					for i := range 1 + rng.IntN(6) {
						ents = append(ents, entry(term, at+uint64(i), fmt.Sprintf("%d-%d-%s", step, i, bytes.Repeat([]byte("x"), rng.IntN(300)))))
					}
					name = fmt.Sprintf("step %d: append %d..%d", step, at, at+uint64(len(ents))-1)
					if _, err := l.Save([]*pb.Message{appendMsg(term, ents...)}); err != nil {
						t.Fatal(err)
					}
					if err := m.ms.Append(ents); err != nil {
						t.Fatal(err)
					}
					m.hs = &pb.HardState{Term: new(term), Vote: new(uint64(1)), Commit: new(uint64(0))}
					m.durableCommit = 0
				case op < 12: // a snapshot from the leader replaces the log
					term++
					at := last + 1 + rng.Uint64N(5)
					s := &pb.Snapshot{Data: []byte(fmt.Sprint("members@", at)), Metadata: &pb.SnapshotMetadata{Index: new(at), Term: new(term), ConfState: &pb.ConfState{Voters: []uint64{1}}}}
					name = fmt.Sprintf("step %d: snapshot received at %d", step, at)
					msg := appendMsg(term)
					msg.Snapshot = s
					if _, err := l.Save([]*pb.Message{msg}); err != nil {
						t.Fatal(err)
					}
					if err := m.ms.ApplySnapshot(s); err != nil {
						t.Fatal(err)
					}
					m.hs = &pb.HardState{Term: new(term), Vote: new(uint64(1)), Commit: new(uint64(0))}
					m.durableCommit = 0
				case op < 15: // a snapshot taken at the applied index
					if last <= si {
						continue
					}
					at := si + 1 + rng.Uint64N(last-si)
					name = fmt.Sprintf("step %d: snapshot at %d", step, at)
					cs := &pb.ConfState{Voters: []uint64{1, 2}}
					data := []byte(fmt.Sprint("members@", at))
					if _, err := l.CreateSnapshot(at, cs, data); err != nil {
						t.Fatal(err)
					}
					if _, err := m.ms.CreateSnapshot(at, cs, data); err != nil {
						t.Fatal(err)
					}
					if m.hs != nil {
						m.durableCommit = m.hs.GetCommit()
					}
				case op < 17: // compact behind the snapshot
					if si < first {
						continue
					}
					at := first + rng.Uint64N(si-first+1)
					name = fmt.Sprintf("step %d: compact %d", step, at)
					if err := l.Compact(at); err != nil {
						t.Fatal(err)
					}
					if err := m.ms.Compact(at); err != nil {
						t.Fatal(err)
					}
				case op < 19: // restart, or crash: everything was synced
					name = fmt.Sprintf("step %d: restart", step)
					if op == 18 {
						name = fmt.Sprintf("step %d: crash", step)
						fs = fs.CrashClone(vfs.CrashCloneCfg{})
					}
					_ = l.Close()
					if l, err = Open(fs, "/r/wal", small); err != nil {
						t.Fatalf("%s: %v", name, err)
					}
					m.reopen()
					if m.hs != nil {
						m.hs.Commit = new(l.HardState().GetCommit()) // checked by same
					}
				default: // a commit-only hard state: not written by itself
					name = fmt.Sprintf("step %d: commit only", step)
					msg := &pb.Message{Type: new(pb.MsgStorageAppend), Term: new(term), Vote: new(uint64(1)), Commit: new(last)}
					if _, err := l.Save([]*pb.Message{msg}); err != nil {
						t.Fatal(err)
					}
					m.hs = &pb.HardState{Term: new(term), Vote: new(uint64(1)), Commit: new(last)}
				}
				same(t, name, l, m)
			}
		})
	}
}

// TestLogRemovesSegments: a compaction removes the segments whose entries
// all precede it, so the files stay bounded while the log runs on.
func TestLogRemovesSegments(t *testing.T) {
	fs := vfs.NewMem()
	l, err := Open(fs, "/wal", small)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	data := string(bytes.Repeat([]byte("d"), 200))
	for i := uint64(1); i <= 2000; i++ {
		if _, err := l.Save([]*pb.Message{appendMsg(1, entry(1, i, data))}); err != nil {
			t.Fatal(err)
		}
		if i%100 == 0 {
			if _, err := l.CreateSnapshot(i, &pb.ConfState{Voters: []uint64{1}}, nil); err != nil {
				t.Fatal(err)
			}
			if c := l.CatchUpStart(i, 50, 1<<20); c > 0 {
				if err := l.Compact(c); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	names, _ := fs.List("/wal")
	if l.DiskBytes() > 40*int64(len(data)+30)+3*small.SegmentBytes {
		t.Fatalf("%d bytes in %d segments after compactions that keep 50 entries of %d bytes", l.DiskBytes(), len(names), len(data))
	}
	if first, _ := l.FirstIndex(); first != 1951 {
		t.Fatalf("first index %d, want 1951", first)
	}
}

// TestLogCutsTornTail: a record torn by a crash at the end of the last
// segment (never synced, so never acknowledged) is cut off at Open; the
// records before it are kept, and later appends follow them.
func TestLogCutsTornTail(t *testing.T) {
	fs := vfs.NewMem()
	l, err := Open(fs, "/wal", Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i := uint64(1); i <= 3; i++ {
		if _, err := l.Save([]*pb.Message{appendMsg(1, entry(1, i, "v"))}); err != nil {
			t.Fatal(err)
		}
	}
	segs := l.Segments()
	_ = l.Close()
	// Half a record at the end of the last segment.
	f, err := fs.OpenReadWrite(segs[len(segs)-1], vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	st, _ := f.Stat()
	rec := appendEntry(nil, entry(1, 4, "torn"))
	if _, err := f.WriteAt(rec[:len(rec)-2], st.Size()); err != nil {
		t.Fatal(err)
	}
	_ = f.Close()
	for range 2 { // the second Open sees the cut segment as an older one
		if l, err = Open(fs, "/wal", Options{}); err != nil {
			t.Fatal(err)
		}
		if last, _ := l.LastIndex(); last != 3 {
			t.Fatalf("last index %d after the torn record, want 3", last)
		}
		_ = l.Close()
	}
}

// TestLogReportsCorruption: a damaged record before the end is reported
// with its file, not skipped.
func TestLogReportsCorruption(t *testing.T) {
	fs := vfs.NewMem()
	l, err := Open(fs, "/wal", Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i := uint64(1); i <= 3; i++ {
		if _, err := l.Save([]*pb.Message{appendMsg(1, entry(1, i, "value"))}); err != nil {
			t.Fatal(err)
		}
	}
	segs := l.Segments()
	_ = l.Close()
	// The segment written is no longer the last once the log reopens.
	if l, err = Open(fs, "/wal", Options{}); err != nil {
		t.Fatal(err)
	}
	_ = l.Close()
	f, err := fs.OpenReadWrite(segs[len(segs)-1], vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	st, _ := f.Stat()
	if _, err := f.WriteAt([]byte{0xff}, st.Size()-3); err != nil {
		t.Fatal(err)
	}
	_ = f.Close()
	_, err = Open(fs, "/wal", Options{})
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Open of a damaged segment: %v, want ErrCorrupt", err)
	}
	t.Log(err)
}

// blockingSyncFS holds every SyncData of its files until release closes.
type blockingSyncFS struct {
	vfs.FS
	release chan struct{}
}

func (fs blockingSyncFS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.Create(name, c)
	return blockingSyncFile{f, fs.release}, err
}

func (fs blockingSyncFS) ReuseForWrite(o, n string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.ReuseForWrite(o, n, c)
	return blockingSyncFile{f, fs.release}, err
}

type blockingSyncFile struct {
	vfs.File
	release chan struct{}
}

func (f blockingSyncFile) SyncData() error { <-f.release; return f.File.SyncData() }

// TestLogSyncInFlight: an fsync that does not return shows in
// SyncInFlight, with how long it has run, and no longer once it returned.
func TestLogSyncInFlight(t *testing.T) {
	fs := blockingSyncFS{vfs.NewMem(), make(chan struct{})}
	l, err := Open(fs, "/wal", Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if _, ok := l.SyncInFlight(); ok {
		t.Fatal("an fsync in flight before any write")
	}
	done := make(chan error, 1)
	go func() {
		_, err := l.Save([]*pb.Message{appendMsg(1, entry(1, 1, "v"))})
		done <- err
	}()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if d, ok := l.SyncInFlight(); ok && d >= 50*time.Millisecond {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the blocked fsync does not show in SyncInFlight")
		}
		time.Sleep(10 * time.Millisecond)
	}
	close(fs.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if d, ok := l.SyncInFlight(); ok {
		t.Fatalf("an fsync in flight for %v after it returned", d)
	}
}

// TestLogSegmentsOverZeros: a new segment is a spare file of
// SegmentBytes zeros that the records overwrite from its start, and the
// log reopens from such segments (the zeros after the records of the
// segment written last are its end, not a torn write to cut) with every
// entry.
func TestLogSegmentsOverZeros(t *testing.T) {
	fs := vfs.NewMem()
	opts := small
	opts.spareInline = true
	l, err := Open(fs, "/wal", opts)
	if err != nil {
		t.Fatal(err)
	}
	// Entries until a fourth segment is started: it holds one entry.
	var n uint64
	for n = 1; len(l.Segments()) < 4; n++ {
		if _, err := l.Save([]*pb.Message{appendMsg(1, entry(1, n, strings.Repeat("z", 300)))}); err != nil {
			t.Fatal(err)
		}
	}
	n--
	newest := l.Segments()[3]
	sizeOf := func(name string) int64 {
		st, err := fs.Stat(name)
		if err != nil {
			t.Fatal(err)
		}
		return st.Size()
	}
	if size := sizeOf(newest); size != opts.SegmentBytes {
		t.Fatalf("the newest segment, with one entry, is %d bytes: not written over a spare of %d", size, opts.SegmentBytes)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l, err = Open(fs, "/wal", opts)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if size := sizeOf(newest); size != opts.SegmentBytes {
		t.Fatalf("reopening cut %s to %d bytes: its zeros were taken for a torn write", newest, size)
	}
	if first, last := mustIndexes(t, l); first != 1 || last != n {
		t.Fatalf("reopened log holds %d..%d, want 1..%d", first, last, n)
	}
}

func mustIndexes(t *testing.T, l *Log) (first, last uint64) {
	t.Helper()
	first, err := l.FirstIndex()
	if err != nil {
		t.Fatal(err)
	}
	if last, err = l.LastIndex(); err != nil {
		t.Fatal(err)
	}
	return first, last
}
