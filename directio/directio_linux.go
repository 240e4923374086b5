//go:build linux

package directio

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"golang.org/x/sys/unix"
)

var probeSeq atomic.Int64

// Probe checks that the filesystem holding dir does direct I/O with the given
// alignment (0 means DefaultAlignment): it creates a temporary file in dir
// with O_DIRECT, writes one aligned block, reads it back and removes the
// file. A refusal is a *ProbeError naming dir (errors.Is(err,
// ErrUnsupported)): EINVAL at open or write, a filesystem that reports no
// direct I/O support through statx, or tmpfs/ramfs (see the package
// comment). An alignment that is not a multiple of what the filesystem
// reports, and failures unrelated to O_DIRECT (a missing directory,
// permissions, a full disk), are plain errors.
func Probe(dir string, alignment int) error {
	a := int64(alignment)
	if a == 0 {
		a = DefaultAlignment
	}
	if err := validAlignment(a); err != nil {
		return err
	}
	var sfs unix.Statfs_t
	if err := unix.Statfs(dir, &sfs); err != nil {
		return fmt.Errorf("directio: probe %s: %w", dir, &os.PathError{Op: "statfs", Path: dir, Err: err})
	}
	switch uint32(sfs.Type) { // f_type is 32 bits wide on some architectures
	case unix.TMPFS_MAGIC:
		return &ProbeError{Path: dir, Err: errors.New("tmpfs keeps file data in the page cache, and before Linux 6.6 returns EINVAL")}
	case unix.RAMFS_MAGIC:
		return &ProbeError{Path: dir, Err: errors.New("ramfs keeps file data in the page cache")}
	}

	var (
		name string
		fd   int
		err  error
	)
	for range 100 {
		name = filepath.Join(dir, fmt.Sprintf(".directio-probe-%d-%d-%d", os.Getpid(), time.Now().UnixNano(), probeSeq.Add(1)))
		fd, err = unix.Open(name, unix.O_RDWR|unix.O_CREAT|unix.O_EXCL|unix.O_DIRECT|unix.O_CLOEXEC, 0o600)
		if err != unix.EEXIST {
			break
		}
	}
	switch {
	case err == unix.EINVAL:
		return &ProbeError{Path: dir, Err: fmt.Errorf("open with O_DIRECT: %w", err)}
	case err != nil:
		return fmt.Errorf("directio: probe %s: %w: %w", dir, errProbeFile, &os.PathError{Op: "open", Path: name, Err: err})
	}
	defer func() {
		_ = unix.Close(fd)
		_ = unix.Unlink(name)
	}()

	var sx unix.Statx_t
	if unix.Statx(fd, "", unix.AT_EMPTY_PATH, unix.STATX_DIOALIGN, &sx) == nil && sx.Mask&unix.STATX_DIOALIGN != 0 {
		if sx.Dio_offset_align == 0 {
			return &ProbeError{Path: dir, Err: errors.New("statx reports no direct I/O support")}
		}
		if a%int64(sx.Dio_offset_align) != 0 || a%int64(sx.Dio_mem_align) != 0 {
			return fmt.Errorf("directio: probe %s: alignment = %d: must be a multiple of the filesystem's direct I/O alignment (offsets %d, memory %d)",
				dir, a, sx.Dio_offset_align, sx.Dio_mem_align)
		}
	}

	w := alignedBuffer(int(a), int(a))
	for i := range w {
		w[i] = byte(i*7 + 1)
	}
	if n, err := unix.Pwrite(fd, w, 0); err == unix.EINVAL {
		return &ProbeError{Path: dir, Err: fmt.Errorf("write of one %d-byte aligned block: %w (is the alignment below the device's logical block size?)", a, err)}
	} else if err != nil {
		return fmt.Errorf("directio: probe %s: %w", dir, &os.PathError{Op: "write", Path: name, Err: err})
	} else if n != len(w) {
		return fmt.Errorf("directio: probe %s: write: %w", dir, io.ErrShortWrite)
	}
	r := alignedBuffer(int(a), int(a))
	if n, err := unix.Pread(fd, r, 0); err == unix.EINVAL {
		return &ProbeError{Path: dir, Err: fmt.Errorf("read of one %d-byte aligned block: %w", a, err)}
	} else if err != nil {
		return fmt.Errorf("directio: probe %s: %w", dir, &os.PathError{Op: "read", Path: name, Err: err})
	} else if n != len(r) || !bytes.Equal(r, w) {
		return fmt.Errorf("directio: probe %s: read back %d bytes that differ from the %d written", dir, n, len(w))
	}
	return nil
}

// setDirect switches an open descriptor to O_DIRECT. Linux checks the same
// filesystem capability as at open, so a refusal is EINVAL.
func setDirect(name string, fd uintptr) error {
	if fd == vfs.InvalidFd {
		return &ProbeError{Path: name, Err: errors.New("the file has no OS descriptor (is the wrapped FS an OS filesystem?)")}
	}
	flags, err := unix.FcntlInt(fd, unix.F_GETFL, 0)
	if err != nil {
		return &os.PathError{Op: "fcntl", Path: name, Err: err}
	}
	if _, err := unix.FcntlInt(fd, unix.F_SETFL, flags|unix.O_DIRECT); err == unix.EINVAL {
		return &ProbeError{Path: name, Err: fmt.Errorf("fcntl(F_SETFL, O_DIRECT): %w", err)}
	} else if err != nil {
		return &os.PathError{Op: "fcntl", Path: name, Err: err}
	}
	return nil
}

// newWriter switches f, just created, to O_DIRECT and wraps it.
func (d *FS) newWriter(name string, f vfs.File) (vfs.File, error) {
	if err := validAlignment(d.align); err != nil {
		return nil, err
	}
	if err := setDirect(name, f.Fd()); err != nil {
		return nil, err
	}
	return newWriter(d, name, f, d.stage, true), nil
}

// stagedWriter wraps f, just created in a directory that fell back to
// buffered I/O, in the same aligned writer without O_DIRECT (or returns f
// when it has no descriptor). Its output is the same; what it adds is that
// the file keeps working if a wrapper retargets its descriptor onto a file
// opened with O_DIRECT elsewhere, as the tiering layout does with dup3 when
// it places a new table on another path.
func (d *FS) stagedWriter(name string, f vfs.File) vfs.File {
	if validAlignment(d.align) != nil || f.Fd() == vfs.InvalidFd {
		return f
	}
	return newWriter(d, name, f, d.stage, false)
}

// newReader switches f, just opened, to O_DIRECT and wraps it.
func (d *FS) newReader(name string, f vfs.File, sequential bool) (vfs.File, error) {
	if err := validAlignment(d.align); err != nil {
		return nil, err
	}
	if err := setDirect(name, f.Fd()); err != nil {
		return nil, err
	}
	return &reader{d: d, f: f, fd: int(f.Fd()), name: name, sequential: sequential}, nil
}

// preadFull reads len(b) bytes at off (both aligned, b's address aligned)
// from an O_DIRECT descriptor, stopping early only at the end of the file.
// owner holds the descriptor open.
func (d *FS) preadFull(c *counters, owner vfs.File, name string, fd int, b []byte, off int64) (int, error) {
	done := 0
	for done < len(b) {
		n, err := unix.Pread(fd, b[done:], off+int64(done))
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			runtime.KeepAlive(owner)
			return done, &os.PathError{Op: "read", Path: name, Err: err}
		}
		if c != nil {
			c.read(n)
		}
		done += n
		// An O_DIRECT read stops short only at the end of the file (or after
		// whole blocks, on a signal); a partial block means the end.
		if n == 0 || int64(n)%d.align != 0 {
			break
		}
	}
	runtime.KeepAlive(owner)
	return done, nil
}

// pwriteFull writes all of b (aligned, like off) at off to an O_DIRECT
// descriptor.
func (d *FS) pwriteFull(c *counters, owner vfs.File, name string, fd int, b []byte, off int64) error {
	done := 0
	for done < len(b) {
		n, err := unix.Pwrite(fd, b[done:], off+int64(done))
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			runtime.KeepAlive(owner)
			return &os.PathError{Op: "write", Path: name, Err: err}
		}
		if c != nil {
			c.write(n)
		}
		done += n
		if done < len(b) && (n == 0 || int64(n)%d.align != 0) {
			runtime.KeepAlive(owner)
			return &os.PathError{Op: "write", Path: name, Err: io.ErrShortWrite}
		}
	}
	runtime.KeepAlive(owner)
	return nil
}

// readDirect reads len(p) bytes at any off through an O_DIRECT descriptor,
// with os.File.ReadAt's results: n < len(p) comes with an error, io.EOF at
// the end of the file. An aligned p (address, offset and length) is read
// into directly; anything else goes through a pooled aligned buffer.
func (d *FS) readDirect(c *counters, owner vfs.File, name string, fd int, p []byte, off int64) (int, error) {
	a := d.align
	if off%a == 0 && int64(len(p))%a == 0 && isAligned(p, a) {
		n, err := d.preadFull(c, owner, name, fd, p, off)
		if err == nil && n < len(p) {
			err = io.EOF
		}
		return n, err
	}
	start, end := alignDown(off, a), alignUp(off+int64(len(p)), a)
	bp := d.bufs.get(int(end - start))
	buf := (*bp)[:end-start]
	m, err := d.preadFull(c, owner, name, fd, buf, start)
	n := 0
	if skip := int(off - start); m > skip {
		n = copy(p, buf[skip:m])
	}
	d.bufs.put(bp)
	if err == nil && n < len(p) {
		err = io.EOF
	}
	return n, err
}
