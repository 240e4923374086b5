//go:build linux

package directio

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// directDir returns a directory on a filesystem that does O_DIRECT:
// t.TempDir(), else a fresh directory under /var/tmp or the package
// directory (removed afterwards). It skips the test if there is none.
func directDir(tb testing.TB) string {
	tb.Helper()
	dir := tb.TempDir()
	err := Probe(dir, 0)
	if err == nil {
		return dir
	}
	errs := []error{err}
	for _, parent := range []string{"/var/tmp", "."} {
		dir, err := os.MkdirTemp(parent, "directio-test-")
		if err != nil {
			errs = append(errs, err)
			continue
		}
		tb.Cleanup(func() { _ = os.RemoveAll(dir) })
		if err := Probe(dir, 0); err != nil {
			errs = append(errs, err)
			continue
		}
		abs, err := filepath.Abs(dir)
		if err != nil {
			tb.Fatal(err)
		}
		return abs
	}
	tb.Skipf("no directory here does O_DIRECT, skipping: %v", errors.Join(errs...))
	return ""
}

// Fuzz operations. An input is a header byte, then operations: an opcode
// byte followed by its big-endian uint16 arguments (missing bytes read as 0).
const (
	opWrite    = 0 // n: write n % (3A+1) bytes
	opSync     = 1 // Sync, then the file on disk must equal the model
	opSyncData = 2 // SyncData, likewise
	opReadAt   = 3 // off, n: ReadAt; opcode bit 3: aligned buffer, offset and length
	opStat     = 4 // compare sizes
	opReopen   = 5 // close; open for reading (opcode bit 3: sequential)
	opRead     = 6 // n: Read of n % (2A+1) bytes at the file offset
	opPrefetch = 7 // off, n: Prefetch, on a reader
	numOps     = 8
)

// fuzzInput encodes operations for the seed corpus.
type fuzzInput []byte

func (in fuzzInput) op(code byte, args ...uint16) fuzzInput {
	in = append(in, code)
	for _, a := range args {
		in = binary.BigEndian.AppendUint16(in, a)
	}
	return in
}

// FuzzAlignedFile runs sequences of writes, syncs, reads, stats and
// close-reopens against a direct file (writer, then reader) and an os.File
// doing the same, and requires identical results: bytes, counts, io.EOF,
// sizes, and after every Sync and Close the exact bytes and length on disk.
// The staging buffer is 1 to 4 alignment blocks, so every path through the
// writer (full buffer, padded tail, rewritten tail) is reached by short
// inputs; the readahead chunk is off, 1 or 2 blocks or the default.
func FuzzAlignedFile(f *testing.F) {
	const A = DefaultAlignment
	seeds := []fuzzInput{
		// Header 0: 4 KiB stage, no readahead. Sync mid-block, then fill the
		// block and more; Close; read across block edges.
		fuzzInput{0}.op(opWrite, 5000).op(opSync).op(opWrite, 3192).op(opReadAt, 4000, 300).
			op(opWrite, 10000).op(opSyncData).op(opStat).op(opReopen).
			op(opReadAt, 0, 100).op(opReadAt, 4095, 2).op(opReadAt, 20000, 5000).op(opReadAt|8, 4096, 4096),
		// Header 1: 8 KiB stage. Many small writes with syncs between.
		fuzzInput{1}.op(opWrite, 1).op(opSync).op(opWrite, 1).op(opSync).op(opWrite, 4094).op(opSync).
			op(opWrite, 1).op(opSync).op(opStat).op(opRead, 10).op(opReopen|8).op(opRead, 4000).op(opRead, 4000),
		// Header 2: 16 KiB stage. Exact multiples of the block and stage.
		fuzzInput{2}.op(opWrite, 3*A).op(opWrite, A).op(opSync).op(opWrite, 2*A).op(opReopen).
			op(opReadAt|8, 0, 6*A).op(opReadAt|8, 6*A, A).op(opReadAt, 0, 6*A+1),
		// Header 4 (4 KiB readahead): sequential reader, prefetch, reads at
		// and past the end.
		fuzzInput{4}.op(opWrite, 7000).op(opWrite, 7000).op(opReopen|8).op(opReadAt, 0, 10).
			op(opReadAt, 10, 5000).op(opReadAt, 13990, 100).op(opReadAt, 14000, 1).op(opPrefetch, 100, 9000).
			op(opReadAt, 200, 8000).op(opRead, 8191).op(opRead, 8191),
		// Header 13 (8 KiB readahead, 8 KiB stage): empty file, then a second
		// generation after a reopen.
		fuzzInput{13}.op(opSync).op(opStat).op(opReopen).op(opReadAt, 0, 1).op(opRead, 1).
			op(opWrite, 12288).op(opSync).op(opWrite, 1).op(opReopen|8).op(opReadAt, 12000, 1000),
		// Header 15 (default readahead): close without sync, reopen twice.
		fuzzInput{15}.op(opWrite, 9999).op(opReopen).op(opPrefetch, 0, 65535).op(opReadAt, 9000, 2000).
			op(opReopen|8).op(opReadAt, 0, 9999),
	}
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	dir := directDir(f)
	var gen atomic.Int64
	f.Fuzz(func(t *testing.T, data []byte) {
		runFileOps(t, dir, gen.Add(1), data)
	})
}

func runFileOps(t *testing.T, dir string, id int64, data []byte) {
	if len(data) == 0 {
		return
	}
	hdr := data[0]
	data = data[1:]
	next := func() byte {
		if len(data) == 0 {
			return 0
		}
		b := data[0]
		data = data[1:]
		return b
	}
	u16 := func() int { return int(next())<<8 | int(next()) }

	readaheads := []int{-1, DefaultAlignment, 2 * DefaultAlignment, 0}
	d := NewFS(vfs.Default, Options{Reads: true, Writes: true, ReadaheadSize: readaheads[(hdr>>2)%4]})
	d.stage = DefaultAlignment << (hdr % 3)
	A := int(d.align)

	path := filepath.Join(dir, fmt.Sprintf("fuzz-%d.sst", id))
	mpath := path + ".model"
	var (
		w     vfs.File // direct writer, while writing
		r     vfs.File // direct reader, after a reopen
		m     *os.File // the model of w or r
		model []byte   // the bytes written
	)
	defer func() {
		for _, c := range []io.Closer{w, r, m} {
			if c != nil {
				_ = c.Close()
			}
		}
		_ = os.Remove(path)
		_ = os.Remove(mpath)
	}()
	check := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	checkDisk := func(when string) {
		t.Helper()
		got, err := os.ReadFile(path)
		check("read file", err)
		if !bytes.Equal(got, model) {
			t.Fatalf("after %s: the file holds %d bytes, want the %d written (first difference at %d)",
				when, len(got), len(model), firstDiff(got, model))
		}
	}
	create := func() {
		t.Helper()
		f, err := d.Create(path, "pebble-compaction")
		check("create", err)
		if _, ok := f.(*writer); !ok {
			t.Fatalf("Create returned %T, want a direct writer", f)
		}
		w = f
		m, err = os.Create(mpath)
		check("create model", err)
		model = model[:0]
	}
	closeAll := func() {
		t.Helper()
		if w != nil {
			check("close", w.Close())
			w = nil
			checkDisk("close")
		}
		if r != nil {
			check("close reader", r.Close())
			r = nil
		}
		if m != nil {
			check("close model", m.Close())
			m = nil
		}
	}
	create()

	for ops := 0; len(data) > 0 && ops < 256; ops++ {
		code := next()
		switch code % numOps {
		case opWrite:
			n := u16() % (3*A + 1)
			if w == nil {
				closeAll()
				create()
			}
			p := make([]byte, n)
			for i := range p {
				p[i] = byte((len(model)+i)*131>>3) ^ byte(id)
			}
			model = append(model, p...)
			wn, err := w.Write(p)
			check("write", err)
			mn, err := m.Write(model[len(model)-n:])
			check("model write", err)
			if wn != mn {
				t.Fatalf("write of %d bytes: wrote %d, model %d", n, wn, mn)
			}
		case opSync, opSyncData:
			if w == nil {
				continue
			}
			if code%numOps == opSync {
				check("sync", w.Sync())
			} else {
				check("syncdata", w.SyncData())
			}
			checkDisk("sync")
		case opReadAt:
			off, n := int64(u16()%(len(model)+2*A+1)), u16()%(2*A+A/2+1)
			var p []byte
			if code&8 != 0 {
				off, n = alignDown(off, int64(A)), int(alignUp(int64(n), int64(A)))
				p = alignedBuffer(n, A)
			} else {
				p = make([]byte, n)
			}
			f := w
			if f == nil {
				f = r
			}
			q := make([]byte, n)
			gn, gerr := f.ReadAt(p, off)
			mn, merr := m.ReadAt(q, off)
			if gn != mn || !errors.Is(gerr, merr) || !bytes.Equal(p[:gn], q[:mn]) {
				t.Fatalf("ReadAt(%d bytes, off %d) of %d: got %d, %v, want %d, %v (first difference at %d)",
					n, off, len(model), gn, gerr, mn, merr, firstDiff(p[:gn], q[:mn]))
			}
		case opStat:
			f := w
			if f == nil {
				f = r
			}
			fi, err := f.Stat()
			check("stat", err)
			mi, err := m.Stat()
			check("model stat", err)
			if fi.Size() != mi.Size() || fi.Size() != int64(len(model)) {
				t.Fatalf("Stat: size %d, model %d, written %d", fi.Size(), mi.Size(), len(model))
			}
		case opReopen:
			closeAll()
			var opts []vfs.OpenOption
			if code&8 != 0 {
				opts = append(opts, vfs.SequentialReadsOption)
			}
			f, err := d.Open(path, opts...)
			check("open", err)
			if rf, ok := f.(*reader); !ok || rf.sequential != (code&8 != 0) {
				t.Fatalf("Open returned %T, want a direct reader (sequential %t)", f, code&8 != 0)
			}
			r = f
			m, err = os.Open(mpath)
			check("open model", err)
		case opRead:
			n := u16() % (2*A + 1)
			f := w
			if f == nil {
				f = r
			}
			p, q := make([]byte, n), make([]byte, n)
			gn, gerr := f.Read(p)
			mn, merr := m.Read(q)
			if gn != mn || !errors.Is(gerr, merr) || !bytes.Equal(p[:gn], q[:mn]) {
				t.Fatalf("Read(%d bytes): got %d, %v, want %d, %v", n, gn, gerr, mn, merr)
			}
		case opPrefetch:
			off, n := int64(u16()), int64(u16())
			if r != nil {
				check("prefetch", r.Prefetch(off, n))
			}
		}
	}
	closeAll()
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	if len(a) != len(b) {
		return min(len(a), len(b))
	}
	return -1
}
