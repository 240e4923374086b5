package rawcodec

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/minio/minlz"
	"github.com/stratadb/strata/internal/workload"
)

// entities returns n generated documents of about size bytes.
func entities(n, size int) [][]byte {
	g := workload.New(1, size)
	data := make([][]byte, n)
	for i := range data {
		data[i] = g.Entity(i)
	}
	return data
}

func randomBytes(n int) []byte {
	r := rand.New(rand.NewPCG(1, 2))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func TestRawCodecNames(t *testing.T) {
	want := []string{"none", "lz4", "snappy", "zstd:1", "zstd:3", "zstd:6", "zstd:9", "zstd:19", "minlz", "minlz-balanced", "s2"}
	var got []string
	for _, b := range All() {
		got = append(got, b.Name())
		again, err := ByName(b.Name())
		if err != nil || again.Name() != b.Name() {
			t.Errorf("ByName(%q) = %v, %v", b.Name(), again, err)
		}
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("All names %q, want %q", got, want)
	}

	for _, tc := range []struct{ in, want string }{
		{"LZ4", "lz4"},
		{" zstd ", "zstd:3"},
		{"zstd:12", "zstd:12"},
		{"zstd-2", "zstd:2"},
		{"MinLZ-Balanced", "minlz-balanced"},
	} {
		b, err := ByName(tc.in)
		if err != nil || b.Name() != tc.want {
			t.Errorf("ByName(%q) = %v, %v; want %s", tc.in, b, err, tc.want)
		}
	}

	const allowed = "allowed are none, lz4, snappy, zstd:1, zstd:3, zstd:6, zstd:9, zstd:19, minlz, minlz-balanced, s2, zstd:<1-22>"
	for _, name := range []string{"brotli", "zstd:0", "zstd:23", "zstdx", ""} {
		_, err := ByName(name)
		want := `unknown codec "` + name + `": ` + allowed
		if err == nil || err.Error() != want {
			t.Errorf("ByName(%q) error %v, want %q", name, err, want)
		}
	}
}

func TestRawRoundTrip(t *testing.T) {
	docs := entities(200, 2048)
	cases := map[string][]byte{
		"empty":   {},
		"one":     {'x'},
		"short":   []byte("hello, hello, hello"),
		"zeros":   make([]byte, 1<<20),
		"random":  randomBytes(100 << 10),
		"json-4k": SplitBlocks(docs, 4<<10)[0],
		"json-1m": bytes.Join(docs, nil),
	}
	for _, b := range All() {
		t.Run("codec="+b.Name(), func(t *testing.T) {
			var dst, out []byte
			for name, src := range cases {
				// Fresh buffers, then reused buffers holding older results.
				for _, reuse := range []bool{false, true} {
					if !reuse {
						dst, out = nil, nil
					}
					var err error
					dst = b.Compress(dst, src)
					out, err = b.Decompress(out, dst)
					if err != nil {
						t.Fatalf("%s (reuse %v): decompress: %v", name, reuse, err)
					}
					if !bytes.Equal(out, src) {
						t.Fatalf("%s (reuse %v): round trip gave %d bytes, want %d", name, reuse, len(out), len(src))
					}
				}
			}
		})
	}
}

// TestRawMinLZLargeBlock checks the Pebble-style Snappy fallback for blocks
// MinLZ cannot encode.
func TestRawMinLZLargeBlock(t *testing.T) {
	src := bytes.Repeat([]byte("a block over eight MiB, "), minlz.MaxBlockSize/20)
	for _, name := range []string{"minlz", "minlz-balanced"} {
		b, _ := ByName(name)
		c := b.Compress(nil, src)
		out, err := b.Decompress(nil, c)
		if err != nil || !bytes.Equal(out, src) {
			t.Fatalf("%s: %d-byte block: round trip failed: %v", name, len(src), err)
		}
	}
}

func TestRawCorruptInput(t *testing.T) {
	src := SplitBlocks(entities(50, 2048), 32<<10)[0]
	for _, b := range All() {
		t.Run("codec="+b.Name(), func(t *testing.T) {
			c := b.Compress(nil, src)
			inputs := [][]byte{nil, c[:len(c)/2], randomBytes(300), append([]byte{0xff, 0xff, 0xff, 0xff, 0x0f}, c...)}
			for i, in := range inputs {
				func() {
					defer func() {
						if r := recover(); r != nil {
							t.Fatalf("input %d: panic: %v", i, r)
						}
					}()
					out, err := b.Decompress(nil, in)
					if b.Name() != "none" && err == nil && bytes.Equal(out, src) {
						t.Errorf("input %d: corrupt input decoded to the original", i)
					}
				}()
			}
		})
	}
}

// TestRawHugeHeader checks a length header claiming gigabytes fails at once
// instead of allocating them.
func TestRawHugeHeader(t *testing.T) {
	in := []byte("\x90\xff\xcf\x9a\x0e`\xa1\x1b\xb3") // uvarint 3,813,932,944
	for _, name := range []string{"lz4", "snappy", "minlz", "minlz-balanced", "s2"} {
		b, _ := ByName(name)
		if _, err := b.Decompress(nil, in); !errors.Is(err, errTooLarge) {
			t.Errorf("%s: error %v, want errTooLarge", name, err)
		}
	}
}

func TestRawRatio(t *testing.T) {
	random := [][]byte{randomBytes(256 << 10)}
	docs := SplitBlocks(entities(2000, 2048), 32<<10)
	for _, b := range All() {
		t.Run("codec="+b.Name(), func(t *testing.T) {
			r, err := Measure(b, random, 0)
			if err != nil {
				t.Fatal(err)
			}
			// Incompressible data costs at most a little framing.
			if r.Ratio > 1 || r.Ratio < 0.99 {
				t.Errorf("random data: ratio %.4f, want 0.99..1", r.Ratio)
			}
			if b.Name() == "none" && r.Ratio != 1 {
				t.Errorf("none: ratio %v, want exactly 1", r.Ratio)
			}

			r, err = Measure(b, docs, 0)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("documents, 32 KB blocks: %.2fx", r.Ratio)
			if b.Name() != "none" && (r.Ratio < 1.3 || r.Ratio > 6) {
				t.Errorf("documents: ratio %.2f, want 1.3..6", r.Ratio)
			}
		})
	}
}

func TestMeasure(t *testing.T) {
	b, _ := ByName("snappy")
	blocks := SplitBlocks(entities(100, 1024), 4<<10)
	start := time.Now()
	r, err := Measure(b, blocks, 50*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < 100*time.Millisecond {
		t.Errorf("Measure took %v, want at least 2 x 50ms", d)
	}
	var raw int64
	for _, blk := range blocks {
		raw += int64(len(blk))
	}
	if r.Codec != "snappy" || r.RawBytes != raw || r.CompressedBytes <= 0 || r.CompressedBytes >= raw ||
		r.Ratio != float64(raw)/float64(r.CompressedBytes) || r.CompressMBps <= 0 || r.DecompressMBps <= 0 {
		t.Errorf("Measure = %+v", r)
	}

	if _, err := Measure(b, [][]byte{{}, nil}, 0); err == nil || err.Error() != "rawcodec: measure snappy: no data in 2 blocks" {
		t.Errorf("empty blocks: error %v", err)
	}
	bad := brokenBlock{b}
	want := fmt.Sprintf("rawcodec: measure broken: block 0: round trip mismatch at byte 0 (%d bytes in, %[1]d out)", len(blocks[0]))
	if _, err := Measure(bad, blocks, 0); err == nil || err.Error() != want {
		t.Errorf("broken codec: error %v", err)
	}
	failing := failingBlock{b}
	if _, err := Measure(failing, blocks, 0); !errors.Is(err, errFailing) {
		t.Errorf("failing codec: error %v, want errFailing in the chain", err)
	}
}

// brokenBlock flips the first byte of every decompressed block.
type brokenBlock struct{ Block }

func (brokenBlock) Name() string { return "broken" }

func (b brokenBlock) Decompress(dst, src []byte) ([]byte, error) {
	out, err := b.Block.Decompress(dst, src)
	if len(out) > 0 {
		out[0] ^= 1
	}
	return out, err
}

var errFailing = errors.New("failing")

type failingBlock struct{ Block }

func (failingBlock) Decompress(dst, src []byte) ([]byte, error) { return nil, errFailing }

func TestRawCodecsNoGoroutines(t *testing.T) {
	before := runtime.NumGoroutine()
	for range 10 {
		for _, b := range All() {
			c := b.Compress(nil, []byte("some data, some data"))
			if _, err := b.Decompress(nil, c); err != nil {
				t.Fatal(err)
			}
		}
	}
	if after := runtime.NumGoroutine(); after > before {
		t.Errorf("goroutines: %d before, %d after; All must not start any", before, after)
	}
}

func TestSplitBlocks(t *testing.T) {
	entry := func(n int, c byte) []byte { return bytes.Repeat([]byte{c}, n) }
	for _, tc := range []struct {
		name      string
		sizes     []int
		blockSize int
		want      []int // block lengths
	}{
		{"none", nil, 10, nil},
		{"empty entries", []int{0, 0}, 10, nil},
		{"exact", []int{5, 5, 5, 5}, 10, []int{10, 10}},
		{"overshoot", []int{4, 4, 4, 4, 4}, 10, []int{12, 8}},
		{"tail", []int{3, 3, 3}, 10, []int{9}},
		{"large entry alone", []int{3, 25, 3}, 10, []int{3, 25, 3}},
		{"entry of block size", []int{10, 10, 1}, 10, []int{10, 10, 1}},
		{"zero block size", []int{1, 2, 3}, 0, []int{1, 2, 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var data [][]byte
			for i, n := range tc.sizes {
				data = append(data, entry(n, byte('a'+i)))
			}
			blocks := SplitBlocks(data, tc.blockSize)
			var got []int
			for _, b := range blocks {
				got = append(got, len(b))
				if cap(b) != len(b) {
					t.Errorf("block cap %d, len %d: appending would clobber the next block", cap(b), len(b))
				}
			}
			if !equalInts(got, tc.want) {
				t.Fatalf("block lengths %v, want %v", got, tc.want)
			}
			if !bytes.Equal(bytes.Join(blocks, nil), bytes.Join(data, nil)) {
				t.Fatalf("blocks do not concatenate to the entries")
			}
		})
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// FuzzRawCodecs checks every codec round-trips any input and that
// Decompress of any input returns an error rather than panicking.
func FuzzRawCodecs(f *testing.F) {
	f.Add([]byte(""))
	f.Add([]byte("hello, hello, hello, hello"))
	f.Add([]byte("\x90\xff\xcf\x9a\x0e`\xa1\x1b\xb3")) // claims 3.8 GB
	f.Add(SplitBlocks(entities(3, 1024), 4<<10)[0])
	codecs := All()
	for _, b := range codecs {
		f.Add(b.Compress(nil, []byte("a sample block, a sample block")))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, b := range codecs {
			out, err := b.Decompress(nil, b.Compress(nil, data))
			if err != nil || !bytes.Equal(out, data) {
				t.Fatalf("%s: round trip of %d bytes failed: %v", b.Name(), len(data), err)
			}
			_, _ = b.Decompress(nil, data)
		}
	})
}
