package engine

import (
	"fmt"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/sstable"
)

// A table carries the writer options of the level it was written for: its
// codec, data block size, filter and index block size. Pebble's moves change
// a table's level without rewriting it, so a table flushed into L0 with
// block_size (4 KB) blocks and then moved to L6 keeps them although L6 asks
// for bottommost_block_size, even when both levels have the same codec.
// levelMismatch tells, from the table's stock properties alone (what
// `pebble sstable properties` shows), whether a table could have been
// written with a level's options; CompactAll rewrites those that could not.
//
// The codec and the filter policy are recorded by name. Block sizes are not
// recorded; they are judged from what is: a writer cuts a data block once it
// holds at least 60% of its target (Pebble's flush governor: the
// size-class-aware low watermark, 90% without size classes) and before it
// passes the next allocator size class above the target, one entry more at
// most. The raw key and value bytes of a table's blocks but the last
// therefore average from about half the target to about twice it (prefix
// compression and per-entry overhead move raw bytes away from block bytes),
// and a block size off by more than a factor of two is always seen. A table
// of one block fits every target it does not exceed. The index partitions
// are judged the same way against the level's index block size, and the
// filter's bits per key from the filter's size.

// tableBlockSlack is the factor by which a table's average block may differ
// from its level's target before the table is said to have another block
// size (see above).
const tableBlockSlack = 2

// levelMismatch returns "" when the table of props could have been written
// with lo's options, else what differs ("data blocks of ~4.1 KB, the
// level's are 32 KB"). codec is the name of the level's compression
// profile; inline, that of a table of the level holding its own values
// (config.Resolved.InlineProfile), also accepted.
func levelMismatch(props *sstable.Properties, lo *pebble.LevelOptions, codec, inline string) string {
	if props.CompressionName != codec && props.CompressionName != inline {
		return fmt.Sprintf("codec %s, the level's is %s", props.CompressionName, codec)
	}
	// RawValueSize counts a value kept in a blob file at its full size,
	// although the data block holds only a reference to it: with such
	// values the blocks hold at least the keys and at most keys plus values.
	high := props.RawKeySize + props.RawValueSize
	low := high
	if props.NumValuesInBlobFiles > 0 {
		low = props.RawKeySize
	}
	if why := blocksMismatch("data blocks", low, high, props.NumDataBlocks, lo.BlockSize); why != "" {
		return why
	}
	// A table whose index fits in one block has no partitions; a larger one
	// has index partitions of about the index block size.
	index := props.IndexSize - props.TopLevelIndexSize
	if why := blocksMismatch("index blocks", index, index, max(props.IndexPartitions, 1), lo.IndexBlockSize); why != "" {
		return why
	}
	return filterMismatch(props, lo.FilterPolicy)
}

// blocksMismatch judges n blocks holding between low and high bytes in all
// against a target block size (see the comment at the top of the file):
// the blocks are too large only if low says so, too small only if high
// does.
func blocksMismatch(what string, low, high, n uint64, target int) string {
	if n == 0 || target <= 0 {
		return ""
	}
	t := uint64(target)
	switch {
	case n == 1 && low > tableBlockSlack*t:
		return fmt.Sprintf("one block of %s holding %d bytes, the level's target is %s", what, low, formatBytes(t))
	case n > 1 && low/n > tableBlockSlack*t:
		return fmt.Sprintf("%s of ~%s, the level's are %s", what, formatBytes(low/n), formatBytes(t))
	case n > 1 && high/(n-1) < t/tableBlockSlack:
		// Every block but the last is at least half the target.
		return fmt.Sprintf("%s of ~%s, the level's are %s", what, formatBytes(high/n), formatBytes(t))
	}
	return ""
}

// filterMismatch checks the table's filter against the level's policy: its
// name, and for a bloom filter its size, which Pebble makes
// ceil(keys x bits / 512) cache lines (odd) of 64 bytes plus 5 bytes.
// NumEntries counts every entry, so a table with shadowed versions or
// tombstones has fewer filter keys than entries: the bits per entry are
// accepted from one below the level's (10% duplicates at 10 bits) to what
// the rounding adds.
func filterMismatch(props *sstable.Properties, policy pebble.FilterPolicy) string {
	want := ""
	if policy != nil {
		want = policy.Name()
	}
	if props.FilterPolicyName != want {
		return fmt.Sprintf("filter %q, the level's is %q", props.FilterPolicyName, want)
	}
	bits, ok := bloomBits(policy)
	if !ok || props.NumEntries < 512 || props.FilterSize < 5 {
		return ""
	}
	n := float64(props.NumEntries)
	per := float64(props.FilterSize-5) * 8 / n
	if per > float64(bits)+2*512/n || per < float64(bits)-1 {
		return fmt.Sprintf("a filter of %.1f bits per key, the level's has %d", per, bits)
	}
	return ""
}

// bloomBits returns the bits per key of a bloom filter policy.
func bloomBits(policy pebble.FilterPolicy) (int, bool) {
	b, ok := policy.(bloom.FilterPolicy)
	return int(b), ok
}

// formatBytes renders a block-sized number of bytes: "32 KB", "4.1 KB".
func formatBytes(b uint64) string {
	if b < 1<<10 {
		return fmt.Sprintf("%d B", b)
	}
	kb := float64(b) / (1 << 10)
	if kb == float64(int(kb)) {
		return fmt.Sprintf("%d KB", int(kb))
	}
	return fmt.Sprintf("%.1f KB", kb)
}
