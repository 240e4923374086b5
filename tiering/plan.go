package tiering

import (
	"fmt"
	"math"
	"strings"

	"github.com/cockroachdb/pebble/v2"
)

// NumLevels is the number of LSM levels, L0 to L6, as in Pebble.
const NumLevels = 7

// LevelShape holds the Pebble options that size the levels; placement reads
// them to compute each level's target size as Pebble's compaction picker
// does. Zero fields take Pebble's defaults.
type LevelShape struct {
	// LBaseMaxBytes is Pebble's Options.LBaseMaxBytes: the target size of
	// Lbase, and this package's size estimate of L0 (as RocksDB's GetPathId
	// estimates L0 = max_bytes_for_level_base). The default value is 64 MiB.
	LBaseMaxBytes int64
	// LevelMultiplier is Pebble's Options.Experimental.LevelMultiplier. The
	// default value is 10.
	LevelMultiplier int
	// TargetFileSizes is Pebble's Options.TargetFileSizes: [0] for L0, [1]
	// for Lbase, [2] for Lbase+1 and so on. A level is split over two paths
	// only where the first can hold at least one such file. The default
	// value is 2 MiB for L0, doubling per level.
	TargetFileSizes [NumLevels]int64
}

// ShapeOf copies the level-sizing options of o.
func ShapeOf(o *pebble.Options) LevelShape {
	return LevelShape{
		LBaseMaxBytes:   o.LBaseMaxBytes,
		LevelMultiplier: o.Experimental.LevelMultiplier,
		TargetFileSizes: o.TargetFileSizes,
	}
}

// withDefaults fills zero fields with Pebble's defaults (options.go
// EnsureDefaults).
func (s LevelShape) withDefaults() LevelShape {
	if s.LBaseMaxBytes <= 0 {
		s.LBaseMaxBytes = 64 << 20
	}
	if s.LevelMultiplier <= 0 {
		s.LevelMultiplier = 10
	}
	if s.TargetFileSizes[0] <= 0 {
		s.TargetFileSizes[0] = 2 << 20
	}
	for i := 1; i < NumLevels; i++ {
		if s.TargetFileSizes[i] <= 0 {
			s.TargetFileSizes[i] = s.TargetFileSizes[i-1] * 2
		}
	}
	return s
}

// targetFileSize is Pebble's Options.TargetFileSize(level, baseLevel).
func (s LevelShape) targetFileSize(level, baseLevel int) int64 {
	if level == 0 {
		return s.TargetFileSizes[0]
	}
	if level < baseLevel {
		return s.TargetFileSizes[1]
	}
	return s.TargetFileSizes[level-baseLevel+1]
}

// LevelTargets returns each level's target size for an LSM whose levels
// currently hold sizes bytes, and Pebble's base level (where L0 compacts
// to). It is Pebble's compactionPickerByScore.initLevelMaxBytes (v2.1,
// compaction_picker.go), minus its view of in-progress compactions:
//
//   - the bottom level's target is the database size less one multiplier's
//     share (dbSize - dbSize/multiplier);
//   - Lbase is the highest level whose backward-divided size still exceeds
//     LBaseMaxBytes, and its target is LBaseMaxBytes;
//   - the levels between grow by a smoothed multiplier;
//   - levels between L0 and Lbase are empty: target 0.
//
// L0's target is LBaseMaxBytes, the estimate RocksDB uses. While nothing is
// below L0, Lbase is L6 with target LBaseMaxBytes.
func LevelTargets(sizes [NumLevels]uint64, shape LevelShape) (targets [NumLevels]uint64, baseLevel int) {
	shape = shape.withDefaults()
	lbase := uint64(shape.LBaseMaxBytes)
	mult := float64(shape.LevelMultiplier)
	targets[0] = lbase

	firstNonEmpty := -1
	var below uint64
	for level := 1; level < NumLevels; level++ {
		if sizes[level] > 0 {
			if firstNonEmpty == -1 {
				firstNonEmpty = level
			}
			below += sizes[level]
		}
	}
	if below == 0 {
		targets[NumLevels-1] = lbase
		return targets, NumLevels - 1
	}
	dbSize := below + sizes[0]
	bottom := dbSize - dbSize/uint64(shape.LevelMultiplier)
	cur := bottom
	for level := NumLevels - 2; level >= firstNonEmpty; level-- {
		cur = uint64(float64(cur) / mult)
	}
	baseLevel = firstNonEmpty
	for baseLevel > 1 && cur > lbase {
		baseLevel--
		cur = uint64(float64(cur) / mult)
	}
	smoothed := 1.0
	if baseLevel < NumLevels-1 {
		smoothed = math.Pow(float64(bottom)/float64(lbase), 1.0/float64(NumLevels-baseLevel-1))
	}
	size := float64(lbase)
	for level := baseLevel; level < NumLevels; level++ {
		if level > baseLevel && size > 0 {
			size *= smoothed
		}
		r := math.Round(size)
		if r >= float64(math.MaxUint64) {
			targets[level] = math.MaxUint64
		} else {
			targets[level] = uint64(r)
		}
	}
	return targets, baseLevel
}

// Share is the part of one level that one path holds.
type Share struct {
	// Path is the index of the path in the list given to New.
	Path int
	// Bytes is how many bytes of the level the path should hold. It is
	// ignored when Rest is set.
	Bytes uint64
	// Rest says the path takes whatever of the level the earlier shares do
	// not: true for the last share of every level.
	Rest bool
}

// Plan is the level-to-path map for one LSM shape: for each level, the
// paths that hold it, in order. Most levels have one share; a level that
// straddles the end of a path's target has two or more.
type Plan struct {
	// BaseLevel is Pebble's Lbase for the shape the plan was made for.
	BaseLevel int
	// LevelTargets are the level sizes the plan was made with.
	LevelTargets [NumLevels]uint64
	// Levels[l] lists the shares of level l; the last has Rest set.
	Levels [NumLevels][]Share
	// minSplit[l] is level l's target file size: the smallest share worth
	// splitting a level for, and the mover's tolerance.
	minSplit [NumLevels]uint64
}

// Place is the placement rule: RocksDB's GetPathId walk, adapted.
//
// Walk the levels from L0 down with a cursor on the paths, starting at
// path 0 with its whole target as remaining capacity. For each level of
// target size s:
//
//  1. If s fits in the current path's remaining capacity (or the current
//     path is the last), the level goes there whole and the capacity drops
//     by s. This is RocksDB's rule.
//  2. Otherwise, if the remaining capacity r is at least one target file of
//     the level (minSplit), the path takes an r-byte share of the level, the
//     cursor moves to the next path and the walk goes on with s-r bytes.
//     This is where RocksDB skips the path (rocksdb#10841: a path smaller
//     than a whole level never gets a byte).
//  3. Otherwise the few bytes left are not worth a split: the cursor moves
//     to the next path and the walk goes on with s.
//
// The last share of each level takes the rest, so the last path takes
// everything below the cursor. pathTargets must not be empty.
func Place(levelTargets [NumLevels]uint64, baseLevel int, pathTargets []uint64, minSplit [NumLevels]uint64) Plan {
	p := Plan{BaseLevel: baseLevel, LevelTargets: levelTargets, minSplit: minSplit}
	last := len(pathTargets) - 1
	cur, rem := 0, pathTargets[0]
	for level := 0; level < NumLevels; level++ {
		need := levelTargets[level]
		var shares []Share
		for {
			if cur == last || need <= rem {
				shares = append(shares, Share{Path: cur, Bytes: need, Rest: true})
				rem = subSat(rem, need)
				break
			}
			if rem > 0 && rem >= minSplit[level] {
				shares = append(shares, Share{Path: cur, Bytes: rem})
				need -= rem
			}
			cur++
			rem = pathTargets[cur]
		}
		p.Levels[level] = shares
	}
	return p
}

// Compute makes the plan for the LSM as it is, with levels currently
// holding sizes bytes: each level below L0 that holds data takes its target
// size (LevelTargets) of the paths' room, or what it holds if that is more;
// L0 takes what it holds (a few flushes, or the small table of a range-key
// touch, are not a whole Lbase's worth); and a level that holds nothing
// takes none (it is still given the path where the walk stands, for its
// first tables). RocksDB's walk reserves room for every level, so after a
// full compaction (everything in the bottom level) the room kept for an
// empty L0 and Lbase would leave a fast path empty while the bottom level
// sits on a slower one. Taking at least what a level holds is what keeps a
// path within its target: the bottom level's target (9/10 of the database)
// is less than it holds, and a level planned whole into a path by its
// target would take that path over by the difference. RocksDB documents
// db_paths as filling each path close to, but not beyond, its target,
// which this keeps (docs/tiering.md, "After a full compaction").
func Compute(sizes [NumLevels]uint64, shape LevelShape, pathTargets []uint64) Plan {
	shape = shape.withDefaults()
	targets, base := LevelTargets(sizes, shape)
	for level, size := range sizes {
		if size == 0 {
			targets[level] = 0
		}
		targets[level] = max(targets[level], size)
	}
	targets[0] = sizes[0]
	p := placeFor(targets, base, shape, pathTargets)
	// Tables are whole: a level planned to fit in a path may not pack into
	// the room of its shares there (a share's last table does not fit), and
	// its last share would take the excess over the path's target. So a
	// level below L0 whose last share is not on the last path gets a last
	// share there for what does not fit. L0 keeps its path: it is compaction
	// debt, and the flushes of writes racing a full compaction belong in the
	// fast path.
	last := len(pathTargets) - 1
	for level := 1; level < NumLevels; level++ {
		shares := p.Levels[level]
		if sizes[level] == 0 || shares[len(shares)-1].Path == last {
			continue
		}
		shares[len(shares)-1].Rest = false
		p.Levels[level] = append(shares, Share{Path: last, Rest: true})
	}
	return p
}

// placeFor places levels of the given targets, with split sizes from shape
// (with defaults).
func placeFor(targets [NumLevels]uint64, base int, shape LevelShape, pathTargets []uint64) Plan {
	var minSplit [NumLevels]uint64
	for level := range minSplit {
		minSplit[level] = uint64(shape.targetFileSize(level, base))
	}
	return Place(targets, base, pathTargets, minSplit)
}

// LevelPaths returns, for each level, the first path holding it: where the
// level's new tables go while that path's share has room.
func (p Plan) LevelPaths() [NumLevels]int {
	var out [NumLevels]int
	for level, shares := range p.Levels {
		if len(shares) > 0 {
			out[level] = shares[0].Path
		}
	}
	return out
}

// PathLevels returns the levels with a share on path i, in order.
func (p Plan) PathLevels(i int) []int {
	var out []int
	for level, shares := range p.Levels {
		for _, s := range shares {
			if s.Path == i {
				out = append(out, level)
				break
			}
		}
	}
	return out
}

// allows reports whether level may have tables on path.
func (p Plan) allows(level, path int) bool {
	for _, s := range p.Levels[level] {
		if s.Path == path {
			return true
		}
	}
	return false
}

// String renders the plan as one line, for example
// "L0:0 L1:0 L2:0 L3:0 L4:0 L5:0(3.0MB)+1 L6:1(4.0MB)+2": level 5 has a 3 MB
// share on path 0 and the rest on path 1.
func (p Plan) String() string {
	var b strings.Builder
	for level, shares := range p.Levels {
		if level > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "L%d:", level)
		for i, s := range shares {
			if i > 0 {
				b.WriteByte('+')
			}
			fmt.Fprintf(&b, "%d", s.Path)
			if !s.Rest {
				fmt.Fprintf(&b, "(%s)", humanBytes(s.Bytes))
			}
		}
	}
	return b.String()
}

// firstFit returns the path of the first share of level, from share index
// from on, where used(path)+size stays within the share; the last share
// takes anything.
func (p Plan) firstFit(level int, from int, size int64, used func(path int) int64) int {
	shares := p.Levels[level]
	for i := from; i < len(shares); i++ {
		s := shares[i]
		if s.Rest || used(s.Path)+size <= int64(s.Bytes) {
			return s.Path
		}
	}
	return shares[len(shares)-1].Path
}

// firstFitRoom is firstFit skipping paths without room (room[p] false: a
// device that returned ENOSPC); when no share of the level has room it
// returns the first path after the level's last share that has, or the
// last share's path when none has.
func (p Plan) firstFitRoom(level int, from int, size int64, used func(path int) int64, room []bool) int {
	ok := func(path int) bool { return path >= len(room) || room[path] }
	shares := p.Levels[level]
	for i := from; i < len(shares); i++ {
		s := shares[i]
		if ok(s.Path) && (s.Rest || used(s.Path)+size <= int64(s.Bytes)) {
			return s.Path
		}
	}
	last := shares[len(shares)-1].Path
	for path := last; path < len(room); path++ {
		if ok(path) {
			return path
		}
	}
	return last
}

// maxSplit returns the largest target file size of any level: the slack a
// path may run over its target before the mover evicts.
func (p Plan) maxSplit() uint64 {
	var m uint64
	for _, v := range p.minSplit {
		m = max(m, v)
	}
	return m
}

// shareIndex returns the index of path among level's shares, or -1.
func (p Plan) shareIndex(level, path int) int {
	for i, s := range p.Levels[level] {
		if s.Path == path {
			return i
		}
	}
	return -1
}

func subSat(a, b uint64) uint64 {
	if b > a {
		return 0
	}
	return a - b
}

// humanBytes renders n in B, KB, MB, GB or TB (powers of 1024).
func humanBytes(n uint64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%dB", n)
	}
	v, suffix := float64(n), "B"
	for _, s := range []string{"KB", "MB", "GB", "TB", "PB"} {
		if v < unit {
			break
		}
		v /= unit
		suffix = s
	}
	return fmt.Sprintf("%.1f%s", v, suffix)
}
