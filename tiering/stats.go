package tiering

import (
	"fmt"
	"strings"
	"text/tabwriter"
)

// PathStats describes one table directory.
type PathStats struct {
	// Dir is the directory.
	Dir string
	// TargetSize is the configured target in bytes; 0 for a draining
	// directory.
	TargetSize uint64
	// Draining is set for a directory no longer in db_paths (or db_path when
	// it is not a path) whose tables the mover is moving out.
	Draining bool
	// Files counts the table and blob files living here. Bytes counts the
	// bytes really on the device: those files, plus old copies of moved
	// tables a reader still holds open (RetainedBytes).
	Files int
	Bytes int64
	// RetainedBytes counts old copies of tables moved away whose reader
	// could not follow them (see docs/tiering.md); the device frees them
	// when the reader closes.
	RetainedBytes int64
	// Full is set while the path is skipped because it returned ENOSPC and
	// has not had room since.
	Full bool
	// SpilledFiles counts new tables sent to a later path because this one
	// was full; SpilledBytes the bytes already written here that were
	// copied along when a table's write hit ENOSPC.
	SpilledFiles, SpilledBytes int64
	// FillPercent is Bytes as a percentage of TargetSize (0 when draining).
	FillPercent float64
	// Levels lists the levels with a share on this path in the current plan.
	Levels []int
	// MovedInFiles, MovedInBytes, MovedOutFiles and MovedOutBytes count the
	// mover's completed moves into and out of this path.
	MovedInFiles, MovedInBytes   int64
	MovedOutFiles, MovedOutBytes int64
	// MoveFailures counts moves into this path that failed (and were rolled
	// back, or left an old copy to remove later).
	MoveFailures int64
}

// Counters are the layout's running totals since New: the files Pebble
// created through the layout and how they were placed, the mover's work,
// and what New recovered. Layout.Counters returns them; Stats carries them
// beside the per-path figures.
type Counters struct {
	// CreatedFiles counts table and blob files Pebble created through the
	// FS, CreatedBytes the bytes written to them.
	CreatedFiles, CreatedBytes int64
	// PlacedAtCreation counts files whose level was known at their first
	// write, so they were written in their path directly; PlacedInFirstPath
	// counts those whose level was not known (left in path 0 for the mover).
	PlacedAtCreation, PlacedInFirstPath int64
	// PlacedDown counts new tables placed in the path of the level that
	// move compactions were taking their level's recent tables to (keys
	// written in order), rather than in their own level's path.
	PlacedDown int64
	// PlacedOverflow counts new tables placed in the next level's path
	// because their own level was already over its target (compaction debt
	// that Pebble takes down to the next level).
	PlacedOverflow int64
	// MovedFiles, MovedBytes and MoveFailures total the mover's work.
	MovedFiles, MovedBytes, MoveFailures int64
	// MovedBytesByReason splits MovedBytes by MoveReason.
	MovedBytesByReason [numMoveReasons]int64
	// MovesInterrupted counts moves Close stopped before their switch
	// (rolled back; a later pass redoes them).
	MovesInterrupted int64
	// SpilledFiles counts new tables that went to a later path because
	// theirs was full (ENOSPC).
	SpilledFiles int64
	// Recovery is what New cleaned up after an interrupted move.
	Recovery RecoveryStats
}

// MovedShare is MovedBytes as a fraction of CreatedBytes: the extra writes
// the mover costs relative to what Pebble wrote.
func (c Counters) MovedShare() float64 {
	if c.CreatedBytes == 0 {
		return 0
	}
	return float64(c.MovedBytes) / float64(c.CreatedBytes)
}

// Stats is a snapshot of the layout: per path usage, the plan, and the
// running totals.
type Stats struct {
	// Paths lists the configured paths in order, then draining directories.
	Paths []PathStats
	// Plan is the current placement plan; LevelPaths its level-to-path map.
	Plan       Plan
	LevelPaths [NumLevels]int
	// Inspected is set when the figures come from Inspect (a read-only
	// open): read from disk, with no mover running and Counters zero.
	Inspected bool
	Counters
}

// Stats returns a snapshot of per-path usage, the plan and the running
// totals.
func (l *Layout) Stats() Stats {
	counts := l.Counters()
	l.mu.Lock()
	defer l.mu.Unlock()
	s := Stats{
		Plan:       l.plan,
		LevelPaths: l.plan.LevelPaths(),
		Counters:   counts,
	}
	s.Paths = make([]PathStats, len(l.locs))
	for i, loc := range l.locs {
		c := l.pstats[i]
		s.Paths[i] = PathStats{
			Dir:           loc.dir,
			TargetSize:    loc.target,
			Draining:      loc.drain,
			MovedInFiles:  c.movedInFiles,
			MovedInBytes:  c.movedInBytes,
			MovedOutFiles: c.movedOutFiles,
			MovedOutBytes: c.movedOutBytes,
			MoveFailures:  c.failures,
			RetainedBytes: l.retained[i],
			Bytes:         l.retained[i],
			Full:          !l.fullAt[i].IsZero(),
			SpilledFiles:  c.spilledFiles,
			SpilledBytes:  c.spilledBytes,
		}
		s.SpilledFiles += c.spilledFiles
		if !loc.drain {
			s.Paths[i].Levels = l.plan.PathLevels(i)
		}
	}
	for _, e := range l.files {
		s.Paths[e.loc].Files++
		s.Paths[e.loc].Bytes += e.size
	}
	for i := range s.Paths {
		if t := s.Paths[i].TargetSize; t > 0 {
			s.Paths[i].FillPercent = 100 * float64(s.Paths[i].Bytes) / float64(t)
		}
	}
	return s
}

// String renders the stats as an aligned table, one row per path.
func (s Stats) String() string {
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "path\tdir\tfiles\tbytes\ttarget\tfill\tlevels\tmoved in\tmoved out\tfailures\tspilled")
	for i, p := range s.Paths {
		target, fill := humanBytes(p.TargetSize), fmt.Sprintf("%.0f%%", p.FillPercent)
		if p.Draining {
			target, fill = "draining", "-"
		}
		levels := make([]string, len(p.Levels))
		for j, lv := range p.Levels {
			levels[j] = fmt.Sprintf("L%d", lv)
		}
		spilled := fmt.Sprintf("%d", p.SpilledFiles)
		if p.Full {
			spilled += " (full)"
		}
		fmt.Fprintf(w, "%d\t%s\t%d\t%s\t%s\t%s\t%s\t%d (%s)\t%d (%s)\t%d\t%s\n", i, p.Dir, p.Files, humanBytes(uint64(max(p.Bytes, 0))),
			target, fill, strings.Join(levels, ","), p.MovedInFiles, humanBytes(uint64(p.MovedInBytes)),
			p.MovedOutFiles, humanBytes(uint64(p.MovedOutBytes)), p.MoveFailures, spilled)
	}
	_ = w.Flush()
	fmt.Fprintf(&b, "plan: %s\n", s.Plan)
	if s.Inspected {
		b.WriteString("read from disk (read-only open): no mover running\n")
		return b.String()
	}
	fmt.Fprintf(&b, "created %d files (%s), %d placed at creation (%d where move compactions take them, %d as the next level's), %d in path 0 for the mover; moved %d files (%s, %.2f%% of created bytes), %d failures\n",
		s.CreatedFiles, humanBytes(uint64(s.CreatedBytes)), s.PlacedAtCreation, s.PlacedDown, s.PlacedOverflow, s.PlacedInFirstPath,
		s.MovedFiles, humanBytes(uint64(s.MovedBytes)), 100*s.MovedShare(), s.MoveFailures)
	if s.MovesInterrupted > 0 || s.SpilledFiles > 0 {
		fmt.Fprintf(&b, "%d moves interrupted by Close (redone later); %d new tables spilled to a later path because theirs was full\n", s.MovesInterrupted, s.SpilledFiles)
	}
	if s.MovedBytes > 0 {
		b.WriteString("moved by reason:")
		for r, n := range s.MovedBytesByReason {
			fmt.Fprintf(&b, " %s %s", MoveReason(r), humanBytes(uint64(n)))
		}
		b.WriteByte('\n')
	}
	return b.String()
}
