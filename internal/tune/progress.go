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
