package rawcodec

import (
	"fmt"
	"testing"
)

// benchBlocks returns about 1 MB of generated documents in blocks of size.
func benchBlocks(size int) [][]byte { return SplitBlocks(entities(512, 2048), size) }

func BenchmarkRawCompress(b *testing.B) {
	for _, codec := range All() {
		for _, size := range []int{4 << 10, 32 << 10} {
			b.Run(fmt.Sprintf("codec=%s/block=%dKB", codec.Name(), size>>10), func(b *testing.B) {
				blocks := benchBlocks(size)
				var total int64
				for _, blk := range blocks {
					total += int64(len(blk))
				}
				b.SetBytes(total)
				b.ReportAllocs()
				dst := make([]byte, 0, 2*size)
				for b.Loop() {
					for _, blk := range blocks {
						dst = codec.Compress(dst, blk)
					}
				}
			})
		}
	}
}

func BenchmarkRawDecompress(b *testing.B) {
	for _, codec := range All() {
		for _, size := range []int{4 << 10, 32 << 10} {
			b.Run(fmt.Sprintf("codec=%s/block=%dKB", codec.Name(), size>>10), func(b *testing.B) {
				blocks := benchBlocks(size)
				compressed := make([][]byte, len(blocks))
				var total int64
				for i, blk := range blocks {
					compressed[i] = codec.Compress(nil, blk)
					total += int64(len(blk))
				}
				b.SetBytes(total)
				b.ReportAllocs()
				dst := make([]byte, 0, 2*size)
				for b.Loop() {
					for _, c := range compressed {
						var err error
						if dst, err = codec.Decompress(dst, c); err != nil {
							b.Fatal(err)
						}
					}
				}
			})
		}
	}
}
