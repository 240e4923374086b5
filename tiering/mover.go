package tiering

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
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
	// MoveFill: an earlier share of the table's level has room for it (a
	// strict pass only): after a full compaction, say, the bottom level's
	// share on a fast path is filled from its share on a slower one.
	MoveFill
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
	case MoveFill:
		return "fill"
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
		if _, err := l.pass(l.ctx, false); err != nil && !errors.Is(err, errStopped) && !errors.Is(err, ErrNotAttached) {
			l.errorf("tiering: mover: %v", err)
		}
	}
}

// Rebalance runs one strict mover pass now and waits for it: it reads the
// LSM's shape, recomputes the plan, and moves every table that is not where
// the plan wants it — tables in a path their level has no share on (after
// a move compaction, a change of db_paths, or the LSM's growth), tables of
// a share more than one target file over its bytes (spilled to the level's
// next share), and every file of a draining directory. Tables being written
// or compacted are left for a later pass (see Settle). It returns the first
// move error; failed moves are counted in Stats and retried by later
// passes.
func (l *Layout) Rebalance(ctx context.Context) error {
	_, err := l.pass(ctx, true)
	return err
}

// Settle runs strict passes (see Rebalance) until every table Pebble
// references sits where the plan wants it, waiting for flushes and
// compactions that hold misplaced tables to finish: when it returns nil,
// every path but the last holds at most its target (L0 excepted: flushes
// racing the passes stay in L0's path).
// It gives up after SettleTimeout of waiting on running jobs, returning
// ErrNotSettled, and stops with ctx's error when ctx is done.
func (l *Layout) Settle(ctx context.Context) error {
	var waited time.Duration
	for {
		r, err := l.pass(ctx, true)
		if err != nil {
			if errors.Is(err, errStopped) && ctx.Err() != nil {
				return ctx.Err()
			}
			return err
		}
		if r.planned == 0 && r.blocked == 0 {
			return nil
		}
		if r.planned > 0 && r.done > 0 {
			continue // moves done; check again, the plan may have shifted
		}
		if r.planned > 0 {
			// Nothing could move: the destinations are full (ENOSPC). The
			// tables stay where they are; Stats show the full paths.
			l.logf("tiering: settle: %d move(s) left undone, their paths are full", r.planned)
			return nil
		}
		if waited >= l.opts.SettleTimeout {
			return fmt.Errorf("%w: %d table(s) held by running compactions after %v", ErrNotSettled, r.blocked, waited)
		}
		const poll = 20 * time.Millisecond
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-l.stopCh:
			return errStopped
		case <-time.After(poll):
		}
		waited += poll
	}
}

// passResult counts what one pass found.
type passResult struct {
	planned int // moves planned (and attempted)
	done    int // moves completed
	blocked int // misplaced tables skipped because a job holds them
}

// pass runs one mover pass: strict (Rebalance, Settle) or lazy (the
// background mover; see planMoves).
func (l *Layout) pass(ctx context.Context, strict bool) (passResult, error) {
	l.passMu.Lock()
	defer l.passMu.Unlock()
	l.mu.Lock()
	db := l.db
	l.mu.Unlock()
	if db == nil {
		return passResult{}, ErrNotAttached
	}
	// Close stops the pass too, whatever ctx the caller gave.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(l.ctx, cancel)()
	levels, err := db.SSTables()
	if err != nil {
		return passResult{}, fmt.Errorf("tiering: read the LSM: %w", err)
	}
	room := l.roomSnapshot()
	moves, blocked := l.planMoves(levels, strict, room)
	var first error
	r := passResult{planned: len(moves), blocked: blocked}
	for _, m := range moves {
		if ctx.Err() != nil {
			return r, errStopped
		}
		if !l.hasRoom(m.to, m.size) {
			continue
		}
		// A destination that ran out of space is marked full and skipped
		// from now on; the table stays where it is, which is no error.
		err := l.move(ctx, m)
		switch {
		case err == nil, errors.Is(err, ErrObsolete): // the LSM changed: look again
			r.done++
		case errors.Is(err, errStopped), vfs.IsNoSpaceError(err):
		case first == nil:
			first = err
		}
	}
	if err := l.finishDrains(); err != nil && first == nil {
		first = err
	}
	return r, first
}

// planMoves installs the plan for the LSM's current shape, recounts usage
// and lists the moves of one pass; blocked counts misplaced tables left
// alone because a flush or compaction holds them.
//
// A strict pass (Rebalance, Settle) brings every table where the plan wants
// it. A lazy pass (the background mover) moves only what must move: the
// files of draining directories, and, from a path over its target by more
// than one target file, tables until the path is within target again —
// first those whose level has no share there (deepest level, oldest table
// first), then the oldest tables of shares over their bytes. A table a
// shifted plan no longer wants where it is stays there while its path has
// room: compactions rewrite most such tables before the path fills, and
// their outputs are placed by the current plan, so the database can grow
// from empty with few moves (docs/history/tiering-measured.md).
// Destinations without room (a device that returned ENOSPC) are skipped.
func (l *Layout) planMoves(levels [][]pebble.SSTableInfo, strict bool, room []bool) (moves []plannedMove, blocked int) {
	sizes := levelSizes(levels)
	levelOf := make(map[string]int)
	for level, tables := range levels {
		if level >= NumLevels {
			break
		}
		for _, t := range tables {
			if t.BackingType != pebble.BackingTypeLocal {
				continue
			}
			name := tableName(uint64(t.BackingSSTNum))
			if prev, ok := levelOf[name]; !ok || level < prev {
				levelOf[name] = level
			}
		}
	}
	// A strict pass places by the plan for the LSM as it is; the lazy
	// passes and creation plan ahead (computePlan).
	plan := Compute(sizes, l.shape, l.targets)
	realBase := plan.BaseLevel
	l.mu.Lock()
	defer l.mu.Unlock()
	// During a full compaction (PlaceForSettle) every pass plans as the LSM
	// is, which Settle ends with: a lazy pass then evicts only where Settle
	// would not move the tables back.
	if !strict && l.settling == 0 {
		plan = l.computePlan(sizes)
	}
	l.plan = plan
	for i := range l.usage {
		clear(l.usage[i])
	}
	// Bytes per location of the tables in the LSM, as the pass plans (files
	// Pebble is about to delete do not count).
	total := make([]int64, len(l.locs))
	var cands []plannedMove
	for name, e := range l.files {
		level, inLSM := levelOf[name]
		if inLSM {
			total[e.loc] += e.size
		}
		if !inLSM {
			e.level = -1
			// Blob files and files Pebble is about to delete: only a
			// draining directory's blob files move, to path 0.
			if _, kind := parseName(name); kind == kindBlob && l.locs[e.loc].drain && !e.creating {
				cands = append(cands, plannedMove{name: name, level: -1, from: e.loc, to: 0, size: e.size, entry: e, reason: MoveDrain})
			}
			continue
		}
		// The reason compares with the level the table was placed for (at
		// creation or its last move), not with the last scan's, which a
		// lazy pass updates without moving.
		reason := MovePlanChanged
		if e.placedAs >= 0 && e.placedAs != level {
			reason = MoveLevelChanged
		}
		e.level = level
		l.usage[level][e.loc] += e.size
		if e.creating || l.inputLocked(name) {
			if !e.creating && (l.locs[e.loc].drain || !plan.allows(level, e.loc)) {
				blocked++
			}
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
	moving := make(map[string]bool)
	add := func(m plannedMove, to int) bool {
		if to == m.from || (to < len(room) && !room[to]) {
			return false
		}
		m.to = to
		if m.level >= 0 {
			used[m.level][m.from] -= m.size
			used[m.level][to] += m.size
		}
		total[m.from] -= m.size
		total[to] += m.size
		moving[m.name] = true
		moves = append(moves, m)
		return true
	}
	fit := func(m plannedMove, from int) int {
		return plan.firstFitRoom(m.level, from, m.size, func(p int) int64 { return used[m.level][p] }, room)
	}
	// 1. Files in a location their level has no share on: after a move
	// compaction or an ingestion, a change of the plan, or in a draining
	// directory. A lazy pass takes only the draining ones here.
	for _, m := range cands {
		if m.level < 0 {
			add(m, 0)
			continue
		}
		if l.locs[m.from].drain {
			m.reason = MoveDrain
			add(m, fit(m, 0))
			continue
		}
		if strict && !plan.allows(m.level, m.from) {
			add(m, fit(m, 0))
		}
	}
	if strict {
		// 2. Shares with room for a whole table take the level's tables
		// from its later shares, so a fast path is not left empty while
		// the level sits on a slower one: first from shares over their
		// bytes (those tables would spill anyway), then from the level's
		// last share (the farthest: no table moves twice down a chain of
		// shares), then the others; newest tables first.
		for level, shares := range plan.Levels {
			for i, s := range shares {
				if s.Rest || (s.Path < len(room) && !room[s.Path]) {
					continue
				}
				var from []int // share indexes after i, in the order they give
				for k := i + 1; k < len(shares); k++ {
					if sk := shares[k]; !sk.Rest && used[level][sk.Path] > int64(sk.Bytes) {
						from = append(from, k)
					}
				}
				for k := len(shares) - 1; k > i; k-- {
					if !slices.Contains(from, k) {
						from = append(from, k)
					}
				}
				for _, k := range from {
					src := shares[k]
					for j := len(cands) - 1; j >= 0; j-- {
						m := cands[j]
						if m.level != level || m.from != src.Path || moving[m.name] {
							continue
						}
						if used[level][s.Path]+m.size > int64(s.Bytes) {
							continue
						}
						m.reason = MoveFill
						add(m, s.Path)
					}
				}
			}
		}
		// 3. Shares over their bytes: spill the oldest tables to the
		// level's later shares until within. No slack here (the lazy
		// passes allow one target file): after a strict pass every path
		// but the last holds at most its target, RocksDB's "close to, but
		// not larger than".
		for level, shares := range plan.Levels {
			for i, s := range shares {
				if s.Rest || used[level][s.Path] <= int64(s.Bytes) {
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
					add(m, fit(m, i+1))
				}
			}
		}
		return moves, blocked
	}
	// Lazy: paths over target by more than one target file evict until
	// within target, tables their level does not want first, deepest level
	// and oldest first, then spills.
	slack := int64(plan.maxSplit())
	evictOrder := append([]plannedMove(nil), cands...)
	sort.SliceStable(evictOrder, func(i, j int) bool { return evictOrder[i].level > evictOrder[j].level })
	// A level over its target has compaction debt: Pebble is about to take
	// its excess down to the next level. Its tables on a later path than
	// the level's own (placed there as the next level's, see
	// overflowsLocked) are where that leads, so they neither count against
	// that path nor move back up.
	var excess [NumLevels]int64
	for level := 1; level < NumLevels-1; level++ {
		var n int64
		for _, b := range l.usage[level] {
			n += b
		}
		excess[level] = n - int64(plan.LevelTargets[level])
	}
	levelPaths := plan.LevelPaths()
	debtBelow := func(level, p int) bool {
		return level > 0 && excess[level] > 0 && levelPaths[level] < p && !plan.allows(level, p)
	}
	for p := 0; p < len(l.targets)-1; p++ {
		target := int64(l.targets[p])
		var debt [NumLevels]int64 // bytes of each level left alone on p
		for level := range excess {
			if debtBelow(level, p) {
				debt[level] = min(l.usage[level][p], excess[level])
				target += debt[level]
			}
		}
		// L0 beyond its share is compaction debt, soon compacted away: it
		// does not count, or a write burst would evict colder tables for
		// nothing.
		// So do tables in L0's path that Pebble moved unchanged into the
		// LSM's real Lbase while the plan ahead puts Lbase elsewhere (a
		// flush moved into an empty Lbase): Lbase holds one LBaseMaxBytes
		// and is compacted down as it fills.
		if si := plan.shareIndex(0, p); si >= 0 {
			transient := used[0][p]
			if !plan.allows(realBase, p) {
				transient += used[realBase][p]
			}
			if debt := transient - int64(plan.Levels[0][si].Bytes); debt > 0 {
				target += debt
			}
		}
		if total[p] <= target+slack {
			continue
		}
		for _, m := range evictOrder {
			if total[p] <= target {
				break
			}
			if m.from != p || moving[m.name] || m.level < 0 || plan.allows(m.level, p) {
				continue
			}
			if debt[m.level] >= m.size {
				debt[m.level] -= m.size
				continue
			}
			add(m, fit(m, 0))
		}
		for level := NumLevels - 1; level >= 0 && total[p] > target; level-- {
			si := plan.shareIndex(level, p)
			if si < 0 || plan.Levels[level][si].Rest {
				continue
			}
			s := plan.Levels[level][si]
			for _, m := range cands {
				if total[p] <= target || used[level][p] <= int64(s.Bytes) {
					break
				}
				if m.level != level || m.from != p || moving[m.name] {
					continue
				}
				m.reason = MoveSpill
				add(m, fit(m, si+1))
			}
		}
	}
	return moves, blocked
}

// levelSizes sums the tables of each level, as DB.SSTables lists them.
func levelSizes(levels [][]pebble.SSTableInfo) (sizes [NumLevels]uint64) {
	for level, tables := range levels {
		if level >= NumLevels {
			break
		}
		for _, t := range tables {
			sizes[level] += t.Size
		}
	}
	return sizes
}

// planAhead is how many times the fast paths' capacity (the targets of
// every path but the last) computePlan sizes the levels for while the
// database is smaller.
const planAhead = 4

// computePlan makes the plan for levels holding sizes bytes, planning
// ahead: while the database is smaller than planAhead times what the paths
// before the last can hold, the levels are sized as for a database of that
// size (the bottom level holding the difference). Levels then keep the
// paths they will have once the database has outgrown its fast paths,
// instead of the bottom level starting in path 0 and being pushed down path
// by path as it grows and Lbase rises (the plan changes that made most of
// the mover's bytes while a database grew from empty; docs/tiering.md).
// Beyond that size the plan follows the real level sizes.
func (l *Layout) computePlan(sizes [NumLevels]uint64) Plan {
	var fast, db uint64
	for _, t := range l.targets[:len(l.targets)-1] {
		fast += t
	}
	for _, s := range sizes {
		db += s
	}
	if ahead := fast * planAhead; db < ahead {
		sizes[NumLevels-1] += ahead - db
	}
	// Every level takes its target's room, also the levels that do not
	// exist yet: the plan is for the database the fast paths are meant for.
	targets, base := LevelTargets(sizes, l.shape)
	return placeFor(targets, base, l.shape, l.targets)
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
	m.entry.placedAs = m.level
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
	l.switchReaders(m.name, m.from, m.to, n)
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
	n, err := l.copyCtx(ctx, out, in)
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

// copyCtx copies in to out in chunks paced by Options.MoveRate, stopping
// when ctx is done.
func (l *Layout) copyCtx(ctx context.Context, out io.Writer, in io.Reader) (int64, error) {
	buf := make([]byte, l.limiter.chunk())
	var n int64
	for {
		if ctx.Err() != nil {
			return n, errStopped
		}
		r, rerr := in.Read(buf)
		if err := l.limiter.wait(ctx, r); err != nil {
			return n, err
		}
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
		l.count(func(c *Counters) {
			c.MovedFiles++
			c.MovedBytes += n
			c.MovedBytesByReason[m.reason] += n
		})
		l.pstats[m.from].movedOutFiles++
		l.pstats[m.from].movedOutBytes += n
		l.pstats[m.to].movedInFiles++
		l.pstats[m.to].movedInBytes += n
	case errors.Is(err, errStopped):
		l.count(func(c *Counters) { c.MovesInterrupted++ })
		l.logf("tiering: move of %s from %s to %s interrupted by Close; the next pass redoes it", m.name, l.locs[m.from].dir, l.locs[m.to].dir)
	case errors.Is(err, ErrObsolete):
	default:
		if vfs.IsNoSpaceError(err) {
			l.fullAt[m.to] = time.Now()
		}
		l.count(func(c *Counters) { c.MoveFailures++ })
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
