package tiering

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// fullRetry is how long a path that returned ENOSPC is skipped when its
// free space cannot be read (GetDiskUsage unsupported); with a readable
// free space it is skipped until it has room again.
const fullRetry = 30 * time.Second

// markFull notes that location loc returned ENOSPC: new tables and moves
// go elsewhere until it has room again.
func (l *Layout) markFull(loc int) {
	l.mu.Lock()
	first := l.fullAt[loc].IsZero()
	l.fullAt[loc] = time.Now()
	l.mu.Unlock()
	if first {
		l.errorf("tiering: %s is full (ENOSPC): new tables go to the next path with room", l.locs[loc].dir)
	}
}

// hasRoom reports whether location loc may take need more bytes: true
// unless it returned ENOSPC and its file system still has less than twice
// need free.
func (l *Layout) hasRoom(loc int, need int64) bool {
	l.mu.Lock()
	at := l.fullAt[loc]
	l.mu.Unlock()
	if at.IsZero() {
		return true
	}
	du, err := l.base.GetDiskUsage(l.locs[loc].dir)
	free := (err == nil && du.AvailBytes >= uint64(2*max(need, 1))) || (err != nil && time.Since(at) > fullRetry)
	if free {
		l.mu.Lock()
		if l.fullAt[loc] == at {
			l.fullAt[loc] = time.Time{}
		}
		l.mu.Unlock()
		l.logf("tiering: %s has room again", l.locs[loc].dir)
	}
	return free
}

// roomSnapshot says, per configured path, whether it has room for one
// table of the largest target size.
func (l *Layout) roomSnapshot() []bool {
	need := int64(l.Plan().maxSplit())
	room := make([]bool, len(l.targets))
	for p := range room {
		room[p] = l.hasRoom(p, need)
	}
	return room
}

// spillOrder lists the configured paths a new table that cannot stay in
// location from may go to: the paths after it, then the ones before it.
func (l *Layout) spillOrder(from int) []int {
	var out []int
	for p := from + 1; p < len(l.targets); p++ {
		out = append(out, p)
	}
	for p := 0; p < from && p < len(l.targets); p++ {
		out = append(out, p)
	}
	return out
}

// withRoom returns to when it has room for need bytes, else the next path
// with room in spillOrder(to) (counting a spill off to), else to.
func (l *Layout) withRoom(to int, need int64) int {
	if l.hasRoom(to, need) {
		return to
	}
	for _, p := range l.spillOrder(to) {
		if l.hasRoom(p, need) {
			l.mu.Lock()
			l.pstats[to].spilledFiles++
			l.mu.Unlock()
			return p
		}
	}
	return to
}

// relocateLocked moves a table being written off a device that returned
// ENOSPC: the bytes written so far are copied into a new file in the next
// path with room, whose descriptor replaces the old one (dup3, as at
// placement, so Pebble's syncing wrapper keeps its descriptor number), and
// the old file is removed. Pebble sees the write succeed. f.mu is held.
func (f *tableFile) relocateLocked() error {
	l := f.l
	from := f.loc
	l.markFull(from)
	for _, to := range l.spillOrder(from) {
		if !l.hasRoom(to, f.off) {
			continue
		}
		dst := l.physical(to, f.name)
		l.markDirty(to)
		nf, err := l.base.Create(dst, f.category)
		if err != nil {
			if vfs.IsNoSpaceError(err) {
				l.markFull(to)
			}
			continue
		}
		if err := copyPrefix(nf, f.inner, f.off); err != nil {
			_ = nf.Close()
			_ = l.base.Remove(dst)
			if vfs.IsNoSpaceError(err) {
				l.markFull(to)
				continue
			}
			return fmt.Errorf("tiering: relocate %s to %s: %w", f.name, l.locs[to].dir, err)
		}
		out, err := retarget(f.inner, nf)
		if err != nil {
			_ = nf.Close()
			_ = l.base.Remove(dst)
			return fmt.Errorf("tiering: relocate %s to %s: %w", f.name, l.locs[to].dir, err)
		}
		old := l.physical(from, f.name)
		f.inner, f.loc, f.moved = out, to, dst
		l.mu.Lock()
		if e, ok := l.files[f.name]; ok && e.creating {
			e.loc = to
		}
		l.pstats[from].spilledFiles++
		l.pstats[from].spilledBytes += f.off
		l.mu.Unlock()
		l.markDirty(from)
		if err := l.base.Remove(old); err != nil {
			l.errorf("tiering: remove %s after relocating it: %v", old, err)
		}
		l.logf("tiering: %s: %s is full, table continues in %s (%d bytes copied)", f.name, l.locs[from].dir, l.locs[to].dir, f.off)
		return nil
	}
	return ErrNoRoom
}

// copyPrefix copies the first n bytes of src to dst.
func copyPrefix(dst vfs.File, src vfs.File, n int64) error {
	buf := make([]byte, min(n, 1<<20))
	for off := int64(0); off < n; {
		k := min(int64(len(buf)), n-off)
		r, err := src.ReadAt(buf[:k], off)
		if r > 0 {
			if _, werr := dst.Write(buf[:r]); werr != nil {
				return werr
			}
			off += int64(r)
		}
		if err != nil && !(err == io.EOF && off == n) {
			if err == io.EOF {
				return fmt.Errorf("short file: %d of %d bytes", off, n)
			}
			return err
		}
	}
	return nil
}

// rateLimiter paces the mover's copying to rate bytes per second across
// moves; 0 means unlimited.
type rateLimiter struct {
	rate int64
	mu   sync.Mutex
	next time.Time // when the bytes granted so far have been paid for
}

// wait blocks until n more bytes may be copied, or ctx is done.
func (r *rateLimiter) wait(ctx context.Context, n int) error {
	if r.rate <= 0 || n <= 0 {
		return nil
	}
	r.mu.Lock()
	now := time.Now()
	if r.next.Before(now) {
		r.next = now
	}
	delay := r.next.Sub(now)
	r.next = r.next.Add(time.Duration(float64(n) / float64(r.rate) * float64(time.Second)))
	r.mu.Unlock()
	if delay <= 0 {
		return nil
	}
	t := time.NewTimer(delay)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return errStopped
	case <-t.C:
		return nil
	}
}

// chunk is the copy buffer size: 1 MiB, smaller under a low rate so the
// pacing stays smooth (a tenth of a second's worth, at least 64 KiB).
func (r *rateLimiter) chunk() int {
	c := 1 << 20
	if r.rate > 0 {
		c = int(min(int64(c), max(r.rate/10, 64<<10)))
	}
	return c
}
