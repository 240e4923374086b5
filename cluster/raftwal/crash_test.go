package raftwal

import (
	"fmt"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	pb "go.etcd.io/raft/v3/raftpb"
)

// crashAtFS crashes a crashable MemFS just before its n-th change (a
// write, sync, create, rename or remove): what was durable then is kept
// in crashed, and every later change is made to the live file system
// only, as on a machine whose power went at that moment.
type crashAtFS struct {
	*vfs.MemFS
	n, ops  int
	crashed *vfs.MemFS
}

func (fs *crashAtFS) step() {
	fs.ops++
	if fs.ops == fs.n && fs.crashed == nil {
		fs.crashed = fs.MemFS.CrashClone(vfs.CrashCloneCfg{})
	}
}

func (fs *crashAtFS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	fs.step()
	f, err := fs.MemFS.Create(name, c)
	return crashAtFile{f, fs}, err
}

func (fs *crashAtFS) ReuseForWrite(o, n string, c vfs.DiskWriteCategory) (vfs.File, error) {
	fs.step()
	f, err := fs.MemFS.ReuseForWrite(o, n, c)
	return crashAtFile{f, fs}, err
}

func (fs *crashAtFS) Rename(o, n string) error { fs.step(); return fs.MemFS.Rename(o, n) }
func (fs *crashAtFS) Remove(name string) error { fs.step(); return fs.MemFS.Remove(name) }
func (fs *crashAtFS) OpenDir(name string) (vfs.File, error) {
	f, err := fs.MemFS.OpenDir(name)
	return crashAtFile{f, fs}, err
}

type crashAtFile struct {
	vfs.File
	fs *crashAtFS
}

func (f crashAtFile) Write(p []byte) (int, error) { f.fs.step(); return f.File.Write(p) }
func (f crashAtFile) Sync() error                 { f.fs.step(); return f.File.Sync() }
func (f crashAtFile) SyncData() error             { f.fs.step(); return f.File.SyncData() }

// TestLogCrashAtEveryStep runs appends, snapshots and compactions that
// roll over and remove segments, and crashes the file system before each
// of its changes in turn (every write, fsync, segment creation and
// removal): after each crash the log opens, and holds every entry whose
// Save had returned and the newest snapshot whose CreateSnapshot had
// returned.
func TestLogCrashAtEveryStep(t *testing.T) {
	const entries = 60
	data := func(i uint64) string { return fmt.Sprintf("entry %d %0200d", i, i) }
	opts := Options{SegmentBytes: 1 << 10, CacheBytes: 256, spareInline: true}
	run := func(fs vfs.FS, acked func(last, snap uint64)) {
		l, err := Open(fs, "/wal", opts)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		var snap uint64
		for i := uint64(1); i <= entries; i++ {
			if _, err := l.Save([]*pb.Message{appendMsg(1, entry(1, i, data(i)))}); err != nil {
				t.Fatal(err)
			}
			acked(i, snap)
			if i%10 == 0 {
				if _, err := l.CreateSnapshot(i-2, &pb.ConfState{Voters: []uint64{1}}, []byte("m")); err != nil {
					t.Fatal(err)
				}
				snap = i - 2
				acked(i, snap)
				if err := l.Compact(i - 5); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	// Count the changes of a run without a crash.
	counter := &crashAtFS{MemFS: vfs.NewCrashableMem(), n: -1}
	run(counter, func(uint64, uint64) {})
	total := counter.ops
	if total < 2*entries {
		t.Fatalf("only %d changes counted", total)
	}
	for n := 1; n <= total; n++ {
		fs := &crashAtFS{MemFS: vfs.NewCrashableMem(), n: n}
		var ackedLast, ackedSnap uint64
		run(fs, func(last, snap uint64) {
			if fs.crashed == nil {
				ackedLast, ackedSnap = last, snap
			}
		})
		if fs.crashed == nil {
			t.Fatalf("crash %d of %d did not happen", n, total)
		}
		l, err := Open(fs.crashed, "/wal", opts)
		if err != nil {
			t.Fatalf("crash before change %d of %d: Open: %v", n, total, err)
		}
		s, _ := l.Snapshot()
		first, _ := l.FirstIndex()
		last, _ := l.LastIndex()
		si := s.GetMetadata().GetIndex()
		if si < ackedSnap || last < ackedLast || first != si+1 {
			t.Fatalf("crash before change %d of %d: snapshot %d, log %d..%d; acknowledged: snapshot %d, entries to %d", n, total, si, first, last, ackedSnap, ackedLast)
		}
		if last >= first {
			ents, err := l.Entries(first, last+1, 1<<30)
			if err != nil {
				t.Fatalf("crash before change %d of %d: entries %d..%d: %v", n, total, first, last, err)
			}
			for _, e := range ents {
				if string(e.GetData()) != data(e.GetIndex()) {
					t.Fatalf("crash before change %d of %d: entry %d reads %q", n, total, e.GetIndex(), e.GetData())
				}
			}
		}
		_ = l.Close()
	}
	t.Logf("crashed before each of %d changes", total)
}
