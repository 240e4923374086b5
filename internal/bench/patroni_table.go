package bench

import (
	"encoding/csv"
	"errors"
	"fmt"
	"image/color"
	"io"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/stratadb/strata/internal/report"
)

// The plot's panel titles, which tests look for in the SVG.
const (
	patroniPlotDisk = "Data directory (MB)"
	patroniPlotKept = "Revisions kept (revision - compacted revision)"
)

// Tables returns the load's table and the disk and history table.
func (r *PatroniRun) Tables() []*report.Table {
	secs := r.Options.Load.Duration.Seconds()
	load := &report.Table{Columns: []report.Column{
		{Name: "Server"}, {Name: "Writes"}, {Name: "Writes/s", Format: "%.0f"}, {Name: "Compare failed"}, {Name: "Keepalives"},
		{Name: "Grants"}, {Name: "Watch events"}, {Name: "Crashes"}, {Name: "Takeovers"}, {Name: "Handover violations"}, {Name: "Errors"},
	}}
	disk := &report.Table{Columns: []report.Column{
		{Name: "Server"},
		{Name: "Dir 25%", Unit: "MB", Format: "%.1f"}, {Name: "Dir 50%", Unit: "MB", Format: "%.1f"},
		{Name: "Dir 75%", Unit: "MB", Format: "%.1f"}, {Name: "Dir end", Unit: "MB", Format: "%.1f"},
		{Name: "Dir peak 1st half", Unit: "MB", Format: "%.1f"}, {Name: "Dir peak 2nd half", Unit: "MB", Format: "%.1f"},
		{Name: "DB size end", Unit: "MB", Format: "%.1f"}, {Name: "DB peak", Unit: "MB", Format: "%.1f"},
		{Name: "Revision"}, {Name: "Compacted to"}, {Name: "Old revision"}, {Name: "Read at it"},
	}}
	dir := func(s PatroniSample) int64 { return s.DirBytes }
	for _, s := range r.Servers {
		load.Rows = append(load.Rows, []any{s.Name, s.Writes, float64(s.Writes) / secs, s.CompareFailed, s.KeepAlives,
			s.Grants, s.WatchEvents, s.Crashes, s.Takeovers, s.Violations, s.Errors})
		end := s.quantile(1)
		old, read := any(nil), any(nil)
		if s.OldRevision > 0 {
			old, read = s.OldRevision, s.OldRead
		}
		disk.Rows = append(disk.Rows, []any{s.Name,
			mb(s.quantile(0.25).DirBytes), mb(s.quantile(0.5).DirBytes), mb(s.quantile(0.75).DirBytes), mb(end.DirBytes),
			mb(s.peakBetween(0, 0.5, dir)), mb(s.peak(0.5, dir)),
			mb(end.DBSize), mb(s.peak(0, func(s PatroniSample) int64 { return s.DBSize })),
			end.Revision, end.CompactRevision, old, read})
		if s.LastError != "" {
			load.Notes = append(load.Notes, fmt.Sprintf("%s: last error: %s", s.Name, s.LastError))
		}
		if s.Err != "" {
			load.Notes = append(load.Notes, fmt.Sprintf("%s: stopped early: %s", s.Name, s.Err))
		}
	}
	o := r.Options
	l := o.Load
	flags := strings.Join(o.Flags(), " ")
	if flags == "" {
		flags = "no auto-compaction flag (etcd's default: the history is kept)"
	}
	load.Notes = append(load.Notes, fmt.Sprintf("%d Patroni clusters of %d members, loop %s, lease TTL %d s, a leader crash every %s, for %s; every server started with: %s",
		l.Clusters, l.Members, l.Loop, l.TTL, l.FailoverEvery, l.Duration, flags))
	disk.Notes = append(disk.Notes, fmt.Sprintf("sampled every %s: Dir is the size of the data directory's files, DB size the server's Status dbSize; "+
		"Old revision is the revision read 3×retention before the end, and Read at it what a Range at that revision returned at the end", o.SampleEvery))
	return []*report.Table{load, disk}
}

// peakBetween is peak over the samples between fractions from and to of
// the run.
func (ps *PatroniServer) peakBetween(from, to float64, field func(PatroniSample) int64) int64 {
	if len(ps.Samples) == 0 {
		return 0
	}
	end := float64(ps.Samples[len(ps.Samples)-1].At)
	var n int64
	for _, s := range ps.Samples {
		if f := float64(s.At); f >= from*end && f <= to*end {
			n = max(n, field(s))
		}
	}
	return n
}

// WriteTables writes Tables in format f, a blank line between them.
func (r *PatroniRun) WriteTables(w io.Writer, f report.Format) error {
	return writeTables(w, f, r.Tables())
}

// WriteTimeline writes every sample as CSV on w, one row per server and
// sample.
func (r *PatroniRun) WriteTimeline(w io.Writer) error {
	cw := csv.NewWriter(w)
	cw.Write([]string{"server", "second", "dir_mb", "db_mb", "db_in_use_mb", "rss_mb", "revision", "compact_revision"})
	f := func(b int64) string { return strconv.FormatFloat(mb(b), 'f', 2, 64) }
	for _, s := range r.Servers {
		for _, smp := range s.Samples {
			cw.Write([]string{s.Name, strconv.FormatFloat(smp.At.Seconds(), 'f', 1, 64), f(smp.DirBytes), f(smp.DBSize), f(smp.DBSizeInUse),
				f(smp.RSSBytes), itoa(smp.Revision), itoa(smp.CompactRevision)})
		}
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		return fmt.Errorf("bench: patroni time line: %w", err)
	}
	return nil
}

// Plot draws the time line as SVG on w: the data directory's size above,
// the revisions kept (the history compaction bounds) below, a line per
// server.
func (r *PatroniRun) Plot(w io.Writer) error {
	if len(r.Servers) == 0 {
		return errors.New("bench: patroni plot: no servers")
	}
	disk, kept := timePlots(patroniPlotDisk, patroniPlotKept)
	for _, s := range r.Servers {
		if len(s.Samples) == 0 {
			continue
		}
		colour, ok := kubeColours[s.Kind]
		if !ok {
			colour = color.RGBA{A: 255}
		}
		var d, k plotter.XYs
		for _, smp := range s.Samples {
			x := smp.At.Seconds()
			d = append(d, plotter.XY{X: x, Y: mb(smp.DirBytes)})
			k = append(k, plotter.XY{X: x, Y: float64(smp.Revision - smp.CompactRevision)})
		}
		for _, l := range []struct {
			p   *plot.Plot
			xys plotter.XYs
		}{{disk, d}, {kept, k}} {
			line, err := plotter.NewLine(l.xys)
			if err != nil {
				return fmt.Errorf("bench: patroni plot: %w", err)
			}
			line.LineStyle = draw.LineStyle{Color: colour, Width: vg.Points(1)}
			l.p.Add(line)
			l.p.Legend.Add(s.Name, line)
		}
	}
	if err := writeStacked(w, disk, kept); err != nil {
		return fmt.Errorf("bench: patroni plot: %w", err)
	}
	return nil
}
