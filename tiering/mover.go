package tiering

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"time"

	"github.com/cockroachdb/errors/oserror"
	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// moveStep names the points between the actions of a move, where tests
// inject errors or kill the process.
type moveStep int

const (
	stepStart     moveStep = iota // nothing done yet
	stepCopied                    // temporary copy written, not yet synced
	stepSynced                    // temporary copy synced and closed
	stepRenamed                   // copy renamed to the table's name in the new path
	stepDirSynced                 // new path's directory synced
	stepSwitched                  // map switched to the new copy; old copy still there
	stepRemoved                   // old copy removed, old directory not yet synced
	numMoveSteps
)

var stepNames = [...]string{"start", "copied", "synced", "renamed", "dir-synced", "switched", "removed"}

func (s moveStep) String() string {
	if s >= 0 && int(s) < len(stepNames) {
		return stepNames[s]
	}
	return fmt.Sprintf("step(%d)", int(s))
}

// moveCategory is the write category of the mover's copies.
const moveCategory vfs.DiskWriteCategory = "tiering-move"

// plannedMove is one table the mover relocates.
type plannedMove struct {
	name     string
	level    int
	from, to int
	size     int64
	entry    *fileEntry
	reason   MoveReason
}

// MoveReason says why the mover relocated a table.
type MoveReason int

const (
	// MoveLevelChanged: the table changed level without being rewritten (a
	// move compaction, or an ingestion into a level) and its new level has
	// no share on its path.
	MoveLevelChanged MoveReason = iota
	// MovePlanChanged: the table's level lost its share on the path because
	// the plan changed: the LSM grew or shrank, or db_paths changed between
	// opens.
	MovePlanChanged
	// MoveSpill: the level's share on the path is over its bytes by more
	// than one target file (placement at creation works on estimates); the
	// oldest tables go to the level's next share.
	MoveSpill
	// MoveDrain: the table lives in a directory no longer in db_paths.
	MoveDrain
	numMoveReasons
)

func (r MoveReason) String() string {
	switch r {
	case MoveLevelChanged:
		return "level-changed"
	case MovePlanChanged:
		return "plan-changed"
	case MoveSpill:
		return "spill"
	case MoveDrain:
		return "drain"
	}
	return fmt.Sprintf("MoveReason(%d)", int(r))
}

// run is the mover's goroutine: a pass after each flush or compaction (the
// events wake it), and every MoverInterval.
func (l *Layout) run() {
	defer close(l.doneCh)
	t := time.NewTicker(l.opts.MoverInterval)
	defer t.Stop()
	for {
		select {
		case <-l.stopCh:
			return
		case <-l.wakeCh:
		case <-t.C:
		}
		if err := l.Rebalance(l.ctx); err != nil && !errors.Is(err, errStopped) && !errors.Is(err, ErrNotAttached) {
			l.errorf("tiering: mover: %v", err)
		}
	}
}

// Rebalance runs one mover pass now and waits for it: it reads the LSM's
// shape, recomputes the plan, and moves every table that is not where the
// plan wants it — tables in a path their level has no share on (after a
// move compaction, a change of db_paths, or the LSM's growth), tables of a
// share more than one target file over its bytes (spilled to the level's
// next share), and every file of a draining directory. It returns the first
// move error; failed moves are counted in Stats and retried by later
// passes.
func (l *Layout) Rebalance(ctx context.Context) error {
	l.passMu.Lock()
	defer l.passMu.Unlock()
	l.mu.Lock()
	db := l.db
	l.mu.Unlock()
	if db == nil {
		return ErrNotAttached
	}
	levels, err := db.SSTables()
	if err != nil {
		return fmt.Errorf("tiering: read the LSM: %w", err)
	}
	moves := l.planMoves(levels)
	var first error
	for _, m := range moves {
		if ctx.Err() != nil {
			return errStopped
		}
		if err := l.move(ctx, m); err != nil && !errors.Is(err, ErrObsolete) && !errors.Is(err, errStopped) && first == nil {
			first = err
		}
	}
	if err := l.finishDrains(); err != nil && first == nil {
		first = err
	}
	return first
}

// planMoves installs the plan for the LSM's current shape, recounts usage
// and lists the moves that bring every table where the plan wants it.
func (l *Layout) planMoves(levels [][]pebble.SSTableInfo) []plannedMove {
	var sizes [NumLevels]uint64
	levelOf := make(map[string]int)
	for level, tables := range levels {
		if level >= NumLevels {
			break
		}
		for _, t := range tables {
			sizes[level] += t.Size
			if t.BackingType != pebble.BackingTypeLocal {
				continue
			}
			name := tableName(uint64(t.BackingSSTNum))
			if prev, ok := levelOf[name]; !ok || level < prev {
				levelOf[name] = level
			}
		}
	}
	plan := Compute(sizes, l.shape, l.targets)

	l.mu.Lock()
	defer l.mu.Unlock()
	l.plan = plan
	for i := range l.usage {
		clear(l.usage[i])
	}
	var cands []plannedMove
	for name, e := range l.files {
		level, inLSM := levelOf[name]
		if !inLSM {
			e.level = -1
			// Blob files and files Pebble is about to delete: only a
			// draining directory's blob files move, to path 0.
			if _, kind := parseName(name); kind == kindBlob && l.locs[e.loc].drain && !e.creating {
				cands = append(cands, plannedMove{name: name, level: -1, from: e.loc, to: 0, size: e.size, entry: e, reason: MoveDrain})
			}
			continue
		}
		reason := MovePlanChanged
		if e.level >= 0 && e.level != level {
			reason = MoveLevelChanged
		}
		e.level = level
		l.usage[level][e.loc] += e.size
		if e.creating || l.inputLocked(name) {
			continue
		}
		cands = append(cands, plannedMove{name: name, level: level, from: e.loc, size: e.size, entry: e, reason: reason})
	}
	// Oldest tables first: they move before the newer ones when a share
	// overflows.
	sort.Slice(cands, func(i, j int) bool {
		if cands[i].level != cands[j].level {
			return cands[i].level < cands[j].level
		}
		ni, _ := parseName(cands[i].name)
		nj, _ := parseName(cands[j].name)
		return ni < nj
	})
	var used [NumLevels]map[int]int64
	for level := range used {
		used[level] = make(map[int]int64)
		for p := range l.targets {
			used[level][p] = l.effUsageLocked(level, p)
		}
		for loc, n := range l.usage[level] {
			if l.locs[loc].drain {
				used[level][loc] = n
			}
		}
	}
	var moves []plannedMove
	moving := make(map[string]bool)
	add := func(m plannedMove, to int) {
		m.to = to
		if m.level >= 0 {
			used[m.level][m.from] -= m.size
			used[m.level][to] += m.size
		}
		moving[m.name] = true
		moves = append(moves, m)
	}
	// 1. Files in a location their level has no share on: after a move
	// compaction or an ingestion, a change of the plan, or in a draining
	// directory.
	for _, m := range cands {
		if m.level < 0 {
			add(m, 0)
			continue
		}
		if plan.allows(m.level, m.from) {
			continue
		}
		if l.locs[m.from].drain {
			m.reason = MoveDrain
		}
		add(m, plan.firstFit(m.level, 0, m.size, func(p int) int64 { return used[m.level][p] }))
	}
	// 2. Shares over their bytes by more than one target file: spill the
	// oldest tables to the level's later shares until within.
	for level, shares := range plan.Levels {
		for i, s := range shares {
			if s.Rest || used[level][s.Path] <= int64(s.Bytes+plan.minSplit[level]) {
				continue
			}
			for _, m := range cands {
				if used[level][s.Path] <= int64(s.Bytes) {
					break
				}
				if m.level != level || m.from != s.Path || moving[m.name] {
					continue
				}
				m.reason = MoveSpill
				add(m, plan.firstFit(level, i+1, m.size, func(p int) int64 { return used[level][p] }))
			}
		}
	}
	return moves
}

// move relocates one table: copy to a temporary name in the new path,
// fsync, rename into place, fsync the directory, switch the map, remove the
// old copy, fsync the old directory. Until the switch, a failure removes
// the new copy and leaves the table where it was; after it, the old copy
// is an orphan removed by a later pass (or at New, as a duplicate).
func (l *Layout) move(ctx context.Context, m plannedMove) (err error) {
	start := time.Now()
	src := l.physical(m.from, m.name)
	tmp := l.physical(m.to, m.name+tempSuffix)
	dst := l.physical(m.to, m.name)
	var n int64
	renamed, switched := false, false
	defer func() {
		if err != nil && !switched {
			_ = l.base.Remove(tmp)
			if renamed {
				_ = l.base.Remove(dst)
			}
		}
		l.recordMove(m, n, err)
		if l.opts.OnMove != nil {
			l.opts.OnMove(MoveInfo{File: m.name, Level: m.level, From: m.from, To: m.to, Reason: m.reason, Bytes: n, Duration: time.Since(start), Err: err})
		}
	}()
	if err = l.step(ctx, stepStart, m.name); err != nil {
		return err
	}
	if n, err = l.copyTo(ctx, m, src, tmp); err != nil {
		return err
	}
	if err = l.base.Rename(tmp, dst); err != nil {
		return fmt.Errorf("tiering: move %s: rename: %w", m.name, err)
	}
	renamed = true
	if err = l.step(ctx, stepRenamed, m.name); err != nil {
		return err
	}
	if err = l.syncDir(m.to); err != nil {
		return err
	}
	if err = l.step(ctx, stepDirSynced, m.name); err != nil {
		return err
	}

	l.mu.Lock()
	if e, ok := l.files[m.name]; !ok || e != m.entry || e.loc != m.from {
		l.mu.Unlock()
		return ErrObsolete
	}
	m.entry.loc = m.to
	m.entry.size = n
	if lv := m.entry.level; lv >= 0 {
		l.usage[lv][m.from] -= n
		l.usage[lv][m.to] += n
	}
	switched = true
	l.mu.Unlock()

	// From here the table lives in the new path; the old copy is garbage.
	if err = l.step(context.Background(), stepSwitched, m.name); err != nil {
		l.addOrphan(src)
		return err
	}
	if err = l.base.Remove(src); err != nil && !oserror.IsNotExist(err) {
		l.addOrphan(src)
		return fmt.Errorf("tiering: move %s: remove the old copy: %w", m.name, err)
	}
	if err = l.step(context.Background(), stepRemoved, m.name); err != nil {
		return err
	}
	return l.syncDir(m.from)
}

// copyTo copies src to tmp and syncs it, returning the bytes copied.
func (l *Layout) copyTo(ctx context.Context, m plannedMove, src, tmp string) (int64, error) {
	in, err := l.base.Open(src, vfs.SequentialReadsOption)
	if err != nil {
		if oserror.IsNotExist(err) {
			return 0, ErrObsolete
		}
		return 0, fmt.Errorf("tiering: move %s: %w", m.name, err)
	}
	defer in.Close()
	fi, err := in.Stat()
	if err != nil {
		return 0, fmt.Errorf("tiering: move %s: %w", m.name, err)
	}
	out, err := l.base.Create(tmp, moveCategory)
	if err != nil {
		return 0, fmt.Errorf("tiering: move %s: %w", m.name, err)
	}
	n, err := copyCtx(ctx, out, in)
	if err == nil && n != fi.Size() {
		err = fmt.Errorf("tiering: move %s: copied %d of %d bytes", m.name, n, fi.Size())
	}
	if err == nil {
		err = l.step(ctx, stepCopied, m.name)
	}
	if err == nil {
		if err = out.Sync(); err != nil {
			err = fmt.Errorf("tiering: move %s: sync: %w", m.name, err)
		}
	}
	if cerr := out.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("tiering: move %s: %w", m.name, cerr)
	}
	if err == nil {
		err = l.step(ctx, stepSynced, m.name)
	}
	return n, err
}

// copyCtx copies in to out in 1 MiB chunks, stopping when ctx is done.
func copyCtx(ctx context.Context, out io.Writer, in io.Reader) (int64, error) {
	buf := make([]byte, 1<<20)
	var n int64
	for {
		if ctx.Err() != nil {
			return n, errStopped
		}
		r, rerr := in.Read(buf)
		if r > 0 {
			w, werr := out.Write(buf[:r])
			n += int64(w)
			if werr != nil {
				return n, werr
			}
		}
		if rerr == io.EOF {
			return n, nil
		}
		if rerr != nil {
			return n, rerr
		}
	}
}

// step runs the test hook at step s; it also stops a move the layout is
// closing (before the switch; after it, the move completes).
func (l *Layout) step(ctx context.Context, s moveStep, name string) error {
	if ctx != nil && ctx.Err() != nil {
		return errStopped
	}
	if l.opts.hook != nil {
		return l.opts.hook(s, name)
	}
	return nil
}

func (l *Layout) recordMove(m plannedMove, n int64, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case err == nil:
		l.movedFiles.Add(1)
		l.movedBytes.Add(n)
		l.movedByReason[m.reason] += n
		l.pstats[m.from].movedOutFiles++
		l.pstats[m.from].movedOutBytes += n
		l.pstats[m.to].movedInFiles++
		l.pstats[m.to].movedInBytes += n
	case errors.Is(err, ErrObsolete), errors.Is(err, errStopped):
	default:
		l.moveFailures.Add(1)
		l.pstats[m.to].failures++
		l.errorf("tiering: move %s from %s to %s: %v", m.name, l.locs[m.from].dir, l.locs[m.to].dir, err)
	}
}

// addOrphan remembers an old copy to remove on the next pass.
func (l *Layout) addOrphan(path string) {
	l.mu.Lock()
	l.orphans = append(l.orphans, path)
	l.mu.Unlock()
}

// finishDrains removes orphans and, once a draining directory holds no
// table, drops it from the paths file.
func (l *Layout) finishDrains() error {
	l.mu.Lock()
	orphans := l.orphans
	l.orphans = nil
	l.mu.Unlock()
	for _, p := range orphans {
		if err := l.base.Remove(p); err != nil && !oserror.IsNotExist(err) {
			l.addOrphan(p)
		}
	}
	l.mu.Lock()
	changed := false
	for i, loc := range l.locs {
		if loc.drain && !l.drained[i] && l.countFiles(i) == 0 {
			l.drained[i] = true
			changed = true
		}
	}
	l.mu.Unlock()
	if !changed {
		return nil
	}
	l.logf("tiering: draining finished")
	return l.writePathsFile()
}
