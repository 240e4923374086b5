// Package directio gives Pebble O_DIRECT table I/O, as RocksDB's
// use_direct_reads and use_direct_io_for_flush_and_compaction do, by wrapping
// the vfs.FS that Pebble writes through.
//
// Usage:
//
//	fs := directio.NewFS(vfs.Default, directio.Options{Reads: true, Writes: true, Fallback: true})
//	for _, dir := range tableDirs { // every directory that holds table files
//		if err := fs.Probe(dir); err != nil {
//			return err // names the directory; errors.Is(err, directio.ErrUnsupported)
//		}
//	}
//	opts := &pebble.Options{FS: fs}
//	db, err := pebble.Open(dir, opts)
//	...
//	st := fs.Stats() // direct reads and writes, directories that fell back
//
// # What is direct
//
// Only table files (names ending in ".sst") are affected; the WAL, the
// MANIFEST, OPTIONS and blob files stay buffered, as in RocksDB.
//
//   - Writes: a table created with a flush or compaction write category
//     ("pebble-memtable-flush", "pebble-compaction", and "sql-row-spill",
//     which Pebble uses for both when EnableSQLRowSpillMetrics is set) is
//     written with O_DIRECT. Tables created by other paths (ingestion copies,
//     checkpoints, tools) use Pebble's default category and stay buffered.
//   - Reads: every Open of a table file returns an O_DIRECT reader.
//
// # Writer
//
// Pebble writes table files in pieces of any size through a 4 KiB bufio
// writer. The direct writer stages them in an aligned buffer (1 MiB) and
// writes whole aligned blocks. Sync, SyncData and Close write the staged
// bytes padded with zeros to the alignment, then ftruncate the file to its
// true length; the unaligned tail stays staged, so the next write rewrites
// that last partial block in place. Whatever the interleaving of Write, Sync
// and Close, the file holds exactly the bytes written, with their length,
// after every Sync and after Close. SyncTo (Pebble's periodic
// sync_file_range) is a no-op: O_DIRECT writes leave no dirty page-cache
// pages to start writeback for, and SyncTo promises no durability.
//
// # Reader
//
// ReadAt serves any offset and length through an aligned bounce buffer (the
// range rounded out to the alignment, read, then copied out), and reads
// straight into the caller's buffer when its address, offset and length are
// already aligned. Reading past the end returns n < len(p) with io.EOF, as
// os.File does.
//
// Pebble's readahead does nothing under O_DIRECT (readahead(2) and fadvise
// act on the page cache), so the reader does its own: a file opened with
// vfs.SequentialReadsOption (compaction inputs, and iterators once Pebble's
// speculative readahead reaches its maximum) reads Options.ReadaheadSize
// aligned chunks and keeps the last one; Prefetch (Pebble's speculative
// readahead on shared handles) reads the requested range into that chunk.
// Shared handles stay open as long as Pebble's file cache keeps the table,
// so their chunks are capped at 16 in all (the oldest is dropped).
//
// # Descriptors
//
// A direct file is opened through the wrapped FS (so Pebble's Create
// semantics, a fresh inode each time, and its FileInfo with the device ID are
// kept) and then switched to O_DIRECT with fcntl(F_SETFL). Fd returns that
// real descriptor: Pebble's syncing file needs a valid descriptor to choose
// SyncTo over a full Sync every BytesPerSync bytes, and fadvise on an
// O_DIRECT descriptor is harmless. The wrapped FS must therefore hand out
// files with real descriptors (vfs.Default); wrap the result with disk-health
// checking or counting filesystems, not the other way round, since direct
// reads and writes use the descriptor and bypass the inner file's Read and
// Write methods.
//
// # Alignment
//
// Options.Alignment applies to file offsets, lengths and memory addresses.
// Zero means DefaultAlignment, 4096: a multiple of every common logical
// block size (512 and 4096), so it is valid on nearly every device at the
// cost of rounding small reads to 4 KiB. Detecting the logical block size
// (BLKSSZGET) needs the block device, which a file on a partition, LVM or
// overlay does not lead to reliably; statfs's f_bsize is the filesystem
// block, not the direct I/O unit. Probe checks the chosen alignment on the
// directory itself, and on kernels with statx STATX_DIOALIGN (6.1+) against
// the alignment the filesystem reports.
//
// # Refusal and fallback
//
// A filesystem that refuses O_DIRECT (EINVAL at open, as tmpfs before Linux
// 6.6 and some overlay and FUSE setups do) fails Probe with a *ProbeError
// that names the directory. tmpfs and ramfs are refused on every kernel:
// since 6.6 tmpfs accepts O_DIRECT, but its data lives in the page cache, so
// direct I/O there cannot keep anything out of memory. With Options.Fallback
// the FS instead uses buffered I/O for every table in that directory, lists
// the directory in Stats().FallbackPaths and logs one line through
// Options.Logger. Each directory is probed once, by (*FS).Probe or on its
// first direct open. Tables written there still go through the aligned
// writer, only without O_DIRECT: the bytes are the same, and the file keeps
// working if a wrapper above (the tiering layout) retargets its descriptor
// with dup3 onto a file opened with O_DIRECT in another directory.
//
// Direct I/O is implemented on Linux only. Elsewhere Probe fails with
// ErrUnsupported, so NewFS with Fallback passes everything through.
package directio
