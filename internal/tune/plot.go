package tune

import (
	"cmp"
	"errors"
	"fmt"
	"image/color"
	"io"
	"slices"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"
)

// TradeoffPoint is one measured configuration on a trade-off plot.
type TradeoffPoint struct {
	// Label names the configuration ("lz4 / zstd:9, 4 KB / 64 KB, bloom 10").
	Label string
	// SizeMB is the database size, WriteMBps and ReadMBps the speeds.
	SizeMB, WriteMBps, ReadMBps float64
	// Pareto marks a member of the frontier over size, write and read;
	// Base the base config the others are measured against.
	Pareto, Base bool
}

// The legend's names of the marks, which tests look for in the SVG.
const (
	legendCandidates = "measured configs"
	legendPareto     = "Pareto frontier (size and both speeds)"
	legendFrontier   = "frontier of this panel"
	legendChosen     = "chosen: "
	legendBase       = "base config"
	ingestAxis       = "Ingest: write + compaction (MB/s)"
)

// Colours of the marks.
var (
	colourCandidate = color.RGBA{R: 150, G: 150, B: 150, A: 255}
	colourPareto    = color.RGBA{R: 31, G: 119, B: 180, A: 255}
	colourChosen    = color.RGBA{R: 214, G: 39, B: 40, A: 255}
)

// PlotTradeoff draws the trade-off between size and speed as SVG on w: two
// panels side by side, DB size (MB) against write MB/s and against point-read
// MB/s. Every configuration is a grey dot, members of the Pareto frontier
// (size, write, read) blue dots; each panel's own frontier (no point both
// smaller and faster on that panel's speed) is a dashed blue line; the base
// config a black square; the chosen point, if chosen >= 0, a red ring named
// in the legend. So the eye finds
// what a table hides: how much speed each MB saved costs.
//
// writeAxis names what WriteMBps holds ("Write (MB/s)").
func PlotTradeoff(w io.Writer, title, writeAxis string, points []TradeoffPoint, chosen int) error {
	return drawTradeoff(vgsvg.New(tradeoffWidth, tradeoffHeight), w, title, writeAxis, points, chosen)
}

// The size of the trade-off plot.
const (
	tradeoffWidth  = 28 * vg.Centimeter
	tradeoffHeight = 13 * vg.Centimeter
)

// drawTradeoff draws PlotTradeoff's panels on canvas and writes it to w.
func drawTradeoff(canvas vg.CanvasWriterTo, w io.Writer, title, writeAxis string, points []TradeoffPoint, chosen int) error {
	if len(points) == 0 {
		return errors.New("tune: plot: no points")
	}
	if chosen >= len(points) {
		return fmt.Errorf("tune: plot: chosen point %d of %d", chosen, len(points))
	}
	panels := []struct {
		name  string
		speed func(TradeoffPoint) float64
	}{
		{writeAxis, func(p TradeoffPoint) float64 { return p.WriteMBps }},
		{"Point read (MB/s)", func(p TradeoffPoint) float64 { return p.ReadMBps }},
	}
	row := make([]*plot.Plot, len(panels))
	for i, panel := range panels {
		p, err := tradeoffPanel(points, chosen, panel.speed)
		if err != nil {
			return err
		}
		p.Title.Text = title
		if i > 0 {
			p.Title.Text = ""
		}
		p.X.Label.Text = "DB size (MB)"
		p.Y.Label.Text = panel.name
		row[i] = p
	}
	tiles := draw.Tiles{Rows: 1, Cols: len(row), PadX: vg.Centimeter, PadTop: vg.Millimeter * 3,
		PadBottom: vg.Millimeter * 3, PadLeft: vg.Millimeter * 3, PadRight: vg.Millimeter * 3}
	dcs := plot.Align([][]*plot.Plot{row}, tiles, draw.New(canvas))
	for i, p := range row {
		p.Draw(dcs[0][i])
	}
	if _, err := canvas.WriteTo(w); err != nil {
		return fmt.Errorf("tune: plot: %w", err)
	}
	return nil
}

// tradeoffPanel returns one panel: size against speed.
func tradeoffPanel(points []TradeoffPoint, chosen int, speed func(TradeoffPoint) float64) (*plot.Plot, error) {
	p := plot.New()
	p.Legend.Top = false // bottom right: large and slow, where few configs fall
	p.Legend.TextStyle.Font.Size = vg.Points(7)
	var all, pareto plotter.XYs
	for _, pt := range points {
		xy := plotter.XY{X: pt.SizeMB, Y: speed(pt)}
		all = append(all, xy)
		if pt.Pareto {
			pareto = append(pareto, xy)
		}
	}
	dots, err := plotter.NewScatter(all)
	if err != nil {
		return nil, fmt.Errorf("tune: plot: %w", err)
	}
	dots.GlyphStyle = draw.GlyphStyle{Color: colourCandidate, Radius: vg.Points(2.5), Shape: draw.CircleGlyph{}}
	p.Add(dots)
	p.Legend.Add(legendCandidates, dots)
	if len(pareto) > 0 {
		front, err := plotter.NewScatter(pareto)
		if err != nil {
			return nil, fmt.Errorf("tune: plot: %w", err)
		}
		front.GlyphStyle = draw.GlyphStyle{Color: colourPareto, Radius: vg.Points(3), Shape: draw.CircleGlyph{}}
		p.Add(front)
		p.Legend.Add(legendPareto, front)
	}
	line, err := plotter.NewLine(frontier2D(all))
	if err != nil {
		return nil, fmt.Errorf("tune: plot: %w", err)
	}
	line.LineStyle = draw.LineStyle{Color: colourPareto, Width: vg.Points(1), Dashes: []vg.Length{vg.Points(4), vg.Points(2)}}
	p.Add(line)
	p.Legend.Add(legendFrontier, line)
	for _, pt := range points {
		if !pt.Base {
			continue
		}
		base, err := plotter.NewScatter(plotter.XYs{{X: pt.SizeMB, Y: speed(pt)}})
		if err != nil {
			return nil, fmt.Errorf("tune: plot: %w", err)
		}
		base.GlyphStyle = draw.GlyphStyle{Color: color.Black, Radius: vg.Points(3.5), Shape: draw.BoxGlyph{}}
		p.Add(base)
		p.Legend.Add(legendBase, base)
		break
	}
	if chosen >= 0 {
		c := points[chosen]
		mark, err := plotter.NewScatter(plotter.XYs{{X: c.SizeMB, Y: speed(c)}})
		if err != nil {
			return nil, fmt.Errorf("tune: plot: %w", err)
		}
		mark.GlyphStyle = draw.GlyphStyle{Color: colourChosen, Radius: vg.Points(6), Shape: draw.RingGlyph{}}
		p.Add(mark)
		p.Legend.Add(legendChosen+c.Label, mark)
	}
	p.X.Min, p.Y.Min = 0, 0 // sizes and speeds from zero: distances read as shares
	return p, nil
}

// frontier2D returns the points no other point beats on both axes (smaller
// x, larger y), in order of x: the staircase of the best speed for each
// size.
func frontier2D(xys plotter.XYs) plotter.XYs {
	s := slices.Clone(xys)
	slices.SortFunc(s, func(a, b plotter.XY) int { return cmp.Or(cmp.Compare(a.X, b.X), cmp.Compare(b.Y, a.Y)) })
	var out plotter.XYs
	for _, pt := range s {
		if len(out) == 0 || pt.Y > out[len(out)-1].Y {
			out = append(out, pt)
		}
	}
	return out
}

// TradeoffPoints returns the candidates as points of a trade-off plot, with
// their ingest speed (write and compaction) as the write figure.
func (res *RecommendResult) TradeoffPoints() []TradeoffPoint {
	out := make([]TradeoffPoint, len(res.Candidates))
	for i, c := range res.Candidates {
		out[i] = TradeoffPoint{Label: c.Name, SizeMB: c.DBSizeBytes / MiB, WriteMBps: c.IngestMBps, ReadMBps: c.ReadMBps, Pareto: c.Pareto, Base: i == 0}
	}
	return out
}

// Plot draws the candidates (PlotTradeoff) with the chosen one marked.
func (res *RecommendResult) Plot(w io.Writer) error {
	return PlotTradeoff(w, fmt.Sprintf("tune recommend --goal %s: %s", res.Goal, oneLine(res.Source)), ingestAxis, res.TradeoffPoints(), res.Chosen)
}

// Plot draws the profiles (PlotTradeoff), the Pareto frontier over size,
// write and read marked; no profile is chosen.
func (res *CompressionResult) Plot(w io.Writer) error {
	points := make([]TradeoffPoint, len(res.Rows))
	cs := make([]Candidate, len(res.Rows))
	for i, r := range res.Rows {
		cs[i] = Candidate{DBSizeBytes: r.DBSizeBytes, WriteMBps: r.WriteMBps, ReadMBps: r.ReadMBps}
	}
	markPareto(cs)
	for i, r := range res.Rows {
		points[i] = TradeoffPoint{Label: r.Name, SizeMB: r.DBSizeBytes / MiB, WriteMBps: r.WriteMBps, ReadMBps: r.ReadMBps, Pareto: cs[i].Pareto}
	}
	return PlotTradeoff(w, "tune compression: "+oneLine(res.Source), "Write (MB/s)", points, -1)
}
