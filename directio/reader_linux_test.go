//go:build linux

package directio

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// TestConcurrentReadAt reads one direct file from several goroutines at
// once, with readahead chunks replacing each other (Prefetch on the shared
// handle, as Pebble's speculative readahead does, and a sequential handle),
// and checks every byte. Run with -race.
func TestConcurrentReadAt(t *testing.T) {
	dir := directDir(t)
	path := filepath.Join(dir, "000001.sst")
	data := make([]byte, 3<<20+123)
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	fs := NewFS(vfs.Default, Options{Reads: true, ReadaheadSize: 64 << 10})
	shared, err := fs.Open(path, vfs.RandomReadsOption)
	if err != nil {
		t.Fatal(err)
	}
	defer shared.Close()
	seq, err := fs.Open(path, vfs.SequentialReadsOption)
	if err != nil {
		t.Fatal(err)
	}
	defer seq.Close()

	var wg sync.WaitGroup
	errc := make(chan error, 8)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f := shared
			if g%2 == 1 {
				f = seq
			}
			rng := rand.New(rand.NewPCG(uint64(g), 5))
			off := int64(rng.IntN(len(data)))
			for range 300 {
				n := rng.IntN(40 << 10)
				if rng.IntN(4) == 0 {
					off = int64(rng.IntN(len(data) + 100)) // jump, sometimes past the end
				}
				if g%2 == 0 && rng.IntN(3) == 0 {
					_ = f.Prefetch(off, 128<<10)
				}
				p := make([]byte, n)
				got, err := f.ReadAt(p, off)
				want := max(0, min(n, len(data)-int(off)))
				switch {
				case got != want:
					errc <- errors.New("wrong count")
				case want < n && err != io.EOF, want == n && err != nil:
					errc <- fmt.Errorf("ReadAt(%d bytes at %d) = %d, %v", n, off, got, err)
				case !bytes.Equal(p[:got], data[min(int(off), len(data)):min(int(off)+got, len(data))]):
					errc <- errors.New("wrong bytes")
				default:
					off += int64(got)
					continue
				}
				return
			}
		}()
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Error(err)
	}
	if st := fs.Stats(); st.DirectReads == 0 {
		t.Error("no direct reads")
	}
}

// TestSharedChunksBounded checks that readers opened without
// SequentialReadsOption, one per open table in Pebble, hold at most
// sharedChunks readahead chunks in all, and that a sequential reader's
// chunk is not counted.
func TestSharedChunksBounded(t *testing.T) {
	dir := directDir(t)
	path := filepath.Join(dir, "000001.sst")
	if err := os.WriteFile(path, make([]byte, 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	fs := NewFS(vfs.Default, Options{Reads: true})
	var readers []*reader
	for range sharedChunks + 5 {
		f, err := fs.Open(path, vfs.RandomReadsOption)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if err := f.Prefetch(0, 64<<10); err != nil {
			t.Fatal(err)
		}
		readers = append(readers, f.(*reader))
	}
	seq, err := fs.Open(path, vfs.SequentialReadsOption)
	if err != nil {
		t.Fatal(err)
	}
	defer seq.Close()
	if _, err := seq.ReadAt(make([]byte, 10), 0); err != nil {
		t.Fatal(err)
	}
	held := 0
	for i, r := range readers {
		if c := r.chunk.Load(); c != nil {
			held++
			if i < 5 {
				t.Errorf("reader %d (among the oldest) still holds its chunk", i)
			}
		}
	}
	if held != sharedChunks {
		t.Errorf("%d shared readers hold chunks, want %d", held, sharedChunks)
	}
	if seq.(*reader).chunk.Load() == nil {
		t.Error("the sequential reader lost its chunk")
	}
}
