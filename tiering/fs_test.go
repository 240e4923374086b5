//go:build unix

package tiering

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"syscall"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// newTwoPathLayout makes a layout whose plan (an empty LSM: L0 and L6 of
// 1 MB each) puts L0 in hot and L6 in cold.
func newTwoPathLayout(t *testing.T, fs vfs.FS, hot, cold string) *Layout {
	t.Helper()
	l, err := New(fs, hot, []Path{{hot, 1 << 20}, {cold, 1 << 30}}, Options{Shape: testShape()})
	if err != nil {
		t.Fatal(err)
	}
	if got := l.LevelPaths(); got[0] != 0 || got[6] != 1 {
		t.Fatalf("level paths %v, want L0 in 0 and L6 in 1", got)
	}
	return l
}

// createAs creates table num through the layout's FS as an output of a job
// writing level (-1: no events, level unknown), writes data and closes it.
func createAs(t *testing.T, l *Layout, dir string, num uint64, level int, data []byte) (fdBefore, fdAfter uintptr) {
	t.Helper()
	el := l.EventListener()
	job := int(num) + 1000
	switch {
	case level == 0:
		el.FlushBegin(pebble.FlushInfo{JobID: job})
	case level > 0:
		el.CompactionBegin(pebble.CompactionInfo{JobID: job, Output: pebble.LevelInfo{Level: level}})
	}
	f, err := l.FS().Create(filepath.Join(dir, tableName(num)), "pebble-compaction")
	if err != nil {
		t.Fatal(err)
	}
	// As Pebble: the syncing wrapper takes the descriptor inside Create,
	// before TableCreated.
	sf := vfs.NewSyncingFile(f, vfs.SyncingFileOptions{BytesPerSync: 512 << 10})
	fdBefore = f.Fd()
	if level >= 0 {
		info := pebble.TableCreateInfo{JobID: job}
		// FileNum's type is internal to Pebble.
		reflect.ValueOf(&info).Elem().FieldByName("FileNum").SetUint(num)
		el.TableCreated(info)
	}
	// Write may scramble its argument (Pebble's MemFS does under invariants).
	if _, err := sf.Write(append([]byte(nil), data...)); err != nil {
		t.Fatal(err)
	}
	if err := sf.Sync(); err != nil {
		t.Fatal(err)
	}
	fdAfter = f.Fd()
	if err := sf.Close(); err != nil {
		t.Fatal(err)
	}
	switch {
	case level == 0:
		el.FlushEnd(pebble.FlushInfo{JobID: job})
	case level > 0:
		el.CompactionEnd(pebble.CompactionInfo{JobID: job})
	}
	return fdBefore, fdAfter
}

func readAll(t *testing.T, fs vfs.FS, name string) []byte {
	t.Helper()
	f, err := fs.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestCreatePlacesByLevel(t *testing.T) {
	for _, tc := range []struct {
		name string
		fs   func(t *testing.T) (vfs.FS, string)
	}{
		{"mem", func(t *testing.T) (vfs.FS, string) { return vfs.NewMem(), "/" }},
		{"os", func(t *testing.T) (vfs.FS, string) { return vfs.Default, t.TempDir() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs, root := tc.fs(t)
			hot, cold := filepath.Join(root, "hot"), filepath.Join(root, "cold")
			l := newTwoPathLayout(t, fs, hot, cold)
			data := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MiB
			createAs(t, l, hot, 1, 0, data[:1000])
			before, after := createAs(t, l, hot, 2, 6, data)
			createAs(t, l, hot, 3, -1, data[:10])
			if tc.name == "os" && (before == vfs.InvalidFd || before != after) {
				t.Errorf("descriptor changed from %d to %d: Pebble's syncing wrapper would hold a stale number", before, after)
			}
			for name, want := range map[string]string{"000001.sst": hot, "000002.sst": cold, "000003.sst": hot} {
				where, _ := physicalFiles(t, l)
				if len(where[name]) != 1 || l.locs[where[name][0]].dir != want {
					t.Errorf("%s in %v, want only %s", name, where[name], want)
				}
			}
			if got := readAll(t, l.FS(), filepath.Join(hot, "000002.sst")); !bytes.Equal(got, data) {
				t.Errorf("000002.sst reads back %d bytes, want %d", len(got), len(data))
			}
			fi, err := l.FS().Stat(filepath.Join(hot, "000002.sst"))
			if err != nil || fi.Size() != int64(len(data)) {
				t.Errorf("Stat: %v, %v", fi, err)
			}
			names, err := l.FS().List(hot)
			if err != nil {
				t.Fatal(err)
			}
			if len(names) != 4 { // three tables and the paths file
				t.Errorf("List(hot) = %v", names)
			}
			st := l.Stats()
			if st.PlacedAtCreation != 2 || st.PlacedInFirstPath != 1 || st.CreatedFiles != 3 {
				t.Errorf("stats %+v", st)
			}
			if st.Paths[1].Files != 1 || st.Paths[1].Bytes != int64(len(data)) {
				t.Errorf("cold path stats %+v", st.Paths[1])
			}
			// Remove, Rename and Link resolve across paths.
			if err := l.FS().Rename(filepath.Join(hot, "000002.sst"), filepath.Join(hot, "000004.sst")); err != nil {
				t.Fatal(err)
			}
			if err := l.FS().Link(filepath.Join(hot, "000004.sst"), filepath.Join(root, "checkpoint-000004.sst")); err != nil {
				t.Fatal(err)
			}
			if got := readAll(t, fs, filepath.Join(root, "checkpoint-000004.sst")); !bytes.Equal(got, data) {
				t.Errorf("linked copy differs")
			}
			if err := l.FS().Remove(filepath.Join(hot, "000004.sst")); err != nil {
				t.Fatal(err)
			}
			if where, _ := physicalFiles(t, l); len(where["000004.sst"])+len(where["000002.sst"]) != 0 {
				t.Errorf("removed table still present: %v", where)
			}
			if _, err := l.FS().Open(filepath.Join(hot, "000004.sst")); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("Open of a removed table: %v", err)
			}
		})
	}
}

// TestReadersDuringMove checks a reader opened before a move keeps reading
// the table and follows it to the new copy (so the old copy's space is
// freed), a reader opened after the switch opens the new one, and a table
// Pebble removes during a move is not resurrected.
func TestReadersDuringMove(t *testing.T) {
	root := t.TempDir()
	hot, cold := filepath.Join(root, "hot"), filepath.Join(root, "cold")
	l := newTwoPathLayout(t, vfs.Default, hot, cold)
	data := bytes.Repeat([]byte("x"), 3<<20+17)
	createAs(t, l, hot, 1, 0, data)
	createAs(t, l, hot, 2, 0, data[:100])
	early, err := l.FS().Open(filepath.Join(hot, "000001.sst"))
	if err != nil {
		t.Fatal(err)
	}
	defer early.Close()
	var late vfs.File
	l.opts.hook = func(s moveStep, name string) error {
		if s == stepSwitched && name == "000001.sst" {
			late, err = l.FS().Open(filepath.Join(hot, "000001.sst"))
			return err
		}
		if s == stepRenamed && name == "000002.sst" {
			return l.FS().Remove(filepath.Join(hot, "000002.sst"))
		}
		return nil
	}
	mv := func(name string) error {
		l.mu.Lock()
		e := l.files[name]
		l.mu.Unlock()
		return l.move(context.Background(), plannedMove{name: name, level: 0, from: 0, to: 1, size: e.size, entry: e})
	}
	if err := mv("000001.sst"); err != nil {
		t.Fatal(err)
	}
	if err := mv("000002.sst"); !errors.Is(err, ErrObsolete) {
		t.Errorf("move of a removed table: %v, want ErrObsolete", err)
	}
	defer late.Close()
	for _, f := range []vfs.File{early, late} {
		buf := make([]byte, len(data))
		if n, err := f.ReadAt(buf, 0); n != len(data) || (err != nil && err != io.EOF) || !bytes.Equal(buf, data) {
			t.Errorf("read %d bytes, %v", n, err)
		}
	}
	lateInfo, _ := late.Stat()
	newInfo, err := os.Stat(filepath.Join(cold, "000001.sst"))
	if err != nil || lateInfo.Sys().(*syscall.Stat_t).Ino != newInfo.Sys().(*syscall.Stat_t).Ino {
		t.Errorf("reader opened after the switch does not read the new copy (%v)", err)
	}
	// The reader opened before the move followed the table: it holds the
	// new copy, so the old one's space is freed now, not when Pebble's file
	// cache closes the reader.
	earlyInfo, _ := early.Stat()
	if newInfo != nil && earlyInfo.Sys().(*syscall.Stat_t).Ino != newInfo.Sys().(*syscall.Stat_t).Ino {
		t.Errorf("reader opened before the move still holds the old copy")
	}
	if st := l.Stats(); st.Paths[0].RetainedBytes != 0 || st.Paths[0].Bytes != 0 {
		t.Errorf("path 0 still counts %d bytes (%d retained by readers)", st.Paths[0].Bytes, st.Paths[0].RetainedBytes)
	}
	where, temps := physicalFiles(t, l)
	if len(where["000001.sst"]) != 1 || where["000001.sst"][0] != 1 || len(where["000002.sst"]) != 0 || len(temps) != 0 {
		t.Errorf("after moves: %v, temps %v", where, temps)
	}
	if st := l.Stats(); st.MovedFiles != 1 || st.MoveFailures != 0 || st.Paths[1].MovedInBytes != int64(len(data)) {
		t.Errorf("stats: %s", st)
	}
}
