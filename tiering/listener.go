package tiering

import "github.com/cockroachdb/pebble/v2"

// EventListener returns the callbacks the layout needs from Pebble. Tee it
// into the database's listener:
//
//	opts.EventListener = pebble.TeeEventListener(layout.EventListener(), mine)
//
// FlushBegin and CompactionBegin tell each job's output level;
// TableCreated and BlobFileCreated map the job's new files to it (read at
// the files' first write, see tableFile); the End events and TableIngested
// wake the mover, since a move compaction or an ingestion changes a table's
// level without writing it.
func (l *Layout) EventListener() pebble.EventListener {
	return pebble.EventListener{
		FlushBegin: func(info pebble.FlushInfo) { l.jobBegin(info.JobID, 0, nil) },
		FlushEnd:   func(info pebble.FlushInfo) { l.jobEnd(info.JobID) },
		CompactionBegin: func(info pebble.CompactionInfo) {
			l.jobBegin(info.JobID, info.Output.Level, info.Input)
		},
		CompactionEnd: func(info pebble.CompactionInfo) {
			l.noteFate(info)
			l.jobEnd(info.JobID)
		},
		TableCreated: func(info pebble.TableCreateInfo) {
			l.fileCreated(info.JobID, uint64(info.FileNum))
		},
		BlobFileCreated: func(info pebble.BlobFileCreateInfo) {
			l.fileCreated(info.JobID, uint64(info.FileNum))
		},
		TableIngested: func(pebble.TableIngestInfo) { l.wake() },
	}
}

func (l *Layout) jobBegin(id, level int, inputs []pebble.LevelInfo) {
	j := &job{
		level:    level,
		inputs:   make(map[string]bool),
		leaving:  make(map[int]int64),
		arriving: make(map[int]int64),
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, in := range inputs {
		for _, t := range in.Tables {
			name := tableName(uint64(t.FileNum))
			j.inputs[name] = true
			if in.Level != level {
				continue
			}
			if e, ok := l.files[name]; ok {
				j.leaving[e.loc] += e.size
			}
		}
	}
	l.jobs[id] = j
}

func (l *Layout) jobEnd(id int) {
	l.mu.Lock()
	if j, ok := l.jobs[id]; ok {
		for _, num := range j.files {
			delete(l.pending, num)
			delete(l.fileJob, num)
		}
		delete(l.jobs, id)
	}
	l.mu.Unlock()
	l.wake()
}

func (l *Layout) fileCreated(jobID int, num uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	j, ok := l.jobs[jobID]
	if !ok {
		return
	}
	l.pending[num] = j.level
	l.fileJob[num] = jobID
	j.files = append(j.files, num)
}

// choosePath returns the path a new file of a known level goes to, its
// estimated size (the level's target file size), and whether its level is
// known. The estimate counts against the path's share until the job ends.
func (l *Layout) choosePath(name string, num uint64) (int, int64, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	level, ok := l.pending[num]
	if !ok {
		return 0, 0, false
	}
	est := l.shape.targetFileSize(level, l.plan.BaseLevel)
	placeAs := l.placeLevelLocked(level)
	switch {
	case placeAs != level:
		l.count(func(c *Counters) { c.PlacedDown++ })
	case l.overflowsLocked(level, est):
		placeAs = level + 1
		l.count(func(c *Counters) { c.PlacedOverflow++ })
	}
	to := l.plan.firstFit(placeAs, 0, est, func(p int) int64 { return l.effUsageLocked(placeAs, p) })
	if j, ok := l.jobs[l.fileJob[num]]; ok {
		j.arriving[to] += est
	}
	if e, ok := l.files[name]; ok {
		e.level, e.placedAs = level, placeAs
		e.est, e.estAt = est, to
	}
	return to, est, true
}

// fileClosed replaces a new file's estimated size in its job's arriving
// bytes by its real size and location, once Pebble has finished writing
// it: tables come out up to twice their target size, and the estimates
// decide where the job's next tables go. l.mu is held.
func (l *Layout) fileClosedLocked(num uint64, e *fileEntry) {
	j, ok := l.jobs[l.fileJob[num]]
	if !ok || e.est == 0 {
		return
	}
	j.arriving[e.estAt] -= e.est
	j.arriving[e.loc] += e.size
	e.est, e.estAt = e.size, e.loc
}

// effUsageLocked estimates the bytes of level on location loc: the last
// scan's count, less the inputs of running jobs that write level (they are
// being rewritten), plus those jobs' outputs placed so far.
func (l *Layout) effUsageLocked(level, loc int) int64 {
	u := l.usage[level][loc]
	for _, j := range l.jobs {
		if j.level != level {
			continue
		}
		u += j.arriving[loc] - j.leaving[loc]
	}
	return max(u, 0)
}

// inputsLocked reports whether name is an input of a running job.
func (l *Layout) inputLocked(name string) bool {
	for _, j := range l.jobs {
		if j.inputs[name] {
			return true
		}
	}
	return false
}

// wake asks the mover for a pass; it never blocks.
func (l *Layout) wake() {
	select {
	case l.wakeCh <- struct{}{}:
	default:
	}
}

// fateWindow is how many of the latest compactions out of a level decide
// whether its new tables are placed where move compactions take them.
const fateWindow = 4

// noteFate records what a finished compaction did with the tables of its
// start level: moved them down unchanged (Pebble's "move" compaction, what
// happens to tables of keys written in order) or rewrote them.
func (l *Layout) noteFate(info pebble.CompactionInfo) {
	if info.Err != nil || len(info.Input) == 0 {
		return
	}
	in := info.Input[0].Level
	if in < 0 || in >= NumLevels {
		return
	}
	moved := info.Reason == "move" && info.Output.Level > in
	l.mu.Lock()
	defer l.mu.Unlock()
	l.fates[in][l.fateNext[in]%fateWindow] = moved
	l.fateNext[in]++
	if moved {
		l.moveTo[in] = info.Output.Level
	}
}

// placeLevelLocked returns the level a new table of level goes to be placed
// as: while each of the last fateWindow compactions out of a level moved
// its tables down unchanged, follow the moves. Keys written in order make
// Pebble move flushes (or the tables L0 compactions write) down level by
// level without rewriting them; placing them in their final level's path
// saves the mover from copying nearly every byte of such a load.
func (l *Layout) placeLevelLocked(level int) int {
	for range NumLevels {
		if l.fateNext[level] < fateWindow || l.moveTo[level] <= level {
			return level
		}
		for _, moved := range l.fates[level] {
			if !moved {
				return level
			}
		}
		level = l.moveTo[level]
	}
	return level
}

// overflowsLocked reports whether a new table of est bytes takes level
// beyond its target in the plan: a compaction into a level that is already
// full (typically Lbase, when an L0 compaction brings it several times its
// target at once). Pebble soon takes such bytes down to the next level,
// rewriting them or, where the next level has no overlapping table, moving
// them unchanged; placed in the next level's path they are where either
// way leads, and the mover need not copy the moved ones. L0 (whose excess
// is compaction debt, rewritten into Lbase) and the bottom level never
// overflow.
func (l *Layout) overflowsLocked(level int, est int64) bool {
	if level == 0 || level >= NumLevels-1 || level < l.plan.BaseLevel {
		return false
	}
	target := int64(l.plan.LevelTargets[level])
	if target <= 0 {
		return false
	}
	var used int64
	for loc := range l.locs {
		used += l.effUsageLocked(level, loc)
	}
	return used+est > target
}
