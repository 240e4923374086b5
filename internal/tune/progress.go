package tune

import (
	"fmt"
	"io"
	"time"

	"github.com/schollz/progressbar/v3"
)

// Progress receives the progress of a long run, from the run's goroutine.
// A nil Progress in an options struct means silent.
type Progress interface {
	// Start announces the total units of work (entities written, read and
	// scanned; codecs measured).
	Start(total int64)
	// Describe names the step now running ("lz4 / zstd run 2/3 strata").
	Describe(step string)
	// Add reports n more units done.
	Add(n int64)
}

// nopProgress is the silent Progress.
type nopProgress struct{}

func (nopProgress) Start(int64)     {}
func (nopProgress) Describe(string) {}
func (nopProgress) Add(int64)       {}

func orNop(p Progress) Progress {
	if p == nil {
		return nopProgress{}
	}
	return p
}

// Bar is a Progress drawn as a progress bar (schollz/progressbar) on a
// writer, normally the command's standard error.
type Bar struct {
	w       io.Writer
	visible bool
	bar     *progressbar.ProgressBar
}

// NewBar returns a Bar writing to w; an invisible Bar draws nothing.
func NewBar(w io.Writer, visible bool) *Bar { return &Bar{w: w, visible: visible} }

// Start draws an empty bar over total units.
func (b *Bar) Start(total int64) {
	opts := []progressbar.Option{
		progressbar.OptionSetWriter(b.w),
		progressbar.OptionSetVisibility(b.visible),
		progressbar.OptionSetWidth(30),
		progressbar.OptionThrottle(100 * time.Millisecond),
		progressbar.OptionShowCount(),
		progressbar.OptionSetPredictTime(true),
	}
	if b.visible {
		// End the bar's line, so what follows starts on a fresh one.
		opts = append(opts, progressbar.OptionOnCompletion(func() { fmt.Fprintln(b.w) }))
	}
	b.bar = progressbar.NewOptions64(total, opts...)
}

// Describe sets the bar's description.
func (b *Bar) Describe(step string) {
	if b.bar != nil {
		b.bar.Describe(step)
	}
}

// Add advances the bar by n units.
func (b *Bar) Add(n int64) {
	if b.bar != nil {
		_ = b.bar.Add64(n)
	}
}

// Finish completes the bar after a successful run.
func (b *Bar) Finish() {
	if b.bar != nil {
		_ = b.bar.Finish()
	}
}

// Abort leaves the bar where a failed run stopped and ends its line.
func (b *Bar) Abort() {
	if b.bar != nil && b.visible {
		_ = b.bar.Exit()
		fmt.Fprintln(b.w)
	}
}

// Lines is a Progress written as one line per step, for a standard error
// that is not a terminal (a log, a CI job), where a bar would print
// nothing: Describe starts a line naming the step, the next Add ends it
// with the step's wall time.
//
//	row 3/16: index 1M keys x 5 versions x 64 B keys ... 2.31s
type Lines struct {
	w     io.Writer
	open  bool
	start time.Time
}

// NewLines returns a Lines writing to w.
func NewLines(w io.Writer) *Lines { return &Lines{w: w} }

// Start does nothing: Lines shows no totals.
func (l *Lines) Start(int64) {}

// Describe ends an unfinished line and starts one for step.
func (l *Lines) Describe(step string) {
	l.Abort()
	fmt.Fprintf(l.w, "%s ...", step)
	l.open, l.start = true, time.Now()
}

// Add ends the current line with its step's wall time.
func (l *Lines) Add(int64) {
	if l.open {
		fmt.Fprintf(l.w, " %s\n", time.Since(l.start).Round(10*time.Millisecond))
		l.open = false
	}
}

// Finish ends an unfinished line.
func (l *Lines) Finish() { l.Abort() }

// Abort ends an unfinished line, so what follows starts on a fresh one.
func (l *Lines) Abort() {
	if l.open {
		fmt.Fprintln(l.w)
		l.open = false
	}
}
