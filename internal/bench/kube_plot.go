package bench

import (
	"encoding/csv"
	"errors"
	"fmt"
	"image/color"
	"io"
	"strconv"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"
)

// The plot's panel titles and legend names, which tests look for in the SVG.
const (
	kubePlotPuts      = "Pod writes per second"
	kubePlotP99       = "Put p99 in each second (ms)"
	kubePlotCompacted = "compaction requested"
	kubePlotKilled    = "leader killed"
	kubePlotTime      = "Seconds from the start of the load"
)

// kubeColours are the lines' colours by server; passes after the first
// are dashed.
var kubeColours = map[Kind]color.RGBA{
	KindStrata: {R: 31, G: 119, B: 180, A: 255},
	KindEtcd37: {R: 255, G: 127, B: 14, A: 255},
	KindEtcd34: {R: 44, G: 160, B: 44, A: 255},
}

// Plot draws each sample's time line as SVG on w: pod writes per second
// above, the put p99 of each second below, one line per server and pass,
// and a mark on the writes line at each second in which the load asked
// for a compaction (and a cross at a leader's kill). A stall, or a
// compaction that slows the writes, shows as a dip the table's totals
// average away.
func (r *KubeRun) Plot(w io.Writer) error {
	if len(r.Samples) == 0 {
		return errors.New("bench: kube plot: no samples")
	}
	puts, p99 := timePlots(kubePlotPuts, kubePlotP99)
	passes := map[Kind]int{}
	markShown, killShown := false, false
	for _, smp := range r.Samples {
		if smp.KubeResult == nil {
			continue
		}
		passes[smp.Kind]++
		name := fmt.Sprintf("%s, pass %d", smp.Name, passes[smp.Kind])
		colour, ok := kubeColours[smp.Kind]
		if !ok { // a running server, --endpoint
			colour = color.RGBA{A: 255}
		}
		style := draw.LineStyle{Color: colour, Width: vg.Points(1)}
		if passes[smp.Kind] > 1 {
			style.Dashes = []vg.Length{vg.Points(4), vg.Points(2)}
		}
		var rate, lat, marks plotter.XYs
		for _, s := range smp.Seconds {
			x := float64(s.At)
			rate = append(rate, plotter.XY{X: x, Y: float64(s.Puts)})
			lat = append(lat, plotter.XY{X: x, Y: ms(s.P99)})
			if s.CompactRequested {
				marks = append(marks, plotter.XY{X: x, Y: float64(s.Puts)})
			}
		}
		if at := smp.DisruptedAt; at > 0 && int(at/time.Second) < len(smp.Seconds) {
			s := smp.Seconds[int(at/time.Second)]
			cross, err := plotter.NewScatter(plotter.XYs{{X: float64(s.At), Y: float64(s.Puts)}})
			if err != nil {
				return fmt.Errorf("bench: kube plot: %w", err)
			}
			cross.GlyphStyle = draw.GlyphStyle{Color: style.Color, Radius: vg.Points(5), Shape: draw.CrossGlyph{}}
			puts.Add(cross)
			if !killShown {
				puts.Legend.Add(kubePlotKilled, cross)
				killShown = true
			}
		}
		if len(rate) == 0 {
			continue
		}
		for _, l := range []struct {
			p   *plot.Plot
			xys plotter.XYs
		}{{puts, rate}, {p99, lat}} {
			line, err := plotter.NewLine(l.xys)
			if err != nil {
				return fmt.Errorf("bench: kube plot: %w", err)
			}
			line.LineStyle = style
			l.p.Add(line)
			l.p.Legend.Add(name, line)
		}
		if len(marks) > 0 {
			dots, err := plotter.NewScatter(marks)
			if err != nil {
				return fmt.Errorf("bench: kube plot: %w", err)
			}
			dots.GlyphStyle = draw.GlyphStyle{Color: style.Color, Radius: vg.Points(3.5), Shape: draw.TriangleGlyph{}}
			puts.Add(dots)
			if !markShown {
				puts.Legend.Add(kubePlotCompacted, dots)
				markShown = true
			}
		}
	}
	if err := writeStacked(w, puts, p99); err != nil {
		return fmt.Errorf("bench: kube plot: %w", err)
	}
	return nil
}

// WriteTimeline writes each sample's time line as CSV on w, one row per
// second: the numbers Plot draws (and the gauges it leaves out), for
// reading a run second by second, e.g. the seconds after each compaction.
func (r *KubeRun) WriteTimeline(w io.Writer) error {
	cw := csv.NewWriter(w)
	cw.Write([]string{"server", "pass", "second", "phase", "puts", "p99_ms", "compacting", "compact_requested", "rss_mb", "disk_mb"})
	passes := map[Kind]int{}
	for _, smp := range r.Samples {
		if smp.KubeResult == nil {
			continue
		}
		passes[smp.Kind]++
		for _, s := range smp.Seconds {
			cw.Write([]string{smp.Name, strconv.Itoa(passes[smp.Kind]), strconv.Itoa(s.At), s.Phase, strconv.Itoa(s.Puts),
				strconv.FormatFloat(ms(s.P99), 'f', 2, 64), strconv.FormatBool(s.Compacting), strconv.FormatBool(s.CompactRequested),
				strconv.FormatFloat(float64(s.RSSBytes)/(1<<20), 'f', 1, 64), strconv.FormatFloat(float64(s.DiskBytes)/(1<<20), 'f', 1, 64)})
		}
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		return fmt.Errorf("bench: kube time line: %w", err)
	}
	return nil
}

// timePlots returns the two plots of a time line, one above the other:
// titled, from 0 up, gridded, legends on top, the time axis named below.
func timePlots(top, bottom string) (*plot.Plot, *plot.Plot) {
	upper, lower := plot.New(), plot.New()
	upper.Title.Text, lower.Title.Text = top, bottom
	lower.X.Label.Text = kubePlotTime
	for _, p := range []*plot.Plot{upper, lower} {
		p.Legend.Top = true
		p.Legend.TextStyle.Font.Size = vg.Points(7)
		p.Y.Min = 0
		p.Add(plotter.NewGrid())
	}
	return upper, lower
}

// writeStacked draws upper above lower (timePlots' pair) as one SVG on w.
func writeStacked(w io.Writer, upper, lower *plot.Plot) error {
	canvas := vgsvg.New(24*vg.Centimeter, 18*vg.Centimeter)
	tiles := draw.Tiles{Rows: 2, Cols: 1, PadY: vg.Centimeter / 2, PadTop: vg.Millimeter * 3,
		PadBottom: vg.Millimeter * 3, PadLeft: vg.Millimeter * 3, PadRight: vg.Millimeter * 3}
	grid := [][]*plot.Plot{{upper}, {lower}}
	dcs := plot.Align(grid, tiles, draw.New(canvas))
	for i, row := range grid {
		row[0].Draw(dcs[i][0])
	}
	_, err := canvas.WriteTo(w)
	return err
}
