package rawcodec

// Raw block codecs: each codec applied directly to a byte block, outside
// Pebble, so that `tune codecs` can measure ratio and speed of every codec on
// the same blocks, the real LZ4 among them.
//
//	b, err := rawcodec.ByName("zstd:3")
//	blocks := rawcodec.SplitBlocks(values, 32<<10)
//	res, err := rawcodec.Measure(b, blocks, time.Second)
//	fmt.Printf("%s %.2fx %.0f MB/s\n", res.Codec, res.Ratio, res.CompressMBps)

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/stratadb/strata/compression"

	"github.com/golang/snappy"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/minio/minlz"
	"github.com/pierrec/lz4/v4"
)

// Block is a block compression codec applied to whole blocks in memory.
//
//  1. Compress(dst, src) returns the compressed form of src. It writes into
//     dst's backing array when its capacity suffices (dst's contents are
//     overwritten, not appended to) and allocates otherwise, so a caller can
//     pass the previous result back in to reuse it.
//  2. Decompress(dst, src) inverts Compress with the same buffer rule, and
//     returns an error, never a panic, when src is corrupt.
//  3. A compressed block is self-describing: Decompress needs no side
//     information such as the uncompressed length.
//
// A Block holds encoder state and is not safe for concurrent use; All
// and ByName return fresh values, one per goroutine.
type Block interface {
	// Name returns the codec's name as accepted by ByName ("zstd:3").
	Name() string
	// Compress returns the compressed form of src, reusing dst if it can.
	Compress(dst, src []byte) []byte
	// Decompress returns the decompressed form of src, reusing dst if it can.
	Decompress(dst, src []byte) ([]byte, error)
}

// rawZstdLevels are the zstd levels All includes.
var rawZstdLevels = [...]int{1, 3, 6, 9, 19}

// MaxBlockSize is the largest block Measure accepts and Decompress
// produces, 128 MiB: twice the longest JSON Lines entity, and well below
// every raw codec's own limit. Decompress checks a block's length header
// against it before allocating, so corrupt input cannot demand gigabytes.
const MaxBlockSize = 128 << 20

// errTooLarge is returned for a compressed block whose header claims more
// than MaxBlockSize bytes.
var errTooLarge = fmt.Errorf("block decodes to more than %d bytes", MaxBlockSize)

// checkLen returns err, or errTooLarge if n, the decoded length a block
// header claims, is out of range.
func checkLen(n int, err error) error {
	if err == nil && (n < 0 || n > MaxBlockSize) {
		return errTooLarge
	}
	return err
}

// rawNames returns the names of the codecs All returns, in its order.
func rawNames() []string {
	names := []string{"none", "lz4", "snappy"}
	for _, l := range rawZstdLevels {
		names = append(names, fmt.Sprintf("zstd:%d", l))
	}
	return append(names, "minlz", "minlz-balanced", "s2")
}

// Names lists the names ByName accepts, for error messages and help:
// the names of All and "zstd:<1-22>" for any other zstd level.
func Names() []string {
	return append(rawNames(), fmt.Sprintf("zstd:<1-%d>", compression.MaxZstdLevel))
}

// All returns a fresh Block for each raw codec, in this order:
//
//   - none: a copy, the baseline (ratio 1.0, memory bandwidth).
//   - lz4: real LZ4 (github.com/pierrec/lz4/v4 block API, the fast
//     compressor) behind a uvarint header holding the uncompressed length
//     (shifted one bit for a stored-as-is flag), much as RocksDB prefixes
//     its LZ4 blocks with the length. Pebble cannot store LZ4; see
//     Codec.Effective.
//   - snappy: github.com/golang/snappy, the codec Pebble uses.
//   - zstd:1, zstd:3, zstd:6, zstd:9, zstd:19: github.com/klauspost/compress
//     zstd, one encoder per level. That pure-Go zstd has 4 speed presets,
//     not 22 levels: zstd.EncoderLevelFromZstd maps levels 1-2 to
//     SpeedFastest, 3-5 to SpeedDefault, 6-9 to SpeedBetterCompression and
//     10 and up to SpeedBestCompression, as Pebble does when built without
//     cgo. So zstd:6 and zstd:9 produce identical output here, and any
//     zstd:N behaves as the preset of its range.
//   - minlz: github.com/minio/minlz at LevelFastest, what Pebble's MinLZ
//     profile uses for data blocks; minlz-balanced is LevelBalanced. As in
//     Pebble, a block over minlz.MaxBlockSize (8 MiB) is compressed with
//     Snappy instead, which minlz.Decode reads.
//   - s2: github.com/klauspost/compress/s2, the Snappy-compatible format.
func All() []Block {
	names := rawNames()
	blocks := make([]Block, len(names))
	for i, name := range names {
		b, err := ByName(name)
		if err != nil {
			// rawNames lists only names ByName accepts.
			panic(err)
		}
		blocks[i] = b
	}
	return blocks
}

// ByName returns a fresh Block for a name of Names; case and surrounding
// spaces are ignored, and plain "zstd" means zstd:3 as in ParseCodec. An
// unknown name returns an error listing the allowed names.
func ByName(name string) (Block, error) {
	n := strings.ToLower(strings.TrimSpace(name))
	switch n {
	case "none":
		return noneBlock{}, nil
	case "lz4":
		return &lz4Block{}, nil
	case "snappy":
		return snappyBlock{}, nil
	case "minlz":
		return minlzBlock{name: "minlz", level: minlz.LevelFastest}, nil
	case "minlz-balanced":
		return minlzBlock{name: "minlz-balanced", level: minlz.LevelBalanced}, nil
	case "s2":
		return s2Block{}, nil
	}
	if strings.HasPrefix(n, "zstd") {
		if c, err := compression.ParseCodec(n); err == nil && c.Algorithm == compression.Zstd {
			return newZstdBlock(c.Level)
		}
	}
	return nil, fmt.Errorf("unknown codec %q: allowed are %s", name, strings.Join(Names(), ", "))
}

// grow returns dst resized to n bytes, reusing its backing array if it can.
func grow(dst []byte, n int) []byte {
	if cap(dst) >= n {
		return dst[:n]
	}
	return make([]byte, n)
}

type noneBlock struct{}

func (noneBlock) Name() string { return "none" }

func (noneBlock) Compress(dst, src []byte) []byte { return append(dst[:0], src...) }

func (noneBlock) Decompress(dst, src []byte) ([]byte, error) { return append(dst[:0], src...), nil }

// lz4Block is an LZ4 block behind a uvarint header of length<<1 | stored,
// where stored marks a block kept as is because LZ4 reported a failure (which
// its documentation rules out for a buffer of CompressBlockBound bytes).
type lz4Block struct {
	c lz4.Compressor
}

func (*lz4Block) Name() string { return "lz4" }

func (b *lz4Block) Compress(dst, src []byte) []byte {
	dst = grow(dst, binary.MaxVarintLen64+lz4.CompressBlockBound(len(src)))
	k := binary.PutUvarint(dst, uint64(len(src))<<1)
	if len(src) == 0 {
		return dst[:k]
	}
	n, err := b.c.CompressBlock(src, dst[k:])
	if err != nil || n == 0 {
		k = binary.PutUvarint(dst, uint64(len(src))<<1|1)
		return append(dst[:k], src...)
	}
	return dst[:k+n]
}

func (*lz4Block) Decompress(dst, src []byte) ([]byte, error) {
	h, k := binary.Uvarint(src)
	size := h >> 1
	if k <= 0 {
		return nil, errors.New("rawcodec: lz4: corrupt length header")
	}
	if size > MaxBlockSize {
		return nil, fmt.Errorf("rawcodec: lz4: %w", errTooLarge)
	}
	if h&1 == 1 {
		if uint64(len(src)-k) != size {
			return nil, errors.New("rawcodec: lz4: corrupt stored block")
		}
		return append(dst[:0], src[k:]...), nil
	}
	dst = grow(dst, int(size))
	if size == 0 {
		return dst, nil
	}
	n, err := lz4.UncompressBlock(src[k:], dst)
	if err != nil {
		return nil, fmt.Errorf("rawcodec: lz4: %w", err)
	}
	if n != int(size) {
		return nil, fmt.Errorf("rawcodec: lz4: decompressed %d bytes, header says %d", n, size)
	}
	return dst, nil
}

type snappyBlock struct{}

func (snappyBlock) Name() string { return "snappy" }

func (snappyBlock) Compress(dst, src []byte) []byte { return snappy.Encode(dst[:cap(dst)], src) }

func (snappyBlock) Decompress(dst, src []byte) ([]byte, error) {
	if err := checkLen(snappy.DecodedLen(src)); err != nil {
		return nil, fmt.Errorf("rawcodec: snappy: %w", err)
	}
	return snappy.Decode(dst[:cap(dst)], src)
}

type s2Block struct{}

func (s2Block) Name() string { return "s2" }

func (s2Block) Compress(dst, src []byte) []byte { return s2.Encode(dst[:cap(dst)], src) }

func (s2Block) Decompress(dst, src []byte) ([]byte, error) {
	if err := checkLen(s2.DecodedLen(src)); err != nil {
		return nil, fmt.Errorf("rawcodec: s2: %w", err)
	}
	return s2.Decode(dst[:cap(dst)], src)
}

type minlzBlock struct {
	name  string
	level int
}

func (b minlzBlock) Name() string { return b.name }

func (b minlzBlock) Compress(dst, src []byte) []byte {
	if len(src) > minlz.MaxBlockSize {
		// Pebble's fallback for blocks MinLZ cannot encode.
		return snappy.Encode(dst[:cap(dst)], src)
	}
	out, err := minlz.Encode(dst, src, b.level)
	if err != nil {
		// Encode fails only on an oversized block or a bad level, both
		// excluded; should it fail, Snappy is still readable by Decode.
		return snappy.Encode(dst[:cap(dst)], src)
	}
	return out
}

func (b minlzBlock) Decompress(dst, src []byte) ([]byte, error) {
	if err := checkLen(minlz.DecodedLen(src)); err != nil {
		return nil, fmt.Errorf("rawcodec: %s: %w", b.name, err)
	}
	return minlz.Decode(dst, src)
}

// zstdBlock is a zstd frame as written by klauspost's EncodeAll, with its
// default 4-byte checksum, as Pebble writes it without cgo (Pebble adds a
// uvarint length prefix, which the frame header already carries).
type zstdBlock struct {
	level int
	enc   *zstd.Encoder
	dec   *zstd.Decoder
}

func newZstdBlock(level int) (*zstdBlock, error) {
	enc, err := zstd.NewWriter(nil,
		zstd.WithEncoderLevel(zstd.EncoderLevelFromZstd(level)),
		zstd.WithEncoderConcurrency(1))
	if err != nil {
		return nil, fmt.Errorf("rawcodec: zstd:%d: %w", level, err)
	}
	dec, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(MaxBlockSize))
	if err != nil {
		return nil, fmt.Errorf("rawcodec: zstd:%d: %w", level, err)
	}
	return &zstdBlock{level: level, enc: enc, dec: dec}, nil
}

func (b *zstdBlock) Name() string { return fmt.Sprintf("zstd:%d", b.level) }

func (b *zstdBlock) Compress(dst, src []byte) []byte { return b.enc.EncodeAll(src, dst[:0]) }

func (b *zstdBlock) Decompress(dst, src []byte) ([]byte, error) {
	out, err := b.dec.DecodeAll(src, dst[:0])
	if err != nil {
		return nil, fmt.Errorf("rawcodec: zstd: %w", err)
	}
	return out, nil
}

// Result is the outcome of Measure for one codec. Speeds are in MB
// (1 MB = 2^20 bytes, as everywhere in Strata's reports) of uncompressed data
// per second of one core, for decompression as well as compression.
type Result struct {
	// Codec is the Block's name.
	Codec string
	// RawBytes is the total size of the blocks.
	RawBytes int64
	// CompressedBytes is the total size of the compressed blocks.
	CompressedBytes int64
	// Ratio is RawBytes / CompressedBytes.
	Ratio float64
	// CompressMBps is the compression speed in MB of input per second.
	CompressMBps float64
	// DecompressMBps is the decompression speed in MB of output per second.
	DecompressMBps float64
}

// Measure measures b on blocks, on the calling goroutine:
//
//  1. One untimed pass compresses each block, decompresses it and checks
//     the result equals the block, returning an error naming the block on a
//     mismatch; it also sums CompressedBytes.
//  2. Timed passes compress every block, repeating whole passes until
//     minDuration has elapsed (at least one pass).
//  3. Timed passes decompress every block the same way.
//
// Blocks must hold at least one byte in total and each at most
// MaxBlockSize bytes. The buffers are reused between blocks, so the timed
// passes measure the codec, not the allocator.
func Measure(b Block, blocks [][]byte, minDuration time.Duration) (Result, error) {
	res := Result{Codec: b.Name()}
	maxLen := 0
	for i, blk := range blocks {
		if len(blk) > MaxBlockSize {
			return res, fmt.Errorf("rawcodec: measure %s: block %d is %d bytes, over the limit of %d", res.Codec, i, len(blk), MaxBlockSize)
		}
		res.RawBytes += int64(len(blk))
		maxLen = max(maxLen, len(blk))
	}
	if res.RawBytes == 0 {
		return res, fmt.Errorf("rawcodec: measure %s: no data in %d blocks", res.Codec, len(blocks))
	}

	// Pass 1: verify and keep the compressed blocks for decompression.
	compressed := make([][]byte, len(blocks))
	var scratch []byte
	for i, blk := range blocks {
		c := b.Compress(nil, blk)
		compressed[i] = c
		res.CompressedBytes += int64(len(c))
		var err error
		scratch, err = b.Decompress(scratch, c)
		if err != nil {
			return res, fmt.Errorf("rawcodec: measure %s: block %d: %w", res.Codec, i, err)
		}
		if !bytes.Equal(scratch, blk) {
			at := 0
			for at < min(len(blk), len(scratch)) && blk[at] == scratch[at] {
				at++
			}
			return res, fmt.Errorf("rawcodec: measure %s: block %d: round trip mismatch at byte %d (%d bytes in, %d out)", res.Codec, i, at, len(blk), len(scratch))
		}
	}
	res.Ratio = float64(res.RawBytes) / float64(res.CompressedBytes)

	// Pass 2: compression speed.
	cbuf := make([]byte, 0, 2*maxLen+64)
	passes := 0
	start := time.Now()
	var elapsed time.Duration
	for passes == 0 || elapsed < minDuration {
		for _, blk := range blocks {
			cbuf = b.Compress(cbuf, blk)
		}
		passes++
		elapsed = time.Since(start)
	}
	res.CompressMBps = mbps(res.RawBytes, passes, elapsed)

	// Pass 3: decompression speed.
	dbuf := make([]byte, 0, maxLen)
	passes = 0
	start = time.Now()
	elapsed = 0
	for passes == 0 || elapsed < minDuration {
		for i, c := range compressed {
			var err error
			dbuf, err = b.Decompress(dbuf, c)
			if err != nil {
				return res, fmt.Errorf("rawcodec: measure %s: block %d: %w", res.Codec, i, err)
			}
			if len(dbuf) != len(blocks[i]) {
				return res, fmt.Errorf("rawcodec: measure %s: block %d: decompressed %d bytes, want %d", res.Codec, i, len(dbuf), len(blocks[i]))
			}
		}
		passes++
		elapsed = time.Since(start)
	}
	res.DecompressMBps = mbps(res.RawBytes, passes, elapsed)
	return res, nil
}

func mbps(bytes int64, passes int, elapsed time.Duration) float64 {
	if elapsed <= 0 {
		elapsed = 1 // a pass faster than the clock's resolution
	}
	return float64(bytes) * float64(passes) / elapsed.Seconds() / (1 << 20)
}

// SplitBlocks concatenates entries into blocks the way an SST data block
// accumulates key/value pairs: entries are appended to the current block
// until it reaches blockSize bytes, then a new block starts, so a block may
// exceed blockSize by less than one entry. An entry of blockSize bytes or more
// is a block of its own (the current block is closed first). A blockSize
// below 1 is taken as 1, making every entry its own block.
//
// The blocks are fresh copies sharing one backing array, each capped at its
// own length; data is not retained. Entries are concatenated as given, so a
// caller that wants keys in the blocks passes key+value entries.
func SplitBlocks(data [][]byte, blockSize int) [][]byte {
	blockSize = max(blockSize, 1)
	total := 0
	for _, e := range data {
		total += len(e)
	}
	if total == 0 {
		return nil
	}
	buf := make([]byte, 0, total)
	var blocks [][]byte
	start := 0
	flush := func() {
		if len(buf) > start {
			blocks = append(blocks, buf[start:len(buf):len(buf)])
			start = len(buf)
		}
	}
	for _, e := range data {
		if len(e) >= blockSize {
			flush()
			buf = append(buf, e...)
			flush()
			continue
		}
		buf = append(buf, e...)
		if len(buf)-start >= blockSize {
			flush()
		}
	}
	flush()
	return blocks
}
